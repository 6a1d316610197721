//! Multi-role gangs: `PodGroup` and `MultiGangRequest`, frozen values over the core's, and
//! the conversion of "a GangRequest or a MultiGangRequest" arguments.

use std::sync::Arc;

use gangplace_core as model;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::convert::{self, GpusPerPod, Movable, Preemptible, Priority};
use crate::errors::core_to_py;
use crate::request::{GangRequest, slices_tuple};
use crate::types::{call_repr, dict, py_repr, terms_parts};

/// One role of a multi-role gang: ``pods`` pods of ``gpus_per_pod`` GPUs.
///
/// docs/roles.md. Validated when built like a ``GangRequest`` (sizes,
/// ``min_pods``, selector, slice sizes); ``name`` must be 1 to 253 bytes. Its level rules
/// come from the ``MultiGangRequest``.
///
/// Args:
///     name: The group's name, unique within its request (``Placement.groups`` key).
///     pods: Pods wanted.
///     gpus_per_pod: GPUs per pod; a pod never spans nodes.
///     min_pods: Elastic groups: when the full unit fits nowhere, the unit is tried again
///         with this group at ``min_pods``.
///     selector: Labels every node of this group must carry.
///     affinity: The group's required node affinity, as ``GangRequest``'s.
///     tolerations: The node taints the group tolerates, as ``GangRequest``'s.
///     slices: ``((level, pods_per_slice), ...)`` as on ``GangRequest``, for this group.
///     spares: Spare pods of this group's pod size held with the unit, as on
///         ``GangRequest`` (docs/repair.md "Spares"); listed in ``Placement.spares`` group by
///         group.
///     resources_per_pod: Resources besides GPUs each pod of the group asks, as on
///         ``GangRequest`` (docs/resources.md "Node resources"): every count of the group's pods is
///         bounded by the nodes' free resources less what the earlier groups took; with
///         them ``gpus_per_pod`` may be 0 (a launcher, a MIG slice).
///
/// Example:
///     >>> PodGroup("workers", 16, 8)
///     PodGroup('workers', 16, 8)
///     >>> PodGroup("launcher", 1, 0, resources_per_pod={"cpu": 4_000})
///     PodGroup('launcher', 1, 0, resources_per_pod={'cpu': 4000})
#[pyclass(frozen, eq, hash, module = "gangplace._gangplace")]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodGroup {
    /// A core gang whose `name` is the group's.
    pub inner: model::GangRequest,
}

#[pymethods]
impl PodGroup {
    #[new]
    #[pyo3(
        signature = (name, pods, gpus_per_pod = GpusPerPod(1), *, min_pods = None, selector = None, slices = None, spares = None, resources_per_pod = None, affinity = None, tolerations = None),
        text_signature = "(name, pods, gpus_per_pod=1, *, min_pods=None, selector=None, slices=(), spares=0, resources_per_pod=None, affinity=(), tolerations=())"
    )]
    #[allow(clippy::too_many_arguments)] // the Python signature: keyword arguments
    fn new(
        name: &Bound<'_, PyAny>,
        pods: &Bound<'_, PyAny>,
        gpus_per_pod: GpusPerPod,
        min_pods: Option<&Bound<'_, PyAny>>,
        selector: Option<&Bound<'_, PyAny>>,
        slices: Option<&Bound<'_, PyAny>>,
        spares: Option<&Bound<'_, PyAny>>,
        resources_per_pod: Option<&Bound<'_, PyAny>>,
        affinity: Option<&Bound<'_, PyAny>>,
        tolerations: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let name = convert::string(name, "name")?;
        let affinity = affinity.map(crate::filters::affinity).transpose()?;
        let tolerations = tolerations.map(crate::filters::tolerations).transpose()?;
        if name.is_empty() || name.len() > model::MAX_NAME_BYTES {
            return Err(core_to_py(model::CoreError::InvalidRequest(format!(
                "a group name must be 1 to {} bytes long, got {} bytes",
                model::MAX_NAME_BYTES,
                name.len()
            ))));
        }
        let pods = convert::int(pods, "pods")?;
        let min_pods = min_pods.map(|m| convert::int(m, "min_pods")).transpose()?;
        let selector = selector.map_or(Ok(Vec::new()), |s| convert::str_mapping(s, "selector"))?;
        let slices = slices.map_or(Ok(Vec::new()), convert::slice_layers)?;
        let spares = spares.map_or(Ok(0), |n| convert::int(n, "spares"))?;
        let resources = (resources_per_pod)
            .map(|r| convert::resource_mapping(r, "resources_per_pod"))
            .transpose()?
            .unwrap_or_default();
        let inner = model::GangRequest::new(pods, gpus_per_pod.0, min_pods, None, selector, name)
            .and_then(|request| request.with_slices(&slices))
            .and_then(|request| request.with_spares(spares))
            .and_then(|request| request.with_resources(resources))
            .and_then(|request| request.check_gpu_less().map(|()| request))
            .and_then(|request| {
                request.with_affinity(
                    affinity.unwrap_or_default(),
                    tolerations.unwrap_or_default(),
                )
            })
            .map_err(core_to_py)?;
        Ok(Self { inner })
    }

    /// The group's name.
    #[getter]
    fn name(&self) -> &str {
        &self.inner.name
    }

    /// Pods wanted.
    #[getter]
    fn pods(&self) -> u64 {
        self.inner.pods
    }

    /// GPUs per pod.
    #[getter]
    fn gpus_per_pod(&self) -> u32 {
        self.inner.gpus_per_pod
    }

    /// Elastic groups: the fewest pods accepted; ``None`` for a rigid group.
    #[getter]
    fn min_pods(&self) -> Option<u64> {
        self.inner.min_pods
    }

    /// A fresh dict, sorted by key.
    #[getter]
    fn selector<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        dict(py, &self.inner.filter.labels)
    }

    /// The group's required node affinity, as ``GangRequest.affinity``.
    #[getter]
    fn affinity<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        crate::filters::affinity_tuple(py, &self.inner.filter.affinity)
    }

    /// The node taints the group tolerates, as ``GangRequest.tolerations``.
    #[getter]
    fn tolerations<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        crate::filters::tolerations_tuple(py, &self.inner.filter.tolerations)
    }

    /// Slice layers, outermost first.
    #[getter]
    fn slices<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        slices_tuple(py, &self.inner)
    }

    /// Spare pods of this group held with the unit.
    #[getter]
    fn spares(&self) -> u64 {
        self.inner.spares
    }

    /// Resources besides GPUs each pod asks (docs/resources.md); sorted by name.
    #[getter]
    fn resources_per_pod<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        dict(py, &self.inner.resources)
    }

    /// GPUs of the group and its spares.
    #[getter]
    fn total_gpus(&self) -> u64 {
        self.inner.total_gpus()
    }

    fn __getnewargs_ex__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyTuple>, Bound<'py, PyDict>)> {
        let inner = &self.inner;
        let args = (
            inner.name.as_str(),
            inner.pods,
            u64::from(inner.gpus_per_pod),
        )
            .into_pyobject(py)?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("min_pods", inner.min_pods)?;
        kwargs.set_item("selector", dict(py, &inner.filter.labels)?)?;
        crate::filters::pickle_into(py, &kwargs, &inner.filter)?;
        kwargs.set_item("slices", slices_tuple(py, inner)?)?;
        kwargs.set_item("spares", inner.spares)?;
        kwargs.set_item("resources_per_pod", dict(py, &inner.resources)?)?;
        Ok((args, kwargs))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let group = &self.inner;
        let mut parts = vec![
            py_repr(py, &group.name)?,
            group.pods.to_string(),
            group.gpus_per_pod.to_string(),
        ];
        if let Some(min) = group.min_pods {
            parts.push(format!("min_pods={min}"));
        }
        if !group.filter.labels.is_empty() {
            parts.push(format!(
                "selector={}",
                py_repr(py, dict(py, &group.filter.labels)?)?
            ));
        }
        parts.extend(crate::filters::repr_parts(py, &group.filter)?);
        if !group.slices.is_empty() {
            parts.push(format!("slices={}", py_repr(py, slices_tuple(py, group)?)?));
        }
        if group.spares > 0 {
            parts.push(format!("spares={}", group.spares));
        }
        if !group.resources.is_empty() {
            let resources = dict(py, &group.resources)?;
            parts.push(format!("resources_per_pod={}", py_repr(py, resources)?));
        }
        Ok(call_repr("PodGroup", &parts))
    }
}

/// Several pod groups placed as one all-or-nothing unit in one domain.
///
/// docs/roles.md: a leader and its workers, workers of different sizes.
/// Validated when built: 1 to 16 groups with unique names, at most 2**28 GPUs in total,
/// colocations naming two different groups. Level names (``required_level``, colocation
/// levels, slice levels) are checked when placed. ``place_gang``, ``reserve``, ``explain``,
/// ``place_many``, ``reserve_many`` and ``capacity_for`` take it; ``plan_preemption`` and
/// ``plan_defrag`` refuse it with ``InvalidRequest``.
///
/// Args:
///     groups: The ``PodGroup`` objects; ``Placement.pods`` lists their pods in this order.
///     required_level: The coarsest level the whole unit may span.
///     colocate: ``((group, anchor, level), ...)``: every pod of ``group`` lies in the
///         domain of ``level`` that holds rank 0 of ``anchor``.
///     name: Free text shown in reasons and reprs.
///     spread: ``"pack"`` or ``"balanced"``, for every group.
///     priority: As on ``GangRequest``.
///     preemptible: As on ``GangRequest``.
///     movable: As on ``GangRequest`` (``plan_defrag`` does not move multi-role holds).
///
/// Example:
///     >>> leader = PodGroup("leader", 1, 1)
///     >>> workers = PodGroup("workers", 4, 8)
///     >>> request = MultiGangRequest((leader, workers), colocate=(("leader", "workers", "rack"),))
///     >>> request.groups
///     (PodGroup('leader', 1, 1), PodGroup('workers', 4, 8))
#[pyclass(frozen, eq, hash, module = "gangplace._gangplace")]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MultiGangRequest {
    /// Shared with the holds placed for it.
    pub inner: Arc<model::MultiGangRequest>,
}

#[pymethods]
impl MultiGangRequest {
    #[new]
    #[pyo3(
        signature = (groups, *, required_level = None, colocate = None, name = String::new(), spread = None, priority = Priority(0), preemptible = Preemptible(true), movable = Movable(false)),
        text_signature = "(groups, *, required_level=None, colocate=(), name='', spread='pack', priority=0, preemptible=True, movable=False)"
    )]
    #[allow(clippy::too_many_arguments)] // the documented signature of MultiGangRequest
    fn new(
        groups: &Bound<'_, PyAny>,
        required_level: Option<&Bound<'_, PyAny>>,
        colocate: Option<&Bound<'_, PyAny>>,
        name: String,
        spread: Option<&Bound<'_, PyAny>>,
        priority: Priority,
        preemptible: Preemptible,
        movable: Movable,
    ) -> PyResult<Self> {
        let terms = model::Terms::new(priority.0, preemptible.0, movable.0).map_err(core_to_py)?;
        let groups = groups
            .try_iter()?
            .map(|group| {
                let group = group?;
                let group = group.cast::<PodGroup>().map_err(|_| {
                    PyTypeError::new_err(format!(
                        "groups must hold PodGroup objects, not {}",
                        convert::type_name(&group)
                    ))
                })?;
                Ok(group.get().inner.clone())
            })
            .collect::<PyResult<Vec<_>>>()?;
        let required_level = required_level
            .map(|l| convert::string(l, "required_level"))
            .transpose()?;
        let colocate = colocate.map_or(Ok(Vec::new()), colocations)?;
        let spread = spread
            .map(|value| convert::string(value, "spread"))
            .transpose()?
            .map_or(Ok(model::Spread::Pack), |name| model::Spread::parse(&name))
            .map_err(core_to_py)?;
        let inner = model::MultiGangRequest::new(groups, required_level, &colocate, name, spread)
            .map_err(core_to_py)?
            .with_terms(terms);
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    /// The ``PodGroup`` objects, in request order.
    #[getter]
    fn groups<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        groups_tuple(py, &self.inner)
    }

    /// The coarsest level the unit may span; ``None``: the whole cluster.
    #[getter]
    fn required_level(&self) -> Option<&str> {
        self.inner.required_level.as_deref()
    }

    /// ``((group, anchor, level), ...)``, as given.
    #[getter]
    fn colocate<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        colocate_tuple(py, &self.inner)
    }

    /// Free text shown in reasons and reprs.
    #[getter]
    fn name(&self) -> &str {
        &self.inner.name
    }

    /// ``"pack"`` or ``"balanced"``.
    #[getter]
    fn spread(&self) -> &'static str {
        self.inner.spread.as_str()
    }

    /// Higher preempts lower; equal priorities never preempt each other.
    #[getter]
    fn priority(&self) -> i32 {
        self.inner.terms.priority
    }

    /// ``False``: its allocations are never victims of preemption.
    #[getter]
    fn preemptible(&self) -> bool {
        self.inner.terms.preemptible
    }

    /// As given; ``plan_defrag`` never moves multi-role allocations.
    #[getter]
    fn movable(&self) -> bool {
        self.inner.terms.movable
    }

    /// GPUs of every group at full size.
    #[getter]
    fn total_gpus(&self) -> u64 {
        self.inner.total_gpus()
    }

    /// Pods of every group at full size.
    #[getter]
    fn pods(&self) -> u64 {
        self.inner.total_pods()
    }

    fn __getnewargs_ex__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyTuple>, Bound<'py, PyDict>)> {
        let inner = &self.inner;
        let args = PyTuple::new(py, [groups_tuple(py, inner)?])?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("required_level", inner.required_level.as_deref())?;
        kwargs.set_item("colocate", colocate_tuple(py, inner)?)?;
        kwargs.set_item("name", &inner.name)?;
        kwargs.set_item("spread", inner.spread.as_str())?;
        kwargs.set_item("priority", inner.terms.priority)?;
        kwargs.set_item("preemptible", inner.terms.preemptible)?;
        kwargs.set_item("movable", inner.terms.movable)?;
        Ok((args, kwargs))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let request = &self.inner;
        let mut parts = vec![py_repr(py, groups_tuple(py, request)?)?];
        if let Some(level) = &request.required_level {
            parts.push(format!("required_level={}", py_repr(py, level)?));
        }
        if !request.colocate.is_empty() {
            parts.push(format!(
                "colocate={}",
                py_repr(py, colocate_tuple(py, request)?)?
            ));
        }
        if !request.name.is_empty() {
            parts.push(format!("name={}", py_repr(py, &request.name)?));
        }
        if request.spread != model::Spread::Pack {
            parts.push(format!("spread={}", py_repr(py, request.spread.as_str())?));
        }
        parts.extend(terms_parts(request.terms));
        Ok(call_repr("MultiGangRequest", &parts))
    }
}

fn groups_tuple<'py>(
    py: Python<'py>,
    request: &model::MultiGangRequest,
) -> PyResult<Bound<'py, PyTuple>> {
    let groups = request.groups.iter().map(|group| PodGroup {
        inner: group.clone(),
    });
    PyTuple::new(py, groups)
}

fn colocate_tuple<'py>(
    py: Python<'py>,
    request: &model::MultiGangRequest,
) -> PyResult<Bound<'py, PyTuple>> {
    let name = |index: usize| request.groups[index].name.as_str();
    let pairs = request
        .colocate
        .iter()
        .map(|c| (name(c.group), name(c.anchor), c.level.as_str()));
    PyTuple::new(py, pairs)
}

/// `((group, anchor, level), ...)` from any iterable of 3-sequences of strings.
fn colocations(value: &Bound<'_, PyAny>) -> PyResult<Vec<(String, String, String)>> {
    value
        .try_iter()?
        .map(|entry| {
            let entry = entry?;
            let parts = convert::str_sequence(&entry, "colocate entry")?;
            match <[String; 3]>::try_from(parts) {
                Ok([group, anchor, level]) => Ok((group, anchor, level)),
                Err(_) => Err(PyTypeError::new_err(
                    "colocate entries must be (group, anchor, level) triples of str",
                )),
            }
        })
        .collect()
}

/// A `GangRequest` or a `MultiGangRequest` argument as the core's request.
pub fn any_request(value: &Bound<'_, PyAny>, what: &str) -> PyResult<model::AnyRequest> {
    if let Ok(request) = value.cast::<GangRequest>() {
        return Ok(model::AnyRequest::Gang(Arc::clone(&request.get().inner)));
    }
    if let Ok(request) = value.cast::<MultiGangRequest>() {
        return Ok(model::AnyRequest::Roles(Arc::clone(&request.get().inner)));
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be a GangRequest or a MultiGangRequest, not {}",
        convert::type_name(value)
    )))
}
