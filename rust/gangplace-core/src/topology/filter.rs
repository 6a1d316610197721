//! Which nodes admit a request's [`NodeFilter`] (docs/placement.md, rule 1), and a node's taints.

use super::{Node, Topology};
use crate::filter::{NodeFilter, Taint};
use crate::ids::NodeId;

impl Node {
    /// Whether the node carries the filter's labels, matches its affinity, and every taint
    /// of it that excludes is tolerated.
    pub fn admits(&self, filter: &NodeFilter) -> bool {
        filter.admits(
            |key| self.labels.get(key).map(|value| &**value),
            &self.taints,
        )
    }

    /// Whether a taint of it excludes requests that do not tolerate it.
    pub fn tainted(&self) -> bool {
        self.taints.iter().any(|taint| taint.effect.excludes())
    }
}

impl Topology {
    /// The nodes admitting `filter`: found through the label index when it selects labels,
    /// else by a pass over every node.
    pub fn nodes_admitting<'a>(
        &'a self,
        filter: &'a NodeFilter,
    ) -> Box<dyn Iterator<Item = NodeId> + 'a> {
        if filter.labels.is_empty() {
            return Box::new(
                self.nodes()
                    .filter(move |(_, node)| node.admits(filter))
                    .map(|(id, _)| id),
            );
        }
        // A label no node carries leaves no candidate (`collect` into `Option` stops there).
        let sets: Option<Vec<_>> = filter
            .labels
            .iter()
            .map(|(key, value)| self.labels.nodes_with(key, value))
            .collect();
        let smallest = sets.and_then(|sets| sets.into_iter().min_by_key(|set| set.len()));
        Box::new(
            smallest
                .into_iter()
                .flatten()
                .copied()
                .filter(move |&id| self.node(id).admits(filter)),
        )
    }

    /// Replaces a node's taints (checked first); the caller updates its state's flag.
    pub fn set_taints(&mut self, id: NodeId, taints: Vec<Taint>) {
        self.nodes[id as usize].taints = taints;
    }
}
