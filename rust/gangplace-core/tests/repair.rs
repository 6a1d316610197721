//! Repair scenarios through the public facade (docs/repair.md "Repair after failures"; a default
//! build: no test machinery).
#![allow(clippy::unwrap_used)] // test helpers: a failed setup should panic loudly

mod common;

use common::{rack_cluster, request};
use gangplace_core::{Allocation, CoreError, Engine, PodPlacement, RepairPlan};

#[test]
fn lost_ranks_are_planned_inside_the_rack_or_widened() {
    let mut engine = rack_cluster(2, 3, 8);
    let held = engine.reserve(&request(2, 8), 30.0, None, 0.0).unwrap();
    let allocation = engine.commit(held.id, None, 0.0).unwrap();
    assert_eq!(allocation.placement.domain, vec!["r0".to_owned()]);
    let lost_node = allocation.placement.pods[1].node.to_string();
    engine.set_gpu_health(&lost_node, 2, false, 0.0).unwrap();
    let plan = engine
        .plan_repair(allocation.id, (false, false), None, 0.0)
        .unwrap()
        .unwrap();
    assert_eq!(plan.lost, vec![1]);
    assert_eq!(plan.replacements.len(), 1);
    assert_eq!(plan.replacements[0].0, 1);
    assert_eq!(&*plan.replacements[0].1.node, "r0-n2"); // the rack's free node
    let filler = engine.reserve(&request(1, 8), 30.0, None, 0.0).unwrap();
    assert_eq!(&*filler.placement.pods[0].node, "r0-n2");
    assert_eq!(
        engine
            .plan_repair(allocation.id, (false, false), None, 0.0)
            .unwrap(),
        None
    );
    let wide = engine
        .plan_repair(allocation.id, (true, false), None, 0.0)
        .unwrap()
        .unwrap();
    assert_eq!(wide.level, "cluster");
    let tiers = engine.explain_repair(allocation.id, None, 0.0).unwrap();
    assert_eq!(
        tiers,
        [("spares", 0), ("slice", 0), ("domain", 0), ("widened", 1)]
    );
    assert!(matches!(
        engine.plan_repair(filler.id, (false, false), None, 0.0),
        Err(CoreError::ReservationError(_))
    ));
    engine.check_invariants().unwrap();
}

/// A committed 2 x 8 gang whose rank `rank` lost hardware (its node removed, or GPU 2 of it
/// unhealthy), and the plan that repairs it inside its rack.
fn broken_pair(engine: &mut Engine, rank: usize, remove: bool) -> (Allocation, RepairPlan) {
    let held = engine.reserve(&request(2, 8), 30.0, None, 0.0).unwrap();
    let allocation = engine.commit(held.id, None, 0.0).unwrap();
    let lost_node = allocation.placement.pods[rank].node.to_string();
    match remove {
        true => drop(engine.remove_node(&lost_node, 0.0).unwrap()),
        false => drop(engine.set_gpu_health(&lost_node, 2, false, 0.0).unwrap()),
    }
    let plan = engine.plan_repair(allocation.id, (false, false), None, 0.0);
    (allocation, plan.unwrap().unwrap())
}

#[test]
fn a_repair_is_held_then_merged_into_the_allocation() {
    let mut engine = rack_cluster(2, 3, 8);
    let (allocation, plan) = broken_pair(&mut engine, 1, false);
    let lost_node = allocation.placement.pods[1].node.to_string();
    let repair = engine.repair(&plan, 30.0, None, 0.0).unwrap();
    assert_eq!(repair.repairs, Some(allocation.id));
    assert_eq!(repair.repaired_ranks, vec![1]);
    assert!(matches!(
        engine.commit(repair.id, None, 0.0),
        Err(CoreError::ReservationError(_))
    ));
    let before = engine.snapshot(0.0).unwrap();
    let mut restored = Engine::restore(&before, 0.0).unwrap();
    assert_eq!(restored.snapshot(0.0).unwrap(), before);
    let merged = engine.commit_repair(repair.id, None, 0.0).unwrap();
    assert_eq!(merged.id, allocation.id);
    assert!(merged.lost.is_empty());
    assert_eq!(merged.placement.pods[1], plan.replacements[0].1);
    assert_eq!(merged.placement.pods[0], allocation.placement.pods[0]);
    let info = engine.node_info(&lost_node, 0.0).unwrap();
    assert_eq!(info.allocated.len(), 0); // the lost pod's healthy GPUs went back
    assert_eq!(info.free.len(), 7);
    assert_eq!(engine.hold_status(repair.id, None, 0.0).unwrap(), "merged");
    assert!(matches!(
        engine.repair(&plan, 30.0, None, 0.0),
        Err(CoreError::Conflict(_))
    ));
    engine.check_invariants().unwrap();
}

#[test]
fn a_released_allocation_takes_its_repair_reservation_with_it() {
    let mut engine = rack_cluster(1, 3, 8);
    let (allocation, plan) = broken_pair(&mut engine, 0, true);
    let repair = engine.repair(&plan, 30.0, None, 0.0).unwrap();
    assert!(engine.release(allocation.id, None, 0.0).unwrap());
    assert_eq!(
        engine.hold_status(repair.id, None, 0.0).unwrap(),
        "rolled-back"
    );
    assert_eq!(engine.stats(0.0).free, 16);
    engine.check_invariants().unwrap();
}

#[test]
fn a_forged_repair_plan_is_refused_and_changes_nothing() {
    let mut engine = rack_cluster(1, 4, 8);
    let (_, plan) = broken_pair(&mut engine, 0, false);
    let before = engine.snapshot(0.0).unwrap();
    let mut wrong_rank = plan.clone();
    wrong_rank.replacements[0].0 = 1;
    let mut wrong_size = plan.clone();
    wrong_size.replacements[0].1 = PodPlacement::new("r0-n2".into(), [0, 1]).unwrap();
    let mut outside = plan.clone();
    outside.replacements[0].1 = PodPlacement::new("elsewhere".into(), 0..8).unwrap();
    for (forged, invalid) in [(wrong_rank, true), (wrong_size, true), (outside, false)] {
        let refused = engine.repair(&forged, 30.0, None, 0.0);
        match invalid {
            true => assert!(matches!(refused, Err(CoreError::InvalidRequest(_)))),
            false => assert!(matches!(refused, Err(CoreError::Conflict(_)))),
        }
        assert_eq!(engine.snapshot(0.0).unwrap(), before);
    }
    assert!(engine.repair(&plan, 30.0, None, 0.0).is_ok());
}

#[test]
fn a_repair_that_preempts_ends_the_lower_priority_job() {
    let mut engine = rack_cluster(1, 3, 8);
    let (allocation, _) = broken_pair(&mut engine, 1, false);
    engine.set_priority(allocation.id, 5, None, 0.0).unwrap();
    let low = engine.reserve(&request(1, 8), 30.0, None, 0.0).unwrap();
    let low = engine.commit(low.id, None, 0.0).unwrap();
    assert_eq!(
        engine
            .plan_repair(allocation.id, (true, false), None, 0.0)
            .unwrap(),
        None
    );
    let plan = engine
        .plan_repair(allocation.id, (false, true), None, 0.0)
        .unwrap()
        .unwrap();
    assert_eq!(plan.victims, vec![low.id]);
    let repair = engine.repair(&plan, 30.0, None, 0.0).unwrap();
    assert_eq!(engine.hold_status(low.id, None, 0.0).unwrap(), "preempted");
    assert!(
        engine
            .commit_repair(repair.id, None, 0.0)
            .unwrap()
            .lost
            .is_empty()
    );
    engine.check_invariants().unwrap();
}
