//! Ending some pods of an allocation (docs/transactions.md "Ending some pods", E1-E4).
#![allow(clippy::unwrap_used)] // test helpers: a failed setup should panic loudly

use gangplace_core::{CoreError, Engine};

mod common;

use common::{given, rack_cluster, ranked, request};

fn committed(engine: &mut Engine, pods: i64, gpus: i64) -> gangplace_core::Allocation {
    let reservation = engine
        .reserve(&request(pods, gpus), 30.0, None, 0.0)
        .unwrap();
    engine.commit(reservation.id, None, 0.0).unwrap()
}

#[test]
fn ended_ranks_free_their_gpus_and_keep_the_other_numbers() {
    let mut engine = rack_cluster(1, 2, 8);
    let allocation = committed(&mut engine, 4, 4);
    assert_eq!(engine.stats(0.0).free, 0);
    let after = engine
        .release_pods(allocation.id, &[2, 0], None, 1.0)
        .unwrap()
        .unwrap();
    assert_eq!(after.ended, vec![0, 2]);
    assert_eq!(after.placement.pods, allocation.placement.pods);
    assert_eq!(engine.stats(1.0).free, 8);
    let error = engine
        .release_pods(allocation.id, &[2], None, 1.0)
        .unwrap_err();
    assert!(matches!(error, CoreError::InvalidRequest(_)), "{error}");
    assert_eq!(
        engine
            .release_pods(allocation.id, &[1, 3], None, 2.0)
            .unwrap(),
        None
    );
    assert_eq!(
        engine.hold_status(allocation.id, None, 2.0).unwrap(),
        "released"
    );
    assert_eq!(engine.stats(2.0).free, 16);
    engine.check_invariants().unwrap();
}

#[test]
fn bad_ranks_change_nothing() {
    let mut engine = rack_cluster(1, 1, 8);
    let allocation = committed(&mut engine, 2, 4);
    let before = engine.snapshot(0.0).unwrap();
    for ranks in [&[][..], &[2], &[-1], &[1, 1]] {
        let error = engine
            .release_pods(allocation.id, ranks, None, 0.0)
            .unwrap_err();
        assert!(
            matches!(error, CoreError::InvalidRequest(_)),
            "{ranks:?}: {error}"
        );
        assert_eq!(engine.snapshot(0.0).unwrap(), before);
    }
}

#[test]
fn another_owner_sees_an_unknown_allocation() {
    let mut engine = rack_cluster(1, 1, 8);
    let reservation = engine
        .reserve(&request(2, 4), 30.0, Some("team"), 0.0)
        .unwrap();
    engine.commit(reservation.id, Some("team"), 0.0).unwrap();
    let error = engine
        .release_pods(reservation.id, &[0], Some("someone"), 0.0)
        .unwrap_err();
    assert!(matches!(error, CoreError::UnknownReservation(_)), "{error}");
    assert!(
        engine
            .release_pods(reservation.id, &[0], Some("team"), 0.0)
            .is_ok()
    );
}

#[test]
fn a_reservation_has_no_pods_to_end() {
    let mut engine = rack_cluster(1, 1, 8);
    let reservation = engine.reserve(&request(2, 4), 30.0, None, 0.0).unwrap();
    let error = engine
        .release_pods(reservation.id, &[0], None, 0.0)
        .unwrap_err();
    assert!(matches!(error, CoreError::ReservationError(_)), "{error}");
}

#[test]
fn an_ended_rank_is_never_lost_and_survives_a_snapshot() {
    let mut engine = rack_cluster(1, 2, 8);
    let allocation = committed(&mut engine, 2, 8);
    let node = allocation.placement.pods[1].node.to_string();
    engine.set_gpu_health(&node, 0, false, 0.0).unwrap();
    let lost = engine.allocations(None, false, 0.0).remove(0);
    assert_eq!(lost.lost, vec![1]);
    let after = engine
        .release_pods(allocation.id, &[1], None, 0.0)
        .unwrap()
        .unwrap();
    assert_eq!(
        (after.lost.as_slice(), after.ended.as_slice()),
        (&[][..], &[1][..])
    );
    // The unhealthy GPU stays out of the pool; the other seven are free.
    assert_eq!(engine.stats(0.0).free, 7);
    let bytes = engine.snapshot(0.0).unwrap();
    let mut restored = Engine::restore(&bytes, 0.0).unwrap();
    assert_eq!(
        restored.allocations(None, false, 0.0),
        engine.allocations(None, false, 0.0)
    );
    assert_eq!(restored.snapshot(0.0).unwrap(), bytes);
}

#[test]
fn an_adopted_gang_grows_and_a_placed_one_does_not() {
    use gangplace_core::{AdoptedPod, Terms, TermsChange};
    let mut engine = rack_cluster(2, 1, 8);
    let pod = |node: &str, count| AdoptedPod::Count {
        node: node.into(),
        count,
    };
    let adopted = engine
        .adopt(given(&[pod("r0-n0", 2)]), None, Terms::default(), 0.0)
        .unwrap();
    let change = TermsChange {
        priority: Some(4),
        ..TermsChange::default()
    };
    let grown = engine
        .adopt_into(adopted.id, given(&[pod("r1-n0", 3)]), None, change, 1.0)
        .unwrap();
    assert_eq!(grown.placement.pods.len(), 2);
    assert_eq!(
        (grown.placement.level.as_str(), grown.terms.priority),
        ("cluster", 4)
    );
    assert_eq!(grown.since, 0.0);
    let placed = committed(&mut engine, 1, 1);
    refused_into(&mut engine, placed.id, given(&[pod("r1-n0", 1)]));
    engine.check_invariants().unwrap();
}

/// `adopt_into` raises `InvalidRequest` and leaves the snapshot as it was.
fn refused_into(
    engine: &mut Engine,
    id: gangplace_core::HoldId,
    pods: gangplace_core::AdoptedPods,
) {
    let before = engine.snapshot(1.0).unwrap();
    let change = gangplace_core::TermsChange::default();
    let error = engine.adopt_into(id, pods, None, change, 1.0).unwrap_err();
    assert!(matches!(error, CoreError::InvalidRequest(_)), "{error}");
    assert_eq!(engine.snapshot(1.0).unwrap(), before);
}

#[test]
fn a_fractional_gang_grows_by_pods_of_its_own_share_only() {
    use gangplace_core::{AdoptedPod, AdoptedPods, Terms, TermsChange};
    let mut engine = rack_cluster(1, 2, 2);
    let one = |node: &str| AdoptedPod::Count {
        node: node.into(),
        count: 1,
    };
    let shares = |pods, milli| AdoptedPods {
        pods,
        gpu_milli: milli,
        ..Default::default()
    };
    let first = [one("r0-n0"), one("r0-n0")];
    let adopted = engine
        .adopt(shares(&first, Some(400)), None, Terms::default(), 0.0)
        .unwrap();
    let later = [one("r0-n0")];
    let grown = engine
        .adopt_into(
            adopted.id,
            shares(&later, Some(400)),
            None,
            TermsChange::default(),
            1.0,
        )
        .unwrap();
    // GPU 0 holds 800: the third pod takes GPU 1 (rule F2), with the same share.
    assert_eq!(grown.placement.pods.len(), 3);
    assert_eq!(grown.placement.gpu_milli, Some(400));
    let shared = engine.node_info("r0-n0", 1.0).unwrap().shared;
    assert_eq!(shared, vec![(0, 800), (1, 400)]);
    for milli in [None, Some(300)] {
        refused_into(&mut engine, adopted.id, shares(&later, milli));
    }
    engine.check_invariants().unwrap();
    assert!(engine.release(adopted.id, None, 2.0).unwrap());
    assert!(engine.node_info("r0-n0", 2.0).unwrap().shared.is_empty());
}

#[test]
fn shares_are_victims_and_their_gpu_is_free_once_all_end() {
    // docs/preemption.md P8: two pods of 400 share GPU 0, one of 300 GPU 1 (priority 0). A
    // whole 1 x 2 gang of priority 5 ends both allocations and takes both GPUs whole; the
    // whole GPUs count nothing against a cap (a share holds no whole GPU).
    use gangplace_core::{AdoptedPod, AdoptedPods, GpuSet, RemovalLimits, Terms};
    let mut engine = rack_cluster(1, 1, 2);
    let on = |gpu: u32| AdoptedPod::Gpus {
        node: "r0-n0".into(),
        gpus: GpuSet::single(gpu),
    };
    let mut adopt = |pods: &[AdoptedPod], milli| {
        let shares = AdoptedPods {
            pods,
            gpu_milli: Some(milli),
            ..Default::default()
        };
        engine
            .adopt(shares, None, Terms::default(), 0.0)
            .unwrap()
            .id
    };
    let first = adopt(&[on(0), on(0)], 400);
    let second = adopt(&[on(1)], 300);
    let gang = ranked(1, 2, None, 5);
    let plan = engine
        .plan_preemption(&gang, &RemovalLimits::default(), 1.0)
        .unwrap()
        .unwrap();
    let mut expected = vec![first, second];
    expected.sort_unstable();
    assert_eq!((plan.victims.clone(), plan.victim_gpus), (expected, 0));
    engine.preempt(&plan, 30.0, None, 1.0).unwrap();
    let node = engine.node_info("r0-n0", 1.0).unwrap();
    assert!(node.shared.is_empty());
    assert_eq!(engine.hold_status(first, None, 1.0).unwrap(), "preempted");
    engine.check_invariants().unwrap();
}
