//! The snapshot body: its header-less layout, record by record (version 2's body, then what
//! versions 3 and 4 add after it).

use serde::{Deserialize, Serialize};

use crate::engine::records::{RequestRecord, TermsRecord};

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Body {
    pub(crate) levels: Vec<String>,
    pub(crate) policy: String,
    pub(crate) max_held_gpus_per_owner: Option<u64>,
    pub(crate) taken_at: f64,
    pub(crate) nodes: Vec<NodeRecord>,
    pub(crate) holds: Vec<HoldRecord>,
    pub(crate) ended: Vec<EndedRecord>,
}

/// What version 3 adds after the version 2 body.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Extension {
    pub(crate) max_level: Option<String>,
}

/// What version 4 adds after the version 3 extension: one entry per hold of the body, in
/// the same order.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Shapes {
    pub(crate) holds: Vec<HoldShape>,
    /// The GPU groups of the nodes that have them, by node name.
    pub(crate) nodes: Vec<NodeShape>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct NodeShape {
    pub(crate) name: String,
    pub(crate) levels: Vec<String>,
    pub(crate) paths: Vec<Vec<u32>>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct HoldShape {
    /// The request's slice layers (empty without a request or slices).
    pub(crate) slices: Vec<(String, i64)>,
    /// The placement's innermost slice paths.
    pub(crate) placement_slices: Vec<Vec<String>>,
    /// The request's spread (`"pack"` without a request).
    pub(crate) spread: String,
    /// The request's NUMA policy (`"none"` without a request).
    pub(crate) numa: String,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct NodeRecord {
    pub(crate) name: String,
    pub(crate) gpus: u32,
    pub(crate) path: Vec<String>,
    pub(crate) labels: Vec<(String, String)>,
    pub(crate) cordoned: bool,
    pub(crate) unhealthy: u64,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct HoldRecord {
    pub(crate) id: u128,
    pub(crate) committed: bool,
    pub(crate) expires_at: f64,
    pub(crate) owner: Option<String>,
    pub(crate) gpus: Vec<(String, u64)>,
    pub(crate) pods: Vec<(String, Vec<u32>)>,
    pub(crate) level: String,
    pub(crate) domain: Vec<String>,
    pub(crate) terms: TermsRecord,
    pub(crate) since: f64,
    pub(crate) request: Option<RequestRecord>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct EndedRecord {
    pub(crate) id: u128,
    pub(crate) ending: u8,
    pub(crate) owner: Option<String>,
}

/// From version 7: per live hold (sorted by id), the ranks `release_pods` ended, sorted.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Endings {
    pub holds: Vec<Vec<u64>>,
}
