//! Engine scenarios through the public facade (a default build: no test machinery).
#![allow(clippy::unwrap_used)] // test helpers: a failed setup should panic loudly

use gangplace_core::{CoreError, Engine, EngineConfig, GangRequest, HoldId, NodeSpec, Policy};

fn request(pods: i64, gpus_per_pod: i64) -> GangRequest {
    GangRequest::new(pods, gpus_per_pod, None, None, Vec::new(), String::new()).unwrap()
}

fn rack_cluster(racks: usize, nodes: usize, gpus: i64) -> Engine {
    let config = EngineConfig::new(vec!["rack".into()], Policy::BestFit, None).unwrap();
    let mut engine = Engine::new(config);
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
