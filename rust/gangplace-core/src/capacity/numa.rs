//! NUMA aggregates (README "Inside a node"): per domain, a histogram of the NUMA groups of its
//! feasible nodes by their free healthy GPUs (a node without GPU groups is one group), so
//! that `numa="single"` capacities, `sum over groups of floor(free in group / g)`, are read
//! like any other capacity instead of visiting nodes.
//!
//! Kept only once some node has GPU groups (until then every node is one group and the
//! ordinary aggregates answer); built from every node then, and updated from the same change
//! records as the ordinary aggregates.

use super::aggregate::Aggregate;
use crate::ids::{DomainId, GpuSet, NodeId};
use crate::state::{NodeChange, NodeStates};
use crate::topology::Topology;

/// Per domain slot: the histogram of NUMA groups by free GPUs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NumaAggregates {
    per_domain: Vec<Aggregate>,
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
        };
        for (id, _) in topology.nodes() {
            built.node_changed(topology, id, None, states.get(id).feasible_set());
        }
        built
    }

    /// Makes room for new domain slots.
    pub fn resize(&mut self, slots: usize) {
        self.per_domain.resize(slots, Aggregate::default());
    }

    /// A node's free GPUs went from `before` to `after` (`None`: infeasible or absent).
    pub fn node_changed(
        &mut self,
        topology: &Topology,
        node: NodeId,
        before: Option<GpuSet>,
        after: Option<GpuSet>,
    ) {
        let groups = groups_of(topology, node);
        let count = |free: Option<GpuSet>, group: GpuSet| free.map(|free| (free & group).count());
        for domain in topology.ancestors(topology.node(node).domain) {
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

    /// Pods of `gpus_per_pod` GPUs the domain holds with every pod inside one NUMA group.
    pub fn capacity(&self, domain: DomainId, gpus_per_pod: u32) -> u64 {
        self.per_domain
            .get(domain as usize)
            .map_or(0, |aggregate| aggregate.capacity(gpus_per_pod))
    }
}
