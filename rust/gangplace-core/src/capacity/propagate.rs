//! Applying a mutation's change records to one family of aggregates and its index: every
//! changed node's entry moves once per record, every domain's entry once per mutation (its
//! value before the first record and after the last), whatever the number of nodes changed.

use std::collections::HashMap;

use super::aggregate::Aggregate;
use super::index::FreeIndex;
use crate::ids::{DomainId, NodeId};
use crate::state::NodeChange;
use crate::topology::Topology;

/// Where a family keeps its per-domain aggregates.
pub trait AggregateStore {
    /// The aggregate of `domain`, created empty if missing.
    fn aggregate_mut(&mut self, domain: DomainId) -> &mut Aggregate;
}

/// The cluster's own aggregates: one per domain slot.
impl AggregateStore for Vec<Aggregate> {
    fn aggregate_mut(&mut self, domain: DomainId) -> &mut Aggregate {
        &mut self[domain as usize]
    }
}

/// A selector pool's aggregates: only the domains that hold a member.
impl<S: std::hash::BuildHasher> AggregateStore for HashMap<DomainId, Aggregate, S> {
    fn aggregate_mut(&mut self, domain: DomainId) -> &mut Aggregate {
        self.entry(domain).or_default()
    }
}

/// Applies the records of the nodes `member` accepts to `store` and `index`. `touched` is
/// scratch space (cleared first) so that a mutation allocates nothing here. `open`: read the
/// counts a selector pool keeps (taints aside), else the cluster's own view's.
pub fn propagate(
    topology: &Topology,
    changes: &[NodeChange],
    member: impl Fn(NodeId) -> bool,
    (store, index): (&mut impl AggregateStore, &mut FreeIndex),
    touched: &mut Vec<(DomainId, u64)>,
    open: bool,
) {
    touched.clear();
    let node_depth = topology.node_depth();
    let as_free = |free: Option<u32>| free.map(u64::from);
    for change in changes.iter().filter(|change| member(change.node)) {
        let (before, after) = if open {
            change.open
        } else {
            (change.before, change.after)
        };
        if before == after {
            continue;
        }
        index.node_moved(node_depth, change.node, as_free(before), as_free(after));
        for domain in topology.ancestors(topology.node(change.node).domain) {
            let aggregate = store.aggregate_mut(domain);
            touched.push((domain, aggregate.free_gpus()));
            aggregate.change(before, after);
        }
    }
    if index.is_stale() {
        return;
    }
    // Stable sort: the first entry of each domain holds its value before the mutation.
    touched.sort_by_key(|&(domain, _)| domain);
    touched.dedup_by_key(|&mut (domain, _)| domain);
    for &(domain, before) in touched.iter() {
        let after = store.aggregate_mut(domain).free_gpus();
        let depth = topology.domain(domain).depth;
        index.domain_moved(depth, domain, Some(before), Some(after));
    }
}
