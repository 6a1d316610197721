//! gangplace-core: the placement kernel of gangplace, in pure Rust.
//!
//! A gang (N pods of G GPUs each) is placed whole or not at all, in the smallest topology
//! domain that holds it, counting only healthy GPUs, deterministically; reservations are
//! held with a lifetime and committed, rolled back or released as a unit.
//!
//! Modules by concept: [`topology`] (levels, domains, nodes, indexes), [`capacity`]
//! (per-domain aggregates and views), [`search`] (the placement rules), [`ledger`]
//! (reservations and allocations), [`engine`] (the operations), [`error`], [`limits`].

pub mod capacity;
pub mod engine;
pub mod error;
pub mod ledger;
pub mod limits;
pub mod model;
pub mod search;
pub mod topology;

pub use engine::Engine;
pub use error::{CoreError, CoreResult};
pub use model::{
    Allocation, ClusterStats, GangRequest, NodeInfo, Placement, PodPlacement, Reservation,
};
pub use search::Policy;
pub use topology::NodeSpec;
