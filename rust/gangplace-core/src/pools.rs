//! Selector pools: aggregates and a free-GPU index for the nodes of one label selector,
//! kept up to date incrementally, so that a request with a selector costs about what a request
//! without one costs.
//!
//! A pool is built the first time a selector is seen (one pass over its matching nodes, found
//! through the label index) and then maintained: every change of a member node's free GPUs or
//! cordon updates the pool's aggregates along the node's ancestors and its index entries,
//! O(levels) per pool the node belongs to. Membership is a bit per pool on each node. At most
//! [`MAX_POOLS`] selectors are kept; the least recently used one is dropped for a new one.
//! Adding or removing nodes drops every pool (they are rebuilt on next use).

use std::collections::HashMap;

use crate::capacity::Aggregate;
use crate::index::FreeIndex;
use crate::topology::{DomainId, NodeId, Topology};

/// Selectors kept at once.
pub const MAX_POOLS: usize = 32;

/// The aggregates and index of one selector's nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectorPool {
    /// The selector, sorted by key.
    pub selector: Vec<(String, String)>,
    /// Aggregates over the pool's uncordoned nodes, for every domain holding a member.
    pub aggregates: HashMap<DomainId, Aggregate>,
    /// Domains holding members and uncordoned members, by free GPUs and path.
    pub index: FreeIndex,
    /// Which bit of a node's membership mask stands for this pool.
    pub bit: u32,
}

/// The pools kept, and per node the pools it belongs to.
#[derive(Debug, Default)]
pub struct Pools {
    pools: Vec<(u64, SelectorPool)>,
    /// Node slot -> bit mask of the pools it belongs to.
    membership: Vec<u32>,
    uses: u64,
}

impl Pools {
    /// Drops every pool (after nodes were added or removed).
    pub fn clear(&mut self) {
        self.pools.clear();
        self.membership.clear();
    }

    /// The pool of `selector`, if kept; marks it used.
    pub fn find(&mut self, selector: &[(String, String)]) -> Option<&SelectorPool> {
        self.uses += 1;
        let uses = self.uses;
        let (used, pool) = self
            .pools
            .iter_mut()
            .find(|(_, p)| p.selector == selector)?;
        *used = uses;
        Some(pool)
    }

    /// The pool of `selector`; it must have been made by [`Topology::selector_pool`].
    pub fn get(&self, selector: &[(String, String)]) -> Option<&SelectorPool> {
        self.pools
            .iter()
            .map(|(_, pool)| pool)
            .find(|pool| pool.selector == selector)
    }

    /// Defers the pools' domain moves (see [`FreeIndex::begin_batch`]).
    pub fn begin_batch(&mut self) {
        for (_, pool) in &mut self.pools {
            pool.index.begin_batch();
        }
    }

    /// Applies the pools' deferred domain moves.
    pub fn end_batch(&mut self) {
        for (_, pool) in &mut self.pools {
            pool.index.end_batch();
        }
    }

    /// Whether `node` belongs to `pool`.
    pub fn contains(&self, pool: &SelectorPool, node: NodeId) -> bool {
        self.membership
            .get(node as usize)
            .is_some_and(|bits| bits & (1 << pool.bit) != 0)
    }

    /// Pools of `node`, as a bit mask.
    fn bits(&self, node: NodeId) -> u32 {
        self.membership.get(node as usize).copied().unwrap_or(0)
    }

    /// A free bit for a new pool, dropping the least recently used pool if all are taken.
    fn free_bit(&mut self) -> u32 {
        if self.pools.len() >= MAX_POOLS {
            let oldest = (0..self.pools.len())
                .min_by_key(|&i| self.pools[i].0)
                .unwrap_or(0);
            let (_, dropped) = self.pools.swap_remove(oldest);
            for bits in &mut self.membership {
                *bits &= !(1 << dropped.bit);
            }
        }
        let used: u32 = self.pools.iter().fold(0, |bits, (_, p)| bits | 1 << p.bit);
        (!used).trailing_zeros()
    }
}

impl Topology {
    /// Makes sure `selector` has a pool (building it from the label index if needed). The
    /// topology must be settled.
    pub fn selector_pool(&mut self, selector: &[(String, String)]) {
        if self.pools.find(selector).is_some() {
            return;
        }
        let bit = self.pools.free_bit();
        let (pool, members) = self.built_pool(selector, bit);
        self.pools.membership.resize(self.node_slots(), 0);
        for id in members {
            self.pools.membership[id as usize] |= 1 << bit;
        }
        self.pools.uses += 1;
        self.pools.pools.push((self.pools.uses, pool));
    }

    /// A pool built from scratch, and its members.
    fn built_pool(&self, selector: &[(String, String)], bit: u32) -> (SelectorPool, Vec<NodeId>) {
        let members: Vec<NodeId> = self.nodes_matching(selector).collect();
        let mut member = vec![false; self.node_slots()];
        let mut aggregates: HashMap<DomainId, Aggregate> = HashMap::new();
        for &id in &members {
            member[id as usize] = true;
            let node = self.node(id);
            // Every domain holding a member has an aggregate (empty while all are cordoned),
            // as the incremental updates keep it.
            for domain in self.ancestors(node.domain) {
                let aggregate = aggregates.entry(domain).or_default();
                if !node.cordoned {
                    aggregate.add_node(node.free_count());
                }
            }
        }
        let index = self.built_index_with(
            |id| aggregates.get(&id).map(Aggregate::free_gpus),
            |id, node| {
                (member[id as usize] && !node.cordoned).then(|| u64::from(node.free_count()))
            },
        );
        let pool = SelectorPool {
            selector: selector.to_vec(),
            aggregates,
            index,
            bit,
        };
        (pool, members)
    }

    /// The kept pool of `selector` (after [`Topology::selector_pool`]).
    pub fn pool(&self, selector: &[(String, String)]) -> Option<&SelectorPool> {
        self.pools.get(selector)
    }

    /// Whether `node` belongs to `pool`.
    pub fn in_pool(&self, pool: &SelectorPool, node: NodeId) -> bool {
        self.pools.contains(pool, node)
    }

    /// A member node's free GPUs went from `before` to `after` (`None`: not feasible).
    pub(crate) fn pools_node_changed(
        &mut self,
        id: NodeId,
        before: Option<u32>,
        after: Option<u32>,
    ) {
        let bits = self.pools.bits(id);
        if bits == 0 || before == after {
            return;
        }
        let node_depth = self.node_depth();
        let ancestors: Vec<(DomainId, usize)> = self
            .ancestors(self.node(id).domain)
            .map(|domain| (domain, self.domain(domain).depth))
            .collect();
        for (_, pool) in &mut self.pools.pools {
            if bits & (1 << pool.bit) == 0 {
                continue;
            }
            let as_free = |free: Option<u32>| free.map(u64::from);
            pool.index
                .node_moved(node_depth, id, as_free(before), as_free(after));
            for &(domain, depth) in &ancestors {
                let aggregate = pool.aggregates.entry(domain).or_default();
                let was = aggregate.free_gpus();
                if let Some(free) = before {
                    aggregate.remove_node(free);
                }
                if let Some(free) = after {
                    aggregate.add_node(free);
                }
                pool.index
                    .domain_moved(depth, domain, Some(was), Some(aggregate.free_gpus()));
            }
        }
    }

    /// Rebuilds every kept pool from scratch and compares (for `check_invariants`).
    pub(crate) fn check_pools(&self) -> Result<(), String> {
        for (_, pool) in &self.pools.pools {
            let (rebuilt, members) = self.built_pool(&pool.selector, pool.bit);
            let membership_agrees = members.iter().all(|&id| self.pools.contains(pool, id))
                && (0..self.node_slots())
                    .filter(|&slot| {
                        let id = NodeId::try_from(slot).unwrap_or(NodeId::MAX);
                        self.pools.contains(pool, id)
                    })
                    .count()
                    == members.len();
            if rebuilt != *pool || !membership_agrees {
                return Err(format!("the pool of selector {:?} is stale", pool.selector));
            }
        }
        Ok(())
    }
}
