//! The placement search: which domain, then which nodes and GPUs.
//!
//! The rules are those of the docs/placement.md (the one canonical text;
//! `gangplace.reference.rules` is their readable transcription). Each function below names
//! the rule it implements. How this code finds the answer fast:
//!
//! - Best-fit reads each level's free-GPU index ([`crate::capacity::FreeIndex`]) from the
//!   fewest sufficient free GPUs upwards (rules 2 and 3), then breaks ties among the equally
//!   free by their ancestors (module `best_fit`).
//! - First-fit walks depth-first in path order, entering only subtrees that hold the gang
//!   (capacities add up, so the domains that fit form a subtree under the root).
//! - Capacities come from the per-domain aggregates, never from visiting nodes.

use crate::capacity::CapacityView;
use crate::capacity::ResourceFit;
use crate::capacity::{Counts, OverlaidCounts, ShapeCount, ShareFit};
use crate::config::Policy;
use crate::error::{CoreResult, internal};
use crate::ids::{DomainId, GpuSet, NodeId, ROOT};
use crate::shapes::{Layers, Numa, Spread};
use crate::topology::Topology;
use fill::{Child, fill_children};

mod balanced;
mod best_fit;
mod candidates;
mod fill;
mod pods;
pub(crate) mod removal;
mod slices;

/// A domain or a node: the things a level is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Item {
    /// A domain (the root, or a domain of a named level).
    Domain(DomainId),
    /// A node, the finest level.
    Node(NodeId),
}

impl Item {
    /// Its path: the domain's path, or the node's path (domain path, then name).
    pub fn path(self, topology: &Topology) -> Vec<&str> {
        match self {
            Item::Domain(id) => topology.domain_path(id),
            Item::Node(id) => topology.node_path(id),
        }
    }
}

/// What the search needs of a request, already validated.
#[derive(Debug, Clone, Copy)]
pub struct Demand {
    /// Pods wanted.
    pub pods: u64,
    /// GPUs per pod, `1..=64`.
    pub gpus_per_pod: u32,
    /// Fewest pods accepted (elastic gangs); equal to `pods` otherwise.
    pub min_pods: u64,
    /// Depth of the coarsest level that may be tried (0: the whole cluster).
    pub coarsest_depth: usize,
}

/// One pod of a plan: a node and the GPUs it takes there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedPod {
    /// The node.
    pub node: NodeId,
    /// The GPUs.
    pub gpus: GpuSet,
}

/// The outcome of a successful search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Depth of the chosen level (0 for the cluster, `levels + 1` for a node).
    pub depth: usize,
    /// The chosen domain or node.
    pub item: Item,
    /// Pods in rank order.
    pub pods: Vec<PlannedPod>,
    /// Slice requests: the domain (or node) of every innermost slice, in rank order.
    pub slices: Vec<Item>,
}

/// The largest capacity found at one level, for explanations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LevelBest {
    /// Depth of the level.
    pub depth: usize,
    /// The first domain (in path order) with the largest capacity; `None` if all are empty.
    pub item: Option<Item>,
    /// Its capacity in pods.
    pub capacity: u64,
}

/// A search over one view of the topology.
#[derive(Debug)]
pub struct Search<'a, V> {
    topology: &'a Topology,
    view: &'a V,
    gpus_per_pod: u32,
    /// The request's slice layers (none by default): domains are then compared by the
    /// slices they hold (module `slices`).
    layers: Layers,
    /// How units are split among the children used (module `balanced`).
    split: Spread,
    /// `Numa::Single`: capacities count pods inside one NUMA group (the NUMA aggregates on
    /// the cluster's view; other views walk the nodes).
    numa: Numa,
    /// A request with resources besides GPUs: each node holds no more pods than its free
    /// resources allow (docs/resources.md "Node resources"), counted node by node, the aggregates'
    /// GPU-only counts serving as bounds.
    fit: Option<ResourceFit<'a>>,
    /// A fractional request (docs/resources.md "Fractions of a GPU"): searched as pods without whole
    /// GPUs, each node holding what its free and shared GPUs' room allows.
    share: Option<ShareFit<'a>>,
    /// The kept pod counts of this search's shape on its view (docs/resources.md "Node
    /// resources"), as kept or through a what-if view: every count read from them, none made
    /// node by node.
    counts: Option<Counts<'a>>,
}

impl<'a, V: CapacityView> Search<'a, V> {
    /// A search for pods of `gpus_per_pod` GPUs. The topology must be settled.
    pub fn new(topology: &'a Topology, view: &'a V, gpus_per_pod: u32) -> Self {
        Self {
            topology,
            view,
            gpus_per_pod,
            layers: Layers::NONE,
            split: Spread::Pack,
            numa: Numa::None,
            fit: None,
            share: None,
            counts: None,
        }
    }

    /// The same search reading its pod counts from `counts` (`None`: counting them). They
    /// must be the current counts of its shape on its view.
    pub fn with_counts(self, counts: Option<&'a ShapeCount>) -> Self {
        Self {
            counts: counts.map(Counts::Kept),
            ..self
        }
    }

    /// The same search reading its pod counts from kept counts seen through its what-if
    /// view. They must be its shape's counts on that view.
    pub fn with_overlaid_counts(self, counts: &'a OverlaidCounts<'a>) -> Self {
        Self {
            counts: Some(Counts::Overlaid(counts)),
            ..self
        }
    }

    /// The same search counting each node's pods also by its free resources (`None`: GPUs
    /// only).
    pub fn with_resources(self, fit: Option<ResourceFit<'a>>) -> Self {
        Self { fit, ..self }
    }

    /// How it counts resources besides GPUs (`None`: GPUs only).
    pub fn fit(&self) -> Option<ResourceFit<'a>> {
        self.fit
    }

    /// The same search for fractional pods (`None`: whole GPUs); `gpus_per_pod` must be 0.
    pub fn with_shares(self, share: Option<ShareFit<'a>>) -> Self {
        Self { share, ..self }
    }

    /// Whether this search places fractional pods.
    pub(super) fn has_shares(&self) -> bool {
        self.share.is_some()
    }

    /// Of the usable nodes with a share of a GPU and no free GPU, the first in rule 3's order
    /// (fewest free GPUs in the parent, then the grandparent, ..., then path order) that holds
    /// `pods`.
    pub(super) fn best_shared_full_node(&self, pods: u64) -> Option<Item> {
        let share = self.share.as_ref()?;
        let full = |&id: &NodeId| self.view.node_free(id).is_some_and(GpuSet::is_empty);
        let holding = |&id: &NodeId| self.holds_pods(Item::Node(id), pods);
        let nodes = share.states.shares().nodes().filter(full).filter(holding);
        let best = nodes.min_by(|&a, &b| {
            let by_ancestry = self.ancestry_order(Item::Node(a), Item::Node(b));
            by_ancestry.then_with(|| match self.view.ranks() {
                Some(index) => index.node_rank(a).cmp(&index.node_rank(b)),
                None => (self.topology.node_path(a)).cmp(&self.topology.node_path(b)),
            })
        });
        best.map(Item::Node)
    }

    /// The same search counting pods per NUMA group (docs/shapes.md "Inside a node"): read from the
    /// NUMA aggregates where the view keeps them, else by walking the nodes below the item.
    pub fn with_numa(self, numa: Numa) -> Self {
        Self { numa, ..self }
    }

    /// The same search for a request with these slice layers and this spread.
    pub fn with_shape(self, layers: Layers, split: Spread) -> Self {
        Self {
            layers,
            split,
            ..self
        }
    }

    /// Free healthy GPUs over the feasible nodes of `item` (rule 3's best-fit key).
    pub fn free_gpus(&self, item: Item) -> u64 {
        match item {
            Item::Domain(id) => self.view.domain_free(id),
            Item::Node(id) => self
                .view
                .node_free(id)
                .map_or(0, |free| u64::from(free.count())),
        }
    }

    /// The children of `item` in path order (none for a node).
    pub fn children(&self, item: Item) -> impl Iterator<Item = Item> + 'a {
        let (domains, nodes): (&[DomainId], &[NodeId]) = match item {
            Item::Domain(id) => {
                let domain = self.topology.domain(id);
                (&domain.child_domains, &domain.child_nodes)
            }
            Item::Node(_) => (&[], &[]),
        };
        let domains = domains.iter().map(|&id| Item::Domain(id));
        domains.chain(nodes.iter().map(|&id| Item::Node(id)))
    }

    /// Places the demand, or returns `None` when no allowed domain can hold it (rules 2-7).
    pub fn plan(&self, demand: &Demand, policy: Policy) -> CoreResult<Option<Plan>> {
        let pods = match self.finest_fitting(demand.pods, demand.coarsest_depth, policy) {
            Some(_) => demand.pods,
            None if demand.min_pods < demand.pods => {
                // With slices, capacities are whole outermost slices (in pods): elastic slice
                // gangs shrink in whole slices.
                let best = self.largest_capacity(demand.coarsest_depth);
                if best.item.is_none() || best.capacity < demand.min_pods {
                    return Ok(None);
                }
                best.capacity
            }
            None => return Ok(None),
        };
        let Some((depth, item)) = self.finest_fitting(pods, demand.coarsest_depth, policy) else {
            return Err(internal("elastic fallback lost its domain"));
        };
        self.plan_in(depth, item, pods).map(Some)
    }

    /// Rules 4-6 inside one chosen domain (or node) `item` at `depth`: `pods` pods spread
    /// and ranked. The item must hold them.
    pub fn plan_in(&self, depth: usize, item: Item, pods: u64) -> CoreResult<Plan> {
        let mut planned = Vec::new();
        if self.layers.is_empty() {
            self.spread(item, pods, &mut planned)?;
        } else {
            let outer = self.layers.outer_size();
            self.spread_slices(item, 0, pods / outer, &mut planned)?;
        }
        self.rank(&mut planned);
        let slices = self.slice_items(&planned);
        Ok(Plan {
            depth,
            item,
            pods: planned,
            slices,
        })
    }

    /// The item of `depth` that holds `node` (the node itself at the node depth).
    pub fn item_of(&self, node: NodeId, depth: usize) -> Item {
        if depth == self.topology.node_depth() {
            return Item::Node(node);
        }
        let domain = self
            .topology
            .ancestors(self.topology.node(node).domain)
            .find(|&id| self.topology.domain(id).depth == depth);
        Item::Domain(domain.unwrap_or(ROOT))
    }

    /// The path of an item: its domain path, or the node's path at the node depth.
    pub fn item_path(&self, item: Item) -> Vec<&'a str> {
        item.path(self.topology)
    }

    /// The topology searched.
    pub fn topology(&self) -> &'a Topology {
        self.topology
    }

    /// The view searched.
    pub fn view(&self) -> &'a V {
        self.view
    }

    /// The slice layers of this search (what-if searches keep the request's shape).
    pub fn layers(&self) -> Layers {
        self.layers
    }

    /// The spread of this search.
    pub fn split(&self) -> Spread {
        self.split
    }

    /// The NUMA policy of this search.
    pub fn numa(&self) -> Numa {
        self.numa
    }

    /// GPUs per pod of this search.
    pub fn gpus_per_pod(&self) -> u32 {
        self.gpus_per_pod
    }

    /// Rules 2 and 3: the finest level at or below `coarsest_depth` with a domain holding
    /// `pods`, and the domain the policy picks there.
    fn finest_fitting(
        &self,
        pods: u64,
        coarsest_depth: usize,
        policy: Policy,
    ) -> Option<(usize, Item)> {
        if !self.holds(Item::Domain(ROOT), pods) {
            return None;
        }
        // Per-NUMA counts have no aggregate, but the index's order (free GPUs) is still rule
        // 3's: its entries are tried fewest first and checked by counting per NUMA group.
        let index = self.view.index();
        match (policy, index) {
            (Policy::BestFit, Some(index)) => {
                self.best_fit_indexed(index, pods, coarsest_depth, true)
            }
            (Policy::BestFit, None) => self.best_fit_walk(pods, coarsest_depth, true),
            (Policy::BestFitPath, Some(index)) => {
                self.best_fit_indexed(index, pods, coarsest_depth, false)
            }
            (Policy::BestFitPath, None) => self.best_fit_walk(pods, coarsest_depth, false),
            (Policy::FirstFit, index) => (coarsest_depth..=self.topology.node_depth())
                .rev()
                .filter(|&depth| {
                    let need = pods * u64::from(self.gpus_per_pod);
                    index.is_none_or(|index| index.level(depth).most_free() >= need)
                        && self.level_may_hold(depth, pods)
                })
                .find_map(|depth| {
                    let item = self.first_fitting(Item::Domain(ROOT), 0, depth, pods)?;
                    Some((depth, item))
                }),
        }
    }

    /// First-fit: the first item of `target` depth in path order that holds `pods`, found
    /// depth-first, entering only subtrees that hold `pods`.
    fn first_fitting(&self, item: Item, depth: usize, target: usize, pods: u64) -> Option<Item> {
        if !self.holds(item, pods) {
            return None;
        }
        if depth == target {
            return Some(item);
        }
        self.children(item)
            .find_map(|child| self.first_fitting(child, depth + 1, target, pods))
    }

    /// The largest capacity of a single domain at `depth` (the first such domain in path
    /// order), searched depth-first and pruned wherever a subtree cannot beat the best so far:
    /// a child never holds more than its parent.
    pub fn largest_capacity(&self, depth: usize) -> LevelBest {
        if !self.layers.is_empty() {
            return self.largest_in_slices(depth);
        }
        let mut best = LevelBest {
            depth,
            item: None,
            capacity: 0,
        };
        self.search_largest(Item::Domain(ROOT), 0, &mut best);
        best
    }

    fn search_largest(&self, item: Item, depth: usize, best: &mut LevelBest) {
        if self.counted() {
            // The plain count bounds the NUMA one: prune on it before counting per group.
            let bound = self.plain_capacity(item);
            if bound == 0 || (best.item.is_some() && bound <= best.capacity) {
                return;
            }
        }
        let capacity = self.capacity(item);
        if capacity == 0 || (best.item.is_some() && capacity <= best.capacity) {
            return;
        }
        if depth == best.depth {
            best.capacity = capacity;
            best.item = Some(item);
            return;
        }
        for child in self.children(item) {
            self.search_largest(child, depth + 1, best);
        }
    }

    /// Rule 4: spreads `pods` over `item` with the fewest children at every level.
    fn spread(&self, item: Item, pods: u64, out: &mut Vec<PlannedPod>) -> CoreResult<()> {
        if let Item::Node(node) = item {
            return self.take_gpus(node, pods, out);
        }
        let children = Child::in_path_order(
            self.children(item)
                .map(|child| (self.capacity(child), child)),
        );
        self.distribute(children, pods, |child, pods| self.spread(child, pods, out))
    }

    /// Units (pods or slices) over children with their capacities: rule 4's fill, or the
    /// balanced split (docs/shapes.md "Balanced spread").
    fn distribute(
        &self,
        children: Vec<Child>,
        units: u64,
        mut place: impl FnMut(Item, u64) -> CoreResult<()>,
    ) -> CoreResult<()> {
        match self.split {
            Spread::Pack => fill_children(children, units, place),
            Spread::Balanced => {
                for (child, share) in balanced::balanced_shares(&children, units)? {
                    place(child, share)?;
                }
                Ok(())
            }
        }
    }

    /// Rule 5: gives `pods` pods the lowest-indexed free healthy GPUs of `node`, or, on a
    /// node with GPU groups, those of the tightest finest group that holds each pod
    /// ([`crate::intranode`]).
    fn take_gpus(&self, node: NodeId, pods: u64, out: &mut Vec<PlannedPod>) -> CoreResult<()> {
        if let Some(share) = &self.share {
            // Fractional pods (docs/resources.md "Fractions of a GPU"): a GPU each, best fit (F2).
            let free = self.view.node_free(node).unwrap_or_default();
            let gpus = (share.choose(node, free, pods))
                .ok_or_else(|| internal("a node held fewer fractions than counted"))?;
            out.extend(gpus.into_iter().map(|gpu| PlannedPod {
                node,
                gpus: GpuSet::single(gpu),
            }));
            return Ok(());
        }
        if self.gpus_per_pod == 0 {
            // Pods without GPUs (docs/resources.md "Node resources") take none.
            let pods = (0..pods).map(|_| PlannedPod {
                node,
                gpus: GpuSet::EMPTY,
            });
            out.extend(pods);
            return Ok(());
        }
        let mut free = self.view.node_free(node).unwrap_or_default();
        let groups = self.topology.node(node).gpu_topology.as_deref();
        let first = out.len();
        for _ in 0..pods {
            let gpus = match groups {
                Some(groups) if free.count() >= self.gpus_per_pod => {
                    groups.choose(free, self.gpus_per_pod)
                }
                _ => free.lowest_n(self.gpus_per_pod),
            };
            if gpus.count() < self.gpus_per_pod {
                return Err(internal("a node held fewer GPUs than counted"));
            }
            free &= !gpus;
            out.push(PlannedPod { node, gpus });
        }
        let taken = &mut out[first..];
        if groups.is_some() && !taken.is_sorted_by_key(|pod| pod.gpus.lowest()) {
            // Tightest groups first need not be lowest GPUs first: the node's pods in rule 6's
            // order, so the ranking sort finds the run already sorted, as on plain nodes.
            taken.sort_unstable_by_key(|pod| pod.gpus.lowest());
        }
        Ok(())
    }

    /// Rule 6 on pods planned in parts (a multi-role anchor placed around its follower).
    pub(crate) fn rank_pods(&self, pods: &mut [PlannedPod]) {
        self.rank(pods);
    }

    /// Rule 6: sorts pods by (node's domain path, node name, first GPU index). With an
    /// index, a node's rank is its position in that order.
    fn rank(&self, pods: &mut [PlannedPod]) {
        match self.view.ranks() {
            Some(index) => {
                pods.sort_unstable_by_key(|pod| (index.node_rank(pod.node), pod.gpus.lowest()))
            }
            None => pods.sort_by_cached_key(|pod| {
                let path: Vec<&str> = self.topology.node_path(pod.node);
                (path, pod.gpus.lowest())
            }),
        }
    }
}
