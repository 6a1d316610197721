//! What a node and the whole cluster read as: the values `node`, `stats` and `gpu_state`
//! hand out.

use serde::{Deserialize, Serialize};

use crate::filter::Taint;

/// One node, as `Cluster.node` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeInfo {
    /// Node name.
    pub name: String,
    /// Number of GPUs.
    pub gpus: u32,
    /// Level -> domain name, outermost first.
    pub topology: Vec<(String, String)>,
    /// Labels sorted by key.
    pub labels: Vec<(String, String)>,
    /// Taints, sorted (docs/placement.md, rule 1).
    pub taints: Vec<Taint>,
    /// Whether it takes no new placements.
    pub cordoned: bool,
    /// Healthy and unheld.
    pub free: Vec<u32>,
    /// Held by reservations.
    pub reserved: Vec<u32>,
    /// Held by allocations (possibly unhealthy since).
    pub allocated: Vec<u32>,
    /// Unhealthy, held or not.
    pub unhealthy: Vec<u32>,
    /// Its GPU groups, if given: level names and each GPU's group ids.
    pub gpu_topology: Option<(Vec<String>, Vec<Vec<u32>>)>,
    /// Its resources besides GPUs, by name (docs/resources.md "Node resources").
    pub resources: Vec<(String, u64)>,
    /// What of them no live hold uses, by name (every resource of `resources`, zeros kept).
    pub free_resources: Vec<(String, u64)>,
    /// Shared GPUs and their used thousandths (docs/resources.md "Fractions of a GPU").
    pub shared: Vec<(u32, u64)>,
}

/// GPU counts over the whole cluster, and its resources besides GPUs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ClusterStats {
    /// All GPUs.
    pub total: u64,
    /// `total - unhealthy`.
    pub healthy: u64,
    /// Healthy and unheld (cordoned nodes included).
    pub free: u64,
    /// Held by reservations.
    pub reserved: u64,
    /// Held by allocations.
    pub allocated: u64,
    /// Unhealthy, held or not.
    pub unhealthy: u64,
    /// Resources besides GPUs over every node, by name (docs/resources.md "Node resources").
    pub resources: Vec<(String, u64)>,
    /// What of them no hold uses (a node's use above its capacity counts as 0 free).
    pub free_resources: Vec<(String, u64)>,
    /// GPUs fractional pods share (neither free nor held whole).
    pub shared: u64,
}

/// Per node, in name order: GPU counts and sets by state, and the node's place in the tree
/// (see `Engine::gpu_state`). Everything a picture or an analysis needs, in one read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuState {
    /// Node names, sorted.
    pub names: Vec<String>,
    /// Each node's domain path, outermost first (one name per level).
    pub paths: Vec<Vec<String>>,
    /// GPUs per node.
    pub gpus: Vec<u8>,
    /// Free healthy GPUs.
    pub free: Vec<u8>,
    /// GPUs held by reservations.
    pub reserved: Vec<u8>,
    /// GPUs held by allocations.
    pub allocated: Vec<u8>,
    /// Unhealthy GPUs (held or not).
    pub unhealthy: Vec<u8>,
    /// Whether the node is cordoned.
    pub cordoned: Vec<bool>,
    /// The sets behind the counts, as masks (bit i: GPU i).
    pub free_mask: Vec<u64>,
    /// See `free_mask`.
    pub reserved_mask: Vec<u64>,
    /// See `free_mask`.
    pub allocated_mask: Vec<u64>,
    /// See `free_mask`.
    pub unhealthy_mask: Vec<u64>,
    /// Per node, the GPUs fractional pods share (docs/resources.md "Fractions of a GPU").
    pub shared_mask: Vec<u64>,
    /// Resources besides GPUs (docs/resources.md "Node resources"): per name, sorted, every node's
    /// capacity and what no hold uses (0 where the node lacks it).
    pub resources: Vec<(String, Vec<u64>, Vec<u64>)>,
}
