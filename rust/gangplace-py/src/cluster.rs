//! `Cluster`: the one mutable object. A frozen pyclass over a `Mutex<Engine>`: no `&mut self`
//! method, so no thread can ever meet a borrow error. The lock is only ever taken by pure
//! Rust code that never calls back into Python, and the clock is read before it is taken.
//! Searches (`place_gang`, `reserve`) run with the GIL released.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use gangplace_core::{Engine, NodeSpec, Policy};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

use crate::convert;
use crate::errors::{CallError, InvalidRequest, contain};
use crate::types::{
    Allocation, ClusterStats, GangRequest, NodeInfo, Placement, Reservation, py_str,
};

/// A GPU cluster: topology, GPU health and holds.
#[pyclass(frozen, module = "gangplace._gangplace")]
#[derive(Debug)]
pub struct Cluster {
    engine: Mutex<Engine>,
    failed: AtomicBool,
    clock: Py<PyAny>,
    /// Copies of the engine's immutable settings, so their getters need not take the lock.
    levels: Vec<String>,
    policy: Policy,
}

fn policy_name(policy: Policy) -> &'static str {
    match policy {
        Policy::BestFit => "best-fit",
        Policy::FirstFit => "first-fit",
    }
}

/// A reservation or allocation given as its object or its id.
fn hold_id(value: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    if let Ok(reservation) = value.cast::<Reservation>() {
        return Ok(reservation.get().inner.id.clone());
    }
    if let Ok(allocation) = value.cast::<Allocation>() {
        return Ok(allocation.get().inner.id.clone());
    }
    if value.is_instance_of::<PyString>() {
        return value.extract();
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be a {}, or its id as a str, not {}",
        if what == "allocation" {
            "Allocation"
        } else {
            "Reservation"
        },
        convert::type_name(value)
    )))
}

impl Cluster {
    /// Reads the clock. Called before the lock is taken: Python code never runs under it.
    fn now(&self, py: Python<'_>) -> PyResult<f64> {
        let reading = self.clock.bind(py).call0()?;
        let now = convert::seconds(&reading, "the clock's reading")?;
        if !now.is_finite() {
            return Err(InvalidRequest::new_err(format!("the clock returned {now}")));
        }
        Ok(now)
    }

    /// Runs `call` on the engine, containing panics (the cluster then fails closed).
    fn run<T>(
        &self,
        call: impl FnOnce(&mut Engine) -> Result<T, CallError>,
    ) -> Result<T, CallError> {
        if self.failed.load(Ordering::Acquire) {
            return Err(CallError::FailedClosed);
        }
        let mut engine = self.engine.lock().map_err(|_| CallError::FailedClosed)?;
        let result = contain(|| call(&mut engine));
        if matches!(result, Err(CallError::Panicked(_))) {
            self.failed.store(true, Ordering::Release);
        }
        result
    }

    /// Like `run`, with the GIL released for the duration (for searches).
    fn run_detached<T: Send>(
        &self,
        py: Python<'_>,
        call: impl FnOnce(&mut Engine) -> Result<T, CallError> + Send,
    ) -> Result<T, CallError> {
        py.detach(|| self.run(call))
    }
}

#[pymethods]
impl Cluster {
    #[new]
    #[pyo3(text_signature = "(levels, *, policy='best-fit', clock=None)")]
    #[pyo3(signature = (levels, *, policy = None, clock = None))]
    fn new(
        py: Python<'_>,
        levels: &Bound<'_, PyAny>,
        policy: Option<&Bound<'_, PyAny>>,
        clock: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let levels = convert::str_sequence(levels, "levels")?;
        let policy = match policy
            .map(|p| convert::string(p, "policy"))
            .transpose()?
            .as_deref()
        {
            None | Some("best-fit") => Policy::BestFit,
            Some("first-fit") => Policy::FirstFit,
            Some(other) => {
                return Err(InvalidRequest::new_err(format!(
                    "policy must be 'best-fit' or 'first-fit', not {other:?}"
                )));
            }
        };
        let clock = match clock {
            Some(clock) if clock.is_callable() => clock.unbind(),
            Some(clock) => {
                return Err(PyTypeError::new_err(format!(
                    "clock must be a callable returning seconds, not {}",
                    convert::type_name(&clock)
                )));
            }
            None => py.import("time")?.getattr("monotonic")?.unbind(),
        };
        let engine = Engine::new(levels.clone(), policy).map_err(crate::errors::core_to_py)?;
        Ok(Self {
            engine: Mutex::new(engine),
            failed: AtomicBool::new(false),
            clock,
            levels,
            policy,
        })
    }

    /// Level names, outermost first.
    #[getter]
    fn levels<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.levels)
    }

    /// `"best-fit"` or `"first-fit"`.
    #[getter]
    fn policy(&self) -> &'static str {
        policy_name(self.policy)
    }

    #[pyo3(signature = (name, *, gpus, topology, labels = None, unhealthy = None))]
    fn add_node(
        &self,
        name: &Bound<'_, PyAny>,
        gpus: &Bound<'_, PyAny>,
        topology: &Bound<'_, PyAny>,
        labels: Option<&Bound<'_, PyAny>>,
        unhealthy: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let spec = NodeSpec {
            name: convert::string(name, "name")?,
            gpus: convert::int(gpus, "gpus")?,
            topology: convert::str_mapping(topology, "topology")?,
            labels: labels.map_or(Ok(Vec::new()), |l| convert::str_mapping(l, "labels"))?,
            unhealthy: unhealthy
                .map_or(Ok(Vec::new()), |u| convert::int_sequence(u, "unhealthy"))?,
        };
        Ok(self.run(|engine| Ok(engine.add_node(spec)?))?)
    }

    fn set_gpu_health(
        &self,
        py: Python<'_>,
        node: &Bound<'_, PyAny>,
        gpu: &Bound<'_, PyAny>,
        healthy: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<String>> {
        let node = convert::string(node, "node")?;
        let gpu = convert::int(gpu, "gpu")?;
        let healthy = convert::boolean(healthy, "healthy")?;
        let now = self.now(py)?;
        Ok(self.run(|engine| Ok(engine.set_gpu_health(&node, gpu, healthy, now)?))?)
    }

    fn cordon(&self, py: Python<'_>, node: &Bound<'_, PyAny>) -> PyResult<()> {
        let node = convert::string(node, "node")?;
        let now = self.now(py)?;
        Ok(self.run(|engine| Ok(engine.set_cordoned(&node, true, now)?))?)
    }

    fn uncordon(&self, py: Python<'_>, node: &Bound<'_, PyAny>) -> PyResult<()> {
        let node = convert::string(node, "node")?;
        let now = self.now(py)?;
        Ok(self.run(|engine| Ok(engine.set_cordoned(&node, false, now)?))?)
    }

    fn node(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<NodeInfo> {
        let name = convert::string(name, "name")?;
        let now = self.now(py)?;
        let inner = self.run(|engine| Ok(engine.node_info(&name, now)?))?;
        Ok(NodeInfo { inner })
    }

    /// Names of all nodes, sorted.
    fn nodes(&self) -> PyResult<Vec<String>> {
        Ok(self.run(|engine| Ok(engine.node_names()))?)
    }

    fn stats(&self, py: Python<'_>) -> PyResult<ClusterStats> {
        let now = self.now(py)?;
        let inner = self.run(|engine| Ok(engine.stats(now)))?;
        Ok(ClusterStats { inner })
    }

    fn place_gang(
        &self,
        py: Python<'_>,
        request: &Bound<'_, GangRequest>,
    ) -> PyResult<Option<Placement>> {
        let request = request.get().inner.clone();
        let now = self.now(py)?;
        let placement = self.run_detached(py, |engine| Ok(engine.place(&request, now)?))?;
        Ok(placement.map(|placement| Placement {
            inner: Arc::new(placement),
        }))
    }

    #[pyo3(signature = (request, *, ttl = None), text_signature = "(self, request, *, ttl=30.0)")]
    fn reserve(
        &self,
        py: Python<'_>,
        request: &Bound<'_, GangRequest>,
        ttl: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Reservation> {
        let request = request.get().inner.clone();
        let ttl = ttl.map_or(Ok(30.0), |t| convert::seconds(t, "ttl"))?;
        let now = self.now(py)?;
        let inner = self.run_detached(py, |engine| Ok(engine.reserve(&request, ttl, now)?))?;
        Ok(Reservation { inner })
    }

    fn commit(&self, py: Python<'_>, reservation: &Bound<'_, PyAny>) -> PyResult<Allocation> {
        let id = hold_id(reservation, "reservation")?;
        let now = self.now(py)?;
        let inner = self.run(|engine| Ok(engine.commit(&id, now)?))?;
        Ok(Allocation { inner })
    }

    fn rollback(&self, py: Python<'_>, reservation: &Bound<'_, PyAny>) -> PyResult<bool> {
        let id = hold_id(reservation, "reservation")?;
        let now = self.now(py)?;
        Ok(self.run(|engine| Ok(engine.rollback(&id, now)?))?)
    }

    fn release(&self, py: Python<'_>, allocation: &Bound<'_, PyAny>) -> PyResult<bool> {
        let id = hold_id(allocation, "allocation")?;
        let now = self.now(py)?;
        Ok(self.run(|engine| Ok(engine.release(&id, now)?))?)
    }

    fn check_invariants(&self) -> PyResult<()> {
        Ok(self.run(|engine| Ok(engine.check_invariants()?))?)
    }

    fn __len__(&self) -> PyResult<usize> {
        Ok(self.run(|engine| Ok(engine.topology().node_count()))?)
    }

    fn __repr__(&self) -> String {
        let nodes = self
            .run(|engine| Ok(engine.topology().node_count()))
            .map_or_else(|_| "?".to_owned(), |n| n.to_string());
        let levels: Vec<String> = self.levels.iter().map(|l| py_str(l)).collect();
        let levels = match levels.as_slice() {
            [one] => format!("({one},)"),
            all => format!("({})", all.join(", ")),
        };
        format!(
            "Cluster(levels={levels}, policy={}, nodes={nodes})",
            py_str(policy_name(self.policy))
        )
    }
}
