//! Which nodes' holds changed since someone last asked: the ledger notes every node whose
//! holders change, and every node of a hold changed in place (priority, state, GPUs held),
//! so that a kept index over the holds ([`crate::preemption`]'s) re-reads only those nodes.
//! The list is bounded: past as many entries as the ledger has node slots (plus a margin),
//! it is dropped and reported as "everything changed", so an engine that never plans a
//! preemption keeps no growing list.

use super::Ledger;
use crate::ids::{HoldId, NodeId};

/// Entries kept beyond the node slots before the list gives up and reports everything.
const MARGIN: usize = 1024;

/// The nodes noted since the last take, or "everything" once too many were noted.
#[derive(Debug, Default)]
pub(super) struct ChangedNodes {
    nodes: Vec<NodeId>,
    overflowed: bool,
    /// The bound on `nodes`, raised with the ledger's node slots.
    bound: usize,
}

impl ChangedNodes {
    /// Notes `node`.
    pub(super) fn mark(&mut self, node: NodeId) {
        if self.overflowed {
            return;
        }
        if self.nodes.len() >= self.bound.max(MARGIN) {
            self.nodes = Vec::new();
            self.overflowed = true;
            return;
        }
        self.nodes.push(node);
    }
}

impl Ledger {
    /// Notes the nodes of live hold `id`, about to be changed in place.
    pub(super) fn note_hold(&mut self, id: HoldId) {
        if let Some(hold) = self.live.get(&id) {
            for &(node, _) in &hold.gpus_by_node {
                self.changed.mark(node);
            }
            // A fractional hold's nodes are those of its shares (docs/preemption.md P8).
            if hold.placement.gpu_milli.is_some() {
                for (node, _) in &hold.resources_by_node {
                    self.changed.mark(*node);
                }
            }
        }
    }

    /// The nodes whose holds changed since the last call, sorted, each once; `None` when
    /// too many changed to be listed (the caller re-reads every node).
    pub fn take_changed(&mut self) -> Option<Vec<NodeId>> {
        let changed = &mut self.changed;
        changed.bound = self.holders.len() + MARGIN;
        let mut nodes = std::mem::take(&mut changed.nodes);
        if std::mem::take(&mut changed.overflowed) {
            return None;
        }
        nodes.sort_unstable();
        nodes.dedup();
        Some(nodes)
    }
}
