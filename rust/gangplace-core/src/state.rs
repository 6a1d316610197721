//! The GPU state of every node: which GPUs are unhealthy, reserved and allocated, and whether
//! the node is cordoned. This is the mutable half of a cluster; the topology is the static
//! half, and [`crate::capacity`] derives its views from both.
//!
//! Every change goes through [`NodeStates::update`] (or a cordon change), which records one
//! [`NodeChange`] (the node's free GPUs as the placement rules count them, before and after)
//! into the caller's [`Changes`]. A mutation collects the records of all its nodes and hands
//! them to the capacity views once, at its end.

use std::collections::BTreeSet;

use crate::ids::{GpuSet, NodeId};
use crate::resources::{Amounts, ResourceUse};
use crate::shares::GpuShares;

/// The GPU state of one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeState {
    /// All of the node's GPUs (empty for a vacant slot).
    pub gpus: GpuSet,
    /// A cordoned node takes no new placements.
    pub cordoned: bool,
    /// A node with a taint that excludes (docs/placement.md, rule 1): out of the cluster's own
    /// view; only the views of requests that tolerate its taints hold it.
    pub tainted: bool,
    /// GPUs that must never be placed on (they may still be held by an allocation).
    pub unhealthy: GpuSet,
    /// GPUs held by live reservations (never unhealthy: health loss revokes).
    pub reserved: GpuSet,
    /// GPUs held by allocations.
    pub allocated: GpuSet,
    /// GPUs fractional pods share (docs/resources.md "Fractions of a GPU"): never free for a whole
    /// pod; their thousandths are in [`NodeStates::shares`].
    pub shared: GpuSet,
}

impl NodeState {
    /// A node with `gpus` GPUs, nothing held.
    pub fn new(gpus: u32, unhealthy: GpuSet) -> Self {
        Self {
            gpus: GpuSet::first(gpus),
            cordoned: false,
            tainted: false,
            unhealthy,
            reserved: GpuSet::EMPTY,
            allocated: GpuSet::EMPTY,
            shared: GpuSet::EMPTY,
        }
    }

    const VACANT: Self = Self {
        gpus: GpuSet::EMPTY,
        cordoned: true,
        tainted: false,
        unhealthy: GpuSet::EMPTY,
        reserved: GpuSet::EMPTY,
        allocated: GpuSet::EMPTY,
        shared: GpuSet::EMPTY,
    };

    /// Healthy GPUs that nothing holds (a shared GPU is held in part).
    pub fn free(&self) -> GpuSet {
        self.gpus & !(self.unhealthy | self.reserved | self.allocated | self.shared)
    }

    /// Number of healthy GPUs that nothing holds.
    pub fn free_count(&self) -> u32 {
        self.free().count()
    }

    /// Number of healthy GPUs, held or not.
    pub fn healthy_count(&self) -> u32 {
        (self.gpus & !self.unhealthy).count()
    }

    /// Free GPUs as the cluster's own view counts them: `None` when cordoned or tainted.
    pub fn feasible_free(&self) -> Option<u32> {
        (!self.cordoned && !self.tainted).then(|| self.free_count())
    }

    /// The free GPUs themselves when feasible (what NUMA counts read).
    pub fn feasible_set(&self) -> Option<GpuSet> {
        (!self.cordoned && !self.tainted).then(|| self.free())
    }

    /// The free GPUs as a selector pool counts them: `None` when cordoned (a pool holds a
    /// tainted node only when its filter tolerates the taints).
    pub fn open_set(&self) -> Option<GpuSet> {
        (!self.cordoned).then(|| self.free())
    }
}

/// One node's feasible free GPUs before and after a mutation (`None`: cordoned or absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeChange {
    /// The node.
    pub node: NodeId,
    /// Before the change.
    pub before: Option<u32>,
    /// After the change.
    pub after: Option<u32>,
    /// The free GPUs before (`None`: cordoned or absent).
    pub before_set: Option<GpuSet>,
    /// The free GPUs after.
    pub after_set: Option<GpuSet>,
    /// Before and after as a selector pool counts them (taints aside: see
    /// [`NodeState::open_set`]).
    pub open: (Option<u32>, Option<u32>),
}

/// The change records of one mutation, in the order the nodes changed.
pub type Changes = Vec<NodeChange>;

/// GPU counts over every node, kept current by every change (so `stats` is O(1)).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    /// All GPUs.
    pub total: u64,
    /// Healthy GPUs that nothing holds (also on cordoned nodes).
    pub free: u64,
    /// GPUs held by reservations.
    pub reserved: u64,
    /// GPUs held by allocations.
    pub allocated: u64,
    /// Unhealthy GPUs.
    pub unhealthy: u64,
    /// GPUs fractional pods share.
    pub shared: u64,
}

impl Totals {
    /// The counts of one node.
    pub fn of(state: &NodeState) -> Self {
        Self {
            total: u64::from(state.gpus.count()),
            free: u64::from(state.free_count()),
            reserved: u64::from(state.reserved.count()),
            allocated: u64::from(state.allocated.count()),
            unhealthy: u64::from(state.unhealthy.count()),
            shared: u64::from(state.shared.count()),
        }
    }

    fn add(&mut self, other: Self) {
        self.total += other.total;
        self.free += other.free;
        self.reserved += other.reserved;
        self.allocated += other.allocated;
        self.unhealthy += other.unhealthy;
        self.shared += other.shared;
    }

    fn remove(&mut self, other: Self) {
        self.total -= other.total;
        self.free -= other.free;
        self.reserved -= other.reserved;
        self.allocated -= other.allocated;
        self.unhealthy -= other.unhealthy;
        self.shared -= other.shared;
    }
}

/// The state of every node slot.
#[derive(Debug, Default, Clone)]
pub struct NodeStates {
    nodes: Vec<NodeState>,
    /// Each slot's unhealthy GPUs again, packed (8 bytes a node): a walk over every hold's
    /// nodes, as preemption's candidates make, reads this instead of the whole states.
    unhealthy: Vec<GpuSet>,
    /// The slots whose node has an unhealthy GPU: a cycle's question "which holds may have
    /// lost ranks" reads these, not every node (issue 51).
    unhealthy_nodes: BTreeSet<NodeId>,
    totals: Totals,
    /// What the live holds use of each node's resources besides GPUs.
    resources: ResourceUse,
    /// The used thousandths of every shared GPU.
    shares: GpuShares,
    /// Nodes whose resources in use changed since the last
    /// [`NodeStates::take_resources_touched`] (repeats allowed).
    resources_touched: Vec<NodeId>,
}

impl NodeStates {
    /// The state of node `id`.
    pub fn get(&self, id: NodeId) -> &NodeState {
        &self.nodes[id as usize]
    }

    /// The unhealthy GPUs of node `id` (empty for a slot never used).
    pub fn unhealthy(&self, id: NodeId) -> GpuSet {
        self.unhealthy.get(id as usize).copied().unwrap_or_default()
    }

    /// The node slots with an unhealthy GPU, ascending (kept: no pass over the nodes).
    pub fn with_unhealthy(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.unhealthy_nodes.iter().copied()
    }

    /// Slot `id`'s packed unhealthy GPUs, and whether it is among the unhealthy nodes.
    fn set_unhealthy(&mut self, id: NodeId, gpus: GpuSet) {
        self.unhealthy[id as usize] = gpus;
        if gpus.is_empty() {
            self.unhealthy_nodes.remove(&id);
        } else {
            self.unhealthy_nodes.insert(id);
        }
    }

    /// What the live holds use of each node's resources besides GPUs.
    pub fn resource_use(&self) -> &ResourceUse {
        &self.resources
    }

    /// The same, to change (capacities; holds change use through
    /// [`NodeStates::use_resources`]).
    pub fn resource_use_mut(&mut self) -> &mut ResourceUse {
        &mut self.resources
    }

    /// The used thousandths of every shared GPU.
    pub fn shares(&self) -> &GpuShares {
        &self.shares
    }

    /// Adds (`take`) or gives back what a hold uses on node `id` besides whole GPUs: named
    /// resources, and GPU shares (whose GPUs become shared, or free again, as recorded).
    pub fn use_resources(
        &mut self,
        id: NodeId,
        amounts: &Amounts,
        take: bool,
        changes: &mut Changes,
    ) {
        let (named, shares) = crate::shares::split(amounts);
        match take {
            true => self.resources.take(id, &named),
            false => self.resources.give(id, &named),
        }
        if !named.is_empty() {
            self.resources_touched.push(id);
        }
        if shares.is_empty() || id as usize >= self.nodes.len() {
            return;
        }
        for &(gpu, milli) in &shares {
            self.shares.change(id, gpu, milli, take);
        }
        let shared = self.shares.shared(id) & self.nodes[id as usize].gpus;
        self.update(id, changes, |state| state.shared = shared);
    }

    /// The nodes whose resources in use changed since the last call (repeats allowed).
    pub fn take_resources_touched(&mut self) -> Vec<NodeId> {
        std::mem::take(&mut self.resources_touched)
    }

    /// The GPU counts over every node.
    pub fn totals(&self) -> Totals {
        self.totals
    }

    /// The totals recounted node by node (for the invariant check).
    pub fn recount(&self) -> Totals {
        let mut totals = Totals::default();
        for state in &self.nodes {
            totals.add(Totals::of(state));
        }
        totals
    }

    /// Whether the packed copy of every node's unhealthy GPUs, and the kept set of nodes with
    /// one, match the node states (for the invariant check).
    pub fn unhealthy_mirrored(&self) -> bool {
        let kept: Vec<NodeId> = (0..)
            .zip(&self.unhealthy)
            .filter(|(_, gpus)| !gpus.is_empty())
            .map(|(id, _)| id)
            .collect();
        (self.nodes.iter().map(|state| state.unhealthy)).eq(self.unhealthy.iter().copied())
            && kept.iter().eq(self.unhealthy_nodes.iter())
    }

    /// Sets the state of a new node in slot `id`.
    pub fn insert(&mut self, id: NodeId, state: NodeState) {
        let slot = id as usize;
        if slot >= self.nodes.len() {
            self.nodes.resize(slot + 1, NodeState::VACANT);
            self.unhealthy.resize(slot + 1, GpuSet::EMPTY);
        }
        self.totals.remove(Totals::of(&self.nodes[slot]));
        self.totals.add(Totals::of(&state));
        self.set_unhealthy(id, state.unhealthy);
        self.nodes[slot] = state;
    }

    /// Empties slot `id` (its node was removed).
    pub fn vacate(&mut self, id: NodeId) {
        self.totals.remove(Totals::of(&self.nodes[id as usize]));
        self.nodes[id as usize] = NodeState::VACANT;
        self.set_unhealthy(id, GpuSet::EMPTY);
        self.resources.clear(id);
        self.shares.clear(id);
    }

    /// Changes node `id` with `change`, recording what the placement rules see change.
    pub fn update(
        &mut self,
        id: NodeId,
        changes: &mut Changes,
        change: impl FnOnce(&mut NodeState),
    ) {
        let state = &mut self.nodes[id as usize];
        let (before_set, open_before) = (state.feasible_set(), state.open_set());
        self.totals.remove(Totals::of(state));
        change(state);
        self.totals.add(Totals::of(state));
        let (after_set, open_after) = (state.feasible_set(), state.open_set());
        let unhealthy = state.unhealthy;
        if self.unhealthy[id as usize] != unhealthy {
            self.set_unhealthy(id, unhealthy);
        }
        if before_set != after_set || open_before != open_after {
            let count = |set: Option<GpuSet>| set.map(GpuSet::count);
            changes.push(NodeChange {
                node: id,
                before: count(before_set),
                after: count(after_set),
                before_set,
                after_set,
                open: (count(open_before), count(open_after)),
            });
        }
    }
}
