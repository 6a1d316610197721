//! gangplace-core: the placement kernel of gangplace, in pure Rust.
//!
//! A gang (N pods of G GPUs each) is placed whole or not at all, in the smallest topology
//! domain that holds it, counting only healthy GPUs, deterministically; reservations are
//! held with a lifetime and committed, rolled back or released as a unit.
//!
//! Modules by concept: [`topology`] (levels, domains, nodes, indexes), [`capacity`]
//! (per-domain aggregates and views), [`index`] (domains and nodes by free GPUs per level), [`pools`] (the same
//! for label selectors), [`search`] (the placement rules), [`ledger`]
//! (reservations and allocations), [`engine`] (the operations), [`transactions`]
//! (reserve, commit, rollback, release), [`snapshot`] (the versioned state format),
//! [`error`], [`limits`]; [`script`] decodes bytes into operation sequences for property
//! tests and fuzzing.

pub mod capacity;
pub mod engine;
pub mod error;
pub mod explain;
pub mod index;
pub mod ledger;
pub mod limits;
pub mod model;
pub mod pools;
pub mod script;
pub mod search;
pub mod snapshot;
pub mod topology;
pub mod transactions;

pub use engine::{Engine, GpuState};
pub use error::{CoreError, CoreResult};
pub use explain::{Exclusions, Explanation, LevelExplanation};
pub use model::{
    Allocation, ClusterStats, GangRequest, NodeInfo, Placement, PodPlacement, Reservation,
};
pub use search::Policy;
pub use topology::NodeSpec;
