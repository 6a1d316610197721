//! The ledger's operation for ending some pods of an allocation (docs/transactions.md "Ending some pods",
//! E1-E4): the ranks are recorded as ended and the GPUs their pods still hold go back to the
//! pool. The engine has computed and checked everything; nothing here can fail.

use super::Ledger;
use crate::ids::{GpuSet, HoldId, NodeId};
use crate::state::{Changes, NodeStates};

impl Ledger {
    /// Marks `ranks` of allocation `id` ended and frees `freed` (per node, GPUs the
    /// allocation holds there). Unhealthy GPUs stay out of the pool, as `end` leaves them.
    pub fn end_pods(
        &mut self,
        states: &mut NodeStates,
        changes: &mut Changes,
        id: HoldId,
        ranks: &[u64],
        freed: &[(NodeId, GpuSet)],
    ) {
        self.note_hold(id);
        let Some(hold) = self.live.get_mut(&id) else {
            return;
        };
        hold.ended.extend_from_slice(ranks);
        hold.ended.sort_unstable();
        let mut count = 0u64;
        let mut touched: Vec<(NodeId, GpuSet)> = Vec::with_capacity(freed.len());
        for &(node, gpus) in freed {
            let Ok(at) = hold.gpus_by_node.binary_search_by_key(&node, |&(on, _)| on) else {
                continue;
            };
            let gone = hold.gpus_by_node[at].1 & gpus;
            hold.gpus_by_node[at].1 &= !gone;
            let left = hold.gpus_by_node[at].1;
            if left.is_empty() {
                hold.gpus_by_node.remove(at);
            }
            count += u64::from(gone.count());
            touched.push((node, left));
            states.update(node, changes, |state| state.allocated &= !gone);
        }
        let owner = hold.owner.clone();
        for (node, left) in touched {
            self.remove_holder(node, id);
            if !left.is_empty() {
                self.add_holder(node, id, left);
            }
        }
        self.count_held(&owner, 0, count);
        self.recheck(id);
    }
}

impl Ledger {
    /// Sets allocation `id`'s resources per node to `by_node` (after some of its pods ended
    /// or were added), handing the difference to the nodes' use.
    pub fn set_resources(
        &mut self,
        states: &mut NodeStates,
        changes: &mut Changes,
        id: HoldId,
        pod_resources: std::sync::Arc<[crate::resources::Amounts]>,
        by_node: Vec<(NodeId, crate::resources::Amounts)>,
    ) {
        self.note_hold(id);
        let Some(hold) = self.live.get_mut(&id) else {
            return;
        };
        for (node, amounts) in &hold.resources_by_node {
            states.use_resources(*node, amounts, false, changes);
        }
        for (node, amounts) in &by_node {
            states.use_resources(*node, amounts, true, changes);
        }
        self.sharers
            .remove(id, &hold.resources_by_node, &mut self.changed);
        self.sharers.add(id, &by_node, &mut self.changed);
        hold.pod_resources = pod_resources;
        hold.resources_by_node = by_node;
    }

    /// The live repair reservations of allocation `id`, sorted by id.
    pub fn repairs_of(&self, id: HoldId) -> &[HoldId] {
        self.repairs.get(&id).map_or(&[], Vec::as_slice)
    }
}

impl Ledger {
    /// Adds pods to allocation `id` (docs/transactions.md "Adopting running work", `adopt(into=...)`):
    /// its placement becomes `placement` (the old pods, then the new ones), `added` (per
    /// node) becomes allocated to it, and its terms become `terms`.
    pub fn add_pods(
        &mut self,
        states: &mut NodeStates,
        changes: &mut Changes,
        id: HoldId,
        (placement, terms): (std::sync::Arc<crate::model::Placement>, crate::model::Terms),
        added: &[(NodeId, GpuSet)],
    ) {
        self.note_hold(id);
        let Some(hold) = self.live.get_mut(&id) else {
            return;
        };
        hold.placement = placement;
        hold.terms = terms;
        self.allocate_more(states, changes, id, added);
        self.recheck(id);
    }
}
