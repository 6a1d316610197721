//! Repair after failures in Python: `RepairPlan` and the `Cluster` methods `plan_repair`,
//! `explain_repair`, `repair` and `commit_repair` (docs/repair.md "Repair after failures").

use gangplace_core::RepairPlan as CorePlan;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::cluster::Cluster;
use crate::cluster_args::{hold_id, owner as owner_name};
use crate::convert;
use crate::types::{Allocation, PodPlacement, Reservation, py_repr};

/// What ``Cluster.plan_repair`` proposes: where each lost rank of an allocation goes.
#[pyclass(frozen, eq, module = "gangplace._gangplace")]
#[derive(Debug, Clone, PartialEq)]
pub struct RepairPlan {
    pub inner: CorePlan,
}

#[pymethods]
impl RepairPlan {
    /// Id of the allocation repaired.
    #[getter]
    fn allocation(&self) -> String {
        self.inner.allocation.to_string()
    }

    /// Its lost ranks when planned, sorted; every one is repaired.
    #[getter]
    fn lost<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.inner.lost)
    }

    /// ``(rank, PodPlacement)`` for every lost rank, in rank order.
    #[getter]
    fn replacements<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let pairs = self.inner.replacements.iter().map(|(rank, pod)| {
            let pod = PodPlacement { inner: pod.clone() };
            (*rank, pod)
        });
        PyTuple::new(py, pairs)
    }

    /// Ranks the allocation's own spares take (their replacements are those spares).
    #[getter]
    #[allow(clippy::wrong_self_convention)] // the attribute's name in docs/repair.md's contract
    fn from_spares<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.inner.from_spares)
    }

    /// Level of the domain searched: the placement's, or the enclosing one when widened.
    #[getter]
    fn level(&self) -> &str {
        &self.inner.level
    }

    /// That domain's path (plus the node name at level ``node``; empty for the cluster).
    #[getter]
    fn domain<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.inner.domain)
    }

    /// Ids of the allocations ``repair`` ends to make room (rule R6), sorted.
    #[getter]
    fn victims<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.inner.victims.iter().map(ToString::to_string))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "RepairPlan(allocation={}, replacements={}, level={}, domain={})",
            py_repr(py, self.allocation())?,
            py_repr(py, self.replacements(py)?)?,
            py_repr(py, self.level())?,
            py_repr(py, self.domain(py)?)?
        ))
    }
}

#[pymethods]
impl Cluster {
    /// Where the lost ranks of an allocation go: all of them, or ``None``.
    ///
    /// A pure query (docs/repair.md "Repair after failures", rules R1-R3, R6). Lost ranks take the
    /// allocation's spares first; then a slice gang's (or a sliced group's) go to free
    /// healthy GPUs in their own innermost slice's domain; other gangs' to the placement's
    /// domain, or with ``widen`` to the smallest enclosing domain, up to the request's
    /// coarsest level, where all fit. With
    /// ``preempt``, when nothing else fits, the fewest lower-priority preemptible allocations
    /// inside the placement's domain become ``victims`` (ended by ``repair``). Pods follow
    /// the placement rules and are counted by the nodes' free resources too when they ask
    /// some (docs/resources.md "Node resources"; victims give theirs back); ranks keep their
    /// numbers. Without lost ranks, a plan with no replacements. A fractional allocation's
    /// lost ranks get pods of its share by rules F1-F2 (docs/repair.md R7); victims may be
    /// fractional allocations, their shares given back (docs/preemption.md P8).
    ///
    /// Raises:
    ///     UnknownReservation: No such id, or another owner's.
    ///     ReservationError: A reservation (commit it first), or an ended allocation.
    #[pyo3(
        signature = (allocation, *, widen = false, preempt = false, owner = None),
        text_signature = "(self, allocation, *, widen=False, preempt=False, owner=None)"
    )]
    fn plan_repair(
        &self,
        py: Python<'_>,
        allocation: &Bound<'_, PyAny>,
        widen: bool,
        preempt: bool,
        owner: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<RepairPlan>> {
        let id = hold_id(allocation, "allocation")?;
        let owner = owner_name(owner)?;
        let now = self.now(py)?;
        let plan = self.run_detached(py, |engine| {
            Ok(engine.plan_repair(id, (widen, preempt), owner.as_deref(), now)?)
        })?;
        Ok(plan.map(|inner| RepairPlan { inner }))
    }

    /// For each tier of rule R2, how many of the allocation's lost ranks would fit there.
    ///
    /// Keys ``"spares"``, ``"slice"``, ``"domain"``, ``"widened"`` (docs/repair.md "Repair after
    /// failures"): each group of lost ranks counted alone by capacity, so the numbers say
    /// where room is, not that a plan exists.
    ///
    /// Raises:
    ///     UnknownReservation: No such id, or another owner's.
    ///     ReservationError: A reservation, or an ended allocation.
    #[pyo3(signature = (allocation, *, owner = None))]
    fn explain_repair<'py>(
        &self,
        py: Python<'py>,
        allocation: &Bound<'_, PyAny>,
        owner: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let id = hold_id(allocation, "allocation")?;
        let owner = owner_name(owner)?;
        let now = self.now(py)?;
        let tiers = self.run_detached(py, |engine| {
            Ok(engine.explain_repair(id, owner.as_deref(), now)?)
        })?;
        let counts = PyDict::new(py);
        for (tier, count) in tiers {
            counts.set_item(tier, count)?;
        }
        Ok(counts)
    }

    /// Reserves a repair plan's replacement GPUs, tied to its allocation.
    ///
    /// Re-validates (docs/repair.md "Repair after failures", R4): the allocation is live, its lost
    /// ranks are the plan's, every target GPU is still free, healthy and inside its domain
    /// (its slice's for a slice gang), and every target node's free resources still hold
    /// what its new pods ask; for a fractional allocation, every target GPU still has room
    /// for its shares (docs/repair.md R7). The reservation's pods are the replacements in
    /// rank order, holding what their ranks ask besides GPUs (and their shares);
    /// ``.repairs`` names the allocation. Commit it with ``commit_repair``.
    ///
    /// Args:
    ///     plan: From ``plan_repair``.
    ///     ttl: Lifetime in seconds; ``commit_repair`` before it runs out.
    ///     owner: Who holds the repair reservation (and may see the allocation).
    ///
    /// Raises:
    ///     Conflict: The plan is stale (lost ranks changed, a target GPU is taken or has
    ///         no room for its shares, or a target node's resources no longer hold its
    ///         pods); nothing is held.
    ///     UnknownReservation: No such allocation, or another owner's.
    ///     ReservationError: The allocation ended, or is a reservation.
    ///     LimitExceeded: The owner would exceed ``max_held_gpus_per_owner``.
    ///     InvalidRequest: Bad ``ttl`` or ``owner``, or a plan that repairs nothing.
    #[pyo3(
        signature = (plan, *, ttl = None, owner = None),
        text_signature = "(self, plan, *, ttl=60.0, owner=None)"
    )]
    fn repair(
        &self,
        py: Python<'_>,
        plan: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        owner: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Reservation> {
        let plan = plan.cast::<RepairPlan>().map_err(|_| {
            PyTypeError::new_err(format!(
                "plan must be a RepairPlan, not {}",
                convert::type_name(plan)
            ))
        })?;
        let plan = plan.get().inner.clone();
        let ttl = ttl.map_or(Ok(gangplace_core::DEFAULT_REPAIR_TTL_SECONDS), |t| {
            convert::seconds(t, "ttl")
        })?;
        let owner = owner_name(owner)?;
        let now = self.now(py)?;
        let inner = self.run_detached(py, |engine| {
            Ok(engine.repair(&plan, ttl, owner.as_deref(), now)?)
        })?;
        Ok(Reservation { inner })
    }

    /// Merges a repair reservation into its allocation, which keeps its id.
    ///
    /// docs/repair.md "Repair after failures", R5: the lost ranks point at the new pods, the lost
    /// pods' healthy GPUs and their resources go back to the pool, ``lost`` becomes empty,
    /// and the domain widens only if a replacement lies outside it.
    ///
    /// Raises:
    ///     Conflict: The allocation's lost ranks changed since ``repair``; the repair
    ///         reservation is rolled back.
    ///     ReservationExpired: It ran out.
    ///     ReservationRevoked: One of its GPUs became unhealthy or its node was removed.
    ///     UnknownReservation: No such id, or another owner's.
    ///     ReservationError: Not a repair reservation, rolled back (also when its allocation
    ///         ended) or already merged.
    ///     LimitExceeded: The allocation's owner would exceed ``max_held_gpus_per_owner``.
    #[pyo3(signature = (reservation, *, owner = None))]
    fn commit_repair(
        &self,
        py: Python<'_>,
        reservation: &Bound<'_, PyAny>,
        owner: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Allocation> {
        let id = hold_id(reservation, "reservation")?;
        let owner = owner_name(owner)?;
        let now = self.now(py)?;
        let inner = self.run(|engine| Ok(engine.commit_repair(id, owner.as_deref(), now)?))?;
        Ok(Allocation { inner })
    }

    /// Holds more spares for an allocation (docs/repair.md "Spares", S5).
    ///
    /// ``count`` pods of its pod size inside its placement's domain, or ``count`` in every
    /// innermost slice domain of a slice gang, by the placement rules with its selector,
    /// spread and NUMA policy, each asking (and holding) what a pod asks besides GPUs;
    /// appended to ``Allocation.spares``. All or nothing.
    ///
    /// Raises:
    ///     Unschedulable: Not all of them fit; nothing changes.
    ///     UnknownReservation: No such id, or another owner's.
    ///     ReservationError: A reservation, or an ended allocation.
    ///     LimitExceeded: Its owner would exceed ``max_held_gpus_per_owner``.
    ///     InvalidRequest: ``count`` below 1 or past the gang limit, an allocation not placed
    ///         from a ``GangRequest``, one whose pods hold no GPU, or a fractional one.
    #[pyo3(signature = (allocation, count, *, owner = None))]
    fn reserve_spares(
        &self,
        py: Python<'_>,
        allocation: &Bound<'_, PyAny>,
        count: &Bound<'_, PyAny>,
        owner: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Allocation> {
        let id = hold_id(allocation, "allocation")?;
        let count = convert::int(count, "count")?;
        let owner = owner_name(owner)?;
        let now = self.now(py)?;
        let inner = self.run_detached(py, |engine| {
            Ok(engine.reserve_spares(id, count, owner.as_deref(), now)?)
        })?;
        Ok(Allocation { inner })
    }
}
