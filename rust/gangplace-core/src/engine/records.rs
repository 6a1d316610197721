//! The snapshot records that more than one concept's part of the format uses (the body in
//! `crate::snapshot`, the repair and multi-role records): terms, requests, endings, pods and
//! owners, each with its checked way back.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::{CoreError, CoreResult};
use crate::ledger::Ending;
use crate::limits::MAX_NAME_BYTES;
use crate::model::{GangRequest, PodPlacement, Terms};

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct TermsRecord {
    priority: i64,
    preemptible: bool,
    movable: bool,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct RequestRecord {
    pods: i64,
    gpus_per_pod: i64,
    min_pods: Option<i64>,
    required_level: Option<String>,
    selector: Vec<(String, String)>,
    name: String,
    terms: TermsRecord,
}

pub(crate) fn terms_record(terms: Terms) -> TermsRecord {
    TermsRecord {
        priority: i64::from(terms.priority),
        preemptible: terms.preemptible,
        movable: terms.movable,
    }
}

pub(crate) fn terms_from(record: &TermsRecord) -> CoreResult<Terms> {
    Terms::new(record.priority, record.preemptible, record.movable).map_err(as_snapshot_error)
}

pub(crate) fn slice_records(request: &GangRequest) -> Vec<(String, i64)> {
    let size = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let layers = request.slices.iter();
    layers
        .map(|layer| (layer.level.clone(), size(layer.pods_per_slice)))
        .collect()
}

pub(crate) fn request_record(request: &GangRequest) -> RequestRecord {
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    RequestRecord {
        pods: count(request.pods),
        gpus_per_pod: i64::from(request.gpus_per_pod),
        min_pods: request.min_pods.map(count),
        required_level: request.required_level.clone(),
        selector: request.filter.labels.clone(),
        name: request.name.clone(),
        terms: terms_record(request.terms),
    }
}

/// A snapshot's request, validated as a new one would be.
pub(crate) fn request_from(record: RequestRecord) -> CoreResult<GangRequest> {
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

pub(crate) fn bad(message: impl Into<String>) -> CoreError {
    CoreError::InvalidSnapshot(message.into())
}

pub(crate) fn ending_code(ending: Ending) -> u8 {
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

pub(crate) fn ending_from(code: u8) -> CoreResult<Ending> {
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
pub(crate) fn pod_from_record(node: String, gpus: &[u32]) -> CoreResult<PodPlacement> {
    let message = format!("a pod on node {node:?} names its GPUs badly");
    PodPlacement::new(node, gpus.iter().map(|&gpu| i64::from(gpu))).map_err(|_| bad(message))
}

pub(crate) fn owner_from(owner: Option<String>) -> CoreResult<Option<Arc<str>>> {
    match owner {
        Some(name) if name.is_empty() || name.len() > MAX_NAME_BYTES => {
            Err(bad("an owner name is empty or too long"))
        }
        owner => Ok(owner.map(Arc::from)),
    }
}

pub(crate) fn as_snapshot_error(error: CoreError) -> CoreError {
    match error {
        CoreError::InvalidSnapshot(message) => CoreError::InvalidSnapshot(message),
        other => bad(other.to_string()),
    }
}
