//! NUMA aggregates (docs/shapes.md "Inside a node"): per domain, a histogram of the NUMA groups of its
//! feasible nodes by their free healthy GPUs (a node without GPU groups is one group), so
//! that `numa="single"` capacities, `sum over groups of floor(free in group / g)`, are read
//! like any other capacity instead of visiting nodes.
//!
//! Kept only once some node has GPU groups (until then every node is one group and the
//! ordinary aggregates answer); built from every node then, and updated from the same change
//! records as the ordinary aggregates.
//!
//! The largest capacity of one domain per level (for pods of up to [`MEMO_POD_GPUS`] GPUs)
//! is remembered between changes: a search skips a level none of whose domains holds the
//! gang without reading its domains one by one. Any change forgets it; the first search
//! after a change reads every domain once.

use std::sync::atomic::{AtomicU64, Ordering};

use super::aggregate::Aggregate;
use crate::ids::{DomainId, GpuSet, NodeId};
use crate::state::{NodeChange, NodeStates};
use crate::topology::Topology;

/// Per domain slot: the histogram of NUMA groups by free GPUs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NumaAggregates {
    per_domain: Vec<Aggregate>,
    largest: LargestMemo,
    capacities: CapacityMemo,
}

/// Per domain slot and pod size up to [`MEMO_POD_GPUS`]: its capacity plus one (0: not
/// computed since the domain last changed). A search reads the same domains' capacities many
/// times (rule 4 reads every child's), and a histogram of NUMA groups has several buckets in
/// use where one of nodes often has one.
#[derive(Debug, Default)]
struct CapacityMemo(Vec<[AtomicU64; MEMO_POD_GPUS as usize]>);

impl CapacityMemo {
    fn resize(&mut self, slots: usize) {
        self.0.resize_with(slots, Default::default);
    }

    fn forget(&mut self, domain: DomainId) {
        if let Some(slots) = self.0.get_mut(domain as usize) {
            for slot in slots {
                *slot.get_mut() = 0;
            }
        }
    }

    fn slot(&self, domain: DomainId, gpus_per_pod: u32) -> Option<&AtomicU64> {
        let size = usize::try_from(gpus_per_pod.checked_sub(1)?).ok()?;
        self.0.get(domain as usize)?.get(size)
    }
}

impl Clone for CapacityMemo {
    /// A memo of the same size with nothing remembered.
    fn clone(&self) -> Self {
        let mut fresh = Self::default();
        fresh.resize(self.0.len());
        fresh
    }
}

impl PartialEq for CapacityMemo {
    /// Always equal: the memo is derived from the histograms, which are compared.
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl Eq for CapacityMemo {}

/// Pod sizes whose per-level largest capacity is remembered (`1..=MEMO_POD_GPUS`).
pub const MEMO_POD_GPUS: u32 = 8;

/// Not computed since the last change.
const UNKNOWN: u64 = u64::MAX;

/// Per (domain depth, pod size): the largest NUMA capacity of one domain of that depth, or
/// [`UNKNOWN`]. Written through `&self` by searches (relaxed atomics: every writer stores the
/// same value, computed from state that cannot change while a search holds `&self`).
#[derive(Debug, Default)]
struct LargestMemo(Box<[AtomicU64]>);

impl LargestMemo {
    fn new(depths: usize) -> Self {
        let slots = depths * MEMO_POD_GPUS as usize;
        Self((0..slots).map(|_| AtomicU64::new(UNKNOWN)).collect())
    }

    fn slot(&self, depth: usize, gpus_per_pod: u32) -> Option<&AtomicU64> {
        if !(1..=MEMO_POD_GPUS).contains(&gpus_per_pod) {
            return None;
        }
        let index = depth * MEMO_POD_GPUS as usize + (gpus_per_pod - 1) as usize;
        self.0.get(index)
    }

    fn forget(&mut self) {
        for slot in &mut self.0 {
            *slot.get_mut() = UNKNOWN;
        }
    }
}

impl Clone for LargestMemo {
    /// A memo of the same size with nothing remembered.
    fn clone(&self) -> Self {
        Self((0..self.0.len()).map(|_| AtomicU64::new(UNKNOWN)).collect())
    }
}

impl PartialEq for LargestMemo {
    /// Always equal: the memo is derived from the histograms, which are compared.
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl Eq for LargestMemo {}

/// The domains of `depth`, found by reading every domain slot (views with a current index
/// read the index's level instead).
pub fn domains_at(topology: &Topology, depth: usize) -> impl Iterator<Item = DomainId> + '_ {
    (0..topology.domain_slots())
        .filter_map(|slot| DomainId::try_from(slot).ok())
        .filter(move |&id| topology.domain(id).depth == depth)
}

/// A node without GPU groups is one group: all its GPUs.
const WHOLE_NODE: [GpuSet; 1] = [GpuSet::ALL];

/// The NUMA groups of a node.
fn groups_of(topology: &Topology, node: NodeId) -> &[GpuSet] {
    match topology.node(node).gpu_topology.as_deref() {
        Some(groups) => groups.numa_groups(),
        None => &WHOLE_NODE,
    }
}

impl NumaAggregates {
    /// The aggregates of every node of `topology`.
    pub fn build(topology: &Topology, states: &NodeStates) -> Self {
        let mut built = Self {
            per_domain: vec![Aggregate::default(); topology.domain_slots()],
            largest: LargestMemo::new(topology.node_depth()),
            capacities: CapacityMemo::default(),
        };
        built.capacities.resize(topology.domain_slots());
        for (id, _) in topology.nodes() {
            built.node_changed(topology, id, None, states.get(id).feasible_set());
        }
        built
    }

    /// Makes room for new domain slots.
    pub fn resize(&mut self, slots: usize) {
        self.largest.forget();
        self.per_domain.resize(slots, Aggregate::default());
        self.capacities.resize(slots);
    }

    /// A node's free GPUs went from `before` to `after` (`None`: infeasible or absent).
    pub fn node_changed(
        &mut self,
        topology: &Topology,
        node: NodeId,
        before: Option<GpuSet>,
        after: Option<GpuSet>,
    ) {
        self.largest.forget();
        let groups = groups_of(topology, node);
        let count = |free: Option<GpuSet>, group: GpuSet| free.map(|free| (free & group).count());
        for domain in topology.ancestors(topology.node(node).domain) {
            self.capacities.forget(domain);
            let aggregate = &mut self.per_domain[domain as usize];
            for &group in groups {
                aggregate.change(count(before, group), count(after, group));
            }
        }
    }

    /// Applies a mutation's change records.
    pub fn apply(&mut self, topology: &Topology, changes: &[NodeChange]) {
        for change in changes {
            self.node_changed(topology, change.node, change.before_set, change.after_set);
        }
    }

    /// The most pods of `gpus_per_pod` GPUs one domain of `depth` holds with every pod inside
    /// one NUMA group (`None` for pods of more than [`MEMO_POD_GPUS`] GPUs), `domains` being
    /// that depth's domains. Remembered until the next change.
    pub fn largest_capacity(
        &self,
        domains: impl Iterator<Item = DomainId>,
        depth: usize,
        gpus_per_pod: u32,
    ) -> Option<u64> {
        let slot = self.largest.slot(depth, gpus_per_pod)?;
        let known = slot.load(Ordering::Relaxed);
        if known != UNKNOWN {
            return Some(known);
        }
        // Through the per-domain memo: after a change only the changed node's ancestors are
        // counted again, the level's other domains are one read each.
        let largest = domains
            .map(|id| self.capacity(id, gpus_per_pod))
            .max()
            .unwrap_or(0);
        slot.store(largest, Ordering::Relaxed);
        Some(largest)
    }

    /// Whether every remembered capacity (per domain, and largest per level) is the one
    /// computed now (invariant checks).
    pub fn check_largest(&self, topology: &Topology) -> Result<(), String> {
        let fresh = self.clone();
        for (domain, slots) in self.capacities.0.iter().enumerate() {
            let Ok(id) = DomainId::try_from(domain) else {
                continue;
            };
            for (size, slot) in (1..).zip(slots) {
                let known = slot.load(Ordering::Relaxed);
                if known != 0 && known - 1 != fresh.capacity(id, size) {
                    return Err(format!(
                        "the remembered NUMA capacity of domain #{domain} is stale"
                    ));
                }
            }
        }
        for depth in 0..topology.node_depth() {
            for size in 1..=MEMO_POD_GPUS {
                let Some(slot) = self.largest.slot(depth, size) else {
                    continue;
                };
                let known = slot.load(Ordering::Relaxed);
                let domains = domains_at(topology, depth);
                if known != UNKNOWN && Some(known) != fresh.largest_capacity(domains, depth, size) {
                    return Err(format!(
                        "the remembered largest NUMA capacity of depth {depth} is stale"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Pods of `gpus_per_pod` GPUs the domain holds with every pod inside one NUMA group.
    pub fn capacity(&self, domain: DomainId, gpus_per_pod: u32) -> u64 {
        let counted = || {
            self.per_domain
                .get(domain as usize)
                .map_or(0, |aggregate| aggregate.capacity(gpus_per_pod))
        };
        let Some(slot) = self.capacities.slot(domain, gpus_per_pod) else {
            return counted();
        };
        match slot.load(Ordering::Relaxed) {
            0 => {
                let pods = counted();
                slot.store(pods + 1, Ordering::Relaxed);
                pods
            }
            known => known - 1,
        }
    }
}
