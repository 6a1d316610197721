//! `pickle` and `copy` support (docs/transactions.md "Pickling, copying and repeatable ids").
//!
//! A `Cluster` travels as its snapshot (`Cluster.restore(snapshot)`; a copy keeps its clock,
//! an unpickled one gets `time.monotonic`); `GangRequest` and `PodPlacement` as their
//! constructor arguments; `Placement` as its pods, level, domain and slices. The other value
//! types (holds, node and cluster reports, plans, explanations) travel as the postcard bytes
//! of the core value they wrap, rebuilt by `_unpickle(kind, data)`: they are results, never
//! inputs that would need validating again (a hold given back to the cluster is looked up by
//! its id).

use std::sync::Arc;

use gangplace_core::LevelName;
use gangplace_core::Placement as CorePlacement;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use crate::cluster::Cluster;
use crate::explain::{Explanation, LevelExplanation};
use crate::nodes::{ClusterStats, NodeInfo};
use crate::preemption::{DefragPlan, Move, PreemptionPlan};
use crate::repair::RepairPlan;
use crate::types::{Allocation, GangRequest, Placement, PodPlacement, Reservation};

#[pymethods]
impl GangRequest {
    fn __getnewargs_ex__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyTuple>, Bound<'py, PyDict>)> {
        let inner = &self.inner;
        let args = PyTuple::new(py, [inner.pods, u64::from(inner.gpus_per_pod)])?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("min_pods", inner.min_pods)?;
        kwargs.set_item("required_level", inner.required_level.as_deref())?;
        let selector = PyDict::new(py);
        for (key, value) in &inner.filter.labels {
            selector.set_item(key, value)?;
        }
        kwargs.set_item("selector", selector)?;
        crate::filters::pickle_into(py, &kwargs, &inner.filter)?;
        kwargs.set_item("name", &inner.name)?;
        kwargs.set_item("priority", inner.terms.priority)?;
        kwargs.set_item("preemptible", inner.terms.preemptible)?;
        kwargs.set_item("movable", inner.terms.movable)?;
        kwargs.set_item("slices", crate::request::slices_tuple(py, inner)?)?;
        kwargs.set_item("spread", inner.spread.as_str())?;
        kwargs.set_item("numa", inner.numa.as_str())?;
        kwargs.set_item("spares", inner.spares)?;
        let resources = crate::types::dict(py, &inner.resources)?;
        kwargs.set_item("resources_per_pod", resources)?;
        kwargs.set_item("gpu_milli", inner.gpu_milli)?;
        Ok((args, kwargs))
    }
}

#[pymethods]
impl PodPlacement {
    /// Rebuilds a pod from `__reduce__`'s parts, its affinity included (for `pickle`).
    #[staticmethod]
    #[pyo3(signature = (node, gpus, affinity = None))]
    fn _rebuild(node: String, gpus: Vec<i64>, affinity: Option<String>) -> PyResult<Self> {
        let mut inner =
            gangplace_core::PodPlacement::new(node, gpus).map_err(crate::errors::core_to_py)?;
        inner.affinity = affinity.as_deref().map(LevelName::new);
        Ok(Self { inner })
    }

    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let py = slf.py();
        let inner = &slf.get().inner;
        let rebuild = py.get_type::<PodPlacement>().getattr("_rebuild")?;
        let parts = (
            inner.node.to_string(),
            inner.gpu_indices(),
            inner.affinity.as_deref().map(str::to_owned),
        )
            .into_pyobject(py)?;
        Ok((rebuild, parts))
    }
}

#[pymethods]
impl Placement {
    /// Rebuilds a placement from `__reduce__`'s parts (for `pickle`; `reserve` validates it).
    #[staticmethod]
    #[pyo3(signature = (pods, level, domain, slices = Vec::new(), groups = Vec::new(), spares = Vec::new(), gpu_milli = None))]
    fn _rebuild(
        pods: Vec<PyRef<'_, PodPlacement>>,
        level: String,
        domain: Vec<String>,
        slices: Vec<Vec<String>>,
        groups: Vec<(String, u64)>,
        spares: Vec<PyRef<'_, PodPlacement>>,
        gpu_milli: Option<u16>,
    ) -> Self {
        let pods = pods.iter().map(|pod| pod.inner.clone()).collect();
        let spares = spares.iter().map(|pod| pod.inner.clone()).collect();
        Self {
            inner: Arc::new(CorePlacement {
                pods,
                level,
                domain,
                slices,
                groups,
                spares,
                gpu_milli,
            }),
        }
    }

    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let py = slf.py();
        let inner = &slf.get().inner;
        let pods: Vec<PodPlacement> = inner
            .pods
            .iter()
            .map(|pod| PodPlacement { inner: pod.clone() })
            .collect();
        let spares: Vec<PodPlacement> = (inner.spares.iter())
            .map(|pod| PodPlacement { inner: pod.clone() })
            .collect();
        let rebuild = py.get_type::<Placement>().getattr("_rebuild")?;
        let parts = (
            pods,
            inner.level.clone(),
            inner.domain.clone(),
            inner.slices.clone(),
            inner.groups.clone(),
            spares,
            inner.gpu_milli,
        )
            .into_pyobject(py)?;
        Ok((rebuild, parts))
    }
}

#[pymethods]
impl Cluster {
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let py = slf.py();
        let restore = py.get_type::<Cluster>().getattr("restore")?;
        let snapshot = slf.call_method0("snapshot")?;
        Ok((restore, PyTuple::new(py, [snapshot])?))
    }

    fn __copy__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let kwargs = PyDict::new(py);
        kwargs.set_item("clock", slf.get().clock_object(py))?;
        let snapshot = slf.call_method0("snapshot")?;
        py.get_type::<Cluster>()
            .getattr("restore")?
            .call((snapshot,), Some(&kwargs))
    }

    fn __deepcopy__<'py>(
        slf: &Bound<'py, Self>,
        _memo: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        Self::__copy__(slf)
    }
}

/// `__reduce__` as `(_unpickle, (kind, postcard bytes of the wrapped core value))` for each
/// listed class, and `_unpickle` itself, which rebuilds any of them by kind.
macro_rules! pickled_by_value {
    ($($class:ident),* $(,)?) => {
        $(
            #[pymethods]
            impl $class {
                fn __reduce__<'py>(
                    slf: &Bound<'py, Self>,
                ) -> PyResult<(Bound<'py, PyAny>, (&'static str, Bound<'py, PyBytes>))> {
                    let py = slf.py();
                    let bytes = postcard::to_stdvec(&slf.get().inner).map_err(|error| {
                        PyValueError::new_err(format!("cannot pickle: {error}"))
                    })?;
                    let unpickle = py.import("gangplace._gangplace")?.getattr("_unpickle")?;
                    Ok((unpickle, (stringify!($class), PyBytes::new(py, &bytes))))
                }
            }
        )*

        /// Rebuilds a value pickled by its `__reduce__` (the kind is its class name).
        #[pyfunction]
        pub fn _unpickle(py: Python<'_>, kind: &str, data: &[u8]) -> PyResult<Py<PyAny>> {
            let bad = |error: postcard::Error| {
                PyValueError::new_err(format!("invalid pickled {kind}: {error}"))
            };
            match kind {
                $(
                    stringify!($class) => {
                        let inner = postcard::from_bytes(data).map_err(bad)?;
                        Ok(Py::new(py, $class { inner })?.into_any())
                    }
                )*
                other => Err(PyValueError::new_err(format!("unknown pickled kind {other:?}"))),
            }
        }
    };
}

pickled_by_value!(
    Reservation,
    Allocation,
    NodeInfo,
    ClusterStats,
    PreemptionPlan,
    Move,
    DefragPlan,
    RepairPlan,
    Explanation,
    LevelExplanation,
);
