//! Engine scenarios and a property test over random operation sequences.
#![allow(clippy::unwrap_used)] // test helpers: a failed setup should panic loudly

use gangplace_core::{CoreError, Engine, GangRequest, NodeSpec, Policy, script};
use proptest::prelude::*;

fn request(pods: i64, gpus_per_pod: i64) -> GangRequest {
    GangRequest::new(pods, gpus_per_pod, None, None, Vec::new(), String::new()).unwrap()
}

fn rack_cluster(racks: usize, nodes: usize, gpus: i64) -> Engine {
    let mut engine = Engine::new(vec!["rack".into()], Policy::BestFit).unwrap();
    for rack in 0..racks {
        for node in 0..nodes {
            engine
                .add_node(NodeSpec {
                    name: format!("r{rack}-n{node}"),
                    gpus,
                    topology: vec![("rack".into(), format!("r{rack}"))],
                    ..NodeSpec::default()
                })
                .unwrap();
        }
    }
    engine
}

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
    let allocation = engine.commit(&reservation.id, None, 1.0).unwrap();
    assert_eq!(
        engine.commit(&reservation.id, None, 2.0).unwrap(),
        allocation
    );
    assert!(matches!(
        engine.rollback(&reservation.id, None, 2.0),
        Err(CoreError::ReservationState(_))
    ));
    assert!(engine.release(&allocation.id, None, 3.0).unwrap());
    assert!(!engine.release(&allocation.id, None, 3.0).unwrap());
    let expiring = engine.reserve(&request(1, 1), 5.0, None, 10.0).unwrap();
    assert!(matches!(
        engine.commit(&expiring.id, None, 15.0),
        Err(CoreError::ReservationExpired(_))
    ));
    assert!(!engine.rollback(&expiring.id, None, 15.0).unwrap());
    assert_eq!(engine.stats(15.0).free, 32);
    engine.check_invariants().unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Random operation scripts (the same decoder the fuzz targets use): invariants,
    /// conservation, unchanged state on refusal and snapshot round trips, after every step.
    #[test]
    fn guarantees_hold_after_every_operation(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let outcome = script::run(&bytes).map_err(TestCaseError::fail)?;
        prop_assert!(outcome.operations >= 6);
    }
}

#[test]
fn scripts_exercise_every_operation() {
    // A fixed script that walks through each operation kind, so a decoder change that
    // silently drops one shows up here.
    let params = [3, 1, 3, 2, 6, 6, 4, 2, 2, 2, 1];
    let mut bytes: Vec<u8> = Vec::new();
    for (selector, count) in (0u8..).zip(params) {
        bytes.push(selector);
        bytes.extend((1..=count).map(|param| param * 3 + selector));
    }
    bytes.extend([11, 0, 0, 0, 0, 11, 5, 0, 7, 1]); // a snapshot, then a corrupted one
    let kinds: std::collections::BTreeSet<String> = script::decode(&bytes)
        .iter()
        .map(|op| {
            format!("{op:?}")
                .split([' ', '{'])
                .next()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    assert_eq!(kinds.len(), 12, "{kinds:?}");
    let outcome = script::run(&bytes).unwrap();
    assert_eq!(outcome.operations, 6 + script::decode(&bytes).len());
}
