//! Selector pools: aggregates and a free-GPU index for the nodes one request's filter admits
//! (its labels, its affinity, the taints it tolerates), kept up to date incrementally, so that
//! a request with a filter costs about what a request without one costs.
//!
//! A pool is built the first time a filter is seen (one pass over its matching nodes, found
//! through the label index when it selects labels, else over every node) and then maintained
//! from the change records of every mutation, O(levels) per changed member. Membership is a
//! bit per pool on each node. A member is counted whether tainted or not (the filter admits
//! it, so it tolerates its taints): the records' `open` counts. At most [`MAX_POOLS`] filters
//! are kept; the least recently used one is dropped for a new one. Adding or removing nodes,
//! or changing labels or taints, drops every pool (they are rebuilt on next use).

use rustc_hash::FxHashMap;

use super::aggregate::Aggregate;
use super::index::FreeIndex;
use super::propagate::{Touched, propagate};
use crate::ids::{DomainId, NodeId};
use crate::model::NodeFilter;
use crate::state::{NodeChange, NodeStates};
use crate::topology::Topology;

/// Selectors kept at once.
pub const MAX_POOLS: usize = 32;

/// The aggregates and index of one selector's nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectorPool {
    /// The filter its members admit.
    pub selector: NodeFilter,
    /// Aggregates over the pool's uncordoned nodes, for every domain holding a member.
    /// (Fx-hashed: looked up on every step of a search; never iterated by a decision.)
    pub aggregates: FxHashMap<DomainId, Aggregate>,
    /// Domains holding members and uncordoned members, by free GPUs and path.
    pub index: FreeIndex,
    /// Which bit of a node's membership mask stands for this pool.
    pub bit: u32,
}

/// The pools kept, and per node the pools it belongs to.
#[derive(Debug, Default, Clone)]
pub struct Pools {
    pools: Vec<(u64, SelectorPool)>,
    /// Node slot -> bit mask of the pools it belongs to.
    membership: Vec<u32>,
    uses: u64,
    touched: Touched,
}

fn is_member(membership: &[u32], bit: u32, node: NodeId) -> bool {
    membership
        .get(node as usize)
        .is_some_and(|bits| bits & (1 << bit) != 0)
}

impl Pools {
    /// Drops every pool (after nodes were added or removed).
    pub fn clear(&mut self) {
        self.pools.clear();
        self.membership.clear();
    }

    /// The pool of `selector`, if kept.
    pub fn get(&self, selector: &NodeFilter) -> Option<&SelectorPool> {
        self.pools
            .iter()
            .map(|(_, pool)| pool)
            .find(|pool| pool.selector == *selector)
    }

    /// The selectors of the pools kept, in the order they were made (invariant checks).
    pub fn selectors(&self) -> impl Iterator<Item = &NodeFilter> {
        self.pools.iter().map(|(_, pool)| &pool.selector)
    }

    /// Whether `node` belongs to `pool`.
    pub fn contains(&self, pool: &SelectorPool, node: NodeId) -> bool {
        is_member(&self.membership, pool.bit, node)
    }

    /// Makes sure `selector` has a pool (building it from the label index if needed) and
    /// marks it used. The topology must be settled.
    pub fn ensure(&mut self, topology: &Topology, states: &NodeStates, selector: &NodeFilter) {
        self.uses += 1;
        let uses = self.uses;
        if let Some((used, _)) = self.pools.iter_mut().find(|(_, p)| p.selector == *selector) {
            *used = uses;
            return;
        }
        let bit = self.free_bit();
        let (pool, members) = built_pool(topology, states, selector, bit);
        self.membership.resize(topology.node_slots(), 0);
        for id in members {
            self.membership[id as usize] |= 1 << bit;
        }
        self.pools.push((uses, pool));
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

    /// Applies a mutation's change records to every pool holding a changed node.
    pub fn apply(&mut self, topology: &Topology, changes: &[NodeChange]) {
        let Self {
            pools,
            membership,
            touched,
            ..
        } = self;
        for (_, pool) in pools.iter_mut() {
            let bit = pool.bit;
            let member = |node: NodeId| is_member(membership, bit, node);
            if !changes.iter().any(|change| member(change.node)) {
                continue;
            }
            propagate(
                topology,
                changes,
                member,
                (&mut pool.aggregates, &mut pool.index),
                touched,
                true,
            );
        }
    }

    /// Rebuilds every kept pool from scratch and compares (for `check_invariants`).
    pub fn check(&self, topology: &Topology, states: &NodeStates) -> Result<(), String> {
        for (_, pool) in &self.pools {
            let (rebuilt, members) = built_pool(topology, states, &pool.selector, pool.bit);
            let marked = (0..self.membership.len())
                .filter(|&slot| self.membership[slot] & (1 << pool.bit) != 0)
                .count();
            let membership_agrees =
                members.iter().all(|&id| self.contains(pool, id)) && marked == members.len();
            if rebuilt != *pool || !membership_agrees {
                return Err(format!("the pool of selector {:?} is stale", pool.selector));
            }
        }
        Ok(())
    }
}

/// A pool built from scratch, and its members.
fn built_pool(
    topology: &Topology,
    states: &NodeStates,
    selector: &NodeFilter,
    bit: u32,
) -> (SelectorPool, Vec<NodeId>) {
    let members: Vec<NodeId> = topology.nodes_admitting(selector).collect();
    let mut member = vec![false; topology.node_slots()];
    let mut aggregates: FxHashMap<DomainId, Aggregate> = FxHashMap::default();
    for &id in &members {
        member[id as usize] = true;
        let free = states.get(id).open_set().map(crate::ids::GpuSet::count);
        // Every domain holding a member has an aggregate (empty while all are cordoned), as
        // the incremental updates keep it.
        for domain in topology.ancestors(topology.node(id).domain) {
            aggregates.entry(domain).or_default().change(None, free);
        }
    }
    let index = FreeIndex::build(
        topology,
        |id| aggregates.get(&id).map(Aggregate::free_gpus),
        |id| {
            let free = states.get(id).open_set().map(crate::ids::GpuSet::count);
            free.filter(|_| member[id as usize]).map(u64::from)
        },
    );
    let pool = SelectorPool {
        selector: selector.clone(),
        aggregates,
        index,
        bit,
    };
    (pool, members)
}
