//! Ending some pods of an allocation (docs/transactions.md "Ending some pods", E1-E4): a worker that
//! completed, a pod that was deleted. The other ranks keep their numbers; the last rank
//! ending ends the allocation as released.

use std::collections::BTreeMap;

use super::Engine;
use super::transactions::{Owner, allocation_of};
use crate::error::{CoreError, CoreResult, internal, invalid};
use crate::ids::{GpuSet, HoldId, NodeId};
use crate::ledger::{Ending, Hold, HoldState};
use crate::model::Allocation;
use crate::state::Changes;

impl Engine {
    /// Ends the pods of `ranks` of allocation `id` (docs/transactions.md "Ending some pods"). Returns the
    /// allocation as it is now, or `None` when no rank is left (it ended as released). On
    /// any error nothing changes.
    pub fn release_pods(
        &mut self,
        id: HoldId,
        ranks: &[i64],
        caller: Owner<'_>,
        now: f64,
    ) -> CoreResult<Option<Allocation>> {
        self.reclaim(now);
        match self.visible(id, caller) {
            (Some(HoldState::Committed), _) => {}
            (Some(HoldState::Reserved), _) => {
                return Err(CoreError::ReservationError(format!(
                    "cannot release pods of {id}: it is not committed; roll it back instead"
                )));
            }
            (None, ending) => return Err(Self::ended_error(id, ending, "release pods of")),
        }
        let hold = self
            .ledger
            .live(id)
            .ok_or_else(|| internal("a live allocation vanished"))?;
        let ranks = checked_ranks(id, hold, ranks)?;
        self.check_no_repair_of(id, &ranks)?;
        let freed = self.freed_by(hold, &ranks);
        let mut changes = Changes::new();
        if hold.ended.len() + ranks.len() == hold.placement.pods.len() {
            self.ledger
                .end(&mut self.states, &mut changes, id, Ending::Released);
            self.apply(&changes);
            return Ok(None);
        }
        self.ledger
            .end_pods(&mut self.states, &mut changes, id, &ranks, &freed);
        let hold = self
            .ledger
            .live(id)
            .ok_or_else(|| internal("a live allocation vanished"))?;
        if !hold.resources_by_node.is_empty() {
            // The ended pods' resources and GPU shares go back with their GPUs.
            let (asks, by_node) = (hold.pod_resources.clone(), self.hold_resources(hold));
            (self.ledger).set_resources(&mut self.states, &mut changes, id, asks, by_node);
        }
        self.apply(&changes);
        let hold = self
            .ledger
            .live(id)
            .ok_or_else(|| internal("a live allocation vanished"))?;
        Ok(Some(allocation_of(&self.topology, &self.states, id, hold)))
    }

    /// Refuses ranks that a live repair reservation of `id` replaces (E3).
    fn check_no_repair_of(&self, id: HoldId, ranks: &[u64]) -> CoreResult<()> {
        for &repair in self.ledger.repairs_of(id) {
            let Some(link) = self.ledger.live(repair).and_then(|h| h.repair.as_ref()) else {
                continue;
            };
            let replaced = link.all_ranks();
            if let Some(rank) = ranks.iter().find(|r| replaced.binary_search(r).is_ok()) {
                return Err(CoreError::ReservationError(format!(
                    "cannot end rank {rank} of {id}: repair reservation {repair} replaces it; \
                     commit or roll back the repair first"
                )));
            }
        }
        Ok(())
    }

    /// Per node, the GPUs that ending `ranks` frees: their pods' GPUs the allocation still
    /// holds there, except GPUs that a remaining rank or a spare on a node of that name
    /// names (a removed node's old pods never free a returned node's GPUs).
    fn freed_by(&self, hold: &Hold, ranks: &[u64]) -> Vec<(NodeId, GpuSet)> {
        let mut ending: BTreeMap<&str, GpuSet> = BTreeMap::new();
        let mut kept: BTreeMap<&str, GpuSet> = BTreeMap::new();
        for (rank, pod) in (0u64..).zip(&hold.placement.pods) {
            if ranks.binary_search(&rank).is_ok() {
                *ending.entry(&pod.node).or_default() |= pod.gpus;
            } else if hold.ended.binary_search(&rank).is_err() {
                *kept.entry(&pod.node).or_default() |= pod.gpus;
            }
        }
        for spare in &hold.placement.spares {
            *kept.entry(&spare.node).or_default() |= spare.gpus;
        }
        let mut freed: Vec<(NodeId, GpuSet)> = ending
            .into_iter()
            .filter_map(|(name, gpus)| {
                let node = self.topology.node_id(name)?;
                let keep = kept.get(name).copied().unwrap_or_default();
                let held = hold.gpus_by_node.iter().find(|&&(on, _)| on == node)?.1;
                let gone = gpus & held & !keep;
                (!gone.is_empty()).then_some((node, gone))
            })
            .collect();
        freed.sort_unstable_by_key(|&(node, _)| node);
        freed
    }
}

/// `ranks` sorted, after checking each is a rank of `hold` that has not ended, named once,
/// and that there is at least one (E2).
fn checked_ranks(id: HoldId, hold: &Hold, ranks: &[i64]) -> CoreResult<Vec<u64>> {
    if ranks.is_empty() {
        return Err(invalid("ranks is empty: name at least one rank to end"));
    }
    let count = hold.placement.pods.len() as u64;
    let mut checked: Vec<u64> = Vec::with_capacity(ranks.len());
    for &rank in ranks {
        let rank = u64::try_from(rank)
            .ok()
            .filter(|&r| r < count)
            .ok_or_else(|| {
                invalid(format!(
                    "rank {rank} is out of range: allocation {id} has ranks 0 to {}",
                    count.saturating_sub(1)
                ))
            })?;
        if hold.ended.binary_search(&rank).is_ok() {
            return Err(invalid(format!("rank {rank} of {id} has already ended")));
        }
        checked.push(rank);
    }
    checked.sort_unstable();
    if let Some(pair) = checked.windows(2).find(|pair| pair[0] == pair[1]) {
        return Err(invalid(format!("rank {} is named twice", pair[0])));
    }
    Ok(checked)
}

impl Engine {
    /// A restored hold's ended ranks are sound: only an allocation has them, sorted, named
    /// once, each a rank of its placement, not all of them, and their pods hold no GPU.
    pub(crate) fn check_ended(&self, hold: &Hold, committed: bool) -> CoreResult<()> {
        let ended = &hold.ended;
        if ended.is_empty() {
            return Ok(());
        }
        let pods = hold.placement.pods.len() as u64;
        let sound = committed
            && ended.windows(2).all(|pair| pair[0] < pair[1])
            && ended.last().is_some_and(|&last| last < pods)
            && (ended.len() as u64) < pods
            && self.freed_by(hold, ended).is_empty();
        if sound {
            return Ok(());
        }
        Err(CoreError::InvalidSnapshot(
            "a hold's ended ranks are not ranks it may have ended".into(),
        ))
    }
}
