//! The pyo3 binding of gangplace-core: converts arguments, calls the core, maps errors.
//! Python imports it as `gangplace._gangplace`; the public API is `gangplace`.

mod adopt;
mod arrays;
mod cluster;
mod cluster_args;
mod convert;
mod determinism;
mod errors;
mod explain;
mod filters;
mod lookahead;
mod nodes;
mod pickling;
mod pictures;
mod placing;
mod pods;
mod preemption;
mod repair;
mod request;
mod roles;
mod types;

use pyo3::prelude::*;

/// The native module. Use the `gangplace` package rather than this module.
#[pymodule(gil_used = false)]
mod _gangplace {
    #[pymodule_export]
    use crate::cluster::Cluster;
    #[pymodule_export]
    use crate::explain::{Explanation, LevelExplanation};
    #[pymodule_export]
    use crate::nodes::{ClusterStats, NodeInfo};
    #[pymodule_export]
    use crate::pickling::_unpickle;
    #[pymodule_export]
    use crate::preemption::{DefragPlan, Move, PreemptionPlan};
    #[pymodule_export]
    use crate::repair::RepairPlan;
    #[pymodule_export]
    use crate::roles::{MultiGangRequest, PodGroup};
    #[pymodule_export]
    use crate::types::{Allocation, GangRequest, Placement, PodPlacement, Reservation};

    use gangplace_core as core;
    use pyo3::prelude::*;
    use pyo3::types::PyDict;

    #[pymodule_init]
    fn init(module: &Bound<'_, PyModule>) -> PyResult<()> {
        module.add("__version__", env!("CARGO_PKG_VERSION"))?;
        module.add("__build_commit__", env!("GANGPLACE_BUILD_COMMIT"))?;
        // The limits table of docs/errors.md is tied to these values by a test.
        let limits = PyDict::new(module.py());
        limits.set_item("max_gpus_per_node", core::MAX_GPUS_PER_NODE)?;
        limits.set_item("max_nodes", core::MAX_NODES)?;
        limits.set_item("max_levels", core::MAX_LEVELS)?;
        limits.set_item("max_name_bytes", core::MAX_NAME_BYTES)?;
        limits.set_item("max_gang_gpus", core::MAX_GANG_GPUS)?;
        limits.set_item("max_slice_layers", core::MAX_SLICE_LAYERS)?;
        limits.set_item("max_groups", core::MAX_GROUPS)?;
        limits.set_item("max_ttl_seconds", core::MAX_TTL_SECONDS)?;
        limits.set_item("default_ttl_seconds", core::DEFAULT_TTL_SECONDS)?;
        limits.set_item(
            "default_repair_ttl_seconds",
            core::DEFAULT_REPAIR_TTL_SECONDS,
        )?;
        limits.set_item("remembered_ended_holds", core::REMEMBERED_ENDED_HOLDS)?;
        let types = module.py().import("types")?;
        module.add(
            "LIMITS",
            types.getattr("MappingProxyType")?.call1((limits,))?,
        )
    }
}
