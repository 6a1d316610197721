//! The ledger's operations for repairs and spares (docs/repair.md "Repair after failures", "Spares"):
//! merging a repair reservation into its allocation, dropping spares that lost hardware,
//! adding spares, and the check of the repair links.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::{EndedHold, Ending, Expiry, HoldState, Ledger};
use crate::ids::{GpuSet, HoldId, NodeId};
use crate::model::Placement;
use crate::state::{Changes, NodeStates};

impl Ledger {
    /// Merges repair reservation `id` into its allocation (docs/repair.md "Repair after failures",
    /// R5): its GPUs become the allocation's, `released` (the lost pods' GPUs still held)
    /// go back to the pool, the allocation's placement becomes `placement`, and the
    /// reservation ends as merged (its resources leave the nodes' use: the engine then
    /// recounts the allocation's, docs/resources.md "Node resources"). The caller has checked everything.
    pub fn merge_repair(
        &mut self,
        states: &mut NodeStates,
        changes: &mut Changes,
        id: HoldId,
        released: &[(NodeId, GpuSet)],
        placement: Arc<Placement>,
    ) {
        let Some(link) = self.live.get(&id).and_then(|hold| hold.repair.clone()) else {
            return;
        };
        let Some(repair) = self.live.remove(&id) else {
            return;
        };
        self.expiries.remove(&Expiry {
            at: repair.expires_at,
            id,
        });
        self.unlink_repair(id, &link);
        for (step, &(node, gpus)) in repair.gpus_by_node.iter().enumerate() {
            states.update(node, changes, |state| {
                state.reserved &= !gpus;
                state.allocated |= gpus;
            });
            self.remove_holder(node, id);
            self.failpoint(step);
        }
        for (node, amounts) in &repair.resources_by_node {
            states.use_resources(*node, amounts, false, changes);
        }
        self.sharers
            .remove(id, &repair.resources_by_node, &mut self.changed);
        for &(node, gpus) in released {
            states.update(node, changes, |state| state.allocated &= !gpus);
        }
        let target = link.allocation;
        self.note_hold(target);
        let Some(allocation) = self.live.get_mut(&target) else {
            self.recheck(id);
            return;
        };
        let merged = merged_gpus(&allocation.gpus_by_node, released, &repair.gpus_by_node);
        let touched: BTreeSet<NodeId> = (allocation.gpus_by_node.iter())
            .chain(&merged)
            .map(|&(node, _)| node)
            .collect();
        allocation.gpus_by_node = merged.into();
        allocation.placement = placement;
        let owner = allocation.owner.clone();
        let held: Vec<(NodeId, GpuSet)> = allocation.gpus_by_node.to_vec();
        for node in touched {
            self.remove_holder(node, target);
            if let Ok(at) = held.binary_search_by_key(&node, |&(on, _)| on) {
                self.add_holder(node, target, held[at].1);
            }
        }
        let freed: u64 = released.iter().map(|&(_, g)| u64::from(g.count())).sum();
        self.count_held(&repair.owner, 0, repair.gpu_count());
        self.count_held(&owner, repair.gpu_count(), freed);
        let owner = repair.owner;
        self.remember(
            id,
            EndedHold {
                ending: Ending::Merged,
                owner,
            },
        );
        self.recheck(id);
        self.recheck(target);
    }

    /// An allocation's spares on node `node` (named `name`) that hold a GPU of `gpus` stop
    /// being spares (docs/repair.md "Spares"): they leave its placement and the GPUs it still holds
    /// for them go back to the pool (unhealthy ones stay out of it). Returns their positions
    /// among its spares before (the engine recounts the resources they asked).
    pub fn drop_spares(
        &mut self,
        states: &mut NodeStates,
        changes: &mut Changes,
        id: HoldId,
        (node, name): (NodeId, &str),
        gpus: GpuSet,
    ) -> Vec<usize> {
        self.note_hold(id);
        let Some(hold) = self.live.get_mut(&id) else {
            return Vec::new();
        };
        let hit =
            |pod: &crate::model::PodPlacement| &*pod.node == name && pod.gpus.intersects(gpus);
        let positions: Vec<usize> = (hold.placement.spares.iter().enumerate())
            .filter(|(_, pod)| hit(pod))
            .map(|(at, _)| at)
            .collect();
        if positions.is_empty() {
            return positions;
        }
        let mut placement = (*hold.placement).clone();
        let dropped = placement.spares.iter().filter(|pod| hit(pod));
        let dropped = dropped.fold(GpuSet::EMPTY, |set, pod| set | pod.gpus);
        placement.spares.retain(|pod| !hit(pod));
        hold.placement = Arc::new(placement);
        let Ok(at) = hold.gpus_by_node.binary_search_by_key(&node, |&(on, _)| on) else {
            self.recheck(id);
            return positions; // the node's GPUs are already gone (`remove_node`)
        };
        let freed = hold.gpus_by_node[at].1 & dropped;
        hold.gpus_by_node[at].1 &= !freed;
        let left = hold.gpus_by_node[at].1;
        if left.is_empty() {
            hold.gpus_by_node.remove(at);
        }
        let owner = hold.owner.clone();
        states.update(node, changes, |state| state.allocated &= !freed);
        self.remove_holder(node, id);
        if !left.is_empty() {
            self.add_holder(node, id, left);
        }
        self.count_held(&owner, 0, u64::from(freed.count()));
        self.recheck(id);
        positions
    }

    /// Adds `pods` (each with its node) to allocation `id` as new spares, after its others
    /// (docs/repair.md "Spares", `reserve_spares`): their GPUs become allocated to it.
    pub fn add_spares(
        &mut self,
        states: &mut NodeStates,
        changes: &mut Changes,
        id: HoldId,
        pods: &[(NodeId, crate::model::PodPlacement)],
    ) {
        self.note_hold(id);
        let Some(hold) = self.live.get_mut(&id) else {
            return;
        };
        let added: Vec<(NodeId, GpuSet)> =
            pods.iter().map(|(node, pod)| (*node, pod.gpus)).collect();
        let mut placement = (*hold.placement).clone();
        placement
            .spares
            .extend(pods.iter().map(|(_, pod)| pod.clone()));
        hold.placement = Arc::new(placement);
        self.allocate_more(states, changes, id, &added);
    }

    /// Allocates `added` (GPUs per node, a node possibly repeated) to live hold `id` on top
    /// of what it holds: the node states, the holders index and the owner's count follow.
    pub(super) fn allocate_more(
        &mut self,
        states: &mut NodeStates,
        changes: &mut Changes,
        id: HoldId,
        added: &[(NodeId, GpuSet)],
    ) {
        self.note_hold(id);
        let Some(hold) = self.live.get_mut(&id) else {
            return;
        };
        hold.gpus_by_node = merged_gpus(&hold.gpus_by_node, &[], added).into();
        let (owner, held) = (hold.owner.clone(), hold.gpus_by_node.clone());
        let touched: BTreeSet<NodeId> = added.iter().map(|&(node, _)| node).collect();
        for (step, node) in touched.into_iter().enumerate() {
            let gpus = added.iter().filter(|&&(on, _)| on == node);
            let gpus = gpus.fold(GpuSet::EMPTY, |set, &(_, gpus)| set | gpus);
            states.update(node, changes, |state| state.allocated |= gpus);
            self.remove_holder(node, id);
            if let Ok(at) = held.binary_search_by_key(&node, |&(on, _)| on) {
                self.add_holder(node, id, held[at].1);
            }
            self.failpoint(step);
        }
        let count: u64 = added.iter().map(|&(_, gpus)| u64::from(gpus.count())).sum();
        self.count_held(&owner, count, 0);
        self.recheck(id);
    }

    /// Every repair reservation names a live allocation, and the index lists exactly them.
    pub(super) fn check_repairs(&self) -> Result<(), String> {
        let mut expected: BTreeMap<HoldId, Vec<HoldId>> = BTreeMap::new();
        for (&id, hold) in &self.live {
            let Some(link) = &hold.repair else { continue };
            let target = self.live.get(&link.allocation);
            if hold.state != HoldState::Reserved
                || target.is_none_or(|target| target.state != HoldState::Committed)
                || link.ranks.len() != hold.placement.pods.len()
                || !link.ranks.windows(2).all(|pair| pair[0] < pair[1])
                || target.is_some_and(|target| {
                    let ranks = link.all_ranks();
                    ranks.windows(2).any(|pair| pair[0] == pair[1])
                        || ranks.last().copied().unwrap_or(0) >= target.placement.pods.len() as u64
                        || ranks.iter().any(|r| target.ended.binary_search(r).is_ok())
                })
            {
                return Err(format!(
                    "repair reservation {id} is not tied to a live allocation"
                ));
            }
            expected.entry(link.allocation).or_default().push(id);
        }
        expected.values_mut().for_each(|ids| ids.sort_unstable());
        if expected != self.repairs {
            return Err("the index of repair reservations is stale".into());
        }
        Ok(())
    }
}

/// `held` less `released` plus `added`, per node sorted by node id, empty nodes dropped.
fn merged_gpus(
    held: &[(NodeId, GpuSet)],
    released: &[(NodeId, GpuSet)],
    added: &[(NodeId, GpuSet)],
) -> Vec<(NodeId, GpuSet)> {
    let mut by_node: BTreeMap<NodeId, GpuSet> = held.iter().copied().collect();
    for &(node, gpus) in released {
        if let Some(set) = by_node.get_mut(&node) {
            *set &= !gpus;
        }
    }
    for &(node, gpus) in added {
        *by_node.entry(node).or_default() |= gpus;
    }
    by_node.retain(|_, gpus| !gpus.is_empty());
    by_node.into_iter().collect()
}
