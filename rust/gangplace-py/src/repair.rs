//! Repair after failures in Python: `RepairPlan` and the `Cluster` methods `plan_repair` and
//! `explain_repair` (README "Repair after failures").

use gangplace_core::RepairPlan as CorePlan;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::cluster::Cluster;
use crate::cluster_args::{hold_id, owner as owner_name};
use crate::types::{PodPlacement, py_repr};

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

    /// Ranks served by the allocation's spares (none until spares exist).
    #[getter]
    #[allow(clippy::wrong_self_convention)] // the attribute's name in the README's contract
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

    /// Ids of allocations ended to make room (none until repair preempts).
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
    /// A pure query (README "Repair after failures", rules R1-R3). A slice gang's lost ranks
    /// go to free healthy GPUs in their own innermost slice's domain; other gangs' to the
    /// placement's domain, or with ``widen`` to the smallest enclosing domain, up to the
    /// request's coarsest level, where all fit. Pods follow the placement rules; ranks keep
    /// their numbers. Without lost ranks, a plan with no replacements.
    ///
    /// Raises:
    ///     UnknownReservation: No such id, or another owner's.
    ///     ReservationError: A reservation (commit it first), or an ended allocation.
    ///     InvalidRequest: A multi-role allocation with sliced groups (not built yet).
    #[pyo3(
        signature = (allocation, *, widen = false, owner = None),
        text_signature = "(self, allocation, *, widen=False, owner=None)"
    )]
    fn plan_repair(
        &self,
        py: Python<'_>,
        allocation: &Bound<'_, PyAny>,
        widen: bool,
        owner: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<RepairPlan>> {
        let id = hold_id(allocation, "allocation")?;
        let owner = owner_name(owner)?;
        let now = self.now(py)?;
        let plan = self.run_detached(py, |engine| {
            Ok(engine.plan_repair(id, widen, owner.as_deref(), now)?)
        })?;
        Ok(plan.map(|inner| RepairPlan { inner }))
    }

    /// For each tier of rule R2, how many of the allocation's lost ranks would fit there.
    ///
    /// Keys ``"spares"``, ``"slice"``, ``"domain"``, ``"widened"`` (README "Repair after
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
}
