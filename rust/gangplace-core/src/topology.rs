//! The topology: levels, the domain tree, nodes and their GPU state, and the indexes that
//! find them (by name, by `(parent, name)`, by label).
//!
//! Depths: the root (`cluster`) is depth 0, the named levels are depths `1..=levels`, and
//! nodes are depth `levels + 1`. A domain is identified by its whole path from the root, so
//! rack `r1` under spine `s1` and rack `r1` under `s2` are different domains.
//!
//! Children are kept sorted by name, so a walk of the tree visits domains and nodes in path
//! order: the order every tie is broken by. Sorting is deferred ([`Topology::settle`]) so that
//! adding many nodes stays linear.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::capacity::Aggregate;
use crate::error::{CoreError, CoreResult, invalid};
use crate::index::FreeIndex;
use crate::limits::{MAX_GPUS_PER_NODE, MAX_LEVELS, MAX_NAME_BYTES, MAX_NODES};
use crate::pools::Pools;

/// Index of a domain in the topology's arena; the root is 0.
pub type DomainId = u32;
/// Index of a node in the topology's arena.
pub type NodeId = u32;
/// Identity of a reservation or allocation.
pub type HoldId = u128;

/// The root domain, level `cluster`.
pub const ROOT: DomainId = 0;
/// The implicit finest level.
pub const NODE_LEVEL: &str = "node";
/// The implicit root level.
pub const CLUSTER_LEVEL: &str = "cluster";

/// A topology domain (the root, a spine, a rack...).
#[derive(Debug)]
pub struct Domain {
    /// 0 for the root, `1..=levels` for named levels.
    pub depth: usize,
    /// Name within its parent (empty for the root).
    pub name: Box<str>,
    /// `None` for the root.
    pub parent: Option<DomainId>,
    /// Child domains sorted by name (empty at the deepest named level).
    pub child_domains: Vec<DomainId>,
    /// Nodes sorted by name (only at the deepest named level, or the root without levels).
    pub child_nodes: Vec<NodeId>,
    /// Aggregates over the feasible (uncordoned) nodes below.
    pub aggregate: Aggregate,
}

/// A node and the state of its GPUs, as bitmasks indexed by GPU.
#[derive(Debug)]
pub struct Node {
    /// Unique, non-empty; shared with the placements that name the node.
    pub name: Arc<str>,
    /// Number of GPUs, `1..=64`.
    pub gpus: u32,
    /// The deepest named domain holding the node (the root when there are no levels).
    pub domain: DomainId,
    /// Labels, sorted by key.
    pub labels: BTreeMap<Box<str>, Box<str>>,
    /// A cordoned node takes no new placements.
    pub cordoned: bool,
    /// GPUs that must never be placed on (they may still be held by an allocation).
    pub unhealthy: u64,
    /// GPUs held by live reservations (never unhealthy: health loss revokes).
    pub reserved: u64,
    /// GPUs held by allocations.
    pub allocated: u64,
    /// Holds touching this node, with the GPUs each holds here.
    pub holders: Vec<(HoldId, u64)>,
}

impl Node {
    /// Mask of all of the node's GPUs.
    pub fn all_gpus(&self) -> u64 {
        if self.gpus >= 64 {
            u64::MAX
        } else {
            (1u64 << self.gpus) - 1
        }
    }

    /// Healthy GPUs that nothing holds.
    pub fn free_mask(&self) -> u64 {
        self.all_gpus() & !(self.unhealthy | self.reserved | self.allocated)
    }

    /// Number of healthy GPUs that nothing holds.
    pub fn free_count(&self) -> u32 {
        self.free_mask().count_ones()
    }

    /// A removed node's slot, waiting for reuse (a real node has at least one GPU).
    pub fn is_vacant(&self) -> bool {
        self.gpus == 0
    }

    fn vacant() -> Self {
        Self {
            name: Arc::from(""),
            gpus: 0,
            domain: ROOT,
            labels: BTreeMap::new(),
            cordoned: true,
            unhealthy: 0,
            reserved: 0,
            allocated: 0,
            holders: Vec::new(),
        }
    }
}

/// What `add_node` receives, before validation.
#[derive(Debug, Clone, Default)]
pub struct NodeSpec {
    /// Node name.
    pub name: String,
    /// Number of GPUs.
    pub gpus: i64,
    /// Level name -> domain name, for exactly the cluster's levels.
    pub topology: Vec<(String, String)>,
    /// Label key -> value.
    pub labels: Vec<(String, String)>,
    /// Indices of unhealthy GPUs.
    pub unhealthy: Vec<i64>,
}

/// Levels, domains and nodes.
#[derive(Debug)]
pub struct Topology {
    levels: Vec<Box<str>>,
    domains: Vec<Domain>,
    nodes: Vec<Node>,
    node_by_name: HashMap<Arc<str>, NodeId>,
    /// Parent -> child name -> child: nested so that a lookup by `&str` allocates nothing.
    domain_by_parent_and_name: HashMap<DomainId, HashMap<Box<str>, DomainId>>,
    nodes_by_label: HashMap<Box<str>, HashMap<Box<str>, Vec<NodeId>>>,
    unsorted: Vec<DomainId>,
    /// Slots of removed nodes and pruned domains, reused by the next additions.
    vacant_nodes: Vec<NodeId>,
    vacant_domains: Vec<DomainId>,
    /// Domains and feasible nodes by free GPUs, per level (see [`crate::index`]).
    index: FreeIndex,
    /// Aggregates and indexes of the label selectors in use (see [`crate::pools`]).
    pub(crate) pools: Pools,
}

fn check_name(what: &str, name: &str) -> CoreResult<()> {
    if name.is_empty() {
        return Err(invalid(format!("{what} must not be empty")));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(invalid(format!(
            "{what} is {} bytes long; the limit is {MAX_NAME_BYTES}",
            name.len()
        )));
    }
    Ok(())
}

impl Topology {
    /// A topology with the given level names, outermost first.
    pub fn new(levels: Vec<String>) -> CoreResult<Self> {
        if levels.len() > MAX_LEVELS {
            return Err(invalid(format!(
                "{} levels given; the limit is {MAX_LEVELS}",
                levels.len()
            )));
        }
        for (index, level) in levels.iter().enumerate() {
            check_name("a level name", level)?;
            if level == NODE_LEVEL || level == CLUSTER_LEVEL {
                return Err(invalid(format!(
                    "level {level:?} is implicit and cannot be declared"
                )));
            }
            if levels[..index].contains(level) {
                return Err(invalid(format!("level {level:?} is given twice")));
            }
        }
        let root = Domain {
            depth: 0,
            name: "".into(),
            parent: None,
            child_domains: Vec::new(),
            child_nodes: Vec::new(),
            aggregate: Aggregate::default(),
        };
        Ok(Self {
            levels: levels.into_iter().map(String::into_boxed_str).collect(),
            domains: vec![root],
            nodes: Vec::new(),
            node_by_name: HashMap::new(),
            domain_by_parent_and_name: HashMap::new(),
            nodes_by_label: HashMap::new(),
            unsorted: Vec::new(),
            vacant_nodes: Vec::new(),
            vacant_domains: Vec::new(),
            index: FreeIndex::stale(),
            pools: Pools::default(),
        })
    }

    /// Level names, outermost first (without `node` and `cluster`).
    pub fn levels(&self) -> &[Box<str>] {
        &self.levels
    }

    /// Depth of the nodes: one below the deepest named level.
    pub fn node_depth(&self) -> usize {
        self.levels.len() + 1
    }

    /// Depth of a level name (`cluster` 0, named levels 1.., `node` last).
    pub fn depth_of(&self, level: &str) -> Option<usize> {
        match level {
            CLUSTER_LEVEL => Some(0),
            NODE_LEVEL => Some(self.node_depth()),
            _ => self
                .levels
                .iter()
                .position(|name| &**name == level)
                .map(|index| index + 1),
        }
    }

    /// Name of the level at `depth`.
    pub fn level_name(&self, depth: usize) -> &str {
        match depth {
            0 => CLUSTER_LEVEL,
            depth if depth == self.node_depth() => NODE_LEVEL,
            depth => &self.levels[depth - 1],
        }
    }

    /// The domain with this id.
    pub fn domain(&self, id: DomainId) -> &Domain {
        &self.domains[id as usize]
    }

    /// The node with this id.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len() - self.vacant_nodes.len()
    }

    /// Size of the node arena: every `NodeId` in use is below it.
    pub fn node_slots(&self) -> usize {
        self.nodes.len()
    }

    /// All nodes, in arena order (not a decision order).
    pub fn nodes(&self) -> impl Iterator<Item = (NodeId, &Node)> {
        (0..)
            .zip(self.nodes.iter())
            .filter(|(_, node)| !node.is_vacant())
    }

    /// The id of the node with this name.
    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.node_by_name.get(name).copied()
    }

    /// A domain and all its ancestors up to the root, innermost first.
    pub fn ancestors(&self, domain: DomainId) -> impl Iterator<Item = DomainId> + '_ {
        std::iter::successors(Some(domain), |&id| self.domain(id).parent)
    }

    /// Names of the domains from the root (excluded) down to `domain`.
    pub fn domain_path(&self, domain: DomainId) -> Vec<&str> {
        let mut path: Vec<&str> = self
            .ancestors(domain)
            .filter(|&id| id != ROOT)
            .map(|id| &*self.domain(id).name)
            .collect();
        path.reverse();
        path
    }

    /// The node's domain path followed by its name: its identity in path order.
    pub fn node_path(&self, node: NodeId) -> Vec<&str> {
        let node = self.node(node);
        let mut path = self.domain_path(node.domain);
        path.push(&node.name);
        path
    }

    /// Nodes carrying every `(key, value)` of `selector`, found through the label index.
    pub fn nodes_matching<'a>(
        &'a self,
        selector: &'a [(String, String)],
    ) -> impl Iterator<Item = NodeId> + 'a {
        let pools: Option<Vec<&Vec<NodeId>>> = selector
            .iter()
            .map(|(key, value)| self.nodes_by_label.get(key.as_str())?.get(value.as_str()))
            .collect();
        let smallest = pools.and_then(|pools| pools.into_iter().min_by_key(|pool| pool.len()));
        smallest.into_iter().flatten().copied().filter(move |&id| {
            let labels = &self.node(id).labels;
            selector
                .iter()
                .all(|(key, value)| labels.get(key.as_str()).is_some_and(|v| **v == **value))
        })
    }

    /// Sorts the children of every domain touched since the last call, and rebuilds the
    /// free-GPU index if nodes were added or removed. Must run before a search so that walks
    /// follow path order.
    pub fn settle(&mut self) {
        let mut unsorted = std::mem::take(&mut self.unsorted);
        unsorted.sort_unstable();
        unsorted.dedup();
        for id in unsorted {
            let mut child_domains = std::mem::take(&mut self.domains[id as usize].child_domains);
            child_domains.sort_unstable_by(|&a, &b| self.domain(a).name.cmp(&self.domain(b).name));
            let mut child_nodes = std::mem::take(&mut self.domains[id as usize].child_nodes);
            child_nodes.sort_unstable_by(|&a, &b| self.node(a).name.cmp(&self.node(b).name));
            let domain = &mut self.domains[id as usize];
            domain.child_domains = child_domains;
            domain.child_nodes = child_nodes;
        }
        if self.index.is_stale() {
            self.rebuild_index();
        }
    }

    fn rebuild_index(&mut self) {
        self.index = self.built_index();
    }

    /// A fresh index of the whole cluster.
    fn built_index(&self) -> FreeIndex {
        self.built_index_with(
            |id| Some(self.domain(id).aggregate.free_gpus()),
            |_, node| (!node.cordoned).then(|| u64::from(node.free_count())),
        )
    }

    /// A fresh index: the tree walked in path order, every domain and node given its rank,
    /// entered with the free GPUs the closures give (`None`: not indexed).
    pub(crate) fn built_index_with(
        &self,
        domain_free: impl Fn(DomainId) -> Option<u64>,
        node_free: impl Fn(NodeId, &Node) -> Option<u64>,
    ) -> FreeIndex {
        let node_depth = self.node_depth();
        let mut index = FreeIndex::default();
        index.begin_rebuild(node_depth + 1, self.domains.len(), self.nodes.len());
        let mut stack = vec![ROOT];
        while let Some(id) = stack.pop() {
            let domain = self.domain(id);
            index.push_domain(domain.depth, id, domain_free(id));
            for &node_id in &domain.child_nodes {
                index.push_node(node_depth, node_id, node_free(node_id, self.node(node_id)));
            }
            stack.extend(domain.child_domains.iter().rev());
        }
        index
    }

    /// The free-GPU index; valid after [`Topology::settle`].
    pub fn index(&self) -> &FreeIndex {
        &self.index
    }

    /// Validates a node description against the levels and the existing nodes.
    fn validate(&self, spec: &NodeSpec) -> CoreResult<(u32, u64)> {
        check_name("a node name", &spec.name)?;
        if self.node_count() >= MAX_NODES {
            return Err(CoreError::LimitExceeded(format!(
                "the cluster already has {MAX_NODES} nodes, the limit"
            )));
        }
        if self.node_by_name.contains_key(spec.name.as_str()) {
            return Err(invalid(format!("node {:?} already exists", spec.name)));
        }
        let gpus = u32::try_from(spec.gpus)
            .ok()
            .filter(|gpus| (1..=MAX_GPUS_PER_NODE).contains(gpus))
            .ok_or_else(|| {
                invalid(format!(
                    "node {:?}: gpus must be in 1..={MAX_GPUS_PER_NODE}, got {}",
                    spec.name, spec.gpus
                ))
            })?;
        for (level, domain) in &spec.topology {
            if !self.levels.iter().any(|known| **known == **level) {
                return Err(invalid(format!(
                    "node {:?}: topology names unknown level {level:?}; the levels are {:?}",
                    spec.name, self.levels
                )));
            }
            check_name(&format!("node {:?}: the {level} name", spec.name), domain)?;
        }
        for level in &self.levels {
            let given = spec.topology.iter().filter(|(l, _)| **l == **level).count();
            if given != 1 {
                return Err(invalid(format!(
                    "node {:?}: topology must give level {level:?} exactly once",
                    spec.name
                )));
            }
        }
        for (key, value) in &spec.labels {
            check_name("a label key", key)?;
            if value.len() > MAX_NAME_BYTES {
                return Err(invalid(format!(
                    "label {key:?} is longer than {MAX_NAME_BYTES} bytes"
                )));
            }
        }
        let mut unhealthy = 0u64;
        for &gpu in &spec.unhealthy {
            let index = u32::try_from(gpu).ok().filter(|&index| index < gpus);
            let index = index.ok_or_else(|| {
                invalid(format!(
                    "node {:?}: unhealthy GPU index {gpu} is not in 0..{gpus}",
                    spec.name
                ))
            })?;
            unhealthy |= 1u64 << index;
        }
        Ok((gpus, unhealthy))
    }

    /// Adds a node; on error nothing changes.
    pub fn add_node(&mut self, spec: NodeSpec) -> CoreResult<NodeId> {
        let (gpus, unhealthy) = self.validate(&spec)?;
        let mut parent = ROOT;
        for index in 0..self.levels.len() {
            let level = &self.levels[index];
            let given = spec.topology.iter().find(|(l, _)| **l == **level);
            let domain_name = given.map_or("", |(_, name)| name.as_str());
            parent = self.child_domain(parent, index + 1, domain_name);
        }
        // `validate` bounds the node count by MAX_NODES, far below u32::MAX.
        let id = self
            .vacant_nodes
            .pop()
            .unwrap_or_else(|| NodeId::try_from(self.nodes.len()).unwrap_or(NodeId::MAX));
        for (key, value) in &spec.labels {
            self.nodes_by_label
                .entry(key.as_str().into())
                .or_default()
                .entry(value.as_str().into())
                .or_default()
                .push(id);
        }
        let node = Node {
            name: Arc::from(spec.name),
            gpus,
            domain: parent,
            labels: spec
                .labels
                .into_iter()
                .map(|(k, v)| (k.into_boxed_str(), v.into_boxed_str()))
                .collect(),
            cordoned: false,
            unhealthy,
            reserved: 0,
            allocated: 0,
            holders: Vec::new(),
        };
        let free = node.free_count();
        self.node_by_name.insert(node.name.clone(), id);
        match self.nodes.get_mut(id as usize) {
            Some(slot) => *slot = node,
            None => self.nodes.push(node),
        }
        self.domains[parent as usize].child_nodes.push(id);
        self.unsorted.push(parent);
        self.index.invalidate();
        self.pools.clear();
        self.update_aggregates(parent, |aggregate| aggregate.add_node(free));
        Ok(id)
    }

    /// The child of `parent` named `name`, created if missing.
    fn child_domain(&mut self, parent: DomainId, depth: usize, name: &str) -> DomainId {
        let existing = self.domain_by_parent_and_name.get(&parent);
        if let Some(&id) = existing.and_then(|children| children.get(name)) {
            return id;
        }
        let domain = Domain {
            depth,
            name: name.into(),
            parent: Some(parent),
            child_domains: Vec::new(),
            child_nodes: Vec::new(),
            aggregate: Aggregate::default(),
        };
        let id = match self.vacant_domains.pop() {
            Some(id) => {
                self.domains[id as usize] = domain;
                id
            }
            None => {
                // At most MAX_NODES * MAX_LEVELS domains, far below u32::MAX.
                let id = DomainId::try_from(self.domains.len()).unwrap_or(DomainId::MAX);
                self.domains.push(domain);
                id
            }
        };
        self.domains[parent as usize].child_domains.push(id);
        self.unsorted.push(parent);
        self.domain_by_parent_and_name
            .entry(parent)
            .or_default()
            .insert(name.into(), id);
        id
    }

    /// Applies `change` to the aggregate of `domain` and of every ancestor.
    fn update_aggregates(&mut self, domain: DomainId, change: impl Fn(&mut Aggregate)) {
        let mut next = Some(domain);
        while let Some(id) = next {
            let domain = &mut self.domains[id as usize];
            let before = domain.aggregate.free_gpus();
            change(&mut domain.aggregate);
            let after = domain.aggregate.free_gpus();
            self.index
                .domain_moved(domain.depth, id, Some(before), Some(after));
            next = domain.parent;
        }
    }

    /// Starts a mutation of many nodes: index entries of domains move once, at
    /// [`Topology::end_batch`]. No search may run in between.
    pub fn begin_batch(&mut self) {
        self.index.begin_batch();
        self.pools.begin_batch();
    }

    /// Ends a batch started by [`Topology::begin_batch`].
    pub fn end_batch(&mut self) {
        self.index.end_batch();
        self.pools.end_batch();
    }

    /// Changes a node's GPU state with `change`, keeping the aggregates up to date.
    pub fn update_node(&mut self, id: NodeId, change: impl FnOnce(&mut Node)) {
        let node = &mut self.nodes[id as usize];
        let (before, feasible, domain) = (node.free_count(), !node.cordoned, node.domain);
        change(node);
        let after = node.free_count();
        if feasible && before != after {
            let depth = self.node_depth();
            let moved = (Some(u64::from(before)), Some(u64::from(after)));
            self.index.node_moved(depth, id, moved.0, moved.1);
            self.update_aggregates(domain, |aggregate| {
                aggregate.remove_node(before);
                aggregate.add_node(after);
            });
            self.pools_node_changed(id, Some(before), Some(after));
        }
    }

    /// Cordons or uncordons a node; a cordoned node leaves the aggregates.
    pub fn set_cordoned(&mut self, id: NodeId, cordoned: bool) {
        let node = &mut self.nodes[id as usize];
        if node.cordoned == cordoned {
            return;
        }
        node.cordoned = cordoned;
        let (free, domain) = (node.free_count(), node.domain);
        let depth = self.node_depth();
        let feasible_free = Some(u64::from(free));
        if cordoned {
            self.index.node_moved(depth, id, feasible_free, None);
            self.update_aggregates(domain, |aggregate| aggregate.remove_node(free));
            self.pools_node_changed(id, Some(free), None);
        } else {
            self.index.node_moved(depth, id, None, feasible_free);
            self.update_aggregates(domain, |aggregate| aggregate.add_node(free));
            self.pools_node_changed(id, None, Some(free));
        }
    }

    /// Removes a node that no hold touches any more (the ledger detaches holds first).
    /// Domains left without nodes are pruned, so the tree looks as if the node had never
    /// been added.
    pub fn remove_node(&mut self, id: NodeId) {
        let node = std::mem::replace(&mut self.nodes[id as usize], Node::vacant());
        self.index.invalidate();
        self.pools.clear();
        if !node.cordoned {
            let free = node.free_count();
            self.update_aggregates(node.domain, |aggregate| aggregate.remove_node(free));
        }
        self.node_by_name.remove(&node.name);
        for (key, value) in &node.labels {
            if let Some(values) = self.nodes_by_label.get_mut(key) {
                if let Some(pool) = values.get_mut(value) {
                    pool.retain(|&other| other != id);
                    if pool.is_empty() {
                        values.remove(value);
                    }
                }
                if values.is_empty() {
                    self.nodes_by_label.remove(key);
                }
            }
        }
        self.domains[node.domain as usize]
            .child_nodes
            .retain(|&other| other != id);
        self.vacant_nodes.push(id);
        self.prune(node.domain);
    }

    /// Removes `domain` and its ancestors while they are empty (never the root).
    fn prune(&mut self, mut domain: DomainId) {
        while domain != ROOT {
            let current = &self.domains[domain as usize];
            if !(current.child_nodes.is_empty() && current.child_domains.is_empty()) {
                return;
            }
            let parent = current.parent.unwrap_or(ROOT);
            let name = std::mem::take(&mut self.domains[domain as usize].name);
            if let Some(children) = self.domain_by_parent_and_name.get_mut(&parent) {
                children.remove(&name);
                if children.is_empty() {
                    self.domain_by_parent_and_name.remove(&parent);
                }
            }
            self.domains[parent as usize]
                .child_domains
                .retain(|&other| other != domain);
            self.domains[domain as usize].parent = None;
            self.vacant_domains.push(domain);
            domain = parent;
        }
    }

    /// Recomputes every aggregate from the nodes and compares; the first mismatch is returned.
    pub fn check_aggregates(&self) -> Result<(), String> {
        let mut expected = vec![Aggregate::default(); self.domains.len()];
        for node in self.nodes.iter().filter(|node| !node.cordoned) {
            for id in self.ancestors(node.domain) {
                expected[id as usize].add_node(node.free_count());
            }
        }
        for (id, (domain, expected)) in self.domains.iter().zip(&expected).enumerate() {
            if domain.aggregate != *expected {
                return Err(format!("aggregate of domain #{id} is stale"));
            }
        }
        if !self.index.is_stale() && self.unsorted.is_empty() && self.index != self.built_index() {
            return Err("the free-GPU index disagrees with the aggregates".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, gpus: i64, topology: &[(&str, &str)]) -> NodeSpec {
        NodeSpec {
            name: name.into(),
            gpus,
            topology: topology
                .iter()
                .map(|(l, d)| ((*l).into(), (*d).into()))
                .collect(),
            ..NodeSpec::default()
        }
    }

    #[test]
    fn rejects_bad_levels() {
        for levels in [vec!["node"], vec!["cluster"], vec![""], vec!["a", "a"]] {
            let levels = levels.into_iter().map(String::from).collect();
            assert!(Topology::new(levels).is_err());
        }
        let many = (0..=MAX_LEVELS).map(|i| format!("l{i}")).collect();
        assert!(Topology::new(many).is_err());
    }

    #[test]
    fn same_rack_name_under_two_spines_is_two_racks() {
        let mut topology = Topology::new(vec!["spine".into(), "rack".into()]).unwrap();
        let a = topology
            .add_node(spec("a", 8, &[("spine", "s1"), ("rack", "r1")]))
            .unwrap();
        let b = topology
            .add_node(spec("b", 8, &[("spine", "s2"), ("rack", "r1")]))
            .unwrap();
        assert_ne!(topology.node(a).domain, topology.node(b).domain);
        assert_eq!(topology.node_path(b), vec!["s2", "r1", "b"]);
        assert_eq!(topology.domain(ROOT).aggregate.free_gpus(), 16);
    }

    #[test]
    fn bad_node_changes_nothing() {
        let mut topology = Topology::new(vec!["rack".into()]).unwrap();
        topology.add_node(spec("a", 8, &[("rack", "r1")])).unwrap();
        let bad = [
            spec("a", 8, &[("rack", "r1")]),
            spec("", 8, &[("rack", "r1")]),
            spec("b", 0, &[("rack", "r1")]),
            spec("b", 65, &[("rack", "r1")]),
            spec("b", 8, &[]),
            spec("b", 8, &[("rack", "r1"), ("spine", "s")]),
            spec("b", 8, &[("rack", "")]),
            NodeSpec {
                unhealthy: vec![8],
                ..spec("b", 8, &[("rack", "r2")])
            },
        ];
        for bad in bad {
            assert!(topology.add_node(bad).is_err());
        }
        assert_eq!(topology.node_count(), 1);
        assert_eq!(topology.domain(ROOT).child_domains.len(), 1);
        topology.check_aggregates().unwrap();
    }
}
