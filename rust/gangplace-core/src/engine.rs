//! The engine: one cluster's topology and ledger behind the operations of the public API.
//! Every operation takes the caller's clock reading `now`, reclaims expired reservations,
//! validates and computes everything that can fail, and only then applies its change.

use crate::capacity::{CapacityView, ClusterView, SelectorView};
use crate::error::{CoreError, CoreResult, invalid};
use crate::ledger::{Ending, HoldState, Ledger, format_id};
use std::sync::Arc;

use crate::model::{ClusterStats, GangRequest, NodeInfo, Placement, PodPlacement, gpu_indices};
use crate::search::{Demand, Item, LevelBest, Plan, Policy, Search};
use crate::topology::{HoldId, NodeId, NodeSpec, Topology};

/// Per-node GPU counts, nodes in name order (see [`Engine::gpu_state`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuState {
    /// Node names, sorted.
    pub names: Vec<String>,
    /// GPUs per node.
    pub gpus: Vec<u8>,
    /// Free healthy GPUs.
    pub free: Vec<u8>,
    /// GPUs held by reservations.
    pub reserved: Vec<u8>,
    /// GPUs held by allocations.
    pub allocated: Vec<u8>,
    /// Unhealthy GPUs (held or not).
    pub unhealthy: Vec<u8>,
    /// Whether the node is cordoned.
    pub cordoned: Vec<bool>,
}

/// A cluster: topology, GPU state and holds.
#[derive(Debug)]
pub struct Engine {
    pub(crate) topology: Topology,
    pub(crate) ledger: Ledger,
    pub(crate) policy: Policy,
    /// Cap on the GPUs one owner may hold (reserved plus allocated); `None`: no cap.
    pub(crate) max_held_gpus_per_owner: Option<u64>,
}

impl Engine {
    /// An empty cluster with these levels (outermost first) and policy.
    pub fn new(levels: Vec<String>, policy: Policy) -> CoreResult<Self> {
        Ok(Self {
            topology: Topology::new(levels)?,
            ledger: Ledger::default(),
            policy,
            max_held_gpus_per_owner: None,
        })
    }

    /// Caps the GPUs each owner may hold; holds made without an owner share one cap.
    pub fn set_max_held_gpus_per_owner(&mut self, cap: Option<u64>) {
        self.max_held_gpus_per_owner = cap;
    }

    /// The cap on GPUs held per owner.
    pub fn max_held_gpus_per_owner(&self) -> Option<u64> {
        self.max_held_gpus_per_owner
    }

    /// Arms (`true`) or disarms the test-only failpoint: the next mutation that holds or
    /// frees GPUs panics after changing its first node, leaving the state half-applied.
    pub fn set_failpoint(&mut self, armed: bool) {
        self.ledger.panic_mid_apply = armed;
    }

    /// The topology (read-only).
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The placement policy.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    pub(crate) fn reclaim(&mut self, now: f64) {
        self.ledger.expire(&mut self.topology, now);
    }

    pub(crate) fn node_id(&self, name: &str) -> CoreResult<NodeId> {
        self.topology
            .node_id(name)
            .ok_or_else(|| CoreError::UnknownNode(name.to_owned()))
    }

    /// Sorts children and rebuilds indexes now rather than at the next search (after a bulk
    /// build, so that the first placement is not charged for it).
    pub fn settle(&mut self) {
        self.topology.settle();
    }

    /// Adds a node; on error nothing changes.
    pub fn add_node(&mut self, spec: NodeSpec) -> CoreResult<()> {
        self.topology.add_node(spec).map(drop)
    }

    /// Marks one GPU healthy or not; returns the ids of the holds on it. A reservation on a
    /// GPU that turns unhealthy is revoked whole; an allocation stays.
    pub fn set_gpu_health(
        &mut self,
        node: &str,
        gpu: i64,
        healthy: bool,
        now: f64,
    ) -> CoreResult<Vec<String>> {
        self.reclaim(now);
        let id = self.node_id(node)?;
        let gpus = self.topology.node(id).gpus;
        let index = u32::try_from(gpu)
            .ok()
            .filter(|&index| index < gpus)
            .ok_or_else(|| invalid(format!("node {node:?} has no GPU {gpu} (it has {gpus})")))?;
        let bit = 1u64 << index;
        let mut holders: Vec<HoldId> = self
            .topology
            .node(id)
            .holders
            .iter()
            .filter(|&&(_, gpus)| gpus & bit != 0)
            .map(|&(holder, _)| holder)
            .collect();
        holders.sort_unstable();
        if !healthy {
            for &holder in &holders {
                let reserved = self
                    .ledger
                    .live(holder)
                    .is_some_and(|hold| hold.state == HoldState::Reserved);
                if reserved {
                    self.ledger.end(&mut self.topology, holder, Ending::Revoked);
                }
            }
        }
        self.topology.update_node(id, |node| {
            if healthy {
                node.unhealthy &= !bit;
            } else {
                node.unhealthy |= bit;
            }
        });
        Ok(holders.into_iter().map(format_id).collect())
    }

    /// Removes a node, as a node failure would: every reservation touching it is revoked
    /// (all its GPUs freed), every allocation touching it loses the GPUs there and stays
    /// until released. Returns the ids of those allocations, sorted.
    pub fn remove_node(&mut self, name: &str, now: f64) -> CoreResult<Vec<String>> {
        self.reclaim(now);
        let id = self.node_id(name)?;
        let mut holders: Vec<HoldId> = self
            .topology
            .node(id)
            .holders
            .iter()
            .map(|&(holder, _)| holder)
            .collect();
        holders.sort_unstable();
        holders.dedup();
        let mut allocations = Vec::new();
        for holder in holders {
            match self.ledger.live(holder).map(|hold| hold.state) {
                Some(HoldState::Reserved) => {
                    self.ledger.end(&mut self.topology, holder, Ending::Revoked);
                }
                Some(HoldState::Committed) => {
                    self.ledger.detach_node(&mut self.topology, holder, id);
                    allocations.push(format_id(holder));
                }
                None => {}
            }
        }
        self.topology.remove_node(id);
        Ok(allocations)
    }

    /// Cordons (`true`) or uncordons a node.
    pub fn set_cordoned(&mut self, node: &str, cordoned: bool, now: f64) -> CoreResult<()> {
        self.reclaim(now);
        let id = self.node_id(node)?;
        self.topology.set_cordoned(id, cordoned);
        Ok(())
    }

    /// The state of one node.
    pub fn node_info(&mut self, name: &str, now: f64) -> CoreResult<NodeInfo> {
        self.reclaim(now);
        let id = self.node_id(name)?;
        let node = self.topology.node(id);
        let levels = self.topology.levels().iter().map(|level| level.to_string());
        let path = self.topology.domain_path(node.domain);
        Ok(NodeInfo {
            name: node.name.to_string(),
            gpus: node.gpus,
            topology: levels.zip(path.into_iter().map(String::from)).collect(),
            labels: node
                .labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            cordoned: node.cordoned,
            free: gpu_indices(node.free_mask()),
            reserved: gpu_indices(node.reserved),
            allocated: gpu_indices(node.allocated),
            unhealthy: gpu_indices(node.unhealthy),
        })
    }

    /// Names of all nodes, sorted.
    pub fn node_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .topology
            .nodes()
            .map(|(_, n)| n.name.to_string())
            .collect();
        names.sort_unstable();
        names
    }

    /// Per node, in name order: GPU counts by state, for analysis and plots.
    pub fn gpu_state(&mut self, now: f64) -> GpuState {
        self.reclaim(now);
        let mut nodes: Vec<(NodeId, &str)> = self
            .topology
            .nodes()
            .map(|(id, node)| (id, &*node.name))
            .collect();
        nodes.sort_unstable_by(|a, b| a.1.cmp(b.1));
        let mut state = GpuState::default();
        for (id, name) in nodes {
            let node = self.topology.node(id);
            // At most 64 set bits: always fits in a u8.
            let count = |mask: u64| u8::try_from(mask.count_ones()).unwrap_or(u8::MAX);
            state.names.push(name.to_owned());
            state.gpus.push(count(node.all_gpus()));
            state.free.push(count(node.free_mask()));
            state.reserved.push(count(node.reserved));
            state.allocated.push(count(node.allocated));
            state.unhealthy.push(count(node.unhealthy));
            state.cordoned.push(node.cordoned);
        }
        state
    }

    /// GPU counts over the cluster.
    pub fn stats(&mut self, now: f64) -> ClusterStats {
        self.reclaim(now);
        let mut stats = ClusterStats::default();
        for (_, node) in self.topology.nodes() {
            stats.total += u64::from(node.gpus);
            stats.free += u64::from(node.free_count());
            stats.reserved += u64::from(node.reserved.count_ones());
            stats.allocated += u64::from(node.allocated.count_ones());
            stats.unhealthy += u64::from(node.unhealthy.count_ones());
        }
        stats.healthy = stats.total - stats.unhealthy;
        stats
    }

    pub(crate) fn demand(&self, request: &GangRequest) -> CoreResult<Demand> {
        let coarsest_depth = match &request.required_level {
            None => 0,
            Some(level) => self.topology.depth_of(level).ok_or_else(|| {
                invalid(format!(
                    "unknown required_level {level:?}; the levels are node, {}cluster",
                    self.topology
                        .levels()
                        .iter()
                        .rev()
                        .map(|l| format!("{l}, "))
                        .collect::<String>()
                ))
            })?,
        };
        Ok(Demand {
            pods: request.pods,
            gpus_per_pod: request.gpus_per_pod,
            min_pods: request.min_pods.unwrap_or(request.pods),
            coarsest_depth,
        })
    }

    /// Runs `search` over the view the request calls for.
    /// The selector's pool must exist (`plan` makes it).
    pub(crate) fn with_search<R>(
        &self,
        request: &GangRequest,
        search: impl FnOnce(&dyn SearchOps) -> R,
    ) -> CoreResult<R> {
        if request.selector.is_empty() {
            let view = ClusterView::new(&self.topology);
            return Ok(search(&Search::new(
                &self.topology,
                &view,
                request.gpus_per_pod,
            )));
        }
        let pool = self.topology.pool(&request.selector);
        let pool = pool.ok_or_else(|| CoreError::Internal("a selector lost its pool".into()))?;
        let view = SelectorView::new(&self.topology, pool);
        Ok(search(&Search::new(
            &self.topology,
            &view,
            request.gpus_per_pod,
        )))
    }

    pub(crate) fn plan(
        &mut self,
        request: &GangRequest,
        now: f64,
    ) -> CoreResult<(Demand, Option<Plan>)> {
        self.reclaim(now);
        self.topology.settle();
        let demand = self.demand(request)?;
        if !request.selector.is_empty() {
            self.topology.selector_pool(&request.selector);
        }
        let plan = self.with_search(request, |search| search.plan(&demand, self.policy))??;
        Ok((demand, plan))
    }

    pub(crate) fn placement(&self, plan: &Plan) -> Placement {
        let domain = match plan.item {
            Item::Domain(id) => self.topology.domain_path(id),
            Item::Node(id) => self.topology.node_path(id),
        };
        Placement {
            pods: plan
                .pods
                .iter()
                .map(|pod| PodPlacement {
                    node: Arc::clone(&self.topology.node(pod.node).name),
                    gpus: pod.gpus,
                })
                .collect(),
            level: self.topology.level_name(plan.depth).to_owned(),
            domain: domain.into_iter().map(String::from).collect(),
        }
    }

    /// Where the gang would go now; changes nothing but expired reservations.
    pub fn place(&mut self, request: &GangRequest, now: f64) -> CoreResult<Option<Placement>> {
        let (_, plan) = self.plan(request, now)?;
        Ok(plan.map(|plan| self.placement(&plan)))
    }

    /// Recomputes every aggregate and cross-checks nodes against the ledger.
    pub fn check_invariants(&self) -> CoreResult<()> {
        self.topology
            .check_aggregates()
            .map_err(CoreError::Internal)?;
        self.topology.check_pools().map_err(CoreError::Internal)?;
        let mut reserved = vec![0u64; self.topology.node_slots()];
        let mut allocated = vec![0u64; self.topology.node_slots()];
        for (_, hold) in self.ledger.live_holds() {
            for &(node, gpus) in &hold.gpus_by_node {
                let index = node as usize;
                if (reserved[index] | allocated[index]) & gpus != 0 {
                    return Err(CoreError::Internal("a GPU is held twice".into()));
                }
                match hold.state {
                    HoldState::Reserved => reserved[index] |= gpus,
                    HoldState::Committed => allocated[index] |= gpus,
                }
            }
        }
        for (id, node) in self.topology.nodes() {
            let index = id as usize;
            let consistent = node.reserved == reserved[index]
                && node.allocated == allocated[index]
                && node.reserved & node.unhealthy == 0
                && (node.reserved | node.allocated | node.unhealthy) & !node.all_gpus() == 0;
            if !consistent {
                return Err(CoreError::Internal(format!(
                    "node {:?} disagrees with the ledger",
                    node.name
                )));
            }
        }
        Ok(())
    }
}

/// The operations the engine needs of a search, whatever its view.
pub(crate) trait SearchOps {
    fn plan(&self, demand: &Demand, policy: Policy) -> CoreResult<Option<Plan>>;
    fn largest_capacity(&self, depth: usize) -> LevelBest;
}

impl<V: CapacityView> SearchOps for Search<'_, V> {
    fn plan(&self, demand: &Demand, policy: Policy) -> CoreResult<Option<Plan>> {
        Search::plan(self, demand, policy)
    }

    fn largest_capacity(&self, depth: usize) -> LevelBest {
        Search::largest_capacity(self, depth)
    }
}
