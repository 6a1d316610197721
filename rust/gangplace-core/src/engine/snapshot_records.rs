//! The records of the snapshot body (module `snapshot`) that more than one part of the format
//! uses: terms, requests, endings, pods and owners, each with its checked way back.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::{CoreError, CoreResult};
use crate::ledger::Ending;
use crate::limits::MAX_NAME_BYTES;
use crate::model::{GangRequest, PodPlacement, Terms};

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct TermsRecord {
    priority: i64,
    preemptible: bool,
    movable: bool,
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct RequestRecord {
    pods: i64,
    gpus_per_pod: i64,
    min_pods: Option<i64>,
    required_level: Option<String>,
    selector: Vec<(String, String)>,
    name: String,
    terms: TermsRecord,
}

pub(super) fn terms_record(terms: Terms) -> TermsRecord {
    TermsRecord {
        priority: i64::from(terms.priority),
        preemptible: terms.preemptible,
        movable: terms.movable,
    }
}

pub(super) fn terms_from(record: &TermsRecord) -> CoreResult<Terms> {
    Terms::new(record.priority, record.preemptible, record.movable).map_err(as_snapshot_error)
}

pub(super) fn slice_records(request: &GangRequest) -> Vec<(String, i64)> {
    let size = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let layers = request.slices.iter();
    layers
        .map(|layer| (layer.level.clone(), size(layer.pods_per_slice)))
        .collect()
}

pub(super) fn request_record(request: &GangRequest) -> RequestRecord {
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    RequestRecord {
        pods: count(request.pods),
        gpus_per_pod: i64::from(request.gpus_per_pod),
        min_pods: request.min_pods.map(count),
        required_level: request.required_level.clone(),
        selector: request.selector.clone(),
        name: request.name.clone(),
        terms: terms_record(request.terms),
    }
}

/// A snapshot's request, validated as a new one would be.
pub(super) fn request_from(record: RequestRecord) -> CoreResult<GangRequest> {
    let terms = terms_from(&record.terms)?;
    let request = GangRequest::new(
        record.pods,
        record.gpus_per_pod,
        record.min_pods,
        record.required_level,
        record.selector,
        record.name,
    )
    .map_err(as_snapshot_error)?;
    Ok(request.with_terms(terms))
}

pub(super) fn bad(message: impl Into<String>) -> CoreError {
    CoreError::InvalidSnapshot(message.into())
}

pub(super) fn ending_code(ending: Ending) -> u8 {
    match ending {
        Ending::RolledBack => 0,
        Ending::Expired => 1,
        Ending::Revoked => 2,
        Ending::Released => 3,
        Ending::Preempted => 4,
        Ending::Migrated => 5,
        Ending::Merged => 6,
    }
}

pub(super) fn ending_from(code: u8) -> CoreResult<Ending> {
    match code {
        0 => Ok(Ending::RolledBack),
        1 => Ok(Ending::Expired),
        2 => Ok(Ending::Revoked),
        3 => Ok(Ending::Released),
        4 => Ok(Ending::Preempted),
        5 => Ok(Ending::Migrated),
        6 => Ok(Ending::Merged),
        other => Err(bad(format!("unknown ending code {other}"))),
    }
}

/// A snapshot's pod: GPU indices must be distinct and below 64.
pub(super) fn pod_from_record(node: String, gpus: &[u32]) -> CoreResult<PodPlacement> {
    let message = format!("a pod on node {node:?} names its GPUs badly");
    PodPlacement::new(node, gpus.iter().map(|&gpu| i64::from(gpu))).map_err(|_| bad(message))
}

pub(super) fn owner_from(owner: Option<String>) -> CoreResult<Option<Arc<str>>> {
    match owner {
        Some(name) if name.is_empty() || name.len() > MAX_NAME_BYTES => {
            Err(bad("an owner name is empty or too long"))
        }
        owner => Ok(owner.map(Arc::from)),
    }
}

pub(super) fn as_snapshot_error(error: CoreError) -> CoreError {
    match error {
        CoreError::InvalidSnapshot(message) => CoreError::InvalidSnapshot(message),
        other => bad(other.to_string()),
    }
}

// The snapshot body (module `snapshot`): its header-less layout, record by record.

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Body {
    pub(super) levels: Vec<String>,
    pub(super) policy: String,
    pub(super) max_held_gpus_per_owner: Option<u64>,
    pub(super) taken_at: f64,
    pub(super) nodes: Vec<NodeRecord>,
    pub(super) holds: Vec<HoldRecord>,
    pub(super) ended: Vec<EndedRecord>,
}

/// What version 3 adds after the version 2 body.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct Extension {
    pub(super) max_level: Option<String>,
}

/// What version 4 adds after the version 3 extension: one entry per hold of the body, in
/// the same order.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct Shapes {
    pub(super) holds: Vec<HoldShape>,
    /// The GPU groups of the nodes that have them, by node name.
    pub(super) nodes: Vec<NodeShape>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct NodeShape {
    pub(super) name: String,
    pub(super) levels: Vec<String>,
    pub(super) paths: Vec<Vec<u32>>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct HoldShape {
    /// The request's slice layers (empty without a request or slices).
    pub(super) slices: Vec<(String, i64)>,
    /// The placement's innermost slice paths.
    pub(super) placement_slices: Vec<Vec<String>>,
    /// The request's spread (`"pack"` without a request).
    pub(super) spread: String,
    /// The request's NUMA policy (`"none"` without a request).
    pub(super) numa: String,
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct NodeRecord {
    pub(super) name: String,
    pub(super) gpus: u32,
    pub(super) path: Vec<String>,
    pub(super) labels: Vec<(String, String)>,
    pub(super) cordoned: bool,
    pub(super) unhealthy: u64,
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct HoldRecord {
    pub(super) id: u128,
    pub(super) committed: bool,
    pub(super) expires_at: f64,
    pub(super) owner: Option<String>,
    pub(super) gpus: Vec<(String, u64)>,
    pub(super) pods: Vec<(String, Vec<u32>)>,
    pub(super) level: String,
    pub(super) domain: Vec<String>,
    pub(super) terms: TermsRecord,
    pub(super) since: f64,
    pub(super) request: Option<RequestRecord>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct EndedRecord {
    pub(super) id: u128,
    pub(super) ending: u8,
    pub(super) owner: Option<String>,
}
