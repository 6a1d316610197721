//! Per node, the live holds with shares of GPUs there (docs/resources.md "Fractions of a GPU"):
//! what `holds_on` lists beside the holders of whole GPUs (docs/transactions.md
//! "Transactions"), read without a pass over the holds. Kept from each hold's use per node
//! (`Hold::resources_by_node`, where its shares are share resources), at every change of it.

use std::collections::HashMap;

use super::changed::ChangedNodes;
use super::{Hold, Ledger};
use crate::ids::{GpuSet, HoldId, NodeId};
use crate::resources::Amounts;
use crate::shares::split;

/// Per node slot: the holds sharing GPUs there, with those GPUs, in the order they came.
#[derive(Debug, Default)]
pub(super) struct Sharers {
    by_node: Vec<Vec<(HoldId, GpuSet)>>,
}

/// The GPUs `amounts` (one node's use) holds shares of.
fn shared_gpus(amounts: &Amounts) -> GpuSet {
    (split(amounts).1.iter()).fold(GpuSet::EMPTY, |set, &(gpu, _)| set | GpuSet::single(gpu))
}

impl Sharers {
    /// Hold `id` now uses `by_node` (it used nothing before, or was removed first); the
    /// nodes it shares GPUs of are noted `changed` (the preemption index sums sharers up).
    pub(super) fn add(
        &mut self,
        id: HoldId,
        by_node: &[(NodeId, Amounts)],
        changed: &mut ChangedNodes,
    ) {
        for (node, amounts) in by_node {
            let gpus = shared_gpus(amounts);
            if gpus.is_empty() {
                continue;
            }
            changed.mark(*node);
            let slot = *node as usize;
            if slot >= self.by_node.len() {
                self.by_node.resize_with(slot + 1, Vec::new);
            }
            self.by_node[slot].push((id, gpus));
        }
    }

    /// Hold `id` no longer uses `by_node` (what it used there); the nodes it shared GPUs of
    /// are noted `changed`.
    pub(super) fn remove(
        &mut self,
        id: HoldId,
        by_node: &[(NodeId, Amounts)],
        changed: &mut ChangedNodes,
    ) {
        for (node, _) in by_node {
            if let Some(sharers) = self.by_node.get_mut(*node as usize) {
                let before = sharers.len();
                sharers.retain(|&(sharer, _)| sharer != id);
                if sharers.len() != before {
                    changed.mark(*node);
                }
            }
        }
    }

    /// The holds sharing GPUs of `node`, with those GPUs, in the order they came.
    fn on(&self, node: NodeId) -> &[(HoldId, GpuSet)] {
        self.by_node.get(node as usize).map_or(&[], Vec::as_slice)
    }

    /// Checks the index against the live holds (for `check_invariants`).
    pub(super) fn check(&self, live: &HashMap<HoldId, Hold>) -> Result<(), String> {
        let mut expected = Sharers::default();
        for (&id, hold) in live {
            expected.add(id, &hold.resources_by_node, &mut ChangedNodes::default());
        }
        let slots = self.by_node.len().max(expected.by_node.len());
        for slot in 0..slots {
            let node = NodeId::try_from(slot).map_err(|_| "too many node slots".to_string())?;
            let mut actual = self.on(node).to_vec();
            let mut wanted = expected.on(node).to_vec();
            actual.sort_unstable();
            wanted.sort_unstable();
            if actual != wanted {
                return Err(format!("the sharers index of node slot {slot} is stale"));
            }
        }
        Ok(())
    }
}

impl Hold {
    /// What this hold's shares hold in all: (thousandths of GPUs, GPUs it has a share of),
    /// healthy or not (docs/preemption.md P8 counts them).
    pub(crate) fn shares_held(&self) -> (u64, u64) {
        let by_node = self.resources_by_node.iter();
        by_node.fold((0, 0), |(held, reach), (_, amounts)| {
            let shares = split(amounts).1;
            let milli: u64 = shares.iter().map(|&(_, milli)| milli).sum();
            (held + milli, reach + shares.len() as u64)
        })
    }
}

impl Ledger {
    /// The holds with shares of GPUs on `node`, with the GPUs each shares there, in the order
    /// they came (the caller sorts, as for [`Ledger::holders_of`]).
    pub fn sharers_of(&self, node: NodeId) -> &[(HoldId, GpuSet)] {
        self.sharers.on(node)
    }
}
