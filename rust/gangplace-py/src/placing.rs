//! The placing calls of `Cluster`: `place_gang`, `explain`, `reserve` and the batches, for
//! single gangs (`GangRequest`) and multi-role gangs (`MultiGangRequest`) alike.

use std::sync::Arc;

use gangplace_core::{AnyRequest, DEFAULT_TTL_SECONDS};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::cluster::Cluster;
use crate::cluster_args::owner as owner_name;
use crate::convert;
use crate::explain::Explanation;
use crate::lookahead::{avoided_pods, gang_request};
use crate::roles::{MultiGangRequest, any_request};
use crate::types::{Allocation, GangRequest, Placement, Reservation};

/// Every request of an iterable, each a `GangRequest` or a `MultiGangRequest`.
fn any_requests(requests: &Bound<'_, PyAny>) -> PyResult<Vec<AnyRequest>> {
    requests
        .try_iter()?
        .map(|request| any_request(&request?, "requests must hold requests: each"))
        .collect()
}

#[pymethods]
impl Cluster {
    /// Where the gang would go now, or ``None``. A pure query: it holds nothing.
    ///
    /// Rules (deterministic; ties always broken by domain path, then node name):
    ///
    /// 1. Feasible nodes are uncordoned and carry every selector label. A node holds
    ///    floor(free healthy GPUs / gpus_per_pod) pods; a domain the sum over its nodes.
    /// 2. Levels are tried finest first (node, the levels innermost first, cluster), none
    ///    coarser than ``required_level``; the first level with a domain holding all pods wins.
    /// 3. best-fit picks the domain with the fewest free healthy GPUs, then the fullest
    ///    parent, grandparent, ..., then smallest path; first-fit the smallest path.
    /// 4. Inside it, pods go to as few children as possible at every level: a child that can
    ///    hold all remaining pods takes them (smallest capacity, then path); otherwise the
    ///    largest child (then smallest path) is filled and the rest continues.
    /// 5. On a node, pods take the lowest-indexed free healthy GPUs.
    /// 6. Pods are ranked by (node's domain path, node name, first GPU).
    /// 7. Elastic gangs: if nothing holds ``pods`` but one domain of the coarsest allowed
    ///    level holds at least ``min_pods``, the largest such number of pods is placed by
    ///    the same rules.
    ///
    /// A ``MultiGangRequest`` is placed as one unit by docs/roles.md.
    ///
    /// Raises:
    ///     InvalidRequest: Unknown ``required_level``.
    fn place_gang(
        &self,
        py: Python<'_>,
        request: &Bound<'_, PyAny>,
    ) -> PyResult<Option<Placement>> {
        let request = any_request(request, "request")?;
        let now = self.now(py)?;
        let placement = self.run_detached(py, |engine| {
            Ok(match &request {
                AnyRequest::Gang(request) => engine.place(request, now)?,
                AnyRequest::Roles(request) => engine.place_roles(request, now)?,
            })
        })?;
        Ok(placement.map(|placement| Placement {
            inner: Arc::new(placement),
        }))
    }

    /// Why the gang fits where it does, or does not fit.
    ///
    /// For every level tried (finest first): the domain that could hold the most pods, how
    /// many, and the held GPUs that would have to be freed there for the gang to fit; the
    /// nodes that cannot take even one pod, by reason. Its ``summary`` is the text of
    /// ``Unschedulable.reason``, followed, when freeing held GPUs would make room, by the
    /// domain needing the fewest (``; freeing 4 held GPUs in rack b would fit it``). Visits
    /// every node: a diagnostic, not a scheduling-loop call. For a ``MultiGangRequest``, each
    /// level's first candidate and the first group that failed there (``failed_group``).
    ///
    /// Raises:
    ///     InvalidRequest: Unknown ``required_level``.
    fn explain(&self, py: Python<'_>, request: &Bound<'_, PyAny>) -> PyResult<Explanation> {
        let request = any_request(request, "request")?;
        let now = self.now(py)?;
        let inner = self.run_detached(py, |engine| {
            Ok(match &request {
                AnyRequest::Gang(request) => engine.explain(request, now)?,
                AnyRequest::Roles(request) => engine.explain_roles(request, now)?,
            })
        })?;
        Ok(Explanation { inner })
    }

    /// Holds GPUs for ``ttl`` seconds (0 < ttl <= 7 days).
    ///
    /// Given a ``GangRequest`` or a ``MultiGangRequest``, places the gang now (as
    /// ``place_gang``) and holds all of it. Given a ``Placement`` from an earlier
    /// ``place_gang``, holds exactly those GPUs if every one is still free, healthy, on an
    /// uncordoned node inside the placement's domain; otherwise raises ``Conflict``. That
    /// closes the race between deciding and binding.
    ///
    /// Args:
    ///     request: What to hold.
    ///     ttl: Lifetime in seconds; ``commit`` before it runs out.
    ///     owner: Who holds it. Only calls with the same ``owner`` can commit, roll back or
    ///         release it; to anyone else its id looks unknown.
    ///     avoid: Pods whose GPUs the gang must not take, or placements standing for all
    ///         their pods (a ``GangRequest`` only; docs/preemption.md "Looking ahead", L2, L3): it
    ///         is placed as if they were held, and they stay as they were.
    ///
    /// Raises:
    ///     Unschedulable: No placement; ``.reason`` tells what each level could hold.
    ///     Conflict: The placement is stale.
    ///     LimitExceeded: The owner would exceed ``max_held_gpus_per_owner``.
    ///     InvalidRequest: Bad ``ttl``, ``owner`` or ``required_level``, or a GPU of
    ///         ``avoid`` its node does not have; nothing is held.
    ///     UnknownNode: A node of ``avoid`` that does not exist.
    #[pyo3(
        signature = (request, *, ttl = None, owner = None, avoid = None),
        text_signature = "(self, request, *, ttl=30.0, owner=None, avoid=())"
    )]
    fn reserve(
        &self,
        py: Python<'_>,
        request: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        owner: Option<&Bound<'_, PyAny>>,
        avoid: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Reservation> {
        let (ttl, owner, avoid) = hold_args(ttl, owner, avoid)?;
        let now = self.now(py)?;
        if !avoid.is_empty() && request.cast::<GangRequest>().is_err() {
            return Err(PyTypeError::new_err(format!(
                "avoid is taken with a GangRequest only, not with a {}",
                convert::type_name(request)
            )));
        }
        let inner = if let Ok(request) = request.cast::<GangRequest>() {
            let request = request.get().inner.clone();
            self.run_detached(py, |engine| {
                Ok(engine.reserve_avoiding(&request, ttl, owner.as_deref(), &avoid, now)?)
            })?
        } else if let Ok(request) = request.cast::<MultiGangRequest>() {
            let request = request.get().inner.clone();
            self.run_detached(py, |engine| {
                Ok(engine.reserve_roles(&request, ttl, owner.as_deref(), now)?)
            })?
        } else if let Ok(placement) = request.cast::<Placement>() {
            let placement = Arc::clone(&placement.get().inner);
            self.run_detached(py, |engine| {
                let terms = gangplace_core::Terms::default();
                Ok(engine.reserve_placement(&placement, ttl, owner.as_deref(), terms, now)?)
            })?
        } else {
            return Err(PyTypeError::new_err(format!(
                "request must be a GangRequest, a MultiGangRequest or a Placement, not {}",
                convert::type_name(request)
            )));
        };
        Ok(Reservation { inner })
    }

    /// Reserves and commits a ``GangRequest`` in one call under one lock.
    ///
    /// ``commit(reserve(request, ttl=ttl, owner=owner, avoid=avoid), owner=owner)``: the same
    /// rules, errors and ids as the two calls (docs/transactions.md "Transactions", "Looking ahead" L2),
    /// without the reservation in between. Private: the Scheduler's start of a job (one
    /// crossing instead of two per start).
    ///
    /// Raises:
    ///     Unschedulable: No placement. LimitExceeded: the owner's cap.
    ///     InvalidRequest, UnknownNode, TypeError: as ``reserve``.
    #[pyo3(
        signature = (request, *, ttl = None, owner = None, avoid = None),
        text_signature = "(self, request, *, ttl=30.0, owner=None, avoid=())"
    )]
    fn _allocate(
        &self,
        py: Python<'_>,
        request: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        owner: Option<&Bound<'_, PyAny>>,
        avoid: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Allocation> {
        let (ttl, owner, avoid) = hold_args(ttl, owner, avoid)?;
        let request = gang_request(request)?;
        let now = self.now(py)?;
        let inner = self.run_detached(py, |engine| {
            let owner = owner.as_deref();
            let held = engine.reserve_avoiding(&request, ttl, owner, &avoid, now)?;
            Ok(engine.commit(held.id, owner, now)?)
        })?;
        Ok(Allocation { inner })
    }

    /// ``place_gang`` for each request on the current state, in one call.
    ///
    /// Raises:
    ///     InvalidRequest: Any request names an unknown level (nothing is answered).
    fn place_many(
        &self,
        py: Python<'_>,
        requests: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<Option<Placement>>> {
        let requests = any_requests(requests)?;
        let now = self.now(py)?;
        let placements = self.run_detached(py, |engine| Ok(engine.place_many(&requests, now)?))?;
        Ok(placements
            .into_iter()
            .map(|placement| placement.map(|p| Placement { inner: Arc::new(p) }))
            .collect())
    }

    /// Reserves the gangs greedily in order, each seeing the previous ones' holds.
    ///
    /// A gang that does not fit, or would take ``owner`` past its cap, gets ``None``.
    ///
    /// Raises:
    ///     InvalidRequest: Bad ``ttl``/``owner``, or a request names an unknown level;
    ///         checked before anything is held.
    #[pyo3(
        signature = (requests, *, ttl = None, owner = None),
        text_signature = "(self, requests, *, ttl=30.0, owner=None)"
    )]
    fn reserve_many(
        &self,
        py: Python<'_>,
        requests: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        owner: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<Option<Reservation>>> {
        let requests = any_requests(requests)?;
        let (ttl, owner, _) = hold_args(ttl, owner, None)?;
        let now = self.now(py)?;
        let reservations = self.run_detached(py, |engine| {
            Ok(engine.reserve_many(&requests, ttl, owner.as_deref(), now)?)
        })?;
        Ok(reservations
            .into_iter()
            .map(|reservation| reservation.map(|inner| Reservation { inner }))
            .collect())
    }
}

/// The holding calls' `ttl` (seconds, default 30), `owner` and `avoid` (`None`: none).
fn hold_args(
    ttl: Option<&Bound<'_, PyAny>>,
    owner: Option<&Bound<'_, PyAny>>,
    avoid: Option<&Bound<'_, PyAny>>,
) -> PyResult<(f64, Option<String>, Vec<gangplace_core::PodPlacement>)> {
    let ttl = ttl.map_or(Ok(DEFAULT_TTL_SECONDS), |t| convert::seconds(t, "ttl"))?;
    Ok((ttl, owner_name(owner)?, avoided_pods(avoid)?))
}
