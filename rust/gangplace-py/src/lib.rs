//! The pyo3 binding of gangplace-core: converts arguments, calls the core, maps errors.
//! Python imports it as `gangplace._gangplace`; the public API is `gangplace`.

mod arrays;
mod cluster;
mod convert;
mod errors;
mod explain;
mod types;

use pyo3::prelude::*;

/// The native module. Use the `gangplace` package rather than this module.
#[pymodule(gil_used = false)]
mod _gangplace {
    #[pymodule_export]
    use crate::cluster::Cluster;
    #[pymodule_export]
    use crate::explain::Explanation;
    #[pymodule_export]
    use crate::types::{
        Allocation, ClusterStats, GangRequest, NodeInfo, Placement, PodPlacement, Reservation,
    };

    use pyo3::prelude::*;

    #[pymodule_init]
    fn init(module: &Bound<'_, PyModule>) -> PyResult<()> {
        module.add("__version__", env!("CARGO_PKG_VERSION"))
    }
}
