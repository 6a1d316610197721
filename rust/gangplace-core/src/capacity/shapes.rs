//! Kept pod counts of the resource shapes searched lately (docs/resources.md "Node resources").
//!
//! A request asking resources besides GPUs has its pods counted node by node: a node holds
//! `min(its GPU pods, its resource pods)`, which no GPU aggregate knows, so a gang whose
//! resources bind on many nodes used to cost a visit of every node of every domain it tried.
//! For the shapes searched lately (GPUs per pod, NUMA rule, asks), every node's count and
//! their sums per domain are kept: built the first time a shape is searched (one pass over
//! the nodes), then brought up to date before the next search from the nodes that changed
//! meanwhile (their free GPUs, health or cordon: the change records; what the holds use of
//! their resources: [`NodeStates::take_resources_touched`]), O(levels) each. A search over
//! the cluster's own view then reads a domain's count at once.
//!
//! For the gang sizes placed with a shape (at most [`MAX_THRESHOLDS`] a shape), the domains
//! holding at least that many pods are also kept, per depth: best-fit then picks among
//! them instead of reading every domain with enough free GPUs in free-GPU order (most of
//! which, where resources bind, hold too few pods).
//!
//! Only a search with nothing pending reads them ([`ShapeCounts::fresh`]): any change not
//! yet brought in makes it count node by node, as without them. At most [`MAX_SHAPES`] are
//! kept (the least recently used dropped for a new one); a node added or removed, a
//! capacity changed, a what-if copy, or more pending nodes than a quarter of the cluster
//! drop them all (rebuilt on next use).

use std::collections::BTreeSet;

use super::ResourceFit;
use crate::ids::{DomainId, NodeId};
use crate::resources::Amounts;
use crate::shapes::Numa;
use crate::state::NodeStates;
use crate::topology::Topology;

/// Shapes kept at once.
pub const MAX_SHAPES: usize = 8;

/// Gang sizes whose holding domains are kept, per shape.
pub const MAX_THRESHOLDS: usize = 4;

/// What a node's pod count depends on besides the state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeKey {
    /// GPUs per pod (0: pods without GPUs).
    pub gpus_per_pod: u32,
    /// Whether pods are counted inside one NUMA group.
    pub numa: Numa,
    /// What each pod asks besides GPUs (not empty).
    pub need: Amounts,
}

/// One shape's counts: every node's pods, and their sums per domain.
#[derive(Debug, Clone)]
pub struct ShapeCount {
    key: ShapeKey,
    /// Per node slot: the pods it holds (0 for a cordoned node or an empty slot).
    nodes: Vec<u64>,
    /// Per domain slot: the sum over its nodes (u128: a node may hold 2^50 tiny pods).
    domains: Vec<u128>,
    /// Per gang size kept: per depth, the domains holding at least that many pods.
    holding: Vec<(u64, Vec<BTreeSet<DomainId>>)>,
}

impl ShapeCount {
    /// Pods node `id` holds.
    #[inline]
    pub fn node(&self, id: NodeId) -> u64 {
        self.nodes.get(id as usize).copied().unwrap_or(0)
    }

    /// Pods domain `id`'s nodes hold, up to `cap`.
    #[inline]
    pub fn domain(&self, id: DomainId, cap: u64) -> u64 {
        let sum = self.domains.get(id as usize).copied().unwrap_or(0);
        u64::try_from(sum).unwrap_or(u64::MAX).min(cap)
    }

    /// Pods domain `id`'s nodes hold, not capped.
    #[inline]
    pub fn domain_sum(&self, id: DomainId) -> u128 {
        self.domains.get(id as usize).copied().unwrap_or(0)
    }

    /// The domains of `depth` holding at least `pods` pods, when kept for that size.
    pub fn holding(&self, depth: usize, pods: u64) -> Option<&BTreeSet<DomainId>> {
        let (_, by_depth) = self.holding.iter().find(|(size, _)| *size == pods)?;
        by_depth.get(depth)
    }

    /// Keeps the domains holding at least `pods` pods (one pass over the domains), the
    /// oldest size dropped past [`MAX_THRESHOLDS`].
    fn keep_size(&mut self, topology: &Topology, pods: u64) {
        if pods == 0 || self.holding.iter().any(|(size, _)| *size == pods) {
            return;
        }
        if self.holding.len() >= MAX_THRESHOLDS {
            self.holding.remove(0);
        }
        let mut by_depth = vec![BTreeSet::new(); topology.node_depth()];
        // Every slot: a domain left without nodes sums to nothing.
        for (slot, &sum) in self.domains.iter().enumerate() {
            let Ok(id) = DomainId::try_from(slot) else {
                break;
            };
            if sum >= u128::from(pods) {
                by_depth[topology.domain(id).depth].insert(id);
            }
        }
        self.holding.push((pods, by_depth));
    }

    fn build(topology: &Topology, states: &NodeStates, key: ShapeKey) -> Self {
        let mut count = Self {
            key,
            nodes: vec![0; topology.node_slots()],
            domains: vec![0; topology.domain_slots()],
            holding: Vec::new(),
        };
        for (id, node) in topology.nodes() {
            let pods = node_pods(topology, states, &count.key, id);
            count.nodes[id as usize] = pods;
            for domain in topology.ancestors(node.domain) {
                count.domains[domain as usize] += u128::from(pods);
            }
        }
        count
    }

    fn refresh(&mut self, topology: &Topology, states: &NodeStates, id: NodeId) {
        let Some(slot) = self.nodes.get_mut(id as usize) else {
            return;
        };
        let (before, after) = (*slot, node_pods(topology, states, &self.key, id));
        if before == after {
            return;
        }
        *slot = after;
        for domain in topology.ancestors(topology.node(id).domain) {
            let sum = &mut self.domains[domain as usize];
            let was = *sum;
            *sum = *sum - u128::from(before) + u128::from(after);
            let now = *sum;
            let depth = topology.domain(domain).depth;
            for (size, by_depth) in &mut self.holding {
                let size = u128::from(*size);
                match (was >= size, now >= size) {
                    (false, true) => by_depth[depth].insert(domain),
                    (true, false) => by_depth[depth].remove(&domain),
                    _ => continue,
                };
            }
        }
    }
}

/// Pods of `key`'s shape node `id` holds on the cluster's view, counted as a search counts
/// them (`Search::numa_count` of a node): its free GPUs (per NUMA group with
/// `numa="single"`), bounded by its free resources.
fn node_pods(topology: &Topology, states: &NodeStates, key: &ShapeKey, id: NodeId) -> u64 {
    let Some(free) = states.get(id).feasible_set() else {
        return 0;
    };
    let groups = topology.node(id).gpu_topology.as_deref();
    let gpu_pods = match (groups, key.numa, key.gpus_per_pod) {
        (_, _, 0) => u64::MAX,
        (Some(groups), Numa::Single, size) => u64::from(groups.numa_capacity(free, size)),
        (_, _, size) => u64::from(free.count() / size),
    };
    if gpu_pods == 0 {
        return 0;
    }
    let capacities = topology.resources().capacities();
    let fit = ResourceFit::new(&key.need, capacities, states.resource_use());
    gpu_pods.min(fit.pods(id))
}

/// The shapes kept, and the nodes changed since they were last brought up to date.
#[derive(Debug, Clone, Default)]
pub struct ShapeCounts {
    kept: Vec<(u64, ShapeCount)>,
    uses: u64,
    /// Node slots when the shapes were built.
    slots: usize,
    pending: Vec<NodeId>,
    /// Per node slot: whether it is in `pending`.
    marked: Vec<bool>,
}

impl ShapeCounts {
    /// Drops every shape.
    pub fn clear(&mut self) {
        self.kept.clear();
        self.pending.clear();
        self.marked.clear();
    }

    /// Notes that `nodes` changed (nothing when no shape is kept).
    pub fn note(&mut self, nodes: impl Iterator<Item = NodeId>) {
        if self.kept.is_empty() {
            return;
        }
        for id in nodes {
            let slot = id as usize;
            if slot >= self.marked.len() {
                self.marked.resize(slot + 1, false);
            }
            if !self.marked[slot] {
                self.marked[slot] = true;
                self.pending.push(id);
            }
        }
        if self.pending.len() > self.slots.max(256) / 4 {
            self.clear(); // cheaper rebuilt on next use than brought up to date
        }
    }

    /// Brings every kept shape up to date from the pending nodes.
    fn bring_up_to_date(&mut self, topology: &Topology, states: &NodeStates) {
        for id in std::mem::take(&mut self.pending) {
            self.marked[id as usize] = false;
            for (_, count) in &mut self.kept {
                count.refresh(topology, states, id);
            }
        }
    }

    /// Brings every kept shape up to date, then keeps `key`'s (built if missing) with the
    /// domains holding each of `sizes` pods.
    pub fn ensure(
        &mut self,
        topology: &Topology,
        states: &NodeStates,
        key: ShapeKey,
        sizes: &[u64],
    ) {
        self.bring_up_to_date(topology, states);
        self.slots = topology.node_slots();
        self.uses += 1;
        let uses = self.uses;
        let at = match self.kept.iter().position(|(_, count)| count.key == key) {
            Some(at) => at,
            None => {
                if self.kept.len() >= MAX_SHAPES {
                    let oldest = (0..self.kept.len()).min_by_key(|&at| self.kept[at].0);
                    if let Some(oldest) = oldest {
                        self.kept.swap_remove(oldest);
                    }
                }
                self.kept
                    .push((uses, ShapeCount::build(topology, states, key)));
                self.kept.len() - 1
            }
        };
        let (used, count) = &mut self.kept[at];
        *used = uses;
        for &pods in sizes {
            count.keep_size(topology, pods);
        }
    }

    /// `key`'s counts, if kept and nothing is pending.
    pub fn fresh(&self, key: &ShapeKey) -> Option<&ShapeCount> {
        if !self.pending.is_empty() {
            return None;
        }
        (self.kept.iter())
            .find(|(_, count)| count.key == *key)
            .map(|(_, count)| count)
    }

    /// Checks every kept count, once brought up to date, against a recount (for
    /// `check_invariants`).
    pub fn check(&self, topology: &Topology, states: &NodeStates) -> Result<(), String> {
        let mut current = self.clone();
        current.bring_up_to_date(topology, states);
        for (_, count) in &current.kept {
            let mut recounted = ShapeCount::build(topology, states, count.key.clone());
            for &(pods, _) in &count.holding {
                recounted.keep_size(topology, pods);
            }
            let same = recounted.nodes == count.nodes
                && recounted.domains == count.domains
                && recounted.holding == count.holding;
            if !same {
                return Err("a resource shape's kept pod counts are stale".into());
            }
        }
        Ok(())
    }
}
