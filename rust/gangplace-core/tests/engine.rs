//! Engine scenarios through the public facade (a default build: no test machinery).
#![allow(clippy::unwrap_used)] // test helpers: a failed setup should panic loudly

use std::sync::Arc;

use gangplace_core::{
    AnyRequest, CoreError, DefragOptions, Engine, EngineConfig, GangRequest, HoldId,
    MultiGangRequest, NodeSpec, Placement, PodPlacement, Policy, RemovalLimits, Spread, Terms,
};

mod common;

use common::{given, rack_cluster, ranked, request};

#[test]
fn unhealthy_gpu_keeps_an_eight_gpu_pod_off_its_node() {
    let mut engine = rack_cluster(1, 1, 8);
    engine.set_gpu_health("r0-n0", 3, false, 0.0).unwrap();
    assert_eq!(engine.place(&request(1, 8), 0.0).unwrap(), None);
    let error = engine.reserve(&request(1, 8), 30.0, None, 0.0).unwrap_err();
    assert!(matches!(error, CoreError::Unschedulable(_)));
    assert_eq!(engine.stats(0.0).reserved, 0);
}

#[test]
fn gang_stays_in_one_rack_when_it_can() {
    let mut engine = rack_cluster(3, 4, 8);
    let placement = engine.place(&request(4, 8), 0.0).unwrap().unwrap();
    assert_eq!(placement.level, "rack");
    assert_eq!(placement.domain, vec!["r0".to_owned()]);
    let wide = engine.place(&request(5, 8), 0.0).unwrap().unwrap();
    assert_eq!(wide.level, "cluster");
    assert_eq!(wide.nodes().len(), 5);
}

#[test]
fn reserve_commit_rollback_release_lifecycle() {
    let mut engine = rack_cluster(2, 2, 8);
    let reservation = engine.reserve(&request(2, 8), 10.0, None, 0.0).unwrap();
    assert_eq!(engine.stats(0.0).reserved, 16);
    let allocation = engine.commit(reservation.id, None, 1.0).unwrap();
    assert_eq!(
        engine.commit(reservation.id, None, 2.0).unwrap(),
        allocation
    );
    assert!(matches!(
        engine.rollback(reservation.id, None, 2.0),
        Err(CoreError::ReservationError(_))
    ));
    assert!(engine.release(allocation.id, None, 3.0).unwrap());
    assert!(!engine.release(allocation.id, None, 3.0).unwrap());
    let expiring = engine.reserve(&request(1, 1), 5.0, None, 10.0).unwrap();
    assert!(matches!(
        engine.commit(expiring.id, None, 15.0),
        Err(CoreError::ReservationExpired(_))
    ));
    assert!(!engine.rollback(expiring.id, None, 15.0).unwrap());
    assert_eq!(engine.stats(15.0).free, 32);
    engine.check_invariants().unwrap();
}

#[test]
fn health_changes_and_node_removal_name_every_hold_they_touch() {
    let mut engine = rack_cluster(1, 2, 8);
    let held = engine.reserve(&request(1, 8), 30.0, None, 0.0).unwrap();
    let node = held.placement.pods[0].node.to_string();
    // Marking a reserved GPU healthy (it already is) still names its holder.
    assert_eq!(
        engine.set_gpu_health(&node, 0, true, 0.0).unwrap(),
        vec![held.id]
    );
    let allocation = engine.commit(held.id, None, 0.0).unwrap();
    let other = engine.reserve(&request(1, 8), 30.0, None, 0.0).unwrap();
    let other_node = other.placement.pods[0].node.to_string();
    assert_ne!(node, other_node);
    // remove_node names the allocation it detaches and the reservation it revokes.
    assert_eq!(engine.remove_node(&node, 0.0).unwrap(), vec![allocation.id]);
    assert_eq!(
        engine.remove_node(&other_node, 0.0).unwrap(),
        vec![other.id]
    );
    assert!(matches!(
        engine.commit(other.id, None, 0.0),
        Err(CoreError::ReservationRevoked(_))
    ));
    engine.check_invariants().unwrap();
}

#[test]
fn malformed_ids_are_unknown_reservations() {
    for text in ["", "gp-", "gp-XYZ", "reservation-1"] {
        assert_eq!(
            text.parse::<HoldId>(),
            Err(CoreError::UnknownReservation(text.to_owned()))
        );
    }
}

/// Racks of 8-GPU nodes, each labelled `host=<its name>`.
fn labelled_cluster(racks: usize, nodes: usize) -> Engine {
    let config = EngineConfig::new(vec!["rack".into()], Policy::BestFit, None).unwrap();
    let mut engine = Engine::new(config);
    for rack in 0..racks {
        for node in 0..nodes {
            let name = format!("r{rack}-n{node}");
            engine
                .add_node(NodeSpec {
                    labels: vec![("host".into(), name.clone())],
                    name,
                    gpus: 8,
                    topology: vec![("rack".into(), format!("r{rack}"))],
                    ..NodeSpec::default()
                })
                .unwrap();
        }
    }
    engine
}

/// Holds `gpus` GPUs of `node` with these terms, committed, through a request pinned to the
/// node by its `host` label (so the allocation keeps a request to be placed again by).
fn hold_on(engine: &mut Engine, node: &str, gpus: i64, terms: Terms) -> HoldId {
    let selector = vec![("host".to_owned(), node.to_owned())];
    let request = GangRequest::new(1, gpus, None, Some("node".into()), selector, String::new());
    let request = Arc::new(request.unwrap().with_terms(terms));
    let held = engine.reserve(&request, 30.0, None, 0.0).unwrap();
    assert_eq!(&*held.placement.pods[0].node, node);
    engine.commit(held.id, None, 0.0).unwrap().id
}

#[test]
fn defragmentation_moves_two_small_jobs_to_the_edge() {
    // Racks r0..r2 of two 8-GPU nodes. Two movable 1 x 2 jobs land on r0-n0 (best-fit on an
    // empty cluster: the first node, then the fullest); pinned jobs that cannot move keep
    // r1 and r2 busy. A 2 x 8 gang required in one rack fits nowhere; moving the two small
    // jobs to the fullest nodes elsewhere (the edge) frees r0.
    let mut engine = labelled_cluster(3, 2);
    let movable = Terms::new(0, true, true).unwrap();
    let small_request = Arc::new(
        GangRequest::new(1, 2, None, Some("node".into()), Vec::new(), String::new())
            .unwrap()
            .with_terms(movable),
    );
    let small: Vec<HoldId> = (0..2)
        .map(|_| {
            let held = engine.reserve(&small_request, 30.0, None, 0.0).unwrap();
            assert_eq!(&*held.placement.pods[0].node, "r0-n0");
            engine.commit(held.id, None, 0.0).unwrap().id
        })
        .collect();
    let fixed = Terms::new(0, false, false).unwrap();
    for (node, gpus) in [("r1-n0", 8), ("r1-n1", 4), ("r2-n0", 6), ("r2-n1", 2)] {
        hold_on(&mut engine, node, gpus, fixed);
    }
    let gang = ranked(2, 8, Some("rack"), 1);
    assert_eq!(engine.place(&gang, 0.0).unwrap(), None);
    let limits = RemovalLimits::new(Some(16), 0.0, Vec::new(), "max_moves").unwrap();
    let plan = engine
        .plan_defrag(&gang, &limits, DefragOptions::default(), 1.0)
        .unwrap()
        .unwrap();
    assert_eq!(plan.placement.domain, vec!["r0".to_owned()]);
    let moved: Vec<HoldId> = plan.moves.iter().map(|m| m.allocation).collect();
    let mut expected = small.clone();
    expected.sort_unstable();
    assert_eq!(moved, expected);
    assert!(plan.evictions.is_empty());
    assert_eq!(plan.moved_gpus, 4);
    // Best-fit sends them to the fullest nodes outside r0: r2-n0 (2 free), then r1-n1 (4).
    let mut targets: Vec<&str> = plan.moves.iter().map(|m| &*m.target.pods[0].node).collect();
    targets.sort_unstable();
    assert_eq!(targets, vec!["r1-n1", "r2-n0"]);
    // At most one move: no plan.
    let one = RemovalLimits::new(Some(1), 0.0, Vec::new(), "max_moves").unwrap();
    let bounded = engine.plan_defrag(&gang, &one, DefragOptions::default(), 1.0);
    assert_eq!(bounded.unwrap(), None);
    let (reservation, replaced) = engine.apply_defrag(&plan, 300.0, None, 2.0).unwrap();
    assert_eq!(reservation.placement.domain, vec!["r0".to_owned()]);
    assert_eq!(replaced.len(), 2);
    for &id in &small {
        assert_eq!(engine.hold_status(id, None, 2.0).unwrap(), "migrated");
        assert!(!engine.release(id, None, 2.0).unwrap());
    }
    for (_, moved_to) in &replaced {
        assert!(moved_to.terms.movable);
    }
    assert!(matches!(
        engine.apply_defrag(&plan, 300.0, None, 2.0),
        Err(CoreError::Conflict(_))
    ));
    engine.check_invariants().unwrap();
}

#[test]
fn a_high_priority_gang_preempts_the_fewest_lowest_jobs_in_one_rack() {
    // Two racks of two 8-GPU nodes. Rack r0 carries one 4-GPU job of priority 1; rack r1
    // carries two 2-GPU jobs of priority 0. A 2 x 8 gang of priority 5 required in one rack
    // must preempt: r1 costs two victims of priority 0, r0 one victim of priority 1; the
    // lowest highest-victim-priority wins (P5), so r1.
    let mut engine = rack_cluster(2, 2, 8);
    let mut hold = |node: &str, gpus: i64, priority| {
        let pod = PodPlacement::new(node.to_owned(), 0..gpus).unwrap();
        let rack = node.split('-').next().unwrap().to_owned();
        let placement = Placement {
            gpu_milli: None,
            pods: vec![pod],
            level: "node".into(),
            domain: vec![rack, node.to_owned()],
            slices: Vec::new(),
            groups: Vec::new(),
            spares: Vec::new(),
        };
        let terms = Terms::new(priority, true, false).unwrap();
        let placed = engine
            .reserve_placement(&Arc::new(placement), 30.0, None, terms, 0.0)
            .unwrap();
        engine.commit(placed.id, None, 0.0).unwrap()
    };
    let r0_job = hold("r0-n0", 4, 1);
    let r1_jobs = [hold("r1-n0", 2, 0), hold("r1-n1", 2, 0)];
    let gang = ranked(2, 8, Some("rack"), 5);
    assert_eq!(engine.place(&gang, 0.0).unwrap(), None);
    let plan = engine
        .plan_preemption(&gang, &RemovalLimits::default(), 1.0)
        .unwrap()
        .unwrap();
    let mut expected: Vec<HoldId> = r1_jobs.iter().map(|a| a.id).collect();
    expected.sort_unstable();
    assert_eq!(plan.victims, expected);
    assert_eq!(plan.max_victim_priority, Some(0));
    assert_eq!(plan.placement.domain, vec!["r1".to_owned()]);
    // Bounded to one victim, only r0 qualifies.
    let one = RemovalLimits::new(Some(1), 0.0, Vec::new(), "max_victims").unwrap();
    let bounded = engine.plan_preemption(&gang, &one, 1.0).unwrap().unwrap();
    assert_eq!(bounded.victims, vec![r0_job.id]);
    let reservation = engine.preempt(&plan, 30.0, Some("team-a"), 1.0).unwrap();
    assert_eq!(reservation.terms.priority, 5);
    assert_eq!(
        engine.hold_status(r1_jobs[0].id, None, 1.0).unwrap(),
        "preempted"
    );
    assert!(!engine.release(r1_jobs[1].id, None, 1.0).unwrap());
    assert!(matches!(
        engine.preempt(&plan, 30.0, None, 1.0),
        Err(CoreError::Conflict(_))
    ));
    engine.check_invariants().unwrap();
}

#[test]
fn equal_priorities_never_preempt_and_capacity_counts_copies() {
    let mut engine = rack_cluster(1, 2, 8);
    let job = ranked(1, 8, None, 3);
    let held = engine.reserve(&job, 30.0, None, 0.0).unwrap();
    engine.commit(held.id, None, 0.0).unwrap();
    assert_eq!(engine.capacity_for(&request(1, 4), 0.0).unwrap(), 2);
    assert_eq!(engine.capacity_for(&request(1, 8), 0.0).unwrap(), 1);
    let same = ranked(2, 8, None, 3);
    let limits = RemovalLimits::default();
    assert_eq!(engine.plan_preemption(&same, &limits, 0.0).unwrap(), None);
    let higher = ranked(2, 8, None, 4);
    let plan = engine
        .plan_preemption(&higher, &limits, 0.0)
        .unwrap()
        .unwrap();
    assert_eq!(plan.victims, vec![held.id]);
}

#[test]
fn adopted_work_is_held_and_bad_adoptions_change_nothing() {
    use gangplace_core::{AdoptedPod, GpuSet};
    let mut engine = rack_cluster(2, 2, 8);
    let pods = [
        AdoptedPod::Count {
            node: "r1-n1".into(),
            count: 3,
        },
        AdoptedPod::Gpus {
            node: "r1-n0".into(),
            gpus: GpuSet::single(7),
        },
    ];
    let adopted = engine
        .adopt(given(&pods), Some("kubelet"), Terms::default(), 5.0)
        .unwrap();
    assert_eq!(adopted.placement.level, "rack");
    assert_eq!(adopted.placement.domain, vec!["r1".to_owned()]);
    let nodes: Vec<&str> = adopted.placement.pods.iter().map(|p| &*p.node).collect();
    assert_eq!(nodes, ["r1-n0", "r1-n1"]);
    assert_eq!(engine.stats(5.0).allocated, 4);
    let before = engine.snapshot(5.0);
    let taken = [AdoptedPod::Gpus {
        node: "r1-n1".into(),
        gpus: GpuSet::single(2),
    }];
    let refused = engine.adopt(given(&taken), None, Terms::default(), 6.0);
    assert!(matches!(refused, Err(CoreError::Conflict(_))));
    let unknown = [AdoptedPod::Count {
        node: "nowhere".into(),
        count: 1,
    }];
    let refused = engine.adopt(given(&unknown), None, Terms::default(), 6.0);
    assert!(matches!(refused, Err(CoreError::UnknownNode(_))));
    assert_eq!(engine.snapshot(5.0), before);
    engine.check_invariants().unwrap();
}

#[test]
fn slice_gangs_keep_every_slice_in_one_rack() {
    // Three racks of 4 nodes x 2 GPUs: 6 pods of 2 GPUs in slices of 3 pods per rack take
    // two racks, three pods in each; slices of 5 never fit a 4-pod rack.
    let mut engine = rack_cluster(3, 4, 2);
    let request = GangRequest::new(6, 2, None, None, Vec::new(), String::new())
        .unwrap()
        .with_slices(&[("rack".to_owned(), 3)])
        .unwrap();
    let placement = engine.place(&request, 0.0).unwrap().unwrap();
    assert_eq!(
        placement.slices,
        vec![vec!["r0".to_owned()], vec!["r1".to_owned()]]
    );
    for (slice, path) in placement.slices.iter().enumerate() {
        for pod in &placement.pods[slice * 3..slice * 3 + 3] {
            assert!(pod.node.starts_with(&format!("{}-", path[0])));
        }
    }
    let too_big = GangRequest::new(10, 2, None, None, Vec::new(), String::new())
        .unwrap()
        .with_slices(&[("rack".to_owned(), 5)])
        .unwrap();
    assert_eq!(engine.place(&too_big, 0.0).unwrap(), None);
    let unknown = GangRequest::new(6, 2, None, None, Vec::new(), String::new())
        .unwrap()
        .with_slices(&[("row".to_owned(), 3)])
        .unwrap();
    assert!(matches!(
        engine.place(&unknown, 0.0),
        Err(CoreError::InvalidRequest(_))
    ));
    let uneven = GangRequest::new(6, 2, None, None, Vec::new(), String::new())
        .unwrap()
        .with_slices(&[("rack".to_owned(), 4)]);
    assert!(matches!(uneven, Err(CoreError::InvalidRequest(_))));
}

fn group(name: &str, pods: i64, gpus_per_pod: i64) -> GangRequest {
    GangRequest::new(pods, gpus_per_pod, None, None, Vec::new(), name.to_owned()).unwrap()
}

#[test]
fn a_leader_joins_its_workers_rack_and_the_unit_is_held_whole() {
    // Two racks of 5 nodes x 8 GPUs: 4 workers of 8 GPUs fill 4 nodes of rack r0, and the
    // 1-GPU leader, colocated with worker rank 0 at the rack level, takes the fifth node.
    let mut engine = rack_cluster(2, 5, 8);
    let colocate = [("leader".to_owned(), "workers".to_owned(), "rack".to_owned())];
    let unit = MultiGangRequest::new(
        vec![group("leader", 1, 1), group("workers", 4, 8)],
        None,
        &colocate,
        "job".into(),
        Spread::Pack,
    )
    .unwrap();
    let placement = engine.place_roles(&unit, 0.0).unwrap().unwrap();
    assert_eq!(placement.level, "rack");
    assert_eq!(
        placement.groups,
        vec![("leader".into(), 1), ("workers".into(), 4)]
    );
    assert_eq!(&*placement.pods[0].node, "r0-n4");
    let unit = Arc::new(unit);
    let reservation = engine.reserve_roles(&unit, 30.0, None, 0.0).unwrap();
    assert_eq!(engine.stats(0.0).reserved, 33);
    assert_eq!(reservation.roles.as_deref(), Some(&*unit));
    assert!(engine.rollback(reservation.id, None, 0.0).unwrap());
    assert_eq!(engine.stats(0.0).reserved, 0);
    // Three such units: two fit (one per rack), the third gets nothing, all or nothing.
    let batch = vec![AnyRequest::Roles(Arc::clone(&unit)); 3];
    let held = engine.reserve_many(&batch, 30.0, None, 0.0).unwrap();
    assert_eq!(held.iter().filter(|hold| hold.is_some()).count(), 2);
    assert_eq!(engine.stats(0.0).reserved, 66);
    engine.check_invariants().unwrap();
    let bytes = engine.snapshot(0.0).unwrap();
    let restored = Engine::restore(&bytes, 0.0).unwrap();
    assert_eq!(restored_bytes(restored), bytes);
}

fn restored_bytes(mut engine: Engine) -> Vec<u8> {
    engine.snapshot(0.0).unwrap()
}

#[test]
fn bad_multi_role_requests_are_refused() {
    let twice = MultiGangRequest::new(
        vec![group("a", 1, 1), group("a", 1, 1)],
        None,
        &[],
        String::new(),
        Spread::Pack,
    );
    assert!(matches!(twice, Err(CoreError::InvalidRequest(_))));
    let unknown = [("a".to_owned(), "b".to_owned(), "rack".to_owned())];
    let dangling = MultiGangRequest::new(
        vec![group("a", 1, 1)],
        None,
        &unknown,
        String::new(),
        Spread::Pack,
    );
    assert!(matches!(dangling, Err(CoreError::InvalidRequest(_))));
    let mut engine = rack_cluster(1, 2, 8);
    let row = [("a".to_owned(), "b".to_owned(), "row".to_owned())];
    let unit = MultiGangRequest::new(
        vec![group("a", 1, 1), group("b", 1, 1)],
        None,
        &row,
        String::new(),
        Spread::Pack,
    )
    .unwrap();
    assert!(matches!(
        engine.place_roles(&unit, 0.0),
        Err(CoreError::InvalidRequest(_))
    ));
}

#[test]
fn a_fractional_job_moves_out_of_a_rack_keeping_its_share() {
    // docs/preemption.md D5: racks of two 1-GPU nodes; a movable share of 300 on r0-n0, a
    // fixed whole job on r1-n0. Two whole GPUs in one rack: the share moves to r1-n1.
    let mut engine = rack_cluster(2, 2, 1);
    let others = ["r0-n1", "r1-n0", "r1-n1"];
    for node in others {
        engine.set_cordoned(node, true, 0.0).unwrap();
    }
    let terms = Terms::new(0, true, true).unwrap();
    let share = GangRequest::new(1, 1, None, Some("node".into()), Vec::new(), String::new());
    let share = share
        .unwrap()
        .with_gpu_milli(Some(300))
        .unwrap()
        .with_terms(terms);
    let held = engine.reserve(&Arc::new(share), 30.0, None, 0.0).unwrap();
    let mover = engine.commit(held.id, None, 0.0).unwrap();
    for node in others {
        engine.set_cordoned(node, false, 0.0).unwrap();
    }
    for node in ["r0-n1", "r1-n1"] {
        engine.set_cordoned(node, true, 0.0).unwrap();
    }
    let fixed = engine
        .reserve(&ranked(1, 1, None, 0), 30.0, None, 0.0)
        .unwrap();
    engine.commit(fixed.id, None, 0.0).unwrap();
    for node in ["r0-n1", "r1-n1"] {
        engine.set_cordoned(node, false, 0.0).unwrap();
    }
    let gang = ranked(2, 1, Some("rack"), 0);
    let limits = RemovalLimits::default();
    let plan = engine
        .plan_defrag(&gang, &limits, DefragOptions::default(), 1.0)
        .unwrap()
        .unwrap();
    assert_eq!(plan.moves.len(), 1);
    assert_eq!(plan.moves[0].allocation, mover.id);
    assert_eq!(plan.moves[0].target.gpu_milli, Some(300));
    assert_eq!(&*plan.moves[0].target.pods[0].node, "r1-n1");
    assert_eq!(plan.moved_gpus, 0);
    engine.apply_defrag(&plan, 30.0, None, 1.0).unwrap();
    let node = engine.node_info("r1-n1", 1.0).unwrap();
    assert_eq!(node.shared, vec![(0, 300)]);
    engine.check_invariants().unwrap();
}
