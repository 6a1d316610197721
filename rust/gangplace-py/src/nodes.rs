//! Frozen, hashable views of a node and of the whole cluster (`Cluster.node`,
//! `Cluster.stats`). Each wraps the core's owned value and builds Python objects only when an
//! attribute is read.

use gangplace_core as model;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::types::{call_repr, dict, py_repr};

/// One node's description and GPU state.
///
/// ``free``, ``reserved`` and ``allocated`` are disjoint. ``unhealthy`` lists every unhealthy
/// GPU: it may overlap ``allocated`` (a GPU that failed after commit stays allocated), never
/// ``reserved`` or ``free``.
#[pyclass(frozen, eq, hash, module = "gangplace._gangplace")]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeInfo {
    pub inner: model::NodeInfo,
}

#[pymethods]
impl NodeInfo {
    /// The node's name.
    #[getter]
    fn name(&self) -> &str {
        &self.inner.name
    }

    /// Its GPU groups (a ``gangplace.NodeTopology``), or ``None``.
    #[getter]
    fn gpu_topology<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let Some((levels, paths)) = &self.inner.gpu_topology else {
            return Ok(None);
        };
        let class = py
            .import("gangplace.gpu_topology")?
            .getattr("NodeTopology")?;
        let levels = PyTuple::new(py, levels)?;
        let paths: PyResult<Vec<Bound<'py, PyTuple>>> =
            paths.iter().map(|path| PyTuple::new(py, path)).collect();
        Ok(Some(class.call1((levels, PyTuple::new(py, paths?)?))?))
    }

    /// Its GPUs, healthy or not.
    #[getter]
    fn gpus(&self) -> u32 {
        self.inner.gpus
    }

    /// Level -> domain name, outermost first.
    #[getter]
    fn topology<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        dict(py, &self.inner.topology)
    }

    /// Its taints: ``(key, value, effect)`` tuples, sorted (docs/placement.md, rule 1).
    #[getter]
    fn taints<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        crate::filters::taints_tuple(py, &self.inner.taints)
    }

    /// Its labels (a fresh dict).
    #[getter]
    fn labels<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        dict(py, &self.inner.labels)
    }

    /// Whether it takes no new placements.
    #[getter]
    fn cordoned(&self) -> bool {
        self.inner.cordoned
    }

    /// Healthy GPUs nothing holds.
    #[getter]
    fn free<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.inner.free)
    }

    /// GPU indices held by reservations.
    #[getter]
    fn reserved<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.inner.reserved)
    }

    /// GPU indices held by allocations (possibly unhealthy since).
    #[getter]
    fn allocated<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.inner.allocated)
    }

    /// GPU indices that are never placed on (held or not).
    #[getter]
    fn unhealthy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.inner.unhealthy)
    }

    /// Its resources besides GPUs (docs/resources.md): a fresh dict, sorted by name.
    #[getter]
    fn resources<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        dict(py, &self.inner.resources)
    }

    /// What of them no live hold uses (every resource of ``resources``, zeros kept).
    #[getter]
    fn free_resources<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        dict(py, &self.inner.free_resources)
    }

    /// Shared GPUs (docs/resources.md "Fractions of a GPU"): GPU index -> used thousandths.
    ///
    /// A fresh dict by index. A shared GPU is in none of ``free``, ``reserved``, ``allocated``.
    #[getter]
    fn shared<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let shared = PyDict::new(py);
        for &(gpu, used) in &self.inner.shared {
            shared.set_item(gpu, used)?;
        }
        Ok(shared)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let node = &self.inner;
        let tuple = |items: &[u32]| -> PyResult<String> { py_repr(py, PyTuple::new(py, items)?) };
        let parts = [
            py_repr(py, &node.name)?,
            format!("gpus={}", node.gpus),
            format!("topology={}", py_repr(py, dict(py, &node.topology)?)?),
            format!("cordoned={}", py_repr(py, node.cordoned)?),
            format!("free={}", tuple(&node.free)?),
            format!("reserved={}", tuple(&node.reserved)?),
            format!("allocated={}", tuple(&node.allocated)?),
            format!("unhealthy={}", tuple(&node.unhealthy)?),
        ];
        let mut parts = parts.to_vec();
        if !node.resources.is_empty() {
            let free = dict(py, &node.free_resources)?;
            parts.push(format!("free_resources={}", py_repr(py, free)?));
        }
        if !node.shared.is_empty() {
            parts.push(format!("shared={}", py_repr(py, self.shared(py)?)?));
        }
        Ok(call_repr("NodeInfo", &parts))
    }
}

/// GPU counts over the whole cluster.
///
/// ``healthy == total - unhealthy``; ``free`` counts cordoned nodes too; ``unhealthy`` counts
/// held unhealthy GPUs too.
#[pyclass(frozen, eq, hash, module = "gangplace._gangplace")]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClusterStats {
    pub inner: model::ClusterStats,
}

#[pymethods]
impl ClusterStats {
    /// All GPUs.
    #[getter]
    fn total(&self) -> u64 {
        self.inner.total
    }

    /// ``total - unhealthy``.
    #[getter]
    fn healthy(&self) -> u64 {
        self.inner.healthy
    }

    /// Healthy GPUs nothing holds (cordoned nodes included).
    #[getter]
    fn free(&self) -> u64 {
        self.inner.free
    }

    /// GPUs held by reservations.
    #[getter]
    fn reserved(&self) -> u64 {
        self.inner.reserved
    }

    /// GPUs held by allocations.
    #[getter]
    fn allocated(&self) -> u64 {
        self.inner.allocated
    }

    /// Unhealthy GPUs, held or not.
    #[getter]
    fn unhealthy(&self) -> u64 {
        self.inner.unhealthy
    }

    /// Resources besides GPUs over every node (docs/resources.md): a fresh dict.
    #[getter]
    fn resources<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        dict(py, &self.inner.resources)
    }

    /// What of them no hold uses, summed over the nodes: a fresh dict.
    #[getter]
    fn free_resources<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        dict(py, &self.inner.free_resources)
    }

    /// GPUs fractional pods share (docs/resources.md): neither free nor held whole.
    #[getter]
    fn shared(&self) -> u64 {
        self.inner.shared
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let s = &self.inner;
        let mut repr = format!(
            "ClusterStats(total={}, healthy={}, free={}, reserved={}, allocated={}, unhealthy={}",
            s.total, s.healthy, s.free, s.reserved, s.allocated, s.unhealthy
        );
        if !s.resources.is_empty() {
            let free = dict(py, &s.free_resources)?;
            repr += &format!(", free_resources={}", py_repr(py, free)?);
        }
        if s.shared > 0 {
            repr += &format!(", shared={}", s.shared);
        }
        Ok(repr + ")")
    }
}
