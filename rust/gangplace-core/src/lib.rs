//! gangplace-core: the placement kernel of gangplace, in pure Rust.
//!
//! A gang (N pods of G GPUs each) is placed whole or not at all, in the smallest topology
//! domain that holds it, counting only healthy GPUs, deterministically; reservations are
//! held with a lifetime and committed, rolled back or released as a unit. The contract is
//! the README's (placement rules, transactions, limits); this crate implements it.
//!
//! Modules, all private behind the re-exports below, in dependency order (no cycles):
//!
//! - `limits`: hard limits and API defaults; `error`: [`CoreError`], one variant per Python
//!   exception class; `ids`: [`HoldId`], [`GpuSet`], domain and node ids.
//! - `config`: [`EngineConfig`] and [`Policy`], validated once.
//! - `model`: requests and results as plain owned values ([`GangRequest`], [`Placement`],
//!   [`Reservation`], ...).
//! - `topology`: the static structure (levels, domain tree, nodes, label index).
//! - `state`: the mutable GPU state per node, with one change record per changed node.
//! - `capacity`: what is derived from both (aggregates, free-GPU index, selector pools),
//!   updated once per mutation from the change records.
//! - `search`: the placement rules over a capacity view (the cluster's, a selector's, or a
//!   what-if overlay of either).
//! - `intranode`: GPU groups inside a node (NUMA, PCIe) and the GPUs a pod takes there.
//! - `shapes`: gang shapes (slice layers: validation and resolution against a topology).
//! - `roles`: multi-role gangs (groups and colocations: validation; the search is
//!   `engine::roles`).
//! - `preemption`: who must make room for a gang (preemption and defragmentation sets).
//! - `ledger`: reservations, allocations, expiry, ended holds, holders per node.
//! - `engine`: the operations ([`Engine`]), with `engine::transactions`, `engine::explain`,
//!   `engine::preemption`, `engine::defrag` and `engine::snapshot`.
//! - `testing` (feature `testing` only): operation scripts, the snapshot framing for the
//!   fuzzers, and the failpoint.

mod capacity;
mod config;
mod engine;
mod error;
mod ids;
mod intranode;
mod ledger;
mod level_name;
mod limits;
mod model;
mod preemption;
mod search;
mod shapes;
mod spares;
mod state;
mod topology;

#[cfg(feature = "testing")]
pub mod testing;

pub use config::{EngineConfig, Policy};
pub use engine::Engine;
pub use engine::explain::{Exclusions, Explanation, LevelExplanation};
pub use engine::snapshot::{FORMAT_VERSION as SNAPSHOT_FORMAT_VERSION, MAGIC as SNAPSHOT_MAGIC};
pub use error::{CoreError, CoreResult};
pub use ids::{CLUSTER_LEVEL, GpuIndexError, GpuSet, HoldId, NODE_LEVEL};
pub use intranode::{GpuTopology, MAX_GPU_LEVELS};
pub use level_name::LevelName;
pub use limits::{
    DEFAULT_REPAIR_TTL_SECONDS, DEFAULT_TTL_SECONDS, MAX_GANG_GPUS, MAX_GPUS_PER_NODE, MAX_LEVELS,
    MAX_NAME_BYTES, MAX_NODES, MAX_PODS, MAX_SLICE_LAYERS, MAX_TTL_SECONDS, REMEMBERED_ENDED_HOLDS,
};
pub use model::{
    AdoptedPod, Allocation, ClusterStats, DefragOptions, DefragPlan, GangRequest, GpuState, Held,
    Move, NodeInfo, Placement, PodPlacement, PreemptionPlan, RemovalLimits, RepairPlan,
    Reservation, Terms,
};
pub use model::{AnyRequest, Colocation, MAX_GROUPS, MultiGangRequest};
pub use shapes::{Numa, SliceLayer, Spread};
pub use topology::NodeSpec;
