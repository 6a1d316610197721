//! Applying a mutation's change records to one family of aggregates and its index: every
//! changed node's entry moves once per record, every domain's entry once per mutation (its
//! value before the first record and after the last), whatever the number of nodes changed.
//! A domain's first touch in a mutation is found by a generation stamp per domain slot, not
//! by sorting the touches (issue 51: the sort was a tenth of a large release's cost).

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

/// The domains a mutation touched, each once with its free GPUs before the mutation, in
/// the order first touched: scratch space kept between mutations so that one allocates
/// nothing once the stamps have grown to the cluster's domain slots.
#[derive(Debug, Default, Clone)]
pub struct Touched {
    first: Vec<(DomainId, u64)>,
    /// Domain slot -> the generation that last touched it.
    stamps: Vec<u32>,
    generation: u32,
}

impl Touched {
    /// Starts a mutation over `slots` domain slots.
    fn begin(&mut self, slots: usize) {
        self.first.clear();
        if self.stamps.len() < slots {
            self.stamps.resize(slots, 0);
        }
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.stamps.fill(0); // wrapped: no stamp may look current
            self.generation = 1;
        }
    }

    /// Notes `domain`, with its free GPUs now, if this mutation has not touched it yet.
    fn note(&mut self, domain: DomainId, free: u64) {
        let stamp = &mut self.stamps[domain as usize];
        if *stamp != self.generation {
            *stamp = self.generation;
            self.first.push((domain, free));
        }
    }
}

/// Applies the records of the nodes `member` accepts to `store` and `index`. `touched` is
/// scratch space so that a mutation allocates nothing here. `open`: read the
/// counts a selector pool keeps (taints aside), else the cluster's own view's.
pub fn propagate(
    topology: &Topology,
    changes: &[NodeChange],
    member: impl Fn(NodeId) -> bool,
    (store, index): (&mut impl AggregateStore, &mut FreeIndex),
    touched: &mut Touched,
    open: bool,
) {
    touched.begin(topology.domain_slots());
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
            touched.note(domain, aggregate.free_gpus());
            aggregate.change(before, after);
        }
    }
    if index.is_stale() {
        return;
    }
    // Each domain once, with its value before the mutation; the index is a set, so the
    // order of these moves does not matter.
    for &(domain, before) in &touched.first {
        let after = store.aggregate_mut(domain).free_gpus();
        let depth = topology.domain(domain).depth;
        index.domain_moved(depth, domain, Some(before), Some(after));
    }
}
