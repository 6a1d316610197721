//! gangplace-core: the placement kernel of gangplace, in pure Rust.
//!
//! A gang (N pods of G GPUs each) is placed whole or not at all, in the smallest topology
//! domain that holds it, counting only healthy GPUs, deterministically; reservations are
//! held with a lifetime and committed, rolled back or released as a unit. The contract is
//! docs/ (placement rules, transactions, limits: one page per concept); this crate implements it.
//!
//! Modules, all private behind the re-exports below, in dependency order (no cycles):
//!
//! - `limits`: hard limits and API defaults; `error`: [`CoreError`], one variant per Python
//!   exception class; `ids`: [`HoldId`], [`GpuSet`], domain and node ids.
//! - `config`: [`EngineConfig`] and [`Policy`], validated once.
//! - `filter`: which nodes a request may use ([`NodeFilter`]: labels, required affinity,
//!   tolerated taints; docs/placement.md rule 1).
//! - `model`: requests and results as plain owned values ([`GangRequest`], [`Placement`],
//!   [`Reservation`], ...).
//! - `resources`: node resources beside GPUs (names, amounts, what holds use, pods that fit).
//! - `topology`: the static structure (levels, domain tree, nodes, label index).
//! - `state`: the mutable GPU state per node, with one change record per changed node.
//! - `capacity`: what is derived from both (aggregates, free-GPU index, selector pools),
//!   updated once per mutation from the change records.
//! - `search`: the placement rules over a capacity view (the cluster's, a selector's, or a
//!   what-if overlay of either); `search::removal`, who must make room for a gang (the
//!   removal sets of preemption and defragmentation).
//! - `intranode`: GPU groups inside a node (NUMA, PCIe) and the GPUs a pod takes there.
//! - `shapes`: gang shapes (slice layers: validation and resolution against a topology).
//! - `ledger`: reservations, allocations, expiry, ended holds, holders per node.
//! - `engine`: what every operation shares: [`Engine`] and its state, with
//!   `engine::transactions`, `engine::adopt`, `engine::explain` (the frame), `engine::removal`
//!   (who may be removed), `engine::ranks` and `engine::records` (shared snapshot records).
//! - One folder per concept, each depending on `engine` and never the reverse, with its
//!   operations, types and snapshot records: `preemption` (with `defrag`), `roles` (multi-role
//!   units; their request types are `model::roles`), `repair` (with spares), `snapshot` (the
//!   versioned format); and `batch` (`place_many`, `reserve_many` over any requests).
//! - `testing` (feature `testing` only): operation scripts, the snapshot framing for the
//!   fuzzers, and the failpoint.

mod batch;
mod capacity;
mod config;
mod engine;
mod error;
mod filter;
mod ids;
mod intranode;
mod ledger;
mod level_name;
mod limits;
mod lookahead;
mod model;
mod preemption;
mod repair;
mod resources;
mod roles;
mod search;
mod shapes;
mod shares;
mod snapshot;
mod spares;
mod state;
mod topology;

#[cfg(feature = "testing")]
pub mod testing;

pub use config::{EngineConfig, Policy};
pub use engine::explain::{Exclusions, Explanation, LevelExplanation};
pub use engine::{AdoptedPods, Engine, NodeUpdate, TermsChange};
pub use error::{CoreError, CoreResult};
pub use ids::{CLUSTER_LEVEL, GpuIndexError, GpuSet, HoldId, NODE_LEVEL};
pub use intranode::{GpuTopology, MAX_GPU_LEVELS};
pub use level_name::LevelName;
pub use limits::{
    DEFAULT_REPAIR_TTL_SECONDS, DEFAULT_TTL_SECONDS, MAX_GANG_GPUS, MAX_GPUS_PER_NODE, MAX_LEVELS,
    MAX_NAME_BYTES, MAX_NODES, MAX_PODS, MAX_RESOURCE_AMOUNT, MAX_RESOURCES_PER_NODE,
    MAX_SLICE_LAYERS, MAX_TTL_SECONDS, REMEMBERED_ENDED_HOLDS,
};
pub use model::{
    AdoptedPod, Allocation, ClusterStats, DefragOptions, DefragPlan, GangRequest, GpuState, Held,
    Move, NodeInfo, Placement, PodPlacement, PreemptionPlan, RemovalLimits, RepairPlan,
    Reservation, Terms,
};
pub use model::{AnyRequest, Colocation, MAX_GROUPS, MultiGangRequest};
pub use model::{Effect, NodeFilter, Operator, Requirement, Taint, Toleration, checked_taints};
pub use shapes::{Numa, SliceLayer, Spread};
pub use snapshot::{FORMAT_VERSION as SNAPSHOT_FORMAT_VERSION, MAGIC as SNAPSHOT_MAGIC};
pub use topology::NodeSpec;
