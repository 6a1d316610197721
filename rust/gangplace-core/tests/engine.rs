//! Engine scenarios and a property test over random operation sequences.
#![allow(clippy::unwrap_used)] // test helpers: a failed setup should panic loudly

use gangplace_core::{CoreError, Engine, GangRequest, NodeSpec, Policy};
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
    let error = engine.reserve(&request(1, 8), 30.0, 0.0).unwrap_err();
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
    let reservation = engine.reserve(&request(2, 8), 10.0, 0.0).unwrap();
    assert_eq!(engine.stats(0.0).reserved, 16);
    let allocation = engine.commit(&reservation.id, 1.0).unwrap();
    assert_eq!(engine.commit(&reservation.id, 2.0).unwrap(), allocation);
    assert!(matches!(
        engine.rollback(&reservation.id, 2.0),
        Err(CoreError::ReservationState(_))
    ));
    assert!(engine.release(&allocation.id, 3.0).unwrap());
    assert!(!engine.release(&allocation.id, 3.0).unwrap());
    let expiring = engine.reserve(&request(1, 1), 5.0, 10.0).unwrap();
    assert!(matches!(
        engine.commit(&expiring.id, 15.0),
        Err(CoreError::ReservationExpired(_))
    ));
    assert!(!engine.rollback(&expiring.id, 15.0).unwrap());
    assert_eq!(engine.stats(15.0).free, 32);
    engine.check_invariants().unwrap();
}

#[derive(Debug, Clone)]
enum Operation {
    Reserve {
        pods: i64,
        gpus_per_pod: i64,
    },
    Commit(usize),
    Rollback(usize),
    Release(usize),
    Health {
        node: usize,
        gpu: i64,
        healthy: bool,
    },
    Cordon {
        node: usize,
        cordoned: bool,
    },
    Tick(f64),
}

fn operation() -> impl Strategy<Value = Operation> {
    prop_oneof![
        3 => (1i64..6, prop::sample::select(vec![1i64, 2, 4, 8]))
            .prop_map(|(pods, gpus_per_pod)| Operation::Reserve { pods, gpus_per_pod }),
        2 => any::<usize>().prop_map(Operation::Commit),
        1 => any::<usize>().prop_map(Operation::Rollback),
        1 => any::<usize>().prop_map(Operation::Release),
        1 => (0usize..8, 0i64..8, any::<bool>())
            .prop_map(|(node, gpu, healthy)| Operation::Health { node, gpu, healthy }),
        1 => (0usize..8, any::<bool>()).prop_map(|(node, cordoned)| Operation::Cordon { node, cordoned }),
        1 => prop::sample::select(vec![0.5, 3.0, 40.0]).prop_map(Operation::Tick),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn invariants_hold_after_every_operation(operations in prop::collection::vec(operation(), 1..60)) {
        let mut engine = rack_cluster(2, 4, 8);
        let mut ids: Vec<String> = Vec::new();
        let mut now = 0.0;
        let pick = |ids: &[String], index: usize| ids.get(index % ids.len().max(1)).cloned();
        for operation in operations {
            match operation {
                Operation::Reserve { pods, gpus_per_pod } => {
                    if let Ok(reservation) = engine.reserve(&request(pods, gpus_per_pod), 30.0, now) {
                        ids.push(reservation.id);
                    }
                }
                Operation::Commit(index) => {
                    if let Some(id) = pick(&ids, index) { let _ = engine.commit(&id, now); }
                }
                Operation::Rollback(index) => {
                    if let Some(id) = pick(&ids, index) { let _ = engine.rollback(&id, now); }
                }
                Operation::Release(index) => {
                    if let Some(id) = pick(&ids, index) { let _ = engine.release(&id, now); }
                }
                Operation::Health { node, gpu, healthy } => {
                    let name = format!("r{}-n{}", node / 4, node % 4);
                    engine.set_gpu_health(&name, gpu, healthy, now).unwrap();
                }
                Operation::Cordon { node, cordoned } => {
                    let name = format!("r{}-n{}", node / 4, node % 4);
                    engine.set_cordoned(&name, cordoned, now).unwrap();
                }
                Operation::Tick(seconds) => now += seconds,
            }
            engine.check_invariants().map_err(|e| TestCaseError::fail(e.to_string()))?;
            let stats = engine.stats(now);
            let idle_unhealthy = stats.unhealthy
                - (0..8)
                    .map(|node| {
                        let info = engine.node_info(&format!("r{}-n{}", node / 4, node % 4), now).unwrap();
                        info.allocated.iter().filter(|gpu| info.unhealthy.contains(gpu)).count() as u64
                    })
                    .sum::<u64>();
            prop_assert_eq!(stats.free + stats.reserved + stats.allocated + idle_unhealthy, stats.total);
        }
    }
}
