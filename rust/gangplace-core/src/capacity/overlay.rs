//! What-if views: a base view with some nodes' free GPUs replaced (the GPUs of would-be
//! victims freed, a would-be placement's GPUs taken, nodes made unusable), so that planning
//! runs the ordinary search on a state that does not exist, without changing the cluster.
//!
//! An overlay counts for one pod size (the search's): replacing a node adds, to each of its
//! ancestors, the difference the replacement makes in free GPUs and in pods of that size, so
//! a domain's capacity is the base view's plus one stored difference (one lookup). A query
//! for another pod size sums over the replaced nodes below the domain instead. An overlay
//! offers no free-GPU index (its entries would be stale): searches over it walk the tree, and
//! rank pods by the base view's ranks.

use rustc_hash::FxHashMap as HashMap;

use super::CapacityView;
use super::aggregate::pods_on_node;
use super::index::FreeIndex;
use crate::ids::{DomainId, GpuSet, NodeId};
use crate::topology::Topology;

/// A base view with some nodes' free GPUs replaced.
#[derive(Debug)]
pub struct Overlay<'a, V> {
    topology: &'a Topology,
    base: &'a V,
    /// The pod size `deltas` count.
    gpus_per_pod: u32,
    /// Replaced nodes: their free GPUs (`None`: unusable).
    nodes: HashMap<NodeId, Option<GpuSet>>,
    /// Domain -> (free GPUs, pods of `gpus_per_pod`) its replaced nodes add to the base view,
    /// kept for the domains of depth `top_depth` or deeper.
    deltas: HashMap<DomainId, (i64, i64)>,
    /// Depth of the shallowest domains whose differences are kept (0: all). Queries about
    /// shallower ones walk the replaced nodes.
    top_depth: usize,
}

fn pods_in(free: Option<GpuSet>, gpus_per_pod: u32) -> u64 {
    free.map_or(0, |free| {
        u64::from(pods_on_node(free.count(), gpus_per_pod))
    })
}

fn gpus_in(free: Option<GpuSet>) -> u64 {
    free.map_or(0, |free| u64::from(free.count()))
}

/// `after - before` as a signed count (both are at most 2^28).
fn change(before: u64, after: u64) -> i64 {
    i64::try_from(after).unwrap_or(i64::MAX) - i64::try_from(before).unwrap_or(i64::MAX)
}

/// `base + delta`, never below zero.
fn adjusted(base: u64, delta: i64) -> u64 {
    base.saturating_add_signed(delta)
}

impl<'a, V: CapacityView> Overlay<'a, V> {
    /// An overlay that changes nothing yet, counting pods of `gpus_per_pod` GPUs.
    pub fn new(topology: &'a Topology, base: &'a V, gpus_per_pod: u32) -> Self {
        Self::with_capacity(topology, base, gpus_per_pod, 0)
    }

    /// The same, with room for `nodes` replaced nodes, for searches inside one domain of
    /// depth `top_depth` (shallower domains are answered by walking the replaced nodes).
    pub fn within(
        topology: &'a Topology,
        base: &'a V,
        gpus_per_pod: u32,
        nodes: usize,
        top_depth: usize,
    ) -> Self {
        let mut replaced = HashMap::default();
        replaced.reserve(nodes);
        Self {
            topology,
            base,
            gpus_per_pod: gpus_per_pod.max(1),
            nodes: replaced,
            deltas: HashMap::default(),
            top_depth,
        }
    }

    /// An overlay that changes nothing yet, counting pods of `gpus_per_pod` GPUs.
    fn with_capacity(topology: &'a Topology, base: &'a V, gpus_per_pod: u32, nodes: usize) -> Self {
        Self::within(topology, base, gpus_per_pod, nodes, 0)
    }

    /// Replaces a node's free GPUs (`None`: the node becomes unusable).
    pub fn set_node(&mut self, node: NodeId, free: Option<GpuSet>) {
        let before = match self.nodes.insert(node, free) {
            Some(previous) => previous,
            None => self.base.node_free(node),
        };
        let size = self.gpus_per_pod;
        let delta = (
            change(gpus_in(before), gpus_in(free)),
            change(pods_in(before, size), pods_in(free, size)),
        );
        if delta == (0, 0) {
            return;
        }
        let ancestors = self.topology.ancestors(self.topology.node(node).domain);
        for domain in ancestors {
            if self.topology.domain(domain).depth < self.top_depth {
                break;
            }
            let entry = self.deltas.entry(domain).or_insert((0, 0));
            entry.0 += delta.0;
            entry.1 += delta.1;
        }
    }

    /// Frees `gpus` on a usable node (they join its free GPUs).
    pub fn free(&mut self, node: NodeId, gpus: GpuSet) {
        if let Some(free) = self.node_free(node) {
            self.set_node(node, Some(free | gpus));
        }
    }

    /// The difference the replaced nodes below `domain` make to `measure`, by walking them:
    /// for pod sizes other than the overlay's, and domains above `top_depth`.
    fn walked_delta(&self, domain: DomainId, measure: impl Fn(Option<GpuSet>) -> u64) -> i64 {
        let mut delta = 0i64;
        for (&node, &free) in &self.nodes {
            let below = self
                .topology
                .ancestors(self.topology.node(node).domain)
                .any(|ancestor| ancestor == domain);
            if below {
                delta += change(measure(self.base.node_free(node)), measure(free));
            }
        }
        delta
    }

    /// The stored differences of a domain, if they are kept for it.
    fn kept(&self, domain: DomainId) -> Option<(i64, i64)> {
        if self.topology.domain(domain).depth < self.top_depth {
            return None;
        }
        Some(self.deltas.get(&domain).copied().unwrap_or((0, 0)))
    }
}

impl<V: CapacityView> CapacityView for Overlay<'_, V> {
    fn domain_capacity(&self, domain: DomainId, gpus_per_pod: u32) -> u64 {
        let base = self.base.domain_capacity(domain, gpus_per_pod);
        match self.kept(domain) {
            Some((_, pods)) if gpus_per_pod == self.gpus_per_pod => adjusted(base, pods),
            _ => adjusted(
                base,
                self.walked_delta(domain, |free| pods_in(free, gpus_per_pod)),
            ),
        }
    }

    fn domain_free(&self, domain: DomainId) -> u64 {
        let base = self.base.domain_free(domain);
        match self.kept(domain) {
            Some((gpus, _)) => adjusted(base, gpus),
            None => adjusted(base, self.walked_delta(domain, gpus_in)),
        }
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
