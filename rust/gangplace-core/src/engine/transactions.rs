//! The transactions of the engine: `reserve` (from a request or from an earlier placement),
//! `commit`, `rollback`, `release`, the listings of live holds, and the batches. Each
//! validates and computes everything that can fail before the ledger changes a single bit.

use std::sync::Arc;

use super::Engine;
use super::ranks::{lost_ranks, may_have_lost};
use crate::error::{CoreError, CoreResult, internal, invalid, texts};
use crate::ids::{GpuSet, HoldId, NodeId};
use crate::ledger::{Ending, Hold, HoldState};
use crate::limits::{MAX_NAME_BYTES, MAX_TTL_SECONDS};
use crate::model::MultiGangRequest;
use crate::model::{Allocation, GangRequest, Held, Placement, Reservation, Terms, check_priority};
use crate::state::{Changes, NodeStates};
use crate::topology::Topology;

/// Who acts on a hold: an owner name, or nobody in particular.
pub type Owner<'a> = Option<&'a str>;

pub(crate) fn check_ttl(ttl: f64) -> CoreResult<()> {
    if ttl.is_finite() && ttl > 0.0 && ttl <= MAX_TTL_SECONDS {
        return Ok(());
    }
    Err(invalid(format!(
        "ttl must be a positive finite number of seconds up to {MAX_TTL_SECONDS}, got {ttl}"
    )))
}

pub(crate) fn check_owner(owner: Owner<'_>) -> CoreResult<()> {
    match owner {
        Some(name) if name.is_empty() || name.len() > MAX_NAME_BYTES => Err(invalid(format!(
            "owner must be 1 to {MAX_NAME_BYTES} bytes long, got {} bytes",
            name.len()
        ))),
        _ => Ok(()),
    }
}

/// Whether a caller claiming `caller` may act on a hold owned by `owner`.
fn may_act(owner: Option<&Arc<str>>, caller: Owner<'_>) -> bool {
    owner.is_none_or(|owner| caller == Some(&**owner))
}

/// Merges per-pod GPU sets into one set per node, sorted by node id; `None` if two pods name
/// the same GPU.
pub(crate) fn gpus_by_node(
    pods: impl Iterator<Item = (NodeId, GpuSet)>,
) -> Option<Vec<(NodeId, GpuSet)>> {
    let mut pods: Vec<(NodeId, GpuSet)> = pods.collect();
    pods.sort_unstable_by_key(|&(node, _)| node);
    let mut merged: Vec<(NodeId, GpuSet)> = Vec::with_capacity(pods.len());
    for (node, gpus) in pods {
        match merged.last_mut() {
            Some((held_on, held)) if *held_on == node => {
                if held.intersects(gpus) {
                    return None;
                }
                *held |= gpus;
            }
            _ => merged.push((node, gpus)),
        }
    }
    merged.retain(|&(_, gpus)| !gpus.is_empty()); // pods without GPUs hold none
    Some(merged)
}

pub(crate) fn held_gpus(held: &[(NodeId, GpuSet)]) -> u64 {
    held.iter().map(|&(_, gpus)| u64::from(gpus.count())).sum()
}

pub(crate) fn reservation_of(id: HoldId, hold: &Hold) -> Reservation {
    Reservation {
        id,
        placement: Arc::clone(&hold.placement),
        expires_at: hold.expires_at,
        owner: hold.owner.as_deref().map(str::to_owned),
        terms: hold.terms,
        since: hold.since,
        request: hold.request.clone(),
        roles: hold.roles.clone(),
        repairs: hold.repair.as_ref().map(|link| link.allocation),
        repaired_ranks: hold
            .repair
            .as_ref()
            .map_or_else(Vec::new, |link| link.ranks.clone()),
    }
}

/// The allocation a committed hold is, its lost ranks computed from the current state.
pub(crate) fn allocation_of(
    topology: &Topology,
    states: &NodeStates,
    id: HoldId,
    hold: &Hold,
) -> Allocation {
    Allocation {
        id,
        lost: lost_ranks(topology, states, hold),
        ended: hold.ended.clone(),
        placement: Arc::clone(&hold.placement),
        owner: hold.owner.as_deref().map(str::to_owned),
        terms: hold.terms,
        since: hold.since,
        request: hold.request.clone(),
        roles: hold.roles.clone(),
    }
}

/// What a new hold is made of, besides its GPUs.
pub(crate) struct NewHold<'a> {
    pub placement: Arc<Placement>,
    pub expires_at: f64,
    pub owner: Owner<'a>,
    pub terms: Terms,
    pub since: f64,
    pub request: Option<Arc<GangRequest>>,
    pub roles: Option<Arc<MultiGangRequest>>,
    /// What each pod asks besides GPUs (`None`: what `request` asks).
    pub pod_resources: Option<Arc<[crate::resources::Amounts]>>,
}

impl Engine {
    /// Refuses a hold of `gpus` more GPUs that would take `owner` past its cap.
    pub(crate) fn check_cap(&self, owner: Owner<'_>, gpus: u64) -> CoreResult<()> {
        self.check_cap_after(owner, gpus, 0)
    }

    /// The same, when `released` GPUs of `owner` are freed by the same operation.
    pub(crate) fn check_cap_after(
        &self,
        owner: Owner<'_>,
        gpus: u64,
        released: u64,
    ) -> CoreResult<()> {
        let Some(cap) = self.config.max_held_gpus_per_owner() else {
            return Ok(());
        };
        let held = self.ledger.held_by(owner).saturating_sub(released);
        if held.saturating_add(gpus) <= cap {
            return Ok(());
        }
        Err(texts::owner_cap(
            owner,
            held.saturating_add(gpus),
            cap,
            held,
        ))
    }

    /// Fresh ids for `count` new holds, distinct from each other and from every known id.
    /// Taken before a mutation starts, so that nothing after it can fail.
    pub(crate) fn new_ids(&self, count: usize) -> CoreResult<Vec<HoldId>> {
        let mut ids: Vec<HoldId> = Vec::with_capacity(count);
        while ids.len() < count {
            let id = self.ledger.new_id()?;
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        Ok(ids)
    }

    /// Records a new hold with id `id` into `changes` and hands out its reservation.
    pub(crate) fn hold_into(
        &mut self,
        changes: &mut Changes,
        id: HoldId,
        gpus_by_node: Vec<(NodeId, GpuSet)>,
        new: NewHold<'_>,
    ) -> Reservation {
        let pod_resources = (new.pod_resources).unwrap_or_else(|| match &new.roles {
            Some(roles) => self.roles_resources(roles, &new.placement),
            None => self.request_resources(new.request.as_deref()),
        });
        // Every node of a new placement is live: all of its pods count.
        let resources_by_node =
            self.resources_by_node(&new.placement, &pod_resources, &[], &|_| true);
        let hold = Hold {
            state: HoldState::Reserved,
            expires_at: new.expires_at,
            gpus_by_node: gpus_by_node.into(),
            placement: new.placement,
            owner: new.owner.map(Arc::from),
            terms: new.terms,
            since: new.since,
            request: new.request,
            roles: new.roles,
            repair: None,
            ended: Vec::new(),
            pod_resources,
            resources_by_node,
            resources_detached: false,
        };
        let reservation = reservation_of(id, &hold);
        self.ledger.hold(&mut self.states, changes, id, hold);
        reservation
    }

    pub(crate) fn hold(
        &mut self,
        gpus_by_node: Vec<(NodeId, GpuSet)>,
        new: NewHold<'_>,
    ) -> CoreResult<Reservation> {
        let id = self.ledger.new_id()?;
        let mut changes = Changes::new();
        let reservation = self.hold_into(&mut changes, id, gpus_by_node, new);
        self.apply(&changes);
        Ok(reservation)
    }

    /// Places the gang and holds its GPUs until `now + ttl`.
    pub fn reserve(
        &mut self,
        request: &Arc<GangRequest>,
        ttl: f64,
        owner: Owner<'_>,
        now: f64,
    ) -> CoreResult<Reservation> {
        check_ttl(ttl)?;
        check_owner(owner)?;
        self.reclaim(now);
        let placed = &*request.placed(); // spares count as pods (docs/repair.md "Spares")
        self.demand(placed)?; // an unknown level is an invalid request, whatever the cap
        self.check_cap(owner, request.min_gpus())?;
        let (demand, plan) = self.plan(placed, now)?;
        let Some(plan) = plan else {
            return Err(CoreError::Unschedulable(
                self.unschedulable_reason(placed, &demand)?,
            ));
        };
        // Fractional pods hold shares, not whole GPUs (docs/resources.md "Fractions of a GPU").
        let whole = plan.pods.iter().filter(|_| request.gpu_milli.is_none());
        let pods = whole.map(|pod| (pod.node, pod.gpus));
        let held = gpus_by_node(pods).ok_or_else(|| internal("a plan took one GPU twice"))?;
        self.check_cap(owner, held_gpus(&held))?;
        let placement = Arc::new(request.split_spares(self.placement(&plan)));
        let new = NewHold {
            placement,
            expires_at: now + ttl,
            owner,
            terms: request.terms,
            since: now,
            request: Some(Arc::clone(request)),
            roles: None,
            pod_resources: None,
        };
        self.hold(held, new)
    }

    /// Holds exactly the GPUs of an earlier placement, if every one of them is still free,
    /// healthy and on an uncordoned node inside the placement's domain; otherwise
    /// [`CoreError::Conflict`] and nothing is held. Closes the decide-then-bind race. The hold
    /// carries `terms` (a placement does not know its request's).
    pub fn reserve_placement(
        &mut self,
        placement: &Arc<Placement>,
        ttl: f64,
        owner: Owner<'_>,
        terms: Terms,
        now: f64,
    ) -> CoreResult<Reservation> {
        check_ttl(ttl)?;
        check_owner(owner)?;
        self.reclaim(now);
        if placement.pods.is_empty() && placement.spares.is_empty() {
            return Err(invalid("the placement has no pods"));
        }
        let held = match placement.gpu_milli {
            // Fractional pods hold shares, not GPUs (docs/resources.md "Fractions of a GPU").
            Some(milli) => {
                self.check_placement_shares(placement, milli, &Default::default())?;
                Vec::new()
            }
            None => self.placement_gpus(placement)?,
        };
        self.check_cap(owner, held_gpus(&held))?;
        let new = NewHold {
            placement: Arc::clone(placement),
            expires_at: now + ttl,
            owner,
            terms,
            since: now,
            request: None,
            roles: None,
            pod_resources: None,
        };
        self.hold(held, new)
    }

    /// The GPUs a placement's pods and spares hold, per node, each checked free and healthy
    /// on a usable node of the domain (`Conflict` otherwise).
    fn placement_gpus(&self, placement: &Placement) -> CoreResult<Vec<(NodeId, GpuSet)>> {
        let mut pods = Vec::with_capacity(placement.pods.len() + placement.spares.len());
        for pod in placement.pods.iter().chain(&placement.spares) {
            let node = self.pod_node(placement, &pod.node)?;
            self.check_pod_gpus(node, pod.gpus)?;
            pods.push((node, pod.gpus));
        }
        gpus_by_node(pods.into_iter()).ok_or_else(|| texts::one_gpu_two_pods("the placement"))
    }

    /// The live, uncordoned node of a placement's pod, inside the placement's domain.
    pub(crate) fn pod_node(&self, placement: &Placement, name: &str) -> CoreResult<NodeId> {
        self.node_inside(&placement.domain, name)
    }

    /// The live, uncordoned node `name`, inside the domain with path `domain`; otherwise
    /// [`CoreError::Conflict`] (the placement or plan naming it is stale).
    pub(crate) fn node_inside(&self, domain: &[String], name: &str) -> CoreResult<NodeId> {
        let id = (self.topology.node_id(name)).ok_or_else(|| texts::node_gone(name))?;
        if self.states.get(id).cordoned {
            return Err(texts::node_cordoned(name));
        }
        let path = self.topology.node_path(id);
        let inside = domain.len() <= path.len() && domain.iter().zip(&path).all(|(a, b)| a == b);
        if !inside {
            return Err(texts::node_outside(name, domain));
        }
        Ok(id)
    }

    /// Refuses a pod's GPUs unless they exist on its node and are free and healthy.
    pub(crate) fn check_pod_gpus(&self, node: NodeId, gpus: GpuSet) -> CoreResult<()> {
        let state = self.states.get(node);
        let name = &self.topology.node(node).name;
        if let Some(gpu) = (gpus & !state.gpus).lowest() {
            return Err(texts::gpu_out_of_range(gpu, name));
        }
        if gpus.is_empty() {
            return Err(invalid(format!("a pod on node {name:?} has no GPUs")));
        }
        let Some(gpu) = (gpus & !state.free()).lowest() else {
            return Ok(());
        };
        Err(texts::placement_gpu_busy(
            gpu,
            name,
            state.unhealthy.contains(gpu),
        ))
    }

    /// The live state and the remembered ending of a hold, as `caller` may see them: a hold
    /// owned by someone else looks unknown.
    pub(crate) fn visible(
        &self,
        id: HoldId,
        caller: Owner<'_>,
    ) -> (Option<HoldState>, Option<Ending>) {
        if let Some(hold) = self.ledger.live(id) {
            if may_act(hold.owner.as_ref(), caller) {
                return (Some(hold.state), None);
            }
            return (None, None);
        }
        match self.ledger.ended(id) {
            Some(ended) if may_act(ended.owner.as_ref(), caller) => (None, Some(ended.ending)),
            _ => (None, None),
        }
    }

    pub(crate) fn ended_error(id: HoldId, ending: Option<Ending>, doing: &str) -> CoreError {
        match ending {
            None => CoreError::UnknownReservation(id.to_string()),
            Some(Ending::Expired) => CoreError::ReservationExpired(id.to_string()),
            Some(Ending::Revoked) => CoreError::ReservationRevoked(id.to_string()),
            Some(Ending::RolledBack) => {
                CoreError::ReservationError(format!("cannot {doing} {id}: it was rolled back"))
            }
            Some(
                ending @ (Ending::Released | Ending::Preempted | Ending::Migrated | Ending::Merged),
            ) => CoreError::ReservationError(format!(
                "cannot {doing} {id}: it was {}",
                ending.as_str()
            )),
        }
    }

    /// `"reserved"`, `"allocated"`, or how the hold ended (see [`Ending::as_str`]).
    pub fn hold_status(
        &mut self,
        id: HoldId,
        caller: Owner<'_>,
        now: f64,
    ) -> CoreResult<&'static str> {
        self.reclaim(now);
        match self.visible(id, caller) {
            (Some(HoldState::Reserved), _) => Ok("reserved"),
            (Some(HoldState::Committed), _) => Ok("allocated"),
            (None, Some(ending)) => Ok(ending.as_str()),
            (None, None) => Err(CoreError::UnknownReservation(id.to_string())),
        }
    }

    /// Changes a live hold's priority; returns the hold as it is now.
    pub fn set_priority(
        &mut self,
        id: HoldId,
        priority: i64,
        caller: Owner<'_>,
        now: f64,
    ) -> CoreResult<Held> {
        let priority = check_priority(priority)?;
        self.reclaim(now);
        match self.visible(id, caller) {
            (Some(_), _) => {}
            (None, ending) => return Err(Self::ended_error(id, ending, "change the priority of")),
        }
        self.ledger.set_priority(id, priority);
        let hold = self
            .ledger
            .live(id)
            .ok_or_else(|| internal("a live hold vanished"))?;
        Ok(match hold.state {
            HoldState::Reserved => Held::Reservation(reservation_of(id, hold)),
            HoldState::Committed => {
                Held::Allocation(allocation_of(&self.topology, &self.states, id, hold))
            }
        })
    }

    /// Turns a reservation into an allocation; again on the same id returns the same.
    pub fn commit(&mut self, id: HoldId, caller: Owner<'_>, now: f64) -> CoreResult<Allocation> {
        self.reclaim(now);
        let (state, ending) = self.visible(id, caller);
        if state.is_none() {
            return Err(Self::ended_error(id, ending, "commit"));
        }
        if let Some(link) = self.ledger.live(id).and_then(|hold| hold.repair.as_ref()) {
            return Err(CoreError::ReservationError(format!(
                "cannot commit {id}: it repairs allocation {}; use commit_repair",
                link.allocation
            )));
        }
        let mut changes = Changes::new();
        self.ledger.commit(&mut self.states, &mut changes, id, now);
        self.apply(&changes);
        let hold = self.ledger.live(id);
        let hold = hold.ok_or_else(|| internal("a committed hold vanished"))?;
        Ok(allocation_of(&self.topology, &self.states, id, hold))
    }

    /// Frees a reservation. `true` if it freed something, `false` if it had already ended.
    pub fn rollback(&mut self, id: HoldId, caller: Owner<'_>, now: f64) -> CoreResult<bool> {
        self.reclaim(now);
        match self.visible(id, caller) {
            (Some(HoldState::Reserved), _) => {
                self.end_hold(id, Ending::RolledBack);
                Ok(true)
            }
            (Some(HoldState::Committed), _)
            | (
                None,
                Some(Ending::Released | Ending::Preempted | Ending::Migrated | Ending::Merged),
            ) => Err(CoreError::ReservationError(format!(
                "cannot roll back {id}: it was committed; release the allocation instead"
            ))),
            (None, Some(Ending::Expired | Ending::Revoked | Ending::RolledBack)) => Ok(false),
            (None, None) => Err(CoreError::UnknownReservation(id.to_string())),
        }
    }

    /// Frees an allocation. `true` the first time, `false` after.
    pub fn release(&mut self, id: HoldId, caller: Owner<'_>, now: f64) -> CoreResult<bool> {
        self.reclaim(now);
        match self.visible(id, caller) {
            (Some(HoldState::Committed), _) => {
                self.end_hold(id, Ending::Released);
                Ok(true)
            }
            (Some(HoldState::Reserved), _) => Err(CoreError::ReservationError(format!(
                "cannot release {id}: it is not committed; roll it back instead"
            ))),
            (None, Some(Ending::Released | Ending::Preempted | Ending::Migrated)) => Ok(false),
            (None, ending) => Err(Self::ended_error(id, ending, "release")),
        }
    }

    /// Live holds in `state` (`owner` given: only that owner's), sorted by id.
    fn holds_in(&mut self, state: HoldState, owner: Owner<'_>, now: f64) -> Vec<(HoldId, &Hold)> {
        self.reclaim(now);
        let mut holds = self.ledger.live_holds_by_id();
        holds.retain(|(_, hold)| {
            hold.state == state && (owner.is_none() || hold.owner.as_deref() == owner)
        });
        holds
    }

    /// Live reservations (`owner` given: only that owner's), sorted by id.
    pub fn reservations(&mut self, owner: Owner<'_>, now: f64) -> Vec<Reservation> {
        let holds = self.holds_in(HoldState::Reserved, owner, now);
        holds
            .into_iter()
            .map(|(id, hold)| reservation_of(id, hold))
            .collect()
    }

    /// Live allocations (`owner` given: only that owner's), sorted by id; with `lost_only`,
    /// only those with lost ranks (docs/repair.md "Repair after failures"), found without making
    /// the others.
    pub fn allocations(&mut self, owner: Owner<'_>, lost_only: bool, now: f64) -> Vec<Allocation> {
        self.reclaim(now);
        let (topology, states) = (&self.topology, &self.states);
        let wanted = |hold: &Hold| {
            hold.state == HoldState::Committed
                && (owner.is_none() || hold.owner.as_deref() == owner)
                && (!lost_only
                    || (may_have_lost(states, hold)
                        && !lost_ranks(topology, states, hold).is_empty()))
        };
        let mut holds: Vec<(HoldId, &Hold)> = if lost_only {
            // Only holds on unhealthy GPUs and holds whose GPUs differ from their pods can
            // have lost ranks: those are read, not every hold.
            let mut suspects = self.ledger.irregular().clone();
            for node in states.with_unhealthy() {
                let unhealthy = states.unhealthy(node);
                let on = self.ledger.holders_on(node).into_iter();
                suspects.extend(
                    on.filter(|&(_, gpus)| gpus.intersects(unhealthy))
                        .map(|(id, _)| id),
                );
            }
            (suspects.into_iter())
                .filter_map(|id| self.ledger.live(id).map(|hold| (id, hold)))
                .filter(|&(_, hold)| wanted(hold))
                .collect()
        } else {
            self.ledger
                .live_holds()
                .filter(|&(_, hold)| wanted(hold))
                .collect()
        };
        holds.sort_unstable_by_key(|&(id, _)| id);
        holds
            .into_iter()
            .map(|(id, hold)| allocation_of(topology, states, id, hold))
            .collect()
    }
}
