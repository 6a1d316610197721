//! The pod counts a search reads instead of counting node by node (docs/resources.md "Node
//! resources"): a shape's kept counts on the cluster's view ([`ShapeCount`]), or those
//! counts seen through a what-if view that changes a few nodes (a repair's view with the GPUs
//! and resources its earlier classes took and its victims gave back): the changed nodes'
//! counts replace theirs, and their ancestors' sums move by the differences. A what-if over
//! a handful of nodes so reads every domain's count at once, as the cluster's own view does,
//! instead of visiting its nodes (issue 50, item 2).

use std::collections::BTreeSet;

use super::ShapeCount;
use crate::ids::{DomainId, NodeId};
use crate::topology::Topology;

/// Kept counts, as they are or through a what-if view.
#[derive(Debug, Clone, Copy)]
pub enum Counts<'a> {
    /// A shape's kept counts on the cluster's view.
    Kept(&'a ShapeCount),
    /// The same with a few nodes' counts changed.
    Overlaid(&'a OverlaidCounts<'a>),
}

impl<'a> Counts<'a> {
    /// Pods node `id` holds.
    #[inline]
    pub fn node(self, id: NodeId) -> u64 {
        match self {
            Counts::Kept(kept) => kept.node(id),
            Counts::Overlaid(overlaid) => overlaid.node(id),
        }
    }

    /// Pods domain `id`'s nodes hold, up to `cap`.
    #[inline]
    pub fn domain(self, id: DomainId, cap: u64) -> u64 {
        match self {
            Counts::Kept(kept) => kept.domain(id, cap),
            Counts::Overlaid(overlaid) => overlaid.domain(id, cap),
        }
    }

    /// The domains of `depth` holding at least `pods` pods, when kept for that size (never
    /// through a what-if view: its changes are not in the kept sets).
    pub fn holding(self, depth: usize, pods: u64) -> Option<&'a BTreeSet<DomainId>> {
        match self {
            Counts::Kept(kept) => kept.holding(depth, pods),
            Counts::Overlaid(_) => None,
        }
    }
}

/// A shape's kept counts with some nodes' counts replaced (see the module's text).
#[derive(Debug, Clone)]
pub struct OverlaidCounts<'a> {
    base: &'a ShapeCount,
    /// Changed nodes and their counts on the what-if view, sorted by node.
    nodes: Vec<(NodeId, u64)>,
    /// Domains above a changed node and how their sums moved, sorted by domain.
    domains: Vec<(DomainId, i128)>,
}

impl<'a> OverlaidCounts<'a> {
    /// `base` with each of `changed`'s `(node, count on the what-if view)` in place of the
    /// node's kept count.
    pub fn new(
        topology: &Topology,
        base: &'a ShapeCount,
        changed: impl IntoIterator<Item = (NodeId, u64)>,
    ) -> Self {
        let mut nodes: Vec<(NodeId, u64)> = changed.into_iter().collect();
        nodes.sort_unstable_by_key(|&(id, _)| id);
        nodes.dedup_by_key(|&mut (id, _)| id);
        let mut domains: Vec<(DomainId, i128)> = Vec::new();
        for &(id, count) in &nodes {
            let moved = i128::from(count) - i128::from(base.node(id));
            if moved == 0 {
                continue;
            }
            for domain in topology.ancestors(topology.node(id).domain) {
                domains.push((domain, moved));
            }
        }
        domains.sort_unstable_by_key(|&(id, _)| id);
        let mut summed: Vec<(DomainId, i128)> = Vec::with_capacity(domains.len());
        for (id, moved) in domains {
            match summed.last_mut() {
                Some((last, sum)) if *last == id => *sum += moved,
                _ => summed.push((id, moved)),
            }
        }
        Self {
            base,
            nodes,
            domains: summed,
        }
    }

    /// Pods node `id` holds on the what-if view.
    #[inline]
    pub fn node(&self, id: NodeId) -> u64 {
        match self.nodes.binary_search_by_key(&id, |&(node, _)| node) {
            Ok(at) => self.nodes[at].1,
            Err(_) => self.base.node(id),
        }
    }

    /// Pods domain `id`'s nodes hold on the what-if view, up to `cap`.
    #[inline]
    pub fn domain(&self, id: DomainId, cap: u64) -> u64 {
        let moved = match self
            .domains
            .binary_search_by_key(&id, |&(domain, _)| domain)
        {
            Ok(at) => self.domains[at].1,
            Err(_) => return self.base.domain(id, cap),
        };
        let sum = i128::try_from(self.base.domain_sum(id)).unwrap_or(i128::MAX) + moved;
        u64::try_from(sum.max(0)).unwrap_or(u64::MAX).min(cap)
    }
}
