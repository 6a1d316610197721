//! Holding and applying a repair (docs/repair.md "Repair after failures", rules R4-R5, issue 14).
//!
//! `repair` re-validates a [`RepairPlan`] against the current state and reserves its
//! replacement GPUs as a repair reservation tied to the allocation; `commit_repair` merges
//! that reservation into the allocation in one mutation: the lost ranks point at the new
//! pods, the lost pods' GPUs that are still held go back to the pool, and the allocation
//! keeps its id. Rolling the reservation back (or letting it expire) leaves the allocation as
//! it was; an allocation that ends takes its repair reservations with it.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::capacity::TakenShares;
use crate::engine::Engine;
use crate::engine::ranks::{asks_of, lost_ranks, slice_of};
use crate::engine::resources::asks_without_spares;
use crate::engine::transactions::{
    Owner, allocation_of, check_owner, check_ttl, gpus_by_node, held_gpus, reservation_of,
};
use crate::error::{CoreError, CoreResult, internal, invalid, texts};
use crate::ids::{GpuSet, HoldId, NodeId};
use crate::ledger::{Ending, Hold, HoldState, RepairLink};
use crate::model::{Allocation, Placement, PodPlacement, RepairPlan, Reservation};
use crate::resources::Amounts;
use crate::state::Changes;

impl Engine {
    /// Reserves the replacement GPUs of `plan` until `now + ttl` as a repair reservation of
    /// its allocation (with what the replacements ask besides GPUs), after checking that the
    /// allocation is live, its lost ranks are the plan's, every target GPU is still free and
    /// healthy inside its domain and every target node's free resources hold what its new
    /// pods ask; otherwise an error and nothing changes (docs/repair.md "Repair after failures", R4).
    pub fn repair(
        &mut self,
        plan: &RepairPlan,
        ttl: f64,
        caller: Owner<'_>,
        now: f64,
    ) -> CoreResult<Reservation> {
        check_ttl(ttl)?;
        check_owner(caller)?;
        self.reclaim(now);
        let target = self.repairable(plan.allocation, caller)?;
        check_plan_shape(plan, target)?;
        let lost = lost_ranks(&self.topology, &self.states, target);
        if lost != plan.lost {
            return Err(texts::repair_plan_stale(plan.allocation, &lost, &plan.lost));
        }
        if plan.replacements.is_empty() {
            return Err(invalid(format!(
                "the plan repairs nothing: allocation {} has no lost ranks",
                plan.allocation
            )));
        }
        let (victims, given_back) = self.repair_victims(plan, target)?;
        let milli = target.placement.gpu_milli; // docs/resources.md "Fractions of a GPU"
        let mut pods: Vec<(NodeId, GpuSet)> = Vec::with_capacity(plan.replacements.len());
        let (mut new_pods, mut ranks, mut spares) = (Vec::new(), Vec::new(), Vec::new());
        let mut asks: Vec<Amounts> = Vec::new();
        for (rank, pod) in &plan.replacements {
            let domain = slice_of(target, *rank).unwrap_or(&plan.domain);
            let node = self.node_inside(domain, &pod.node)?;
            if plan.from_spares.contains(rank) {
                self.check_spare(target, pod)?;
                spares.push((*rank, pod.clone()));
                continue;
            }
            match victims.get(&node) {
                // A pod without GPUs (its rank's lost pod had none: `check_plan_shape`) holds
                // only its resources, checked below; a share's room is checked below too.
                _ if pod.gpus.is_empty() || milli.is_some() => {}
                Some(&freed) => self.check_pod_gpus_freed(node, pod.gpus, freed)?,
                None => self.check_pod_gpus(node, pod.gpus)?,
            }
            if milli.is_none() {
                pods.push((node, pod.gpus)); // shares hold no whole GPU
            }
            new_pods.push(pod.clone());
            ranks.push(*rank);
            asks.push(asks_of(target, usize::try_from(*rank).unwrap_or(usize::MAX)).clone());
        }
        let held =
            gpus_by_node(pods.into_iter()).ok_or_else(|| texts::one_gpu_two_pods("the plan"))?;
        self.check_cap(caller, held_gpus(&held))?;
        let placement = Placement {
            gpu_milli: milli,
            pods: new_pods,
            level: plan.level.clone(),
            domain: plan.domain.clone(),
            slices: Vec::new(),
            groups: Vec::new(),
            spares: Vec::new(),
        };
        let asks: Arc<[Amounts]> = match asks.first() {
            Some(first) if asks.iter().all(|ask| ask == first) => match first.is_empty() {
                true => Arc::from(Vec::new()),
                false => Arc::from(vec![first.clone()]),
            },
            _ => asks.into(),
        };
        if let Some(milli) = milli {
            // The victims' GPUs and shares count free (docs/preemption.md P8).
            let freed = victims.iter().map(|(&node, &gpus)| (node, gpus)).collect();
            self.check_shares_after(&placement, milli, &freed, &given_back, None)?;
        }
        let resources_by_node = self.resources_by_node(&placement, &asks, &[], &|_| true);
        self.check_asked_resources(resources_by_node.clone(), &plan.victims)?;
        let hold = Hold {
            state: HoldState::Reserved,
            expires_at: now + ttl,
            gpus_by_node: held.into(),
            placement: Arc::new(placement),
            owner: caller.map(Arc::from),
            terms: target.terms,
            since: now,
            request: None,
            roles: None,
            repair: Some(Arc::new(RepairLink {
                allocation: plan.allocation,
                ranks,
                spares,
            })),
            ended: Vec::new(),
            pod_resources: asks,
            resources_by_node,
            resources_detached: false,
        };
        let id = self.ledger.new_id()?;
        let reservation = reservation_of(id, &hold);
        let mut changes = Changes::new();
        for &victim in &plan.victims {
            let (states, ledger) = (&mut self.states, &mut self.ledger);
            ledger.end(states, &mut changes, victim, Ending::Preempted);
        }
        self.ledger.hold(&mut self.states, &mut changes, id, hold);
        self.apply(&changes);
        Ok(reservation)
    }

    /// R6's victims of `plan`, re-validated (each live, committed, preemptible, of a lower
    /// priority than the allocation), the healthy GPUs they free per node (with the shared
    /// GPUs all of whose shares they hold), and their shares of healthy GPUs.
    fn repair_victims(
        &self,
        plan: &RepairPlan,
        target: &Hold,
    ) -> CoreResult<(BTreeMap<NodeId, GpuSet>, TakenShares)> {
        let mut freed: BTreeMap<NodeId, GpuSet> = BTreeMap::new();
        for &victim in &plan.victims {
            let hold = self.ledger.live(victim).filter(|hold| {
                hold.state == HoldState::Committed
                    && hold.terms.preemptible
                    && hold.terms.priority < target.terms.priority
            });
            let Some(hold) = hold else {
                return Err(texts::repair_victim_changed(victim));
            };
            for &(node, gpus) in &hold.gpus_by_node {
                *freed.entry(node).or_default() |= gpus & !self.states.get(node).unhealthy;
            }
        }
        let given_back = self.shares_given_back(&plan.victims);
        let whole = self.freed_whole(Default::default(), &given_back);
        for (node, gpus) in whole {
            *freed.entry(node).or_default() |= gpus;
        }
        Ok((freed, given_back))
    }

    /// Like [`Engine::check_pod_gpus`], counting `freed` (a victim's GPUs) as free too.
    fn check_pod_gpus_freed(&self, node: NodeId, gpus: GpuSet, freed: GpuSet) -> CoreResult<()> {
        let usable = self.states.get(node).free() | freed;
        match (gpus & !usable).lowest() {
            None => Ok(()),
            Some(gpu) => Err(texts::repair_gpu_taken(gpu, &self.topology.node(node).name)),
        }
    }

    /// Merges repair reservation `id` into its allocation and returns the allocation as it is
    /// now (docs/repair.md "Repair after failures", R5). If the allocation's lost ranks are no longer
    /// those the reservation replaces, raises [`CoreError::Conflict`] and rolls the
    /// reservation back; any other error changes nothing.
    pub fn commit_repair(
        &mut self,
        id: HoldId,
        caller: Owner<'_>,
        now: f64,
    ) -> CoreResult<Allocation> {
        self.reclaim(now);
        let (state, ending) = self.visible(id, caller);
        match state {
            None => return Err(Self::ended_error(id, ending, "commit_repair")),
            Some(HoldState::Committed) => {
                return Err(CoreError::ReservationError(format!(
                    "cannot commit_repair {id}: it is an allocation, not a repair reservation"
                )));
            }
            Some(HoldState::Reserved) => {}
        }
        let repair = self
            .ledger
            .live(id)
            .ok_or_else(|| internal("a live hold vanished"))?;
        let Some(link) = repair.repair.clone() else {
            return Err(CoreError::ReservationError(format!(
                "cannot commit_repair {id}: it is not a repair reservation; use commit"
            )));
        };
        let target = self
            .ledger
            .live(link.allocation)
            .ok_or_else(|| internal("a repair reservation outlived its allocation"))?;
        let lost = lost_ranks(&self.topology, &self.states, target);
        let stale = match lost == link.all_ranks() {
            false => Some(texts::lost_ranks_changed(
                link.allocation,
                &lost,
                &link.all_ranks(),
            )),
            true => (link.spares.iter())
                .find_map(|(_, spare)| self.check_spare(target, spare).err())
                .map(|error| error.to_string()),
        };
        if let Some(why) = stale {
            self.end_hold(id, Ending::RolledBack);
            return Err(texts::repair_rolled_back(&why, id));
        }
        let released = self.held_by_lost(target, &lost);
        let freed = held_gpus(&released);
        let owner = target.owner.clone();
        if owner.as_deref() != repair.owner.as_deref() {
            self.check_cap_after(owner.as_deref(), repair.gpu_count(), freed)?;
        }
        let placement = Arc::new(self.repaired_placement(target, &link, &repair.placement.pods));
        // The spares used now hold their ranks: their slots leave the asks.
        let used: Vec<usize> = (target.placement.spares.iter().enumerate())
            .filter(|(_, spare)| link.spares.iter().any(|(_, used)| used == *spare))
            .map(|(at, _)| at)
            .collect();
        let pods = target.placement.pods.len();
        let asks = asks_without_spares(pods, &target.pod_resources, &used);
        let new_nodes: Vec<NodeId> = (repair.placement.pods.iter())
            .filter_map(|pod| self.topology.node_id(&pod.node))
            .collect();
        let mut changes = Changes::new();
        let (states, ledger) = (&mut self.states, &mut self.ledger);
        ledger.merge_repair(states, &mut changes, id, &released, placement);
        self.resync_resources(&mut changes, link.allocation, asks, &new_nodes);
        self.apply(&changes);
        let merged = self.ledger.live(link.allocation);
        let merged = merged.ok_or_else(|| internal("a repaired allocation vanished"))?;
        Ok(allocation_of(
            &self.topology,
            &self.states,
            link.allocation,
            merged,
        ))
    }

    /// Refuses `pod` unless it is still one of the allocation's spares.
    fn check_spare(&self, hold: &Hold, pod: &PodPlacement) -> CoreResult<()> {
        if hold.placement.spares.contains(pod) {
            return Ok(());
        }
        Err(texts::spare_gone(&pod.node))
    }

    /// The GPUs the lost pods of `hold` still hold (on nodes that are still there), per node.
    fn held_by_lost(&self, hold: &Hold, lost: &[u64]) -> Vec<(NodeId, GpuSet)> {
        let mut released: Vec<(NodeId, GpuSet)> = Vec::new();
        for &rank in lost {
            let Some(pod) = usize::try_from(rank)
                .ok()
                .and_then(|r| hold.placement.pods.get(r))
            else {
                continue;
            };
            let Some(node) = self.topology.node_id(&pod.node) else {
                continue;
            };
            let held = hold.gpus_by_node.binary_search_by_key(&node, |&(on, _)| on);
            if let Ok(at) = held {
                released.push((node, pod.gpus & hold.gpus_by_node[at].1));
            }
        }
        gpus_by_node(released.into_iter()).unwrap_or_default()
    }

    /// `hold`'s placement with the ranks of `link` pointing at `pods`; its domain the
    /// placement's own if it holds them all, else the smallest domain enclosing it and them.
    fn repaired_placement(
        &self,
        hold: &Hold,
        link: &RepairLink,
        pods: &[PodPlacement],
    ) -> Placement {
        let mut placement = (*hold.placement).clone();
        let mut domain = placement.domain.clone();
        let used = |spare: &PodPlacement| link.spares.iter().any(|(_, used)| used == spare);
        placement.spares.retain(|spare| !used(spare));
        let served = link.spares.iter().map(|(rank, spare)| (rank, spare));
        for (&rank, pod) in link.ranks.iter().zip(pods).chain(served) {
            if let Some(slot) = usize::try_from(rank)
                .ok()
                .and_then(|r| placement.pods.get_mut(r))
            {
                *slot = pod.clone();
            }
            let path = self
                .topology
                .node_id(&pod.node)
                .map(|node| self.topology.node_path(node))
                .unwrap_or_default();
            let shared = domain.iter().zip(&path).take_while(|(a, b)| a == b).count();
            domain.truncate(shared);
        }
        if domain.len() != placement.domain.len() {
            placement.level = self.topology.level_name(domain.len()).to_owned();
            placement.domain = domain;
        }
        placement
    }
}

/// Refuses a plan whose replacements do not cover its lost ranks one for one (in rank order)
/// with pods of their ranks' sizes: such a plan was not made by `plan_repair`.
fn check_plan_shape(plan: &RepairPlan, hold: &Hold) -> CoreResult<()> {
    let ranks = plan.replacements.iter().map(|&(rank, _)| rank);
    if !ranks.eq(plan.lost.iter().copied()) {
        return Err(invalid(
            "the plan's replacements do not match its lost ranks one for one, in rank order",
        ));
    }
    for (rank, pod) in &plan.replacements {
        let lost = usize::try_from(*rank)
            .ok()
            .and_then(|r| hold.placement.pods.get(r));
        let Some(lost) = lost else {
            return Err(invalid(format!(
                "the plan replaces rank {rank}; the allocation has {} pods",
                hold.placement.pods.len()
            )));
        };
        if lost.gpus.count() != pod.gpus.count() {
            return Err(invalid(format!(
                "the plan gives rank {rank} {} GPUs; its pod has {}",
                pod.gpus.count(),
                lost.gpus.count()
            )));
        }
    }
    Ok(())
}
