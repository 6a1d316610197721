//! The topology: levels, the domain tree and the nodes' static description (name, GPU count,
//! place in the tree, labels), with the lookups that find them. Structure only: the GPU state
//! lives in [`crate::state`] and everything derived from it in [`crate::capacity`].
//!
//! Depths: the root (`cluster`) is depth 0, the named levels are depths `1..=levels`, and
//! nodes are depth `levels + 1`. A domain is identified by its whole path from the root, so
//! rack `r1` under spine `s1` and rack `r1` under `s2` are different domains.
//!
//! Children are kept sorted by name, so a walk of the tree visits domains and nodes in path
//! order: the order every tie is broken by. Sorting is deferred ([`Topology::settle`]) so that
//! adding many nodes stays linear.

pub(crate) mod edit;
mod filter;
mod labels;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::config::check_name;
use crate::error::{CoreError, CoreResult, invalid, texts};
use crate::filter::Taint;
use crate::ids::{CLUSTER_LEVEL, DomainId, GpuIndexError, GpuSet, NODE_LEVEL, NodeId, ROOT};
use crate::intranode::GpuTopology;
use crate::limits::MAX_NODES;
use crate::resources::NodeResources;
use labels::LabelIndex;

/// A topology domain (the root, a spine, a rack...).
#[derive(Debug)]
pub struct Domain {
    /// 0 for the root, `1..=levels` for named levels.
    pub depth: usize,
    /// Name within its parent (empty for the root).
    pub name: Box<str>,
    /// `None` for the root (and for a pruned slot).
    pub parent: Option<DomainId>,
    /// Child domains sorted by name (empty at the deepest named level).
    pub child_domains: Vec<DomainId>,
    /// Nodes sorted by name (only at the deepest named level, or the root without levels).
    pub child_nodes: Vec<NodeId>,
}

impl Domain {
    fn new(depth: usize, name: &str, parent: Option<DomainId>) -> Self {
        Self {
            depth,
            name: name.into(),
            parent,
            child_domains: Vec::new(),
            child_nodes: Vec::new(),
        }
    }
}

/// A node's static description.
#[derive(Debug)]
pub struct Node {
    /// Unique, non-empty; shared with the placements that name the node.
    pub name: Arc<str>,
    /// Number of GPUs, `1..=64` (0 marks a vacant slot).
    pub gpus: u32,
    /// The deepest named domain holding the node (the root when there are no levels).
    pub domain: DomainId,
    /// Labels, sorted by key.
    pub labels: BTreeMap<Box<str>, Box<str>>,
    /// Its GPU groups (NUMA, PCIe), if given: the GPUs a pod takes follow them.
    pub gpu_topology: Option<Arc<GpuTopology>>,
    /// Its taints, sorted (docs/placement.md, rule 1).
    pub taints: Vec<Taint>,
}

impl Node {
    /// A removed node's slot, waiting for reuse (node names are never empty).
    pub fn is_vacant(&self) -> bool {
        self.name.is_empty()
    }

    /// Its labels as owned `(key, value)` pairs, sorted by key.
    pub fn label_pairs(&self) -> Vec<(String, String)> {
        let pairs = self.labels.iter();
        pairs.map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn vacant() -> Self {
        Self {
            name: Arc::from(""),
            gpus: 0,
            domain: ROOT,
            labels: BTreeMap::new(),
            gpu_topology: None,
            taints: Vec::new(),
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
    /// Intra-node levels (outermost first) and each GPU's group ids, if known.
    pub gpu_topology: Option<(Vec<String>, Vec<Vec<u32>>)>,
    /// Resources besides GPUs, name -> quantity in base units (docs/resources.md "Node resources").
    pub resources: Vec<(String, i64)>,
    /// Taints (checked by [`crate::filter::checked_taints`]).
    pub taints: Vec<Taint>,
}

/// A node just added: where it went, and the GPU state its spec gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddedNode {
    /// Its id.
    pub id: NodeId,
    /// Its GPUs.
    pub gpus: u32,
    /// The GPUs the spec marked unhealthy.
    pub unhealthy: GpuSet,
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
    labels: LabelIndex,
    unsorted: Vec<DomainId>,
    /// Slots of removed nodes and pruned domains, reused by the next additions.
    vacant_nodes: Vec<NodeId>,
    vacant_domains: Vec<DomainId>,
    /// Every distinct GPU topology given, by (levels, paths, GPUs): equal ones are shared,
    /// with their memo of GPU choices (`intranode`). Kept after their nodes are removed.
    gpu_topologies: GpuTopologies,
    /// Resource names and each node's capacity (docs/resources.md "Node resources").
    resources: NodeResources,
}

type GpuTopologies = BTreeMap<(Vec<String>, Vec<Vec<u32>>, u32), Arc<GpuTopology>>;

impl Topology {
    /// A topology with the given level names, outermost first (validated by
    /// [`crate::EngineConfig`]).
    pub fn new(levels: &[String]) -> Self {
        Self {
            levels: levels.iter().map(|l| l.as_str().into()).collect(),
            domains: vec![Domain::new(0, "", None)],
            nodes: Vec::new(),
            node_by_name: HashMap::new(),
            domain_by_parent_and_name: HashMap::new(),
            labels: LabelIndex::default(),
            unsorted: Vec::new(),
            vacant_nodes: Vec::new(),
            vacant_domains: Vec::new(),
            gpu_topologies: BTreeMap::new(),
            resources: NodeResources::default(),
        }
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

    /// Size of the domain arena: every `DomainId` in use is below it.
    pub fn domain_slots(&self) -> usize {
        self.domains.len()
    }

    /// All nodes, in arena order (not a decision order).
    pub fn nodes(&self) -> impl Iterator<Item = (NodeId, &Node)> {
        (0..)
            .zip(self.nodes.iter())
            .filter(|(_, node)| !node.is_vacant())
    }

    /// All nodes sorted by name: the order listings use.
    pub fn nodes_by_name(&self) -> Vec<(NodeId, &Node)> {
        let mut nodes: Vec<(NodeId, &Node)> = self.nodes().collect();
        nodes.sort_unstable_by(|a, b| a.1.name.cmp(&b.1.name));
        nodes
    }

    /// The id of the node with this name.
    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.node_by_name.get(name).copied()
    }

    /// The id of the node with this name, or [`CoreError::UnknownNode`].
    pub fn known_node(&self, name: &str) -> CoreResult<NodeId> {
        self.node_id(name)
            .ok_or_else(|| CoreError::UnknownNode(name.to_owned()))
    }

    /// Every node under `domain` (in no decision order).
    pub fn nodes_under(&self, domain: DomainId) -> Vec<NodeId> {
        let mut nodes = Vec::new();
        let mut stack = vec![domain];
        while let Some(id) = stack.pop() {
            let domain = self.domain(id);
            stack.extend_from_slice(&domain.child_domains);
            nodes.extend_from_slice(&domain.child_nodes);
        }
        nodes
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

    /// Whether a node was added or a domain created since the last [`Topology::settle`].
    pub fn is_settled(&self) -> bool {
        self.unsorted.is_empty()
    }

    /// Sorts the children of every domain touched since the last call, so that walks follow
    /// path order. Must run before a search.
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
    }

    /// Validates a node description against the levels and the existing nodes.
    fn validate(&self, spec: &NodeSpec) -> CoreResult<(u32, GpuSet)> {
        check_name("a node name", &spec.name)?;
        if self.node_count() >= MAX_NODES {
            return Err(texts::node_limit());
        }
        if self.node_by_name.contains_key(spec.name.as_str()) {
            return Err(invalid(format!("node {:?} already exists", spec.name)));
        }
        let gpus = edit::checked_gpus(spec)?;
        self.validate_topology(spec)?;
        edit::validate_labels(&spec.labels)?;
        crate::filter::checked_taints(spec.taints.clone())?;
        // Repeating an unhealthy index is harmless: the list is read as a set.
        let mut indices = spec.unhealthy.clone();
        indices.sort_unstable();
        indices.dedup();
        let unhealthy = GpuSet::from_indices(indices, gpus).map_err(|error| {
            let (GpuIndexError::OutOfRange(gpu) | GpuIndexError::Repeated(gpu)) = error;
            invalid(format!(
                "node {:?}: unhealthy GPU index {gpu} is not in range({gpus})",
                spec.name
            ))
        })?;
        Ok((gpus, unhealthy))
    }

    pub(crate) fn validate_topology(&self, spec: &NodeSpec) -> CoreResult<()> {
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
        Ok(())
    }

    /// The shared topology equal to `(levels, paths)` for `gpus` GPUs, checked when first seen.
    fn shared_gpu_topology(
        &mut self,
        levels: Vec<String>,
        paths: Vec<Vec<u32>>,
        gpus: u32,
        node: &str,
    ) -> CoreResult<Arc<GpuTopology>> {
        let key = (levels, paths, gpus);
        if let Some(shared) = self.gpu_topologies.get(&key) {
            return Ok(Arc::clone(shared));
        }
        let (levels, paths, _) = key.clone();
        let topology = GpuTopology::new(levels, paths, gpus)
            .map_err(|error| invalid(format!("node {node:?}: {error}")))?;
        let shared = Arc::new(topology);
        self.gpu_topologies.insert(key, Arc::clone(&shared));
        Ok(shared)
    }

    /// Adds a node; on error nothing changes.
    pub fn add_node(&mut self, spec: NodeSpec) -> CoreResult<AddedNode> {
        let (gpus, unhealthy) = self.validate(&spec)?;
        let resources = self.resources.check(&spec.name, spec.resources)?;
        let gpu_topology = match spec.gpu_topology {
            Some((levels, paths)) => {
                Some(self.shared_gpu_topology(levels, paths, gpus, &spec.name)?)
            }
            None => None,
        };
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
        let node = Node {
            name: Arc::from(spec.name),
            gpus,
            domain: parent,
            labels: spec
                .labels
                .into_iter()
                .map(|(k, v)| (k.into_boxed_str(), v.into_boxed_str()))
                .collect(),
            gpu_topology,
            taints: crate::filter::checked_taints(spec.taints).unwrap_or_default(),
        };
        self.labels.insert(id, &node.labels);
        self.node_by_name.insert(node.name.clone(), id);
        self.resources.set(id, &resources);
        match self.nodes.get_mut(id as usize) {
            Some(slot) => *slot = node,
            None => self.nodes.push(node),
        }
        self.domains[parent as usize].child_nodes.push(id);
        self.unsorted.push(parent);
        Ok(AddedNode {
            id,
            gpus,
            unhealthy,
        })
    }

    /// The child of `parent` named `name`, created if missing.
    fn child_domain(&mut self, parent: DomainId, depth: usize, name: &str) -> DomainId {
        let existing = self.domain_by_parent_and_name.get(&parent);
        if let Some(&id) = existing.and_then(|children| children.get(name)) {
            return id;
        }
        let domain = Domain::new(depth, name, Some(parent));
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

    /// Removes a node. Domains left without nodes are pruned, so the tree looks as if the
    /// node had never been added.
    pub fn remove_node(&mut self, id: NodeId) {
        let node = std::mem::replace(&mut self.nodes[id as usize], Node::vacant());
        self.node_by_name.remove(&node.name);
        self.labels.remove(id, &node.labels);
        self.domains[node.domain as usize]
            .child_nodes
            .retain(|&other| other != id);
        self.vacant_nodes.push(id);
        self.resources.set(id, &[]);
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

    /// Every domain and node in path order (depth-first, children by name), with its depth.
    /// The topology must be settled.
    pub fn walk(&self, mut visit: impl FnMut(Walked)) {
        let node_depth = self.node_depth();
        let mut stack = vec![ROOT];
        while let Some(id) = stack.pop() {
            let domain = self.domain(id);
            visit(Walked::Domain(domain.depth, id));
            for &node in &domain.child_nodes {
                visit(Walked::Node(node_depth, node));
            }
            stack.extend(domain.child_domains.iter().rev());
        }
    }
}

/// One step of [`Topology::walk`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Walked {
    /// A domain at its depth.
    Domain(usize, DomainId),
    /// A node at the node depth.
    Node(usize, NodeId),
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
    fn same_rack_name_under_two_spines_is_two_racks() {
        let mut topology = Topology::new(&["spine".into(), "rack".into()]);
        let a = topology
            .add_node(spec("a", 8, &[("spine", "s1"), ("rack", "r1")]))
            .unwrap();
        let b = topology
            .add_node(spec("b", 8, &[("spine", "s2"), ("rack", "r1")]))
            .unwrap();
        assert_ne!(topology.node(a.id).domain, topology.node(b.id).domain);
        assert_eq!(topology.node_path(b.id), vec!["s2", "r1", "b"]);
    }

    #[test]
    fn bad_node_changes_nothing() {
        let mut topology = Topology::new(&["rack".into()]);
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
    }

    #[test]
    fn removing_the_last_node_prunes_its_domains() {
        let mut topology = Topology::new(&["rack".into()]);
        let a = topology.add_node(spec("a", 8, &[("rack", "r1")])).unwrap();
        topology.remove_node(a.id);
        assert_eq!(topology.node_count(), 0);
        assert!(topology.domain(ROOT).child_domains.is_empty());
        assert_eq!(topology.node_id("a"), None);
    }
}
