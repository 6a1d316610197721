//! Frozen, hashable value types. Each wraps the core's owned value and builds Python objects
//! only when an attribute is read.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use gangplace_core as model;
use pyo3::BoundObject;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::convert;
use crate::errors::core_to_py;
pub use crate::request::GangRequest;

/// `{key: value}` in the pairs' order (labels, selectors, resource quantities).
pub(crate) fn dict<'py, V>(py: Python<'py>, pairs: &[(String, V)]) -> PyResult<Bound<'py, PyDict>>
where
    V: Clone + IntoPyObject<'py>,
{
    let dict = PyDict::new(py);
    for (key, value) in pairs {
        dict.set_item(key, value.clone())?;
    }
    Ok(dict)
}

/// Python's own `repr` of a value converted to a Python object (as pydantic-core builds its
/// reprs): quotes, escapes and number formats are exactly Python's.
pub fn py_repr<'py>(py: Python<'py>, value: impl IntoPyObject<'py>) -> PyResult<String> {
    let object = value.into_pyobject(py).map_err(Into::into)?;
    Ok(object.into_any().into_bound().repr()?.to_string())
}

/// The keyword parts of terms that differ from the defaults.
pub(crate) fn terms_parts(terms: model::Terms) -> Vec<String> {
    let mut parts = Vec::new();
    if terms.priority != 0 {
        parts.push(format!("priority={}", terms.priority));
    }
    if !terms.preemptible {
        parts.push("preemptible=False".to_owned());
    }
    if terms.movable {
        parts.push("movable=True".to_owned());
    }
    parts
}

/// `Name(arg, ..., key=value, ...)`: positional and keyword parts already as reprs.
pub(crate) fn call_repr(name: &str, parts: &[String]) -> String {
    format!("{name}({})", parts.join(", "))
}

/// One pod of a placement: a node and the GPU indices it takes there.
#[pyclass(frozen, eq, hash, module = "gangplace._gangplace")]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodPlacement {
    pub inner: model::PodPlacement,
}

#[pymethods]
impl PodPlacement {
    #[new]
    fn new(node: &Bound<'_, PyAny>, gpus: &Bound<'_, PyAny>) -> PyResult<Self> {
        let node = convert::string(node, "node")?;
        let gpus = convert::int_sequence(gpus, "gpus")?;
        let inner = model::PodPlacement::new(node, gpus).map_err(core_to_py)?;
        Ok(Self { inner })
    }

    /// The node's name.
    #[getter]
    fn node(&self) -> &str {
        &self.inner.node
    }

    /// GPU indices, ascending.
    #[getter]
    fn gpus<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.inner.gpu_indices())
    }

    /// The finest intra-node level holding all its GPUs, or ``"node"``.
    ///
    /// Set by the engine for the pods it places, adopts or restores on nodes with a
    /// ``NodeTopology`` (docs/shapes.md "Inside a node"); a pod you build says ``"node"``. Not part
    /// of equality.
    #[getter]
    fn affinity(&self) -> &str {
        self.inner.affinity.as_deref().unwrap_or("node")
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let node = py_repr(py, &*self.inner.node)?;
        let gpus = py_repr(py, PyTuple::new(py, self.inner.gpu_indices())?)?;
        Ok(call_repr("PodPlacement", &[node, gpus]))
    }
}

/// Where a gang goes.
///
/// ``len(placement)`` is the number of pods placed (fewer than asked only for elastic gangs).
#[pyclass(frozen, eq, hash, module = "gangplace._gangplace")]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Placement {
    pub inner: Arc<model::Placement>,
}

#[pymethods]
impl Placement {
    /// Pods in rank order: sorted by (node's domain path, node name, first GPU).
    #[getter]
    fn pods<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let pods = self
            .inner
            .pods
            .iter()
            .map(|pod| PodPlacement { inner: pod.clone() });
        PyTuple::new(py, pods)
    }

    /// ``"node"``, a level name, or ``"cluster"``: the finest level that held the gang.
    #[getter]
    fn level(&self) -> &str {
        &self.inner.level
    }

    /// Path of the chosen domain.
    ///
    /// The node name is appended at level ``node``; the path is ``()`` at ``cluster``.
    #[getter]
    fn domain<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.inner.domain)
    }

    /// Distinct node names in order of their first rank (a repair keeps ranks in place).
    #[getter]
    fn nodes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.inner.nodes())
    }

    /// Slice gangs: the domain path of every innermost slice, in rank order.
    #[getter]
    fn slices<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let paths: PyResult<Vec<Bound<'py, PyTuple>>> = self
            .inner
            .slices
            .iter()
            .map(|path| PyTuple::new(py, path))
            .collect();
        PyTuple::new(py, paths?)
    }

    /// Spare pods held next to the gang (docs/repair.md), in the order they were placed.
    ///
    /// Not ranks of the gang.
    #[getter]
    fn spares<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let spares = (self.inner.spares.iter()).map(|pod| PodPlacement { inner: pod.clone() });
        PyTuple::new(py, spares)
    }

    /// Multi-role gangs: group name -> its pods in rank order, in request order.
    ///
    /// A fresh dict; empty for a single gang.
    #[getter]
    fn groups<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let groups = PyDict::new(py);
        let mut pods = self.inner.pods.iter();
        for (name, count) in &self.inner.groups {
            let count = usize::try_from(*count).unwrap_or(usize::MAX);
            let part = pods
                .by_ref()
                .take(count)
                .map(|pod| PodPlacement { inner: pod.clone() });
            groups.set_item(name, PyTuple::new(py, part)?)?;
        }
        Ok(groups)
    }

    /// Whole GPUs of all pods (0 for fractional pods, which hold shares: ``gpu_milli``).
    #[getter]
    fn total_gpus(&self) -> usize {
        if self.inner.gpu_milli.is_some() {
            return 0;
        }
        self.inner
            .pods
            .iter()
            .map(|pod| pod.gpu_count() as usize)
            .sum()
    }

    /// Thousandths of its GPU each pod uses (docs/resources.md); ``None``: whole.
    #[getter]
    fn gpu_milli(&self) -> Option<u16> {
        self.inner.gpu_milli
    }

    fn __len__(&self) -> usize {
        self.inner.pods.len()
    }

    /// Notebooks show the pods and their GPUs.
    fn _repr_html_(slf: &Bound<'_, Self>) -> PyResult<String> {
        let pictures = slf.py().import("gangplace.pictures")?;
        pictures.call_method1("placement_svg", (slf,))?.extract()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let pods: Vec<Bound<'_, PyTuple>> = self
            .inner
            .pods
            .iter()
            .map(|pod| {
                let gpus = PyTuple::new(py, pod.gpu_indices())?;
                PyTuple::new(py, [py_object(py, &pod.node)?, gpus.into_any()])
            })
            .collect::<PyResult<_>>()?;
        let parts = [
            format!("level={}", py_repr(py, &self.inner.level)?),
            format!(
                "domain={}",
                py_repr(py, PyTuple::new(py, &self.inner.domain)?)?
            ),
            format!("pods={}", py_repr(py, pods)?),
        ];
        let mut parts = parts.to_vec();
        if !self.inner.spares.is_empty() {
            parts.push(format!("spares={}", py_repr(py, self.spares(py)?)?));
        }
        if let Some(milli) = self.inner.gpu_milli {
            parts.push(format!("gpu_milli={milli}"));
        }
        Ok(call_repr("Placement", &parts))
    }
}

/// A hold's request as Python sees it: a `GangRequest`, a `MultiGangRequest`, or `None`.
fn request_object<'py>(
    py: Python<'py>,
    request: &Option<Arc<model::GangRequest>>,
    roles: &Option<Arc<model::MultiGangRequest>>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    if let Some(roles) = roles {
        let roles = crate::roles::MultiGangRequest {
            inner: Arc::clone(roles),
        };
        return Ok(Some(Bound::new(py, roles)?.into_any()));
    }
    request
        .as_ref()
        .map(|inner| {
            let inner = Arc::clone(inner);
            Ok(Bound::new(py, GangRequest { inner })?.into_any())
        })
        .transpose()
}

fn py_object<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    Ok(text.into_pyobject(py)?.into_any())
}

/// A hold on a placement's GPUs until ``expires_at``, in seconds of the cluster's clock.
#[pyclass(frozen, eq, hash, module = "gangplace._gangplace")]
#[derive(Debug, Clone)]
pub struct Reservation {
    pub inner: model::Reservation,
}

impl PartialEq for Reservation {
    fn eq(&self, other: &Self) -> bool {
        self.inner.id == other.inner.id
            && self.inner.placement == other.inner.placement
            && self.inner.expires_at.to_bits() == other.inner.expires_at.to_bits()
            && self.inner.owner == other.inner.owner
            && self.inner.terms == other.inner.terms
            && self.inner.since.to_bits() == other.inner.since.to_bits()
            && self.inner.repairs == other.inner.repairs
            && self.inner.repaired_ranks == other.inner.repaired_ranks
    }
}

impl Eq for Reservation {}

impl Hash for Reservation {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.inner.id.hash(state);
        self.inner.placement.hash(state);
        self.inner.expires_at.to_bits().hash(state);
        self.inner.owner.hash(state);
        self.inner.terms.hash(state);
        self.inner.since.to_bits().hash(state);
    }
}

#[pymethods]
impl Reservation {
    /// Unguessable: ``"gp-"`` and 32 hex digits (128 random bits).
    #[getter]
    fn id(&self) -> String {
        self.inner.id.to_string()
    }

    /// The request it was placed for; ``None`` for ``reserve(placement)``.
    #[getter]
    fn request<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        request_object(py, &self.inner.request, &self.inner.roles)
    }

    /// Where its GPUs are.
    #[getter]
    fn placement(&self) -> Placement {
        Placement {
            inner: Arc::clone(&self.inner.placement),
        }
    }

    /// Its spare pods (``placement.spares``): held, never free, not ranks.
    #[getter]
    fn spares<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        self.placement().spares(py)
    }

    /// Clock time at which it expires unless committed.
    #[getter]
    fn expires_at(&self) -> f64 {
        self.inner.expires_at
    }

    /// Who holds it; ``None`` when reserved without an owner.
    #[getter]
    fn owner(&self) -> Option<&str> {
        self.inner.owner.as_deref()
    }

    /// Priority (from the request; ``Cluster.set_priority`` changes it).
    #[getter]
    fn priority(&self) -> i32 {
        self.inner.terms.priority
    }

    /// ``False``: never a victim of preemption.
    #[getter]
    fn preemptible(&self) -> bool {
        self.inner.terms.preemptible
    }

    /// ``True``: a defragmentation candidate once committed.
    #[getter]
    fn movable(&self) -> bool {
        self.inner.terms.movable
    }

    /// Clock time of ``reserve``.
    #[getter]
    fn since(&self) -> f64 {
        self.inner.since
    }

    /// A repair reservation (``Cluster.repair``): the id of the allocation it repairs.
    ///
    /// ``None`` for other reservations.
    #[getter]
    fn repairs(&self) -> Option<String> {
        self.inner.repairs.map(|id| id.to_string())
    }

    /// A repair reservation: the ranks its pods replace, one per pod in pod order.
    ///
    /// Empty for other reservations.
    #[getter]
    fn repaired_ranks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.inner.repaired_ranks)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let parts = [
            format!("id={}", py_repr(py, self.id())?),
            format!("expires_at={}", py_repr(py, self.inner.expires_at)?),
            format!("owner={}", py_repr(py, self.owner())?),
        ];
        let mut parts = parts.to_vec();
        parts.extend(terms_parts(self.inner.terms));
        if let Some(allocation) = self.repairs() {
            parts.push(format!("repairs={}", py_repr(py, allocation)?));
        }
        parts.push(format!("placement={}", self.placement().__repr__(py)?));
        Ok(call_repr("Reservation", &parts))
    }
}

/// A committed reservation. Its id is the reservation's id.
#[pyclass(frozen, eq, hash, module = "gangplace._gangplace")]
#[derive(Debug, Clone)]
pub struct Allocation {
    pub inner: model::Allocation,
}

impl PartialEq for Allocation {
    fn eq(&self, other: &Self) -> bool {
        self.inner.id == other.inner.id
            && self.inner.placement == other.inner.placement
            && self.inner.owner == other.inner.owner
            && self.inner.terms == other.inner.terms
            && self.inner.since.to_bits() == other.inner.since.to_bits()
            && self.inner.ended == other.inner.ended
    }
}

impl Eq for Allocation {}

impl Hash for Allocation {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.inner.id.hash(state);
        self.inner.placement.hash(state);
        self.inner.owner.hash(state);
        self.inner.terms.hash(state);
        self.inner.since.to_bits().hash(state);
        self.inner.ended.hash(state);
    }
}

#[pymethods]
impl Allocation {
    /// Its id (``gp-`` and 32 hex digits), the same as its reservation's.
    #[getter]
    fn id(&self) -> String {
        self.inner.id.to_string()
    }

    /// The request it was placed for; ``None`` for ``reserve(placement)`` and ``adopt``.
    #[getter]
    fn request<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        request_object(py, &self.inner.request, &self.inner.roles)
    }

    /// Ranks that lost hardware, sorted (docs/repair.md "Repair after failures").
    ///
    /// A rank is lost when its pod's node was removed (even if a node of that name came
    /// back) or one of its GPUs is unhealthy; a GPU marked healthy again un-loses it. As of
    /// when this value was made: ``allocations()`` and ``commit`` give current ones.
    #[getter]
    fn lost<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.inner.lost)
    }

    /// Ranks whose pods ``release_pods`` ended, sorted (docs/transactions.md).
    ///
    /// They stay listed in ``placement.pods`` (every other rank keeps its number), hold no
    /// GPU, and are never lost nor repaired.
    #[getter]
    fn ended<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.inner.ended)
    }

    /// The placement as reserved (a removed node's pods and ended ranks stay listed).
    #[getter]
    fn placement(&self) -> Placement {
        Placement {
            inner: Arc::clone(&self.inner.placement),
        }
    }

    /// Its spare pods (``placement.spares``): held, never free, not ranks.
    #[getter]
    fn spares<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        self.placement().spares(py)
    }

    /// Who holds it; ``None`` when reserved without an owner.
    #[getter]
    fn owner(&self) -> Option<&str> {
        self.inner.owner.as_deref()
    }

    /// Priority (from the request; ``Cluster.set_priority`` changes it).
    #[getter]
    fn priority(&self) -> i32 {
        self.inner.terms.priority
    }

    /// ``False``: never a victim of preemption.
    #[getter]
    fn preemptible(&self) -> bool {
        self.inner.terms.preemptible
    }

    /// ``True``: a defragmentation candidate.
    #[getter]
    fn movable(&self) -> bool {
        self.inner.terms.movable
    }

    /// Clock time of ``commit`` (``min_runtime`` counts from it).
    #[getter]
    fn since(&self) -> f64 {
        self.inner.since
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let parts = [
            format!("id={}", py_repr(py, self.id())?),
            format!("owner={}", py_repr(py, self.owner())?),
        ];
        let mut parts = parts.to_vec();
        parts.extend(terms_parts(self.inner.terms));
        if !self.inner.ended.is_empty() {
            let ended = self.ended(py)?;
            parts.push(format!("ended={}", ended.repr()?));
        }
        parts.push(format!("placement={}", self.placement().__repr__(py)?));
        Ok(call_repr("Allocation", &parts))
    }
}
