//! `Explanation`: why a gang fits or not, as structured fields and a readable `str()`.

use std::sync::Arc;

use gangplace_core::explain;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::types::Placement;

/// Why a gang fits where it does, or does not fit (see `Cluster.explain`).
#[pyclass(frozen, module = "gangplace._gangplace")]
#[derive(Debug)]
pub struct Explanation {
    pub inner: explain::Explanation,
}

fn level_line(level: &explain::LevelExplanation) -> String {
    let domain = match &level.domain {
        Some(path) if path.is_empty() => "the cluster".to_owned(),
        Some(path) => path.join("/"),
        None => "-".to_owned(),
    };
    let freeing = match level.gpus_to_free {
        Some(0) => "fits".to_owned(),
        Some(gpus) => format!("would fit if {gpus} held GPUs there were freed"),
        None if level.domain.is_some() => "cannot fit even if emptied".to_owned(),
        None => "no domain holds a pod".to_owned(),
    };
    format!(
        "  {:<8} best {:<24} holds {} of {} pods; {}",
        level.level, domain, level.capacity, level.needed, freeing
    )
}

#[pymethods]
impl Explanation {
    /// Whether the gang fits now.
    #[getter]
    fn fits(&self) -> bool {
        self.inner.placement.is_some()
    }

    /// Where it would go (what `place_gang` answers), or `None`.
    #[getter]
    fn placement(&self) -> Option<Placement> {
        self.inner
            .placement
            .clone()
            .map(|p| Placement { inner: Arc::new(p) })
    }

    /// One line: `Unschedulable.reason` when the gang does not fit.
    #[getter]
    fn summary(&self) -> &str {
        &self.inner.summary
    }

    /// The levels tried, finest first: dicts with `level`, `domain` (path tuple or `None`),
    /// `capacity`, `needed` and `gpus_to_free` (`None`: cannot fit even if emptied).
    #[getter]
    fn levels<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for level in &self.inner.levels {
            let dict = PyDict::new(py);
            dict.set_item("level", &level.level)?;
            let domain = level
                .domain
                .as_ref()
                .map(|path| PyTuple::new(py, path))
                .transpose()?;
            dict.set_item("domain", domain)?;
            dict.set_item("capacity", level.capacity)?;
            dict.set_item("needed", level.needed)?;
            dict.set_item("gpus_to_free", level.gpus_to_free)?;
            list.append(dict)?;
        }
        Ok(list)
    }

    /// Nodes that cannot take one pod, by reason: `cordoned`, `selector_mismatch`,
    /// `unhealthy`, `too_few_free`.
    #[getter]
    fn excluded<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let excluded = self.inner.excluded;
        let dict = PyDict::new(py);
        dict.set_item("cordoned", excluded.cordoned)?;
        dict.set_item("selector_mismatch", excluded.selector_mismatch)?;
        dict.set_item("unhealthy", excluded.unhealthy)?;
        dict.set_item("too_few_free", excluded.too_few_free)?;
        Ok(dict)
    }

    fn __str__(&self) -> String {
        let mut lines = vec![self.inner.summary.clone()];
        lines.extend(self.inner.levels.iter().map(level_line));
        let excluded = self.inner.excluded;
        lines.push(format!(
            "  excluded nodes: {} cordoned, {} without the selector's labels, {} with too few \
             healthy GPUs for a pod, {} with too few free GPUs",
            excluded.cordoned,
            excluded.selector_mismatch,
            excluded.unhealthy,
            excluded.too_few_free
        ));
        lines.join("\n")
    }

    fn __repr__(&self) -> String {
        format!("<Explanation: {}>", self.inner.summary)
    }
}
