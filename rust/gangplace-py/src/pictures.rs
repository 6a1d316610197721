//! The pictures of `Cluster`: its rack map as SVG, shown by notebooks (drawn by
//! `gangplace.pictures`).

use pyo3::prelude::*;

use crate::cluster::Cluster;

#[pymethods]
impl Cluster {
    /// The rack map as an SVG document (see ``gangplace.pictures``).
    ///
    /// One block per top-level domain, racks as columns, nodes as rows of GPU cells coloured
    /// free / reserved / allocated / unhealthy, cordoned nodes hatched; ``highlight``
    /// outlines a placement's GPUs. Large clusters collapse to a cell per node or rack.
    #[pyo3(signature = (highlight = None))]
    fn to_svg(slf: &Bound<'_, Self>, highlight: Option<&Bound<'_, PyAny>>) -> PyResult<String> {
        let pictures = slf.py().import("gangplace.pictures")?;
        pictures
            .call_method1("cluster_svg", (slf, highlight))?
            .extract()
    }

    /// Notebooks show the rack map.
    fn _repr_html_(slf: &Bound<'_, Self>) -> PyResult<String> {
        Self::to_svg(slf, None)
    }
}
