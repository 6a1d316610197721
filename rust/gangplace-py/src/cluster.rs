//! `Cluster`: the one mutable object. A frozen pyclass over a `Mutex<Engine>`: no `&mut self`
//! method, so no thread can ever meet a borrow error. The lock is only ever taken by pure
//! Rust code that never calls back into Python, and the clock is read before it is taken.
//! Searches (`place_gang`, `reserve`) run with the GIL released.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use gangplace_core::{Engine, HoldId, NodeSpec, NodeUpdate};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyString, PyTuple};

use crate::arrays;
use crate::cluster_args::{default_clock, hold_id, new_engine, owner as owner_name};
use crate::convert;
use crate::errors::{CallError, InvalidRequest, contain};
use crate::nodes::{ClusterStats, NodeInfo};
use crate::types::{Allocation, Reservation};

fn ids(ids: Vec<HoldId>) -> Vec<String> {
    ids.into_iter().map(|id| id.to_string()).collect()
}

/// A GPU cluster: its topology, the health of every GPU, and the holds on them.
///
/// Safe to share between threads: every method is atomic. Searches run without the GIL.
///
/// Args:
///     levels: Topology level names, outermost first, e.g. ``("spine", "rack")``; may be
///         empty. ``node`` (finest) and ``cluster`` (root) are implicit and may not be named.
///     policy: ``"best-fit"`` (default), ``"first-fit"``, or ``"best-fit-path"`` (best-fit
///         with ties broken by path alone, the rule before the ancestor tie-break; kept to
///         measure it).
///     clock: Zero-argument callable returning seconds (default ``time.monotonic``); used
///         only for reservation lifetimes.
///     max_held_gpus_per_owner: Cap on the GPUs one owner may hold at once (reserved plus
///         allocated); reservations made without an owner share one cap. ``None``: no cap.
///     max_level: No placement spans more than one domain of this level (fabrics that
///         never join, such as Slurm switch trees without a common top); ``"node"``, a
///         level name, or ``None``/``"cluster"``: no bound. Kept in snapshots.
///
/// Raises:
///     InvalidRequest: Bad levels, policy, cap or max_level.
#[pyclass(frozen, module = "gangplace._gangplace")]
#[derive(Debug)]
pub struct Cluster {
    engine: Mutex<Engine>,
    failed: AtomicBool,
    clock: Py<PyAny>,
    /// A copy of the engine's immutable configuration, so its getters need not take the lock.
    config: gangplace_core::EngineConfig,
}

impl Cluster {
    pub(crate) fn wrap(engine: Engine, clock: Py<PyAny>) -> Self {
        Self {
            config: engine.config().clone(),
            engine: Mutex::new(engine),
            failed: AtomicBool::new(false),
            clock,
        }
    }

    /// Reads the clock. Called before the lock is taken: Python code never runs under it.
    /// The clock callable (for copies).
    pub(crate) fn clock_object<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        self.clock.bind(py).clone()
    }

    pub(crate) fn now(&self, py: Python<'_>) -> PyResult<f64> {
        let reading = self.clock.bind(py).call0()?;
        let now = convert::seconds(&reading, "the clock's reading")?;
        if !now.is_finite() {
            return Err(InvalidRequest::new_err(format!("the clock returned {now}")));
        }
        Ok(now)
    }

    /// Runs `call` on the engine, containing panics (the cluster then fails closed).
    pub(crate) fn run<T>(
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
    pub(crate) fn run_detached<T: Send>(
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
    #[pyo3(
        text_signature = "(levels, *, policy='best-fit', clock=None, max_held_gpus_per_owner=None, max_level=None)"
    )]
    #[pyo3(signature = (levels, *, policy = None, clock = None, max_held_gpus_per_owner = None, max_level = None))]
    fn new(
        py: Python<'_>,
        levels: &Bound<'_, PyAny>,
        policy: Option<&Bound<'_, PyAny>>,
        clock: Option<Bound<'_, PyAny>>,
        max_held_gpus_per_owner: Option<&Bound<'_, PyAny>>,
        max_level: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let cap = max_held_gpus_per_owner;
        let (engine, clock) = new_engine(py, levels, policy, clock, cap, max_level)?;
        Ok(Self::wrap(engine, clock))
    }

    /// Per-node GPU state as numpy arrays, nodes in name order: one read for a picture.
    ///
    /// Keys: ``node`` (names), ``gpus``, ``free``, ``reserved``, ``allocated``,
    /// ``unhealthy`` (uint8 counts), ``cordoned`` (bool), ``free_mask``, ``reserved_mask``,
    /// ``allocated_mask``, ``unhealthy_mask``, ``shared_mask`` (uint64, bit i: GPU i; a
    /// shared GPU, docs/resources.md "Fractions of a GPU", is in none of the other masks),
    /// ``domains``: a dict of level name -> the domain name of every node at that level, and
    /// ``resources`` / ``free_resources``: dicts of resource name -> every node's capacity /
    /// unused amount (uint64; 0 where a node lacks it; docs/resources.md "Node resources").
    fn gpu_state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let now = self.now(py)?;
        let state = self.run_detached(py, |engine| Ok(engine.gpu_state(now)))?;
        arrays::gpu_state_dict(py, self.config.levels(), state)
    }

    /// Rebuilds a cluster from ``snapshot()`` bytes.
    ///
    /// Reservations keep their remaining lifetimes: each deadline moves by the difference
    /// between ``clock()`` now and the snapshot's clock reading. The restored cluster answers
    /// every query and operation as the original did.
    ///
    /// Raises:
    ///     InvalidSnapshot: Truncated, corrupted, foreign or inconsistent bytes; no cluster
    ///         is built.
    ///     TypeError: ``data`` is not bytes.
    #[staticmethod]
    #[pyo3(signature = (data, *, clock = None))]
    fn restore(
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        clock: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let bytes: Vec<u8> = if let Ok(bytes) = data.cast::<PyBytes>() {
            bytes.as_bytes().to_vec()
        } else if let Ok(array) = data.cast::<PyByteArray>() {
            array.to_vec()
        } else {
            return Err(PyTypeError::new_err(format!(
                "data must be bytes from Cluster.snapshot(), not {}",
                convert::type_name(data)
            )));
        };
        let clock = default_clock(py, clock)?;
        let now = convert::seconds(&clock.bind(py).call0()?, "the clock's reading")?;
        let engine = py.detach(|| contain(|| Ok(Engine::restore(&bytes, now)?)))?;
        Ok(Self::wrap(engine, clock))
    }

    /// The whole state as versioned, checksummed bytes.
    ///
    /// Levels, policy, cap, nodes, labels, health, cordons, reservations with their
    /// remaining lifetimes, allocations, owners, and the remembered ended ids. Equal states
    /// give equal bytes.
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let now = self.now(py)?;
        let bytes = self.run_detached(py, |engine| Ok(engine.snapshot(now)?))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// The cap on GPUs one owner may hold at once; ``None``: no cap.
    #[getter]
    fn max_held_gpus_per_owner(&self) -> Option<u64> {
        self.config.max_held_gpus_per_owner()
    }

    /// No placement spans more than one domain of this level; ``None``: no bound.
    #[getter]
    fn max_level(&self) -> Option<&str> {
        self.config.max_level()
    }

    /// Level names, outermost first.
    #[getter]
    fn levels<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.config.levels())
    }

    /// ``"best-fit"``, ``"first-fit"`` or ``"best-fit-path"``.
    #[getter]
    fn policy(&self) -> &'static str {
        self.config.policy().as_str()
    }

    /// Adds a node with ``gpus`` GPUs (1..64) under the domains ``topology`` names.
    ///
    /// Args:
    ///     name: Unique, non-empty.
    ///     gpus: Number of GPUs, 1..64; 0 for a node offering only ``resources`` (every
    ///         GPU partitioned into MIG slices).
    ///     topology: Every level -> its domain name, and no other keys.
    ///     labels: Labels selectors match against.
    ///     unhealthy: GPU indices that must never be placed on.
    ///     gpu_topology: Its GPU groups (a ``gangplace.NodeTopology``: NUMA sockets, PCIe
    ///         switches); pods then take the GPUs of the tightest finest group that holds
    ///         them (docs/shapes.md "Inside a node").
    ///     resources: Resources besides GPUs, name -> integer quantity in base units
    ///         (``"cpu"`` in millicores, ``"memory"`` in bytes, any other name in units;
    ///         docs/resources.md "Node resources"): 0..2**50 each, at most 32 names, not
    ///         ``"nvidia.com/gpu"`` (GPUs are ``gpus``).
    ///     taints: ``(key, value, effect)`` tuples, effect ``"NoSchedule"``,
    ///         ``"PreferNoSchedule"`` or ``"NoExecute"`` (at most 32): a request that does
    ///         not tolerate a ``NoSchedule`` or ``NoExecute`` taint never uses the node
    ///         (docs/placement.md, rule 1).
    ///
    /// Raises:
    ///     InvalidRequest: Duplicate or empty names, missing or extra levels, out-of-range
    ///         counts, indices or quantities, a GPU topology of another GPU count. The
    ///         cluster is left exactly as it was.
    ///     LimitExceeded: The cluster already has 4,194,304 nodes.
    #[pyo3(signature = (name, *, gpus, topology, labels = None, unhealthy = None, gpu_topology = None, resources = None, taints = None))]
    #[allow(clippy::too_many_arguments)] // the Python signature: keyword arguments
    fn add_node(
        &self,
        name: &Bound<'_, PyAny>,
        gpus: &Bound<'_, PyAny>,
        topology: &Bound<'_, PyAny>,
        labels: Option<&Bound<'_, PyAny>>,
        unhealthy: Option<&Bound<'_, PyAny>>,
        gpu_topology: Option<&Bound<'_, PyAny>>,
        resources: Option<&Bound<'_, PyAny>>,
        taints: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let spec = NodeSpec {
            name: convert::string(name, "name")?,
            gpus: convert::int(gpus, "gpus")?,
            topology: convert::str_mapping(topology, "topology")?,
            labels: labels.map_or(Ok(Vec::new()), |l| convert::str_mapping(l, "labels"))?,
            unhealthy: unhealthy
                .map_or(Ok(Vec::new()), |u| convert::int_sequence(u, "unhealthy"))?,
            gpu_topology: gpu_topology.map(convert::gpu_topology).transpose()?,
            resources: (resources.map(|r| convert::resource_mapping(r, "resources")))
                .transpose()?
                .unwrap_or_default(),
            taints: taints
                .map(crate::filters::taints)
                .transpose()?
                .unwrap_or_default(),
        };
        Ok(self.run(|engine| Ok(engine.add_node(spec)?))?)
    }

    /// Marks one GPU healthy or unhealthy.
    ///
    /// A reservation holding a GPU that turns unhealthy is revoked whole (all its GPUs are
    /// freed; ``commit`` raises ``ReservationRevoked``). An allocation stays; after its
    /// release the GPU stays out of the pool while unhealthy.
    ///
    /// Returns:
    ///     The ids of the reservations and allocations that hold that GPU, sorted, whether
    ///     it is marked healthy or unhealthy.
    ///
    /// Raises:
    ///     UnknownNode: No such node.
    ///     InvalidRequest: ``gpu`` out of range.
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
        let holders = self.run(|engine| Ok(engine.set_gpu_health(&node, gpu, healthy, now)?))?;
        Ok(ids(holders))
    }

    /// No new placements on ``node``; its reservations and allocations stay valid.
    fn cordon(&self, py: Python<'_>, node: &Bound<'_, PyAny>) -> PyResult<()> {
        let node = convert::string(node, "node")?;
        let now = self.now(py)?;
        Ok(self.run(|engine| Ok(engine.set_cordoned(&node, true, now)?))?)
    }

    /// Undoes ``cordon``.
    fn uncordon(&self, py: Python<'_>, node: &Bound<'_, PyAny>) -> PyResult<()> {
        let node = convert::string(node, "node")?;
        let now = self.now(py)?;
        Ok(self.run(|engine| Ok(engine.set_cordoned(&node, false, now)?))?)
    }

    /// The node's state. Raises ``UnknownNode`` (a ``KeyError``).
    fn node(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<NodeInfo> {
        let name = convert::string(name, "name")?;
        let now = self.now(py)?;
        let inner = self.run(|engine| Ok(engine.node_info(&name, now)?))?;
        Ok(NodeInfo { inner })
    }

    /// All node names, sorted.
    fn nodes(&self) -> PyResult<Vec<String>> {
        Ok(self.run(|engine| Ok(engine.node_names()))?)
    }

    /// GPU counts over the cluster.
    fn stats(&self, py: Python<'_>) -> PyResult<ClusterStats> {
        let now = self.now(py)?;
        let inner = self.run(|engine| Ok(engine.stats(now)))?;
        Ok(ClusterStats { inner })
    }

    /// Turns a reservation into an allocation. Idempotent.
    ///
    /// Raises:
    ///     ReservationExpired: Its lifetime ran out.
    ///     ReservationRevoked: One of its GPUs became unhealthy or its node was removed.
    ///     UnknownReservation: No such id, or it belongs to another owner.
    ///     ReservationError: It was rolled back or released.
    #[pyo3(signature = (reservation, *, owner = None))]
    fn commit(
        &self,
        py: Python<'_>,
        reservation: &Bound<'_, PyAny>,
        owner: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Allocation> {
        let id = hold_id(reservation, "reservation")?;
        let owner = owner_name(owner)?;
        let now = self.now(py)?;
        let inner = self.run(|engine| Ok(engine.commit(id, owner.as_deref(), now)?))?;
        Ok(Allocation { inner })
    }

    /// Frees a reservation, restoring every node exactly.
    ///
    /// Returns:
    ///     True if it freed something; False if it had already expired, been revoked or
    ///     rolled back.
    ///
    /// Raises:
    ///     ReservationError: It was committed (release the allocation instead).
    ///     UnknownReservation: No such id, or it belongs to another owner.
    #[pyo3(signature = (reservation, *, owner = None))]
    fn rollback(
        &self,
        py: Python<'_>,
        reservation: &Bound<'_, PyAny>,
        owner: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let id = hold_id(reservation, "reservation")?;
        let owner = owner_name(owner)?;
        let now = self.now(py)?;
        Ok(self.run(|engine| Ok(engine.rollback(id, owner.as_deref(), now)?))?)
    }

    /// Frees an allocation.
    ///
    /// Returns:
    ///     True the first time, False after.
    ///
    /// Raises:
    ///     ReservationError: The id was never committed.
    ///     UnknownReservation: No such id, or it belongs to another owner.
    #[pyo3(signature = (allocation, *, owner = None))]
    fn release(
        &self,
        py: Python<'_>,
        allocation: &Bound<'_, PyAny>,
        owner: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let id = hold_id(allocation, "allocation")?;
        let owner = owner_name(owner)?;
        let now = self.now(py)?;
        Ok(self.run(|engine| Ok(engine.release(id, owner.as_deref(), now)?))?)
    }

    /// Live reservations, sorted by id; only ``owner``'s when given, else all.
    #[pyo3(signature = (owner = None))]
    fn reservations(
        &self,
        py: Python<'_>,
        owner: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<Reservation>> {
        let owner = owner_name(owner)?;
        let now = self.now(py)?;
        let all = self.run(|engine| Ok(engine.reservations(owner.as_deref(), now)))?;
        Ok(all.into_iter().map(|inner| Reservation { inner }).collect())
    }

    /// Live allocations, sorted by id; only ``owner``'s when given, else all.
    ///
    /// With ``lost=True``, only those with lost ranks (docs/repair.md "Repair after failures"):
    /// the others are skipped inside the engine, so a scheduler finds its damaged jobs
    /// each cycle without reading every allocation.
    #[pyo3(signature = (owner = None, *, lost = false))]
    fn allocations(
        &self,
        py: Python<'_>,
        owner: Option<&Bound<'_, PyAny>>,
        lost: bool,
    ) -> PyResult<Vec<Allocation>> {
        let owner = owner_name(owner)?;
        let now = self.now(py)?;
        let all = self.run(|engine| Ok(engine.allocations(owner.as_deref(), lost, now)))?;
        Ok(all.into_iter().map(|inner| Allocation { inner }).collect())
    }

    /// Removes a node, as a node failure would.
    ///
    /// Every reservation touching the node is revoked (all its GPUs are freed, ``commit``
    /// raises ``ReservationRevoked``). Allocations touching it lose the GPUs there and stay
    /// until released; ``release`` still works.
    ///
    /// Returns:
    ///     The ids of every hold that had GPUs (or, for pods without GPUs, resources) on the
    ///     node, sorted: the reservations it revoked and the allocations it detached (as
    ///     ``set_gpu_health`` names the holds of a GPU). ``reservations()`` and
    ///     ``allocations()`` tell them apart.
    ///
    /// Raises:
    ///     UnknownNode: No such node.
    fn remove_node(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
        let name = convert::string(name, "name")?;
        let now = self.now(py)?;
        let holders = self.run(|engine| Ok(engine.remove_node(&name, now)?))?;
        Ok(ids(holders))
    }

    /// Updates a node in place (docs/transactions.md "Node updates", N1-N3).
    ///
    /// ``labels`` and ``taints`` replace every label or taint of the node, at any time
    /// (selector pools follow; holds already on the node stay).
    /// ``topology``, ``gpus`` and ``gpu_topology`` change only while no reservation or
    /// allocation holds a GPU of the node; a value equal to the current one is no change.
    /// The node keeps its cordon and its unhealthy GPUs (those past a smaller count are
    /// dropped).
    ///
    /// Args:
    ///     name: The node.
    ///     labels: Every label, replacing the old ones; ``None``: unchanged.
    ///     topology: Every level -> its domain name; ``None``: unchanged.
    ///     gpus: The GPU count, 1..64 (0 with resources); ``None``: unchanged.
    ///     gpu_topology: Its GPU groups; ``None``: unchanged (a node with groups that
    ///         changes its GPU count needs new groups).
    ///     resources: Every resource besides GPUs, replacing the old ones, at any time
    ///         (pods already holding more than a smaller capacity keep it; the node is full
    ///         for that resource until they end); ``None``: unchanged.
    ///     taints: Every taint, replacing the old ones (as ``add_node``); ``None``:
    ///         unchanged.
    ///
    /// Raises:
    ///     UnknownNode: No such node.
    ///     Conflict: A change of topology, GPU count or groups while holds sit on the node.
    ///     InvalidRequest: Bad names, levels, counts or groups (as ``add_node``).
    ///
    /// On any error the cluster is left exactly as it was.
    #[pyo3(signature = (name, *, labels = None, topology = None, gpus = None, gpu_topology = None, resources = None, taints = None))]
    #[allow(clippy::too_many_arguments)] // the Python signature: keyword arguments
    fn update_node(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
        labels: Option<&Bound<'_, PyAny>>,
        topology: Option<&Bound<'_, PyAny>>,
        gpus: Option<&Bound<'_, PyAny>>,
        gpu_topology: Option<&Bound<'_, PyAny>>,
        resources: Option<&Bound<'_, PyAny>>,
        taints: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let name = convert::string(name, "name")?;
        let update = NodeUpdate {
            labels: labels
                .map(|l| convert::str_mapping(l, "labels"))
                .transpose()?,
            topology: topology
                .map(|t| convert::str_mapping(t, "topology"))
                .transpose()?,
            gpus: gpus.map(|g| convert::int(g, "gpus")).transpose()?,
            gpu_topology: gpu_topology.map(convert::gpu_topology).transpose()?,
            resources: (resources.map(|r| convert::resource_mapping(r, "resources")))
                .transpose()?,
            taints: match taints.map(crate::filters::taints).transpose() {
                Ok(taints) => taints,
                // As for labels, an unknown node is named before a bad taint value.
                Err(err) if !err.is_instance_of::<PyTypeError>(py) => {
                    self.run(|engine| Ok(engine.known_node(&name)?))?;
                    return Err(err);
                }
                Err(err) => return Err(err),
            },
        };
        let now = self.now(py)?;
        Ok(self.run(|engine| Ok(engine.update_node(&name, update, now)?))?)
    }

    /// Testing only (built with the `testing` feature): arms the failpoint that panics
    /// half-way through the next mutation.
    #[cfg(feature = "testing")]
    fn _set_failpoint(&self, armed: &Bound<'_, PyAny>) -> PyResult<()> {
        let armed = convert::boolean(armed, "armed")?;
        Ok(self.run(|engine| {
            engine.set_failpoint(armed);
            Ok(())
        })?)
    }

    /// Testing only (built with the `testing` feature): ids count up from `start`.
    #[cfg(feature = "testing")]
    fn _use_sequential_ids(&self, start: u128) -> PyResult<()> {
        Ok(self.run(|engine| {
            engine.set_sequential_ids(Some(start));
            Ok(())
        })?)
    }

    /// Recomputes every aggregate and cross-checks holds.
    ///
    /// Raises:
    ///     InternalError: On any mismatch (a bug in gangplace).
    fn check_invariants(&self) -> PyResult<()> {
        Ok(self.run(|engine| Ok(engine.check_invariants()?))?)
    }

    fn __len__(&self) -> PyResult<usize> {
        Ok(self.run(|engine| Ok(engine.topology().node_count()))?)
    }

    /// ``"n0" in cluster``: whether a node has that name (``False`` for anything not a str).
    fn __contains__(&self, name: &Bound<'_, PyAny>) -> PyResult<bool> {
        let Ok(name) = name.extract::<String>() else {
            return Ok(false);
        };
        Ok(self.run(|engine| Ok(engine.topology().node_id(&name).is_some()))?)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let nodes = self
            .run(|engine| Ok(engine.topology().node_count()))
            .map_or_else(|_| "?".to_owned(), |n| n.to_string());
        let levels = PyTuple::new(py, self.config.levels())?.repr()?;
        let policy = PyString::new(py, self.config.policy().as_str()).repr()?;
        Ok(format!(
            "Cluster(levels={levels}, policy={policy}, nodes={nodes})"
        ))
    }
}
