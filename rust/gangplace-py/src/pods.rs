//! `Cluster.release_pods`: ending some pods of an allocation (docs/transactions.md "Ending some pods");
//! `Cluster.holds_on`: which holds sit on a node (docs/transactions.md "Transactions").
//! Converts the arguments, calls the core, maps its errors.

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::cluster::Cluster;
use crate::cluster_args::{hold_id, owner as owner_name};
use crate::convert::{int_sequence, string};
use crate::types::Allocation;

#[pymethods]
impl Cluster {
    /// Ends some pods of an allocation (docs/transactions.md "Ending some pods", E1-E4).
    ///
    /// For a worker that completed or a pod that was deleted while the rest of the gang runs.
    /// The GPUs the ended pods still hold go back to the pool (unhealthy ones stay out of it);
    /// the ranks are listed in ``Allocation.ended`` and keep their places in
    /// ``placement.pods``, so every other rank keeps its number. An ended rank is never lost
    /// nor repaired, and an allocation with an ended rank is no longer moved by
    /// defragmentation.
    ///
    /// Args:
    ///     allocation: The allocation or its id.
    ///     ranks: The ranks to end (ints, each once).
    ///     owner: The caller (as for ``release``).
    ///
    /// Returns:
    ///     The allocation as it is now, or ``None`` when no rank is left: then it ended as
    ///     released (``hold_status`` says ``"released"``) and its spares' GPUs are freed too.
    ///
    /// Raises:
    ///     InvalidRequest: No ranks, a rank out of range, named twice or already ended.
    ///     ReservationError: A reservation (not committed), an allocation that ended, or a
    ///         rank that a live repair reservation replaces.
    ///     UnknownReservation: No such id, or it belongs to another owner.
    #[pyo3(signature = (allocation, ranks, *, owner = None))]
    fn release_pods(
        &self,
        py: Python<'_>,
        allocation: &Bound<'_, PyAny>,
        ranks: &Bound<'_, PyAny>,
        owner: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Allocation>> {
        let id = hold_id(allocation, "allocation")?;
        let ranks = int_sequence(ranks, "ranks")?;
        let owner = owner_name(owner)?;
        let now = self.now(py)?;
        let after =
            self.run(|engine| Ok(engine.release_pods(id, &ranks, owner.as_deref(), now)?))?;
        Ok(after.map(|inner| Allocation { inner }))
    }

    /// The live holds with GPUs on a node (docs/transactions.md "Transactions").
    ///
    /// Reservations and allocations, spares included, each once and sorted by id, with the
    /// GPU indices it holds on the node, ascending (an allocation keeps the GPUs that failed
    /// under it); a fractional hold with the GPUs it holds shares of (docs/resources.md F1),
    /// so several holds may name one shared GPU. Expired reservations are reclaimed first.
    /// A pure query: one pass over the node's holds, not over the cluster's.
    ///
    /// Raises:
    ///     UnknownNode: No such node (a ``KeyError``).
    fn holds_on<'py>(
        &self,
        py: Python<'py>,
        name: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<(String, Bound<'py, PyTuple>)>> {
        let name = string(name, "name")?;
        let now = self.now(py)?;
        let holds = self.run(|engine| Ok(engine.holds_on(&name, now)?))?;
        holds
            .into_iter()
            .map(|(id, gpus)| Ok((id.to_string(), PyTuple::new(py, gpus.indices())?)))
            .collect()
    }
}
