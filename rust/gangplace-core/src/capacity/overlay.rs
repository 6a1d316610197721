//! What-if views: a base view with some nodes' free GPUs replaced (the GPUs of would-be
//! victims freed, a would-be placement's GPUs taken, nodes made unusable), so that planning
//! runs the ordinary search on a state that does not exist, without changing the cluster.
//!
//! A domain's capacity is the base view's plus, for each replaced node below it, the
//! difference the replacement makes; the replaced nodes are listed per ancestor, so a query
//! costs O(replaced nodes below the domain). An overlay offers no free-GPU index (its entries
//! would be stale): searches over it walk the tree, and rank pods by the base view's ranks.

use std::collections::HashMap;

use super::CapacityView;
use super::index::FreeIndex;
use crate::ids::{DomainId, GpuSet, NodeId};
use crate::topology::Topology;

/// A base view with some nodes' free GPUs replaced.
#[derive(Debug)]
pub struct Overlay<'a, V> {
    topology: &'a Topology,
    base: &'a V,
    /// Replaced nodes: their free GPUs (`None`: unusable).
    nodes: HashMap<NodeId, Option<GpuSet>>,
    /// Domain -> the replaced nodes below it, in the order they were first replaced.
    below: HashMap<DomainId, Vec<NodeId>>,
}

fn pods_in(free: Option<GpuSet>, gpus_per_pod: u32) -> u64 {
    free.map_or(0, |free| u64::from(free.count() / gpus_per_pod))
}

fn gpus_in(free: Option<GpuSet>) -> u64 {
    free.map_or(0, |free| u64::from(free.count()))
}

impl<'a, V: CapacityView> Overlay<'a, V> {
    /// An overlay that changes nothing yet.
    pub fn new(topology: &'a Topology, base: &'a V) -> Self {
        Self {
            topology,
            base,
            nodes: HashMap::new(),
            below: HashMap::new(),
        }
    }

    /// Replaces a node's free GPUs (`None`: the node becomes unusable).
    pub fn set_node(&mut self, node: NodeId, free: Option<GpuSet>) {
        if self.nodes.insert(node, free).is_none() {
            for domain in self.topology.ancestors(self.topology.node(node).domain) {
                self.below.entry(domain).or_default().push(node);
            }
        }
    }

    /// Frees `gpus` on a usable node (they join its free GPUs).
    pub fn free(&mut self, node: NodeId, gpus: GpuSet) {
        if let Some(free) = self.node_free(node) {
            self.set_node(node, Some(free | gpus));
        }
    }

    fn sum_below(&self, domain: DomainId, measure: impl Fn(Option<GpuSet>) -> u64) -> (u64, u64) {
        let (mut now, mut before) = (0u64, 0u64);
        for node in self.below.get(&domain).map_or(&[][..], Vec::as_slice) {
            now += measure(self.nodes.get(node).copied().flatten());
            before += measure(self.base.node_free(*node));
        }
        (now, before)
    }
}

impl<V: CapacityView> CapacityView for Overlay<'_, V> {
    fn domain_capacity(&self, domain: DomainId, gpus_per_pod: u32) -> u64 {
        let (now, before) = self.sum_below(domain, |free| pods_in(free, gpus_per_pod));
        (self.base.domain_capacity(domain, gpus_per_pod) + now).saturating_sub(before)
    }

    fn domain_free(&self, domain: DomainId) -> u64 {
        let (now, before) = self.sum_below(domain, gpus_in);
        (self.base.domain_free(domain) + now).saturating_sub(before)
    }

    fn node_free(&self, node: NodeId) -> Option<GpuSet> {
        match self.nodes.get(&node) {
            Some(replaced) => *replaced,
            None => self.base.node_free(node),
        }
    }

    fn index(&self) -> Option<&FreeIndex> {
        None
    }

    fn ranks(&self) -> Option<&FreeIndex> {
        self.base.ranks()
    }

    fn largest_domain(&self, depth: usize) -> Option<u64> {
        self.base.largest_domain(depth)
    }
}
