//! `Cluster.adopt`: work that is already running, as one allocation (docs/transactions.md "Adopting
//! running work"). Converts the entries, calls the core, maps its errors.

use gangplace_core::{AdoptedPod, AdoptedPods, CoreError, MAX_GPUS_PER_NODE, Terms, TermsChange};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::cluster::Cluster;
use crate::cluster_args::{hold_id, owner as owner_name};
use crate::convert::{self, Movable, Preemptible, Priority};
use crate::errors::core_to_py;
use crate::types::{Allocation, PodPlacement};

/// Pods given to `adopt` at most (the gang limit bounds them anyway; this bounds the copy).
const MAX_ADOPTED_PODS: usize = 1 << 20;

#[pymethods]
impl Cluster {
    /// Records pods that already run as one allocation; no placement rule applies.
    ///
    /// For a scheduler that starts up and finds work bound to nodes (Kubernetes pods, Slurm
    /// ``GresUsed``). Each entry is a ``PodPlacement`` (exactly those GPUs) or a
    /// ``(node, count)`` pair (that many of the node's lowest-indexed free healthy GPUs).
    /// Every GPU must exist, be free and healthy, and be named once; cordoned nodes are
    /// accepted. The result is an ordinary allocation (release, snapshots, caps, owners,
    /// preemption), at the finest level whose one domain holds all of its nodes; priority,
    /// preemptible and movable default to 0, True and False.
    ///
    /// With ``into`` (docs/transactions.md "Adopting running work"), the pods join that live
    /// allocation instead, as new ranks after its others (ranked among themselves by rule
    /// 6; every earlier rank keeps its number), for a pod of a running gang that shows up
    /// later. Only an allocation placed without a request (``adopt``,
    /// ``reserve(placement)``) grows; ``owner`` is then the caller (as for ``release``) and
    /// the allocation keeps its owner; a priority or flag given replaces the allocation's,
    /// one left ``None`` keeps it.
    ///
    /// ``resources`` (docs/resources.md "Node resources"): what the pods use besides GPUs, one
    /// mapping for every pod or one per pod in the order given; each node must have them free. A
    /// ``(node, 0)`` entry is a pod without GPUs, adopted when it asks resources.
    ///
    /// ``gpu_milli`` (docs/resources.md "Fractions of a GPU"): each pod uses that many thousandths
    /// of one GPU (1 to 999), for pods sharing GPUs (time-slicing, MPS, Alibaba's
    /// ``gpu_milli``). Each entry is then a ``(node, 1)`` pair, whose GPU rule F2 chooses
    /// (the least room that holds the share, ties to the lowest index), or a
    /// ``PodPlacement`` of exactly one GPU, which must be healthy, held by no whole pod and
    /// have room. With ``into``, the pods of a fractional allocation give its share (an
    /// allocation has one share per pod).
    ///
    /// Raises:
    ///     Conflict: A GPU is held, unhealthy, named twice, or a node has too few free GPUs
    ///         for a count or too few free resources for its pods; for fractions, a GPU or
    ///         node without room for a share. Nothing changed.
    ///     UnknownNode: No node has an entry's name.
    ///     InvalidRequest: No pods, a GPU index or count out of range, a bad priority or
    ///         owner, ``into`` an allocation placed for a request, ``gpu_milli`` out of
    ///         range or other than ``into``'s share per pod (``None`` for whole GPUs), or a
    ///         fractional pod of other than one GPU.
    ///     LimitExceeded: The owner's cap.
    ///     ReservationError: ``into`` a reservation or an allocation that ended.
    ///     UnknownReservation: ``into`` an unknown id, or another owner's.
    #[pyo3(
        signature = (pods, *, owner = None, priority = None, preemptible = None, movable = None, into = None, resources = None, gpu_milli = None),
        text_signature = "(self, pods, *, owner=None, priority=None, preemptible=None, movable=None, into=None, resources=None, gpu_milli=None)"
    )]
    #[allow(clippy::too_many_arguments)] // the Python signature: keyword arguments
    fn adopt(
        &self,
        py: Python<'_>,
        pods: &Bound<'_, PyAny>,
        owner: Option<&Bound<'_, PyAny>>,
        priority: Option<Priority>,
        preemptible: Option<Preemptible>,
        movable: Option<Movable>,
        into: Option<&Bound<'_, PyAny>>,
        resources: Option<&Bound<'_, PyAny>>,
        gpu_milli: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Allocation> {
        let into = into.map(|value| hold_id(value, "into")).transpose()?;
        let pods = adopted_pods(pods)?;
        let asks = adopted_asks(resources, pods.len())?;
        let gpu_milli = (gpu_milli.map(|m| convert::int(m, "gpu_milli"))).transpose()?;
        let given = AdoptedPods {
            pods: &pods,
            asks: &asks,
            gpu_milli,
        };
        let owner = owner_name(owner)?;
        let change = TermsChange {
            priority: priority.map(|p| p.0),
            preemptible: preemptible.map(|p| p.0),
            movable: movable.map(|m| m.0),
        };
        let now = self.now(py)?;
        let inner = match into {
            Some(id) => self
                .run(|engine| Ok(engine.adopt_into(id, given, owner.as_deref(), change, now)?))?,
            None => {
                let terms = change.applied_to(Terms::default()).map_err(core_to_py)?;
                self.run(|engine| Ok(engine.adopt(given, owner.as_deref(), terms, now)?))?
            }
        };
        Ok(Allocation { inner })
    }
}

/// `resources`: one mapping for every pod, or a sequence of one mapping per pod (`None`:
/// the pods ask nothing besides GPUs).
fn adopted_asks(
    resources: Option<&Bound<'_, PyAny>>,
    pods: usize,
) -> PyResult<Vec<Vec<(String, i64)>>> {
    let Some(resources) = resources else {
        return Ok(Vec::new());
    };
    if resources.cast::<pyo3::types::PyMapping>().is_ok() {
        let one = convert::resource_mapping(resources, "resources")?;
        return Ok(vec![one; pods]);
    }
    if resources.is_instance_of::<pyo3::types::PyString>() {
        return Err(PyTypeError::new_err(
            "resources must be a mapping or a sequence of mappings, not a str",
        ));
    }
    let mut asks = Vec::new();
    for entry in resources.try_iter()? {
        asks.push(convert::resource_mapping(&entry?, "resources entries")?);
        if asks.len() > pods {
            break; // the core names the mismatch
        }
    }
    Ok(asks)
}

/// The entries: each a `PodPlacement`, or a `(node, count)` pair.
fn adopted_pods(pods: &Bound<'_, PyAny>) -> PyResult<Vec<AdoptedPod>> {
    if pods.is_instance_of::<pyo3::types::PyString>() {
        return Err(PyTypeError::new_err(
            "pods must be an iterable of PodPlacement or (node, count), not a str",
        ));
    }
    let mut adopted = Vec::new();
    for entry in pods.try_iter()? {
        let entry = entry?;
        if adopted.len() >= MAX_ADOPTED_PODS {
            return Err(core_to_py(CoreError::LimitExceeded(format!(
                "adopt takes at most {MAX_ADOPTED_PODS} pods"
            ))));
        }
        adopted.push(adopted_pod(&entry)?);
    }
    Ok(adopted)
}

fn adopted_pod(entry: &Bound<'_, PyAny>) -> PyResult<AdoptedPod> {
    if let Ok(pod) = entry.cast::<PodPlacement>() {
        let pod = &pod.get().inner;
        return Ok(AdoptedPod::Gpus {
            node: pod.node.to_string(),
            gpus: pod.gpus,
        });
    }
    let wrong = || {
        PyTypeError::new_err(format!(
            "each pod must be a PodPlacement or a (node, count) tuple, not {}",
            convert::type_name(entry)
        ))
    };
    let pair = entry.cast::<PyTuple>().map_err(|_| wrong())?;
    if pair.len() != 2 {
        return Err(wrong());
    }
    let node = convert::string(&pair.get_item(0)?, "node")?;
    let count = convert::int(&pair.get_item(1)?, "count")?;
    match u32::try_from(count) {
        Ok(count) if count <= MAX_GPUS_PER_NODE => Ok(AdoptedPod::Count { node, count }),
        _ => Err(core_to_py(CoreError::InvalidRequest(format!(
            "a pod on node {node:?} must take 0 to {MAX_GPUS_PER_NODE} GPUs, not {count}"
        )))),
    }
}
