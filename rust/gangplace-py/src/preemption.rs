//! Priority preemption in Python: `PreemptionPlan` and the `Cluster` methods that plan and
//! apply it (`plan_preemption`, `preempt`, `set_priority`, `hold_status`, `capacity_for`).

use std::sync::Arc;

use gangplace_core::{
    AnyRequest, DEFAULT_TTL_SECONDS, DefragOptions, DefragPlan as CoreDefrag, Held,
    Move as CoreMove, PreemptionPlan as CorePlan, RemovalLimits,
};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};

use crate::cluster::Cluster;
use crate::cluster_args::{hold_id, owner as owner_name};
use crate::convert;
use crate::errors::core_to_py;
use crate::types::{Allocation, GangRequest, Placement, Reservation, py_repr};

/// Moves at most, when `plan_defrag` is given no `max_moves`.
const DEFAULT_MAX_MOVES: usize = 16;
/// Lifetime of `apply_defrag`'s reservations when none is given: moved jobs restart from a
/// checkpoint before they commit.
const DEFAULT_DEFRAG_TTL: f64 = 300.0;

/// What ``Cluster.plan_preemption`` proposes: allocations to end, and where the gang goes.
#[pyclass(frozen, eq, module = "gangplace._gangplace")]
#[derive(Debug, Clone, PartialEq)]
pub struct PreemptionPlan {
    pub inner: CorePlan,
}

#[pymethods]
impl PreemptionPlan {
    /// The request planned for: a ``GangRequest`` or a ``MultiGangRequest``.
    #[getter]
    fn request<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        any_request_object(py, &self.inner.request)
    }

    /// Exactly what ``Cluster.preempt`` will hold.
    #[getter]
    fn placement(&self) -> Placement {
        Placement {
            inner: Arc::clone(&self.inner.placement),
        }
    }

    /// Ids of the allocations to end, sorted (empty when the gang fits as it is).
    #[getter]
    fn victims<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let ids = self.inner.victims.iter().map(|id| id.to_string());
        PyTuple::new(py, ids)
    }

    /// Whole GPUs the victims hold in total, healthy or not (a share counts none).
    #[getter]
    fn victim_gpus(&self) -> u64 {
        self.inner.victim_gpus
    }

    /// The highest victim priority; ``None`` without victims.
    #[getter]
    fn max_victim_priority(&self) -> Option<i32> {
        self.inner.max_victim_priority
    }

    /// Whether the victims came from ``plan_preemption(candidates=...)`` (P7).
    #[getter]
    fn chosen_victims(&self) -> bool {
        self.inner.chosen_victims
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let request = py_repr(py, self.request(py)?)?;
        Ok(format!(
            "PreemptionPlan(request={request}, victims={}, victim_gpus={}, \
             max_victim_priority={}, placement={})",
            py_repr(py, self.victims(py)?)?,
            self.inner.victim_gpus,
            py_repr(py, self.inner.max_victim_priority)?,
            py_repr(py, self.placement())?
        ))
    }
}

/// One move of a defragmentation: an allocation, where it is, where it goes.
#[pyclass(frozen, eq, module = "gangplace._gangplace")]
#[derive(Debug, Clone, PartialEq)]
pub struct Move {
    pub inner: CoreMove,
}

#[pymethods]
impl Move {
    /// Id of the allocation that moves.
    #[getter]
    fn allocation(&self) -> String {
        self.inner.allocation.to_string()
    }

    /// Where it is now.
    #[getter]
    fn source(&self) -> Placement {
        Placement {
            inner: Arc::clone(&self.inner.source),
        }
    }

    /// Where it goes.
    #[getter]
    fn target(&self) -> Placement {
        Placement {
            inner: Arc::clone(&self.inner.target),
        }
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Move(allocation={}, source={}, target={})",
            py_repr(py, self.allocation())?,
            py_repr(py, self.source())?,
            py_repr(py, self.target())?
        ))
    }
}

/// What ``Cluster.plan_defrag`` proposes: moves (and evictions) that make room.
#[pyclass(frozen, eq, module = "gangplace._gangplace")]
#[derive(Debug, Clone, PartialEq)]
pub struct DefragPlan {
    pub inner: CoreDefrag,
}

#[pymethods]
impl DefragPlan {
    /// The request planned for: a ``GangRequest`` or a ``MultiGangRequest``.
    #[getter]
    fn request<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        any_request_object(py, &self.inner.request)
    }

    /// Exactly what ``Cluster.apply_defrag`` will hold for the gang.
    #[getter]
    fn placement(&self) -> Placement {
        Placement {
            inner: Arc::clone(&self.inner.placement),
        }
    }

    /// Sorted by allocation id.
    #[getter]
    fn moves<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let moves = self.inner.moves.iter().map(|inner| Move {
            inner: inner.clone(),
        });
        PyTuple::new(py, moves)
    }

    /// Allocations preempted because they could not move (``evict_unplaceable``).
    #[getter]
    fn evictions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.inner.evictions.iter().map(|id| id.to_string()))
    }

    /// Whole GPUs the moved allocations hold in total (a share counts none).
    #[getter]
    fn moved_gpus(&self) -> u64 {
        self.inner.moved_gpus
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "DefragPlan(request={}, moves={}, evictions={}, moved_gpus={}, placement={})",
            py_repr(py, self.request(py)?)?,
            py_repr(py, self.moves(py)?)?,
            py_repr(py, self.evictions(py)?)?,
            self.inner.moved_gpus,
            py_repr(py, self.placement())?
        ))
    }
}

/// The removal limits of `plan_preemption` and `plan_defrag`.
pub fn removal_limits(
    max_members: Option<&Bound<'_, PyAny>>,
    what: &str,
    min_runtime: Option<&Bound<'_, PyAny>>,
    exempt_owners: Option<&Bound<'_, PyAny>>,
) -> PyResult<RemovalLimits> {
    let max_members = max_members
        .filter(|most| !most.is_none())
        .map(|most| convert::int(most, what))
        .transpose()?;
    let min_runtime = min_runtime.map_or(Ok(0.0), |m| convert::seconds(m, "min_runtime"))?;
    let exempt = exempt_owners.map_or(Ok(Vec::new()), |e| {
        convert::str_sequence(e, "exempt_owners")
    })?;
    RemovalLimits::new(max_members, min_runtime, exempt, what).map_err(core_to_py)
}

/// The ids of `what` (an iterable of allocations or ids); `None` when not given.
fn hold_ids(
    values: Option<&Bound<'_, PyAny>>,
    what: &str,
) -> PyResult<Option<Vec<gangplace_core::HoldId>>> {
    let Some(values) = values.filter(|values| !values.is_none()) else {
        return Ok(None);
    };
    if values.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be an iterable of allocations or ids, not a str"
        )));
    }
    let items = values.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be an iterable of allocations or ids, not {}",
            convert::type_name(values)
        ))
    })?;
    let each = format!("each of {what}");
    items
        .map(|item| hold_id(&item?, &each))
        .collect::<PyResult<Vec<_>>>()
        .map(Some)
}

/// A live hold as its Python object.
pub fn held(py: Python<'_>, held: Held) -> PyResult<Py<PyAny>> {
    Ok(match held {
        Held::Reservation(inner) => Reservation { inner }.into_pyobject(py)?.into_any().unbind(),
        Held::Allocation(inner) => Allocation { inner }.into_pyobject(py)?.into_any().unbind(),
    })
}

#[pymethods]
impl Cluster {
    /// Which allocations to end so that the gang fits, and where it then goes.
    ///
    /// A pure query (docs/preemption.md, rules P1-P6): a gang that fits as it is gets a plan
    /// without victims. Victims are whole live allocations, preemptible, of a strictly lower
    /// priority, committed at least ``min_runtime`` seconds ago, of owners not in
    /// ``exempt_owners``, not in ``exempt_allocations`` (allocations or ids; ids of no live
    /// allocation are ignored); the plan is 1-minimal among those, and the finest level that
    /// yields one wins. With ``candidates`` (rule P7), victims come only from those
    /// allocations, whatever their priority (the caller's policy chose them, as the
    /// Scheduler's queues do); the other filters still apply, and ``preempt`` accepts them.
    /// A ``MultiGangRequest`` is planned for as one unit: it fits a domain when every group
    /// and colocation succeeds there (docs/roles.md). A request asking
    /// resources besides GPUs counts them: victims give back their resources with their
    /// GPUs, and a job holding only resources can be one (docs/resources.md "Node resources").
    /// Shares count (docs/preemption.md P8): a fractional allocation may be a victim,
    /// giving back its shares (a shared GPU is free once all its shares are given back),
    /// and a fractional gang's pods count by the room of the GPUs; P4-P5 count what
    /// victims hold in thousandths of a GPU (for a ``MultiGangRequest`` too).
    ///
    /// Returns:
    ///     The plan, or ``None`` when no set within ``max_victims`` makes room.
    ///
    /// Raises:
    ///     InvalidRequest: Negative ``max_victims``, bad ``min_runtime``, or an unknown level.
    ///     UnknownReservation: A string in ``exempt_allocations`` or ``candidates`` that is
    ///         no hold id.
    #[pyo3(
        signature = (request, *, max_victims = None, min_runtime = None, exempt_owners = None, exempt_allocations = None, candidates = None),
        text_signature = "(self, request, *, max_victims=None, min_runtime=0.0, exempt_owners=(), exempt_allocations=(), candidates=None)"
    )]
    #[allow(clippy::too_many_arguments)] // the documented signature of plan_preemption
    fn plan_preemption(
        &self,
        py: Python<'_>,
        request: &Bound<'_, PyAny>,
        max_victims: Option<&Bound<'_, PyAny>>,
        min_runtime: Option<&Bound<'_, PyAny>>,
        exempt_owners: Option<&Bound<'_, PyAny>>,
        exempt_allocations: Option<&Bound<'_, PyAny>>,
        candidates: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<PreemptionPlan>> {
        let request = crate::roles::any_request(request, "request")?;
        let limits = removal_limits(max_victims, "max_victims", min_runtime, exempt_owners)?;
        let exempt = hold_ids(exempt_allocations, "exempt_allocations")?.unwrap_or_default();
        let limits = limits
            .with_exempt_holds(exempt)
            .with_only_holds(hold_ids(candidates, "candidates")?);
        let now = self.now(py)?;
        let plan = self.run_detached(py, |engine| {
            Ok(match &request {
                AnyRequest::Gang(request) => engine.plan_preemption(request, &limits, now)?,
                AnyRequest::Roles(request) => {
                    engine.plan_preemption_roles(request, &limits, now)?
                }
            })
        })?;
        Ok(plan.map(|inner| PreemptionPlan { inner }))
    }

    /// Ends the plan's victims and reserves its placement, in one atomic mutation.
    ///
    /// The reservation carries the request's priority and flags. The victims'
    /// ``hold_status`` becomes ``"preempted"``; releasing them returns ``False``. The caller
    /// stops their pods before binding; the ttl covers their grace period.
    ///
    /// Raises:
    ///     Conflict: Anything moved since the plan (a victim ended or changed priority, a
    ///         GPU of the placement was taken, a node was cordoned or removed). Nothing
    ///         changed.
    ///     LimitExceeded: The owner's cap.
    #[pyo3(
        signature = (plan, *, ttl = None, owner = None),
        text_signature = "(self, plan, *, ttl=30.0, owner=None)"
    )]
    fn preempt(
        &self,
        py: Python<'_>,
        plan: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        owner: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Reservation> {
        let plan = plan.cast::<PreemptionPlan>().map_err(|_| {
            PyTypeError::new_err(format!(
                "plan must be a PreemptionPlan, not {}",
                convert::type_name(plan)
            ))
        })?;
        let plan = plan.get().inner.clone();
        let ttl = ttl.map_or(Ok(DEFAULT_TTL_SECONDS), |t| convert::seconds(t, "ttl"))?;
        let owner = owner_name(owner)?;
        let now = self.now(py)?;
        let inner = self.run_detached(py, |engine| {
            Ok(engine.preempt(&plan, ttl, owner.as_deref(), now)?)
        })?;
        Ok(Reservation { inner })
    }

    /// Changes a live hold's priority; returns the hold as it is now.
    ///
    /// Raises:
    ///     UnknownReservation: Unknown id (or another owner's).
    ///     ReservationError: The hold has ended.
    ///     InvalidRequest: ``priority`` out of -2**31..2**31-1.
    #[pyo3(signature = (hold, priority, *, owner = None))]
    fn set_priority(
        &self,
        py: Python<'_>,
        hold: &Bound<'_, PyAny>,
        priority: &Bound<'_, PyAny>,
        owner: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let id = hold_id(hold, "hold")?;
        let priority = convert::int(priority, "priority")?;
        let owner = owner_name(owner)?;
        let now = self.now(py)?;
        let changed =
            self.run(|engine| Ok(engine.set_priority(id, priority, owner.as_deref(), now)?))?;
        held(py, changed)
    }

    /// ``"reserved"``, ``"allocated"``, or how the hold ended.
    ///
    /// Endings: ``"released"``, ``"rolled-back"``, ``"expired"``, ``"revoked"``,
    /// ``"preempted"``, ``"migrated"``, ``"merged"`` (a repair reservation after
    /// ``commit_repair``). Snapshots keep them.
    ///
    /// Raises:
    ///     UnknownReservation: Unknown id, another owner's, or ended too long ago.
    #[pyo3(signature = (hold, *, owner = None))]
    fn hold_status(
        &self,
        py: Python<'_>,
        hold: &Bound<'_, PyAny>,
        owner: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyString>> {
        let id = hold_id(hold, "hold")?;
        let owner = owner_name(owner)?;
        let now = self.now(py)?;
        let status = self.run(|engine| Ok(engine.hold_status(id, owner.as_deref(), now)?))?;
        Ok(PyString::intern(py, status).unbind())
    }

    /// Which movable jobs to move where so that the gang fits (docs/preemption.md, rules D1-D4).
    ///
    /// A pure query. Candidates are movable allocations of a priority at most the
    /// request's; a set is chosen per domain as for preemption and accepted only if every
    /// member can be placed again outside the gang's domain by its own request (biggest
    /// first, best-fit sends them to the fullest domains), never at a coarser level than it
    /// has unless ``allow_downgrade``. With ``evict_unplaceable`` a member that cannot move
    /// is preempted instead, if it is a preemption candidate. A ``MultiGangRequest`` is
    /// planned for as one unit (docs/roles.md). Shares
    /// count (docs/preemption.md D5): a fractional gang is placed by the room of the GPUs,
    /// and a fractional allocation may move, keeping its share (its GPUs' room given back,
    /// its new pods placed by rules F1-F2); sets and moves are ranked in thousandths of a
    /// GPU; ``moved_gpus`` counts whole GPUs.
    ///
    /// Returns:
    ///     The plan (no moves when the gang fits), or ``None``.
    #[pyo3(
        signature = (
            request, *, max_moves = None, allow_downgrade = None, evict_unplaceable = None,
            min_runtime = None, exempt_owners = None
        ),
        text_signature = "(self, request, *, max_moves=16, allow_downgrade=False, evict_unplaceable=False, min_runtime=0.0, exempt_owners=())"
    )]
    #[allow(clippy::too_many_arguments)] // the documented signature of plan_defrag
    fn plan_defrag(
        &self,
        py: Python<'_>,
        request: &Bound<'_, PyAny>,
        max_moves: Option<&Bound<'_, PyAny>>,
        allow_downgrade: Option<&Bound<'_, PyAny>>,
        evict_unplaceable: Option<&Bound<'_, PyAny>>,
        min_runtime: Option<&Bound<'_, PyAny>>,
        exempt_owners: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<DefragPlan>> {
        let request = crate::roles::any_request(request, "request")?;
        let mut limits = removal_limits(max_moves, "max_moves", min_runtime, exempt_owners)?;
        if max_moves.is_none() {
            limits.max_members = Some(DEFAULT_MAX_MOVES);
        }
        let flag = |value: Option<&Bound<'_, PyAny>>, what| {
            value.map_or(Ok(false), |v| convert::boolean(v, what))
        };
        let options = DefragOptions {
            allow_downgrade: flag(allow_downgrade, "allow_downgrade")?,
            evict_unplaceable: flag(evict_unplaceable, "evict_unplaceable")?,
        };
        let now = self.now(py)?;
        let plan = self.run_detached(py, |engine| {
            Ok(match &request {
                AnyRequest::Gang(request) => engine.plan_defrag(request, &limits, options, now)?,
                AnyRequest::Roles(request) => {
                    engine.plan_defrag_roles(request, &limits, options, now)?
                }
            })
        })?;
        Ok(plan.map(|inner| DefragPlan { inner }))
    }

    /// Moves and evicts in one atomic mutation.
    ///
    /// Returns the gang's reservation and, per moved allocation id, its new reservation
    /// (same owner, priority and flags). Moved allocations end as ``"migrated"``, evicted
    /// ones as ``"preempted"``. A moved job that does not commit its new reservation before
    /// its ttl loses it: it has then in effect been preempted.
    ///
    /// Raises:
    ///     Conflict: Anything moved since the plan. Nothing changed.
    ///     LimitExceeded: The owner's cap (for the gang's reservation).
    #[pyo3(
        signature = (plan, *, ttl = None, owner = None),
        text_signature = "(self, plan, *, ttl=300.0, owner=None)"
    )]
    fn apply_defrag<'py>(
        &self,
        py: Python<'py>,
        plan: &Bound<'py, PyAny>,
        ttl: Option<&Bound<'py, PyAny>>,
        owner: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<(Reservation, Bound<'py, PyDict>)> {
        let plan = plan.cast::<DefragPlan>().map_err(|_| {
            PyTypeError::new_err(format!(
                "plan must be a DefragPlan, not {}",
                convert::type_name(plan)
            ))
        })?;
        let plan = plan.get().inner.clone();
        let ttl = ttl.map_or(Ok(DEFAULT_DEFRAG_TTL), |t| convert::seconds(t, "ttl"))?;
        let owner = owner_name(owner)?;
        let now = self.now(py)?;
        let (gang, moved) = self.run_detached(py, |engine| {
            Ok(engine.apply_defrag(&plan, ttl, owner.as_deref(), now)?)
        })?;
        let moves = PyDict::new(py);
        for (old, inner) in moved {
            moves.set_item(old.to_string(), Reservation { inner })?;
        }
        Ok((Reservation { inner: gang }, moves))
    }

    /// How many disjoint copies of ``request`` ``reserve_many`` would place now.
    ///
    /// The fragmentation figure to track before and after a decision (owner caps aside).
    /// Costs one placement per copy. A ``MultiGangRequest`` counts whole units.
    fn capacity_for(&self, py: Python<'_>, request: &Bound<'_, PyAny>) -> PyResult<u64> {
        let request = crate::roles::any_request(request, "request")?;
        let now = self.now(py)?;
        Ok(self.run_detached(py, |engine| {
            Ok(match &request {
                AnyRequest::Gang(request) => engine.capacity_for(request, now)?,
                AnyRequest::Roles(request) => engine.capacity_for_roles(request, now)?,
            })
        })?)
    }
}

/// A request of either kind as its Python object.
fn any_request_object<'py>(py: Python<'py>, request: &AnyRequest) -> PyResult<Bound<'py, PyAny>> {
    match request {
        AnyRequest::Gang(inner) => {
            let inner = Arc::clone(inner);
            Ok(Bound::new(py, GangRequest { inner })?.into_any())
        }
        AnyRequest::Roles(inner) => {
            let inner = Arc::clone(inner);
            Ok(Bound::new(py, crate::roles::MultiGangRequest { inner })?.into_any())
        }
    }
}
