//! The request a gang is placed by: `GangRequest`, a frozen value over the core's request.

use std::sync::Arc;

use gangplace_core as model;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::convert::{self, GpusPerPod, Movable, Preemptible, Priority};
use crate::errors::core_to_py;
use crate::types::{call_repr, dict, py_repr, terms_parts};

/// A gang: ``pods`` pods of ``gpus_per_pod`` GPUs each, placed whole or not at all.
///
/// Validated when built: ``pods`` >= 1, ``gpus_per_pod`` in 1..64 (0 for pods without
/// GPUs, which must ask ``resources_per_pod``), ``pods * gpus_per_pod`` at most 2**28 (the
/// most GPUs a cluster at its limits holds), ``min_pods`` in 1..pods, slice sizes (below).
/// Out-of-range values raise ``InvalidRequest`` (also for huge ints), wrong types
/// ``TypeError``. An unknown ``required_level`` or slice level is reported when the request
/// is placed.
///
/// Args:
///     pods: Pods wanted.
///     gpus_per_pod: GPUs per pod; a pod never spans nodes. 0: pods without GPUs (CPU-only
///         launchers, MIG slices as named resources), counted by ``resources_per_pod``
///         alone; they take neither ``numa="single"`` nor spares.
///     min_pods: Elastic gangs: the fewest pods accepted when ``pods`` do not fit.
///     required_level: The coarsest level the gang may span: ``"node"``, a level name, or
///         ``"cluster"`` (the same as ``None``).
///     selector: Labels every chosen node must carry (all of them).
///     affinity: Required node affinity, Kubernetes' ``nodeSelectorTerms``: a sequence of
///         terms, each a sequence of ``(key, operator, values)`` requirements; a node must
///         meet every requirement of at least one term. Operators ``"In"``, ``"NotIn"``,
///         ``"Exists"``, ``"DoesNotExist"``, ``"Gt"``, ``"Lt"`` (docs/placement.md, rule 1).
///     tolerations: The node taints it tolerates: ``(key, operator, value, effect)`` with
///         operator ``"Equal"`` or ``"Exists"`` and effect ``None`` (any), ``"NoSchedule"``,
///         ``"PreferNoSchedule"`` or ``"NoExecute"``. A node with a ``NoSchedule`` or
///         ``NoExecute`` taint the request does not tolerate is never used.
///     name: Free text shown in reasons and reprs.
///     priority: In -2**31..2**31-1 (a Kubernetes PriorityClass value fits). Higher
///         preempts lower; equal priorities never preempt each other.
///     preemptible: ``False``: its allocations are never victims of preemption.
///     movable: ``True``: its allocations can be checkpointed and restarted elsewhere
///         (candidates of ``Cluster.plan_defrag``).
///     slices: ``((level, pods_per_slice), ...)``, outermost first, at most 3 layers: ranks
///         ``j*k`` to ``(j+1)*k - 1`` of every layer lie in one domain of its level (docs/shapes.md
///         "Slices"). Each size divides ``pods`` and the outer size; levels strictly nested
///         and none coarser than ``required_level``; ``min_pods`` a multiple of the
///         outermost size.
///     spread: ``"pack"`` (rule 4: as few children as possible, the largest filled first) or
///         ``"balanced"`` (as many children as pack uses, the largest, split as evenly as
///         their capacities allow; docs/shapes.md "Balanced spread").
///     numa: ``"none"`` or ``"single"``: every pod's GPUs in one NUMA group of its node (the
///         level named ``numa`` of its ``NodeTopology``, else the outermost; a node without
///         one is one group), and capacities count pods per group (docs/shapes.md "Inside a node").
///     spares: Extra pods of the gang's pod size held next to it, part of the all-or-nothing
///         placement (docs/repair.md "Spares"): the last ``spares`` pods of the gang of
///         ``pods + spares``, or with slices ``spares`` more in every innermost slice domain.
///     resources_per_pod: Resources besides GPUs each pod asks, name -> integer quantity in
///         base units: ``"cpu"`` in millicores, ``"memory"`` in bytes, any other name in
///         units (docs/resources.md "Node resources"). A node then holds ``min(free GPUs // g, free
///         r // r per pod for every r)`` pods. Quantities 0..2**50, names unique, at most 32; a
///         name no node of the cluster offers raises ``InvalidRequest`` when placed.
///         Preemption, defragmentation, repair, spares and ``place_after`` count them too.
///     gpu_milli: Thousandths of one GPU each pod asks, 1..999, with ``gpus_per_pod=1``
///         (docs/resources.md "Fractions of a GPU"): each pod takes a share of one GPU, chosen best
///         fit among the node's partly used GPUs, and a shared GPU never goes to a whole-GPU
///         pod. No spares or ``numa="single"``; preemption ends and defragmentation moves
///         whole-GPU allocations for them (docs/preemption.md P8, D5).
///         ``None``: whole GPUs.
///
/// Example:
///     >>> GangRequest(4, 8, required_level="rack")
///     GangRequest(4, 8, required_level='rack')
///     >>> GangRequest(64, 4, slices=(("rack", 16),)).slices
///     (('rack', 16),)
#[pyclass(frozen, eq, hash, module = "gangplace._gangplace")]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GangRequest {
    /// Shared with the holds placed for it (they keep their request).
    pub inner: Arc<model::GangRequest>,
}

#[pymethods]
impl GangRequest {
    #[new]
    #[pyo3(
        text_signature = "(pods, gpus_per_pod=1, *, min_pods=None, required_level=None, selector=None, name='', priority=0, preemptible=True, movable=False, slices=(), spread='pack', numa='none', spares=0, resources_per_pod=None, gpu_milli=None, affinity=(), tolerations=())"
    )]
    #[pyo3(signature = (pods, gpus_per_pod = GpusPerPod(1), *, min_pods = None, required_level = None, selector = None, name = String::new(), priority = Priority(0), preemptible = Preemptible(true), movable = Movable(false), slices = None, spread = None, numa = None, spares = None, resources_per_pod = None, gpu_milli = None, affinity = None, tolerations = None))]
    #[allow(clippy::too_many_arguments)] // the documented signature of GangRequest
    fn new(
        pods: &Bound<'_, PyAny>,
        gpus_per_pod: GpusPerPod,
        min_pods: Option<&Bound<'_, PyAny>>,
        required_level: Option<&Bound<'_, PyAny>>,
        selector: Option<&Bound<'_, PyAny>>,
        name: String,
        priority: Priority,
        preemptible: Preemptible,
        movable: Movable,
        slices: Option<&Bound<'_, PyAny>>,
        spread: Option<&Bound<'_, PyAny>>,
        numa: Option<&Bound<'_, PyAny>>,
        spares: Option<&Bound<'_, PyAny>>,
        resources_per_pod: Option<&Bound<'_, PyAny>>,
        gpu_milli: Option<&Bound<'_, PyAny>>,
        affinity: Option<&Bound<'_, PyAny>>,
        tolerations: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let affinity = affinity.map(crate::filters::affinity).transpose()?;
        let tolerations = tolerations.map(crate::filters::tolerations).transpose()?;
        let terms = model::Terms::new(priority.0, preemptible.0, movable.0).map_err(core_to_py)?;
        let pods = convert::int(pods, "pods")?;
        let GpusPerPod(gpus_per_pod) = gpus_per_pod;
        let min_pods = min_pods.map(|m| convert::int(m, "min_pods")).transpose()?;
        let required_level = required_level
            .map(|l| convert::string(l, "required_level"))
            .transpose()?;
        let selector = selector.map_or(Ok(Vec::new()), |s| convert::str_mapping(s, "selector"))?;
        let slices = slices.map_or(Ok(Vec::new()), convert::slice_layers)?;
        let spread = spread
            .map(|value| convert::string(value, "spread"))
            .transpose()?
            .map_or(Ok(model::Spread::Pack), |name| model::Spread::parse(&name))
            .map_err(core_to_py)?;
        let numa = numa
            .map(|value| convert::string(value, "numa"))
            .transpose()?
            .map_or(Ok(model::Numa::None), |name| model::Numa::parse(&name))
            .map_err(core_to_py)?;
        let spares = spares.map_or(Ok(0), |n| convert::int(n, "spares"))?;
        let resources = (resources_per_pod)
            .map(|r| convert::resource_mapping(r, "resources_per_pod"))
            .transpose()?
            .unwrap_or_default();
        let gpu_milli = gpu_milli
            .map(|m| convert::int(m, "gpu_milli"))
            .transpose()?;
        let inner =
            model::GangRequest::new(pods, gpus_per_pod, min_pods, required_level, selector, name)
                .and_then(|request| request.with_slices(&slices))
                .and_then(|request| request.with_spares(spares))
                .and_then(|request| request.with_resources(resources))
                .map_err(core_to_py)?
                .with_spread(spread)
                .with_numa(numa);
        inner.check_gpu_less().map_err(core_to_py)?; // after the NUMA policy is set
        let inner = inner
            .with_gpu_milli(gpu_milli)
            .and_then(|request| {
                request.with_affinity(
                    affinity.unwrap_or_default(),
                    tolerations.unwrap_or_default(),
                )
            })
            .map_err(core_to_py)?;
        Ok(Self {
            inner: Arc::new(inner.with_terms(terms)),
        })
    }

    /// Pods wanted.
    #[getter]
    fn pods(&self) -> u64 {
        self.inner.pods
    }

    /// GPUs per pod (1 to 64); a pod never spans nodes.
    #[getter]
    fn gpus_per_pod(&self) -> u32 {
        self.inner.gpus_per_pod
    }

    /// Spare pods held next to the gang (per innermost slice domain with slices).
    #[getter]
    fn spares(&self) -> u64 {
        self.inner.spares
    }

    /// Elastic gangs: the fewest pods accepted; ``None`` for a rigid gang.
    #[getter]
    fn min_pods(&self) -> Option<u64> {
        self.inner.min_pods
    }

    /// The coarsest level the gang may span; ``None``: the whole cluster.
    #[getter]
    fn required_level(&self) -> Option<&str> {
        self.inner.required_level.as_deref()
    }

    /// A fresh dict, sorted by key.
    #[getter]
    fn selector<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        dict(py, &self.inner.filter.labels)
    }

    /// Required node affinity: ``((key, operator, values), ...)`` terms, sorted.
    #[getter]
    fn affinity<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        crate::filters::affinity_tuple(py, &self.inner.filter.affinity)
    }

    /// The taints it tolerates: ``(key, operator, value, effect)``, sorted.
    #[getter]
    fn tolerations<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        crate::filters::tolerations_tuple(py, &self.inner.filter.tolerations)
    }

    /// Free text shown in reasons and reprs.
    #[getter]
    fn name(&self) -> &str {
        &self.inner.name
    }

    /// Whole GPUs of the gang and its spares (with slices, ``spares`` per innermost slice).
    ///
    /// 0 for fractional pods, which hold shares.
    #[getter]
    fn total_gpus(&self) -> u64 {
        self.inner.total_gpus()
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

    /// ``True``: its allocations can be moved by defragmentation.
    #[getter]
    fn movable(&self) -> bool {
        self.inner.terms.movable
    }

    /// Slice layers, outermost first: ``(level, pods_per_slice)`` pairs (docs/shapes.md).
    #[getter]
    fn slices<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        slices_tuple(py, &self.inner)
    }

    /// ``"pack"`` (rule 4) or ``"balanced"`` (docs/shapes.md "Balanced spread").
    #[getter]
    fn spread(&self) -> &'static str {
        self.inner.spread.as_str()
    }

    /// ``"none"`` or ``"single"`` (docs/shapes.md "Inside a node").
    #[getter]
    fn numa(&self) -> &'static str {
        self.inner.numa.as_str()
    }

    /// Resources besides GPUs each pod asks: a fresh dict, sorted by name.
    #[getter]
    fn resources_per_pod<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        dict(py, &self.inner.resources)
    }

    /// Thousandths of one GPU each pod asks (docs/resources.md); ``None``: whole.
    #[getter]
    fn gpu_milli(&self) -> Option<u16> {
        self.inner.gpu_milli
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let request = &self.inner;
        let mut parts = vec![request.pods.to_string(), request.gpus_per_pod.to_string()];
        if let Some(min) = request.min_pods {
            parts.push(format!("min_pods={min}"));
        }
        if let Some(level) = &request.required_level {
            parts.push(format!("required_level={}", py_repr(py, level)?));
        }
        if !request.filter.labels.is_empty() {
            let selector = dict(py, &request.filter.labels)?;
            parts.push(format!("selector={}", py_repr(py, selector)?));
        }
        parts.extend(crate::filters::repr_parts(py, &request.filter)?);
        if !request.name.is_empty() {
            parts.push(format!("name={}", py_repr(py, &request.name)?));
        }
        parts.extend(terms_parts(request.terms));
        if !request.slices.is_empty() {
            parts.push(format!(
                "slices={}",
                py_repr(py, slices_tuple(py, request)?)?
            ));
        }
        if request.spread != model::Spread::Pack {
            parts.push(format!("spread={}", py_repr(py, request.spread.as_str())?));
        }
        if request.numa != model::Numa::None {
            parts.push(format!("numa={}", py_repr(py, request.numa.as_str())?));
        }
        if request.spares > 0 {
            parts.push(format!("spares={}", request.spares));
        }
        if !request.resources.is_empty() {
            let resources = dict(py, &request.resources)?;
            parts.push(format!("resources_per_pod={}", py_repr(py, resources)?));
        }
        if let Some(milli) = request.gpu_milli {
            parts.push(format!("gpu_milli={milli}"));
        }
        Ok(call_repr("GangRequest", &parts))
    }
}

/// `((level, pods_per_slice), ...)`.
pub(crate) fn slices_tuple<'py>(
    py: Python<'py>,
    request: &model::GangRequest,
) -> PyResult<Bound<'py, PyTuple>> {
    let layers = request
        .slices
        .iter()
        .map(|layer| (layer.level.as_str(), layer.pods_per_slice));
    PyTuple::new(py, layers)
}
