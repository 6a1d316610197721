//! Capacity: everything derived from the topology and the GPU state that the search reads
//! instead of visiting nodes. Per-domain [`Aggregate`]s (how many pods of any size fit), the
//! per-level free-GPU [`FreeIndex`] (best-fit in one lookup), and selector [`pools`] (the same
//! two over the nodes of one label selector).
//!
//! All of it is updated from one place, [`Capacity::apply`], with the change records a
//! mutation collected ([`crate::state::NodeChange`]); adding or removing a node invalidates
//! the index and the pools, which are rebuilt when the cluster is next settled or used.
//! [`Capacity::check`] rebuilds everything from scratch and compares, for `check_invariants`.

mod aggregate;
mod buckets;
mod counts;
mod index;
mod numa;
mod overlay;
mod pools;
mod propagate;
mod resource_fit;
mod shapes;
mod shares;
mod ties;

pub use aggregate::Aggregate;
pub use counts::{Counts, OverlaidCounts};
pub use index::FreeIndex;
pub use overlay::Overlay;
pub use pools::SelectorPool;
pub use resource_fit::ResourceFit;
pub use shapes::{ShapeCount, ShapeKey};
pub use shares::{ShareFit, TakenShares};

use crate::ids::{DomainId, GpuSet, NodeId};
use crate::model::NodeFilter;
use crate::state::{NodeChange, NodeStates};
use crate::topology::Topology;
use numa::NumaAggregates;
use pools::Pools;
use propagate::{Touched, propagate};
use shapes::ShapeCounts;

/// The derived views of one cluster.
#[derive(Debug, Clone)]
pub struct Capacity {
    /// Per domain slot: the aggregate over its feasible nodes.
    aggregates: Vec<Aggregate>,
    index: FreeIndex,
    pools: Pools,
    touched: Touched,
    /// Per depth, the most GPUs (healthy or not) any one domain (or node) has: no gang
    /// larger than that fits there, whatever is removed. Rebuilt with the index.
    largest: Vec<u64>,
    /// NUMA groups by free GPUs per domain, once some node has GPU groups (module `numa`).
    numa: Option<NumaAggregates>,
    /// The kept pod counts of resource shapes (module `shapes`).
    shapes: ShapeCounts,
}

impl Default for Capacity {
    fn default() -> Self {
        Self {
            aggregates: vec![Aggregate::default()],
            index: FreeIndex::stale(),
            pools: Pools::default(),
            touched: Touched::default(),
            largest: Vec::new(),
            numa: None,
            shapes: ShapeCounts::default(),
        }
    }
}

impl Capacity {
    /// A node was added (its state in `states`): it joins the aggregates of its domains; the
    /// index and the pools are rebuilt on next use. The first node with GPU groups starts the
    /// NUMA aggregates.
    pub fn node_added(&mut self, topology: &Topology, states: &NodeStates, id: NodeId) {
        let free = states.get(id).feasible_set();
        self.aggregates
            .resize(topology.domain_slots(), Aggregate::default());
        self.index.invalidate();
        self.pools.clear();
        self.shapes.clear();
        for domain in topology.ancestors(topology.node(id).domain) {
            self.aggregates[domain as usize].change(None, free.map(GpuSet::count));
        }
        match &mut self.numa {
            Some(numa) => {
                numa.resize(topology.domain_slots());
                numa.node_changed(topology, id, None, free);
            }
            None if topology.node(id).gpu_topology.is_some() => {
                self.numa = Some(NumaAggregates::build(topology, states));
            }
            None => {}
        }
    }

    /// A node's labels or taints changed: the selector pools are rebuilt on next use
    /// (membership is per node and per pool; rebuilding is one pass over a filter's nodes).
    pub fn labels_changed(&mut self) {
        self.pools.clear();
    }

    /// A node is about to be removed (call before the topology prunes its domains).
    pub fn node_removed(&mut self, topology: &Topology, states: &NodeStates, id: NodeId) {
        let free = states.get(id).feasible_set();
        self.index.invalidate();
        self.pools.clear();
        self.shapes.clear();
        for domain in topology.ancestors(topology.node(id).domain) {
            self.aggregates[domain as usize].change(free.map(GpuSet::count), None);
        }
        if let Some(numa) = &mut self.numa {
            numa.node_changed(topology, id, free, None);
        }
    }

    /// Pods of `gpus_per_pod` GPUs a domain holds with each pod in one NUMA group, over every
    /// feasible node.
    pub fn numa_capacity(&self, domain: DomainId, gpus_per_pod: u32) -> u64 {
        match &self.numa {
            Some(numa) => numa.capacity(domain, gpus_per_pod),
            None => self.aggregates[domain as usize].capacity(gpus_per_pod),
        }
    }

    /// Applies a mutation's change records to the aggregates, the index and the pools.
    pub fn apply(&mut self, topology: &Topology, changes: &[NodeChange]) {
        if changes.is_empty() {
            return;
        }
        let store = &mut self.aggregates;
        propagate(
            topology,
            changes,
            |_| true,
            (store, &mut self.index),
            &mut self.touched,
            false,
        );
        self.pools.apply(topology, changes);
        if let Some(numa) = &mut self.numa {
            numa.apply(topology, changes);
        }
        self.shapes.note(changes.iter().map(|change| change.node));
    }

    /// Notes nodes whose resources in use changed (their shape counts are then stale).
    pub fn resources_changed(&mut self, nodes: impl Iterator<Item = NodeId>) {
        self.shapes.note(nodes);
    }

    /// Drops the kept shape counts: a capacity changed, or this is a what-if copy whose
    /// resource changes are not noted.
    pub fn drop_shapes(&mut self) {
        self.shapes.clear();
    }

    /// Brings the kept shape counts up to date and keeps `key`'s, with the domains holding
    /// each of `sizes` pods.
    pub fn ensure_shape(
        &mut self,
        topology: &Topology,
        states: &NodeStates,
        key: ShapeKey,
        sizes: &[u64],
    ) {
        self.shapes.ensure(topology, states, key, sizes);
    }

    /// `key`'s kept counts, if current.
    pub fn shape(&self, key: &ShapeKey) -> Option<&ShapeCount> {
        self.shapes.fresh(key)
    }

    /// Rebuilds the index if nodes were added or removed. The topology must be settled.
    pub fn settle(&mut self, topology: &Topology, states: &NodeStates) {
        if self.index.is_stale() {
            self.index = self.built_index(topology, states);
            self.largest = largest_by_depth(topology);
        }
    }

    /// The most GPUs one domain of `depth` has (`None` before the first settle).
    pub fn largest_domain(&self, depth: usize) -> Option<u64> {
        self.largest.get(depth).copied()
    }

    fn built_index(&self, topology: &Topology, states: &NodeStates) -> FreeIndex {
        FreeIndex::build(
            topology,
            |id| Some(self.aggregates[id as usize].free_gpus()),
            |id| states.get(id).feasible_free().map(u64::from),
        )
    }

    /// Makes sure `selector` has a pool (an empty selector needs none: it reads the
    /// cluster's own views). The topology must be settled.
    pub fn ensure_pool(&mut self, topology: &Topology, states: &NodeStates, selector: &NodeFilter) {
        if selector.is_plain() {
            return;
        }
        self.pools.ensure(topology, states, selector);
    }

    /// The selectors whose pools are kept (invariant checks).
    pub fn pool_selectors(&self) -> impl Iterator<Item = &NodeFilter> {
        self.pools.selectors()
    }

    /// The aggregate of a domain (over every feasible node).
    pub fn aggregate(&self, domain: DomainId) -> &Aggregate {
        &self.aggregates[domain as usize]
    }

    /// The view of every uncordoned node.
    pub fn cluster_view<'a>(&'a self, states: &'a NodeStates) -> ClusterView<'a> {
        ClusterView {
            capacity: self,
            states,
        }
    }

    /// The view of the uncordoned nodes carrying every label of `selector`, if its pool is
    /// kept (after [`Capacity::ensure_pool`]).
    pub fn selector_view<'a>(
        &'a self,
        states: &'a NodeStates,
        selector: &NodeFilter,
    ) -> Option<SelectorView<'a>> {
        let pool = self.pools.get(selector)?;
        Some(SelectorView {
            pools: &self.pools,
            pool,
            states,
        })
    }

    /// The view of a request's selector: the cluster's for an empty one, else its pool's
    /// (after [`Capacity::ensure_pool`]).
    pub fn view_for<'a>(
        &'a self,
        states: &'a NodeStates,
        selector: &NodeFilter,
    ) -> Option<AnyView<'a>> {
        if selector.is_plain() {
            return Some(AnyView::Cluster(self.cluster_view(states)));
        }
        self.selector_view(states, selector).map(AnyView::Selector)
    }

    /// Rebuilds everything from the nodes and compares; the first mismatch is returned.
    pub fn check(&self, topology: &Topology, states: &NodeStates) -> Result<(), String> {
        self.shapes.check(topology, states)?;
        let mut expected = vec![Aggregate::default(); topology.domain_slots()];
        for (id, node) in topology.nodes() {
            let free = states.get(id).feasible_free();
            for domain in topology.ancestors(node.domain) {
                expected[domain as usize].change(None, free);
            }
        }
        for (id, (actual, expected)) in self.aggregates.iter().zip(&expected).enumerate() {
            if actual != expected {
                return Err(format!("aggregate of domain #{id} is stale"));
            }
        }
        if let Some(numa) = &self.numa {
            let mut expected = NumaAggregates::build(topology, states);
            expected.resize(topology.domain_slots());
            let mut actual = numa.clone();
            actual.resize(topology.domain_slots());
            if actual != expected {
                return Err("the NUMA aggregates are stale".into());
            }
            numa.check_largest(topology)?;
        }
        if !self.index.is_stale()
            && topology.is_settled()
            && self.index != self.built_index(topology, states)
        {
            return Err("the free-GPU index disagrees with the aggregates".into());
        }
        self.pools.check(topology, states)
    }
}

/// Per depth, the most GPUs of one domain (the last depth: one node).
fn largest_by_depth(topology: &Topology) -> Vec<u64> {
    let node_depth = topology.node_depth();
    let mut totals = vec![0u64; topology.domain_slots()];
    let mut largest = vec![0u64; node_depth + 1];
    for (_, node) in topology.nodes() {
        let gpus = u64::from(node.gpus);
        largest[node_depth] = largest[node_depth].max(gpus);
        for domain in topology.ancestors(node.domain) {
            totals[domain as usize] += gpus;
        }
    }
    for (id, total) in totals.into_iter().enumerate() {
        let depth = topology.domain(DomainId::try_from(id).unwrap_or(0)).depth;
        largest[depth] = largest[depth].max(total);
    }
    largest
}

/// Which nodes a request may use, and what they hold: what the search reads.
pub trait CapacityView {
    /// Pods of `gpus_per_pod` GPUs the domain's usable nodes hold.
    fn domain_capacity(&self, domain: DomainId, gpus_per_pod: u32) -> u64;
    /// Free healthy GPUs over the domain's usable nodes.
    fn domain_free(&self, domain: DomainId) -> u64;
    /// The node's free healthy GPUs if the request may place pods on it.
    fn node_free(&self, node: NodeId) -> Option<GpuSet>;
    /// The per-level free-GPU index for searching, when it is current for this view.
    fn index(&self) -> Option<&FreeIndex>;
    /// An index whose ranks give path order (for ranking pods), when one is current.
    fn ranks(&self) -> Option<&FreeIndex> {
        self.index()
    }
    /// Usable nodes of the domain with exactly `free` free healthy GPUs, when an aggregate
    /// knows it (`None`: count them).
    fn nodes_with_free(&self, _domain: DomainId, _free: u32) -> Option<u32> {
        None
    }
    /// An upper bound on the GPUs of any one domain of `depth` (`None`: unknown).
    fn largest_domain(&self, _depth: usize) -> Option<u64> {
        None
    }
    /// Pods of `gpus_per_pod` GPUs the domain's usable nodes hold with each pod inside one
    /// NUMA group, when an aggregate knows it (`None`: count them).
    fn domain_numa_capacity(&self, _domain: DomainId, _gpus_per_pod: u32) -> Option<u64> {
        None
    }
    /// The most pods one domain of `depth` holds with each pod inside one NUMA group, when
    /// the NUMA aggregates know it (`None`: unknown).
    fn largest_numa_capacity(
        &self,
        _topology: &Topology,
        _depth: usize,
        _gpus_per_pod: u32,
    ) -> Option<u64> {
        None
    }
}

/// Every uncordoned, untainted node.
#[derive(Debug)]
pub struct ClusterView<'a> {
    capacity: &'a Capacity,
    states: &'a NodeStates,
}

impl CapacityView for ClusterView<'_> {
    fn domain_capacity(&self, domain: DomainId, gpus_per_pod: u32) -> u64 {
        self.capacity.aggregate(domain).capacity(gpus_per_pod)
    }

    fn domain_free(&self, domain: DomainId) -> u64 {
        self.capacity.aggregate(domain).free_gpus()
    }

    fn node_free(&self, node: NodeId) -> Option<GpuSet> {
        self.states.get(node).feasible_set()
    }

    fn index(&self) -> Option<&FreeIndex> {
        let index = &self.capacity.index;
        (!index.is_stale()).then_some(index)
    }

    fn nodes_with_free(&self, domain: DomainId, free: u32) -> Option<u32> {
        Some(self.capacity.aggregate(domain).nodes_with_free(free))
    }

    fn largest_domain(&self, depth: usize) -> Option<u64> {
        self.capacity.largest_domain(depth)
    }

    fn domain_numa_capacity(&self, domain: DomainId, gpus_per_pod: u32) -> Option<u64> {
        Some(self.capacity.numa_capacity(domain, gpus_per_pod))
    }

    fn largest_numa_capacity(
        &self,
        topology: &Topology,
        depth: usize,
        gpus_per_pod: u32,
    ) -> Option<u64> {
        let numa = self.capacity.numa.as_ref()?;
        let index = &self.capacity.index;
        if index.is_stale() {
            let domains = numa::domains_at(topology, depth);
            return numa.largest_capacity(domains, depth, gpus_per_pod);
        }
        let domains = index.level(depth).ids().iter().copied();
        numa.largest_capacity(domains, depth, gpus_per_pod)
    }
}

/// Uncordoned nodes admitting one request's filter (labels, affinity, tolerated taints).
#[derive(Debug)]
pub struct SelectorView<'a> {
    pools: &'a Pools,
    pool: &'a SelectorPool,
    states: &'a NodeStates,
}

impl CapacityView for SelectorView<'_> {
    fn domain_capacity(&self, domain: DomainId, gpus_per_pod: u32) -> u64 {
        let aggregate = self.pool.aggregates.get(&domain);
        aggregate.map_or(0, |aggregate| aggregate.capacity(gpus_per_pod))
    }

    fn domain_free(&self, domain: DomainId) -> u64 {
        let aggregate = self.pool.aggregates.get(&domain);
        aggregate.map_or(0, Aggregate::free_gpus)
    }

    fn node_free(&self, node: NodeId) -> Option<GpuSet> {
        let state = self.states.get(node);
        let usable = !state.cordoned && self.pools.contains(self.pool, node);
        usable.then(|| state.free())
    }

    fn index(&self) -> Option<&FreeIndex> {
        let index = &self.pool.index;
        (!index.is_stale()).then_some(index)
    }

    fn nodes_with_free(&self, domain: DomainId, free: u32) -> Option<u32> {
        let aggregate = self.pool.aggregates.get(&domain);
        Some(aggregate.map_or(0, |aggregate| aggregate.nodes_with_free(free)))
    }
}

/// Either view, for searches that hold several (one per group of a multi-role gang).
#[derive(Debug)]
pub enum AnyView<'a> {
    /// Every uncordoned, untainted node.
    Cluster(ClusterView<'a>),
    /// The nodes of one selector.
    Selector(SelectorView<'a>),
}

impl CapacityView for AnyView<'_> {
    fn domain_capacity(&self, domain: DomainId, gpus_per_pod: u32) -> u64 {
        match self {
            AnyView::Cluster(view) => view.domain_capacity(domain, gpus_per_pod),
            AnyView::Selector(view) => view.domain_capacity(domain, gpus_per_pod),
        }
    }

    fn domain_free(&self, domain: DomainId) -> u64 {
        match self {
            AnyView::Cluster(view) => view.domain_free(domain),
            AnyView::Selector(view) => view.domain_free(domain),
        }
    }

    fn node_free(&self, node: NodeId) -> Option<GpuSet> {
        match self {
            AnyView::Cluster(view) => view.node_free(node),
            AnyView::Selector(view) => view.node_free(node),
        }
    }

    fn index(&self) -> Option<&FreeIndex> {
        match self {
            AnyView::Cluster(view) => view.index(),
            AnyView::Selector(view) => view.index(),
        }
    }

    fn nodes_with_free(&self, domain: DomainId, free: u32) -> Option<u32> {
        match self {
            AnyView::Cluster(view) => view.nodes_with_free(domain, free),
            AnyView::Selector(view) => view.nodes_with_free(domain, free),
        }
    }

    fn largest_domain(&self, depth: usize) -> Option<u64> {
        match self {
            AnyView::Cluster(view) => view.largest_domain(depth),
            AnyView::Selector(view) => view.largest_domain(depth),
        }
    }

    fn domain_numa_capacity(&self, domain: DomainId, gpus_per_pod: u32) -> Option<u64> {
        match self {
            AnyView::Cluster(view) => view.domain_numa_capacity(domain, gpus_per_pod),
            AnyView::Selector(view) => view.domain_numa_capacity(domain, gpus_per_pod),
        }
    }

    fn largest_numa_capacity(
        &self,
        topology: &Topology,
        depth: usize,
        gpus_per_pod: u32,
    ) -> Option<u64> {
        match self {
            AnyView::Cluster(view) => view.largest_numa_capacity(topology, depth, gpus_per_pod),
            AnyView::Selector(view) => view.largest_numa_capacity(topology, depth, gpus_per_pod),
        }
    }
}
