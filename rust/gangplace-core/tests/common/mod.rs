//! Builders shared by the engine scenario files.
#![allow(dead_code, clippy::unwrap_used)] // each test file uses some of them

use std::sync::Arc;

use gangplace_core::{Engine, EngineConfig, GangRequest, NodeSpec, Policy, Terms};

pub fn request(pods: i64, gpus_per_pod: i64) -> Arc<GangRequest> {
    Arc::new(GangRequest::new(pods, gpus_per_pod, None, None, Vec::new(), String::new()).unwrap())
}

pub fn ranked(
    pods: i64,
    gpus_per_pod: i64,
    level: Option<&str>,
    priority: i64,
) -> Arc<GangRequest> {
    let level = level.map(str::to_owned);
    let request = GangRequest::new(pods, gpus_per_pod, None, level, Vec::new(), String::new());
    let terms = Terms::new(priority, true, false).unwrap();
    Arc::new(request.unwrap().with_terms(terms))
}

pub fn rack_cluster(racks: usize, nodes: usize, gpus: i64) -> Engine {
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

/// `adopt`'s argument for whole-GPU pods asking nothing else.
pub fn given(pods: &[gangplace_core::AdoptedPod]) -> gangplace_core::AdoptedPods<'_> {
    gangplace_core::AdoptedPods {
        pods,
        ..Default::default()
    }
}
