//! The engine: one cluster's topology, GPU state, derived capacity and ledger behind the
//! operations of the public API. Every operation takes the caller's clock reading `now`,
//! reclaims expired reservations, validates and computes everything that can fail, and only
//! then applies its change; the nodes it changed are handed to the capacity views once, at
//! the end ([`Engine::apply`]).
//!
//! Submodules, what every operation shares: [`transactions`] (reserve, commit, rollback,
//! release, listings), [`adopt`], [`explain`] (the frame and one-gang explanations),
//! [`removal`] (who may be removed, and for what), [`ranks`] (what a hold's ranks have lost),
//! [`records`] (snapshot records every concept uses), [`nodes`] (updating a node in place), [`pods`] (ending some pods of an allocation). The concepts (`crate::preemption`,
//! `crate::roles`, `crate::repair`, `crate::snapshot`) add their operations to [`Engine`] in
//! their own folders.

pub(crate) mod adopt;
pub(crate) mod explain;
mod nodes;
mod pods;
pub(crate) mod ranks;
pub(crate) mod records;
pub(crate) mod removal;
pub(crate) mod resources;
mod search_ops;
mod shares;
pub(crate) mod transactions;

use std::sync::Arc;

use crate::capacity::{Capacity, CapacityView};
use crate::config::{EngineConfig, Policy};
use crate::error::{CoreResult, internal, invalid};
use crate::ids::{GpuSet, HoldId, NodeId};
use crate::ledger::{Ending, HoldState, Ledger, VictimIndex};
use crate::level_name::LevelName;
use crate::model::{ClusterStats, GangRequest, GpuState, NodeInfo, Placement, PodPlacement};
use crate::search::{Demand, Plan, Search};
use crate::shapes::Layers;
use crate::state::{Changes, NodeState, NodeStates};
use crate::topology::{NodeSpec, Topology};

pub use adopt::{AdoptedPods, TermsChange};
pub use nodes::NodeUpdate;
pub(crate) use search_ops::SearchOps;
use search_ops::search_over;

/// A cluster: topology, GPU state and holds.
#[derive(Debug)]
pub struct Engine {
    pub(crate) config: EngineConfig,
    pub(crate) topology: Topology,
    pub(crate) states: NodeStates,
    pub(crate) capacity: Capacity,
    pub(crate) ledger: Ledger,
    /// Bounds per domain on the sets preemption may choose, kept from the ledger.
    pub(crate) victims: VictimIndex,
}

impl Engine {
    /// An empty cluster.
    pub fn new(config: EngineConfig) -> Self {
        Self {
            topology: Topology::new(config.levels()),
            config,
            states: NodeStates::default(),
            capacity: Capacity::default(),
            ledger: Ledger::default(),
            victims: VictimIndex::default(),
        }
    }

    /// What the cluster was configured with.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The placement policy.
    pub fn policy(&self) -> Policy {
        self.config.policy()
    }

    /// The topology (read-only).
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The GPU state of a node (read-only).
    pub fn node_state(&self, id: NodeId) -> &NodeState {
        self.states.get(id)
    }

    /// Arms (`true`) or disarms the test-only failpoint: the next mutation that holds or
    /// frees GPUs panics after changing its first node, leaving the state half-applied.
    #[cfg(feature = "testing")]
    pub fn set_failpoint(&mut self, armed: bool) {
        self.ledger.panic_mid_apply = armed;
    }

    /// Hold ids from now on come from a generator seeded with `seed` (`None`: from the
    /// operating system's randomness again). Repeatable runs; never for a shared service,
    /// whose ids must stay unguessable. Not kept in snapshots.
    pub fn seed_ids(&mut self, seed: Option<u64>) {
        self.ledger.seed_ids(seed);
    }

    /// Test-only: ids count up from `start` (`None`: random again).
    #[cfg(feature = "testing")]
    pub fn set_sequential_ids(&mut self, start: Option<u128>) {
        self.ledger.next_sequential_id.set(start);
    }

    /// Hands a mutation's change records to the capacity views.
    pub(crate) fn apply(&mut self, changes: &Changes) {
        self.capacity.apply(&self.topology, changes);
        let touched = self.states.take_resources_touched();
        self.capacity.resources_changed(touched.into_iter());
    }

    pub(crate) fn reclaim(&mut self, now: f64) {
        let mut changes = Changes::new();
        self.ledger.expire(&mut self.states, &mut changes, now);
        self.apply(&changes);
    }

    /// Ends a live hold and updates the views.
    pub(crate) fn end_hold(&mut self, id: HoldId, ending: Ending) {
        let mut changes = Changes::new();
        self.ledger.end(&mut self.states, &mut changes, id, ending);
        self.apply(&changes);
    }

    /// Sorts children and rebuilds indexes now rather than at the next search (after a bulk
    /// build, so that the first placement is not charged for it).
    pub fn settle(&mut self) {
        self.topology.settle();
        self.capacity.settle(&self.topology, &self.states);
    }

    /// Adds a node; on error nothing changes.
    pub fn add_node(&mut self, spec: NodeSpec) -> CoreResult<()> {
        let added = self.topology.add_node(spec)?;
        self.victims.topology_changed();
        let mut state = NodeState::new(added.gpus, added.unhealthy);
        state.tainted = self.topology.node(added.id).tainted();
        self.states.insert(added.id, state);
        let resources = self.topology.resources();
        let in_use = self.states.resource_use_mut();
        in_use.sync_names(resources.names().len());
        in_use.node_added(added.id, resources.capacity(added.id));
        self.capacity
            .node_added(&self.topology, &self.states, added.id);
        Ok(())
    }

    /// Marks one GPU healthy or not; returns the ids of the holds on it, sorted, in both
    /// directions. A reservation on a GPU that turns unhealthy is revoked whole; an
    /// allocation stays.
    pub fn set_gpu_health(
        &mut self,
        node: &str,
        gpu: i64,
        healthy: bool,
        now: f64,
    ) -> CoreResult<Vec<HoldId>> {
        self.reclaim(now);
        let id = self.topology.known_node(node)?;
        let gpus = self.topology.node(id).gpus;
        let index = u32::try_from(gpu)
            .ok()
            .filter(|&index| index < gpus)
            .ok_or_else(|| invalid(format!("node {node:?} has no GPU {gpu} (it has {gpus})")))?;
        let bit = GpuSet::single(index);
        let mut holders: Vec<HoldId> = self
            .ledger
            .holders_on(id)
            .into_iter()
            .filter(|&(_, gpus)| gpus.intersects(bit))
            .map(|(holder, _)| holder)
            .collect();
        if self.states.get(id).shared.contains(index) {
            // Fractional holds share it (docs/resources.md "Fractions of a GPU"): the same rules.
            holders.extend(self.holds_sharing(id, index));
            holders.sort_unstable();
        }
        let mut changes = Changes::new();
        if !healthy {
            for &holder in &holders {
                let reserved = self
                    .ledger
                    .live(holder)
                    .is_some_and(|hold| hold.state == HoldState::Reserved);
                let (states, ledger) = (&mut self.states, &mut self.ledger);
                match reserved {
                    true => ledger.end(states, &mut changes, holder, Ending::Revoked),
                    false => {
                        let dropped =
                            ledger.drop_spares(states, &mut changes, holder, (id, node), bit);
                        self.spares_dropped(&mut changes, holder, &dropped);
                    }
                }
            }
        }
        self.states.update(id, &mut changes, |state| {
            if healthy {
                state.unhealthy &= !bit;
            } else {
                state.unhealthy |= bit;
            }
        });
        self.apply(&changes);
        Ok(holders)
    }

    /// Cordons (`true`) or uncordons a node.
    pub fn set_cordoned(&mut self, node: &str, cordoned: bool, now: f64) -> CoreResult<()> {
        self.reclaim(now);
        let id = self.topology.known_node(node)?;
        let mut changes = Changes::new();
        self.states
            .update(id, &mut changes, |state| state.cordoned = cordoned);
        self.apply(&changes);
        Ok(())
    }

    /// `UnknownNode` unless the cluster has a node of this name.
    pub fn known_node(&self, name: &str) -> CoreResult<()> {
        self.topology.known_node(name).map(|_| ())
    }

    /// The state of one node.
    pub fn node_info(&mut self, name: &str, now: f64) -> CoreResult<NodeInfo> {
        self.reclaim(now);
        let id = self.topology.known_node(name)?;
        let node = self.topology.node(id);
        let state = self.states.get(id);
        let levels = self.topology.levels().iter().map(|level| level.to_string());
        let path = self.topology.domain_path(node.domain);
        Ok(NodeInfo {
            name: node.name.to_string(),
            gpus: node.gpus,
            topology: levels.zip(path.into_iter().map(String::from)).collect(),
            labels: node.label_pairs(),
            taints: node.taints.clone(),
            cordoned: state.cordoned,
            free: state.free().indices(),
            reserved: state.reserved.indices(),
            allocated: state.allocated.indices(),
            unhealthy: state.unhealthy.indices(),
            gpu_topology: node
                .gpu_topology
                .as_deref()
                .map(|groups| (groups.levels().to_vec(), groups.paths().to_vec())),
            resources: self.node_resources(id, false),
            free_resources: self.node_resources(id, true),
            shared: self.node_shares(id),
        })
    }

    /// Names of all nodes, sorted.
    pub fn node_names(&self) -> Vec<String> {
        let nodes = self.topology.nodes_by_name();
        nodes.iter().map(|(_, n)| n.name.to_string()).collect()
    }

    /// Per node, in name order: GPU counts and sets by state and the node's domain path.
    pub fn gpu_state(&mut self, now: f64) -> GpuState {
        self.reclaim(now);
        let mut out = GpuState::default();
        for (id, node) in self.topology.nodes_by_name() {
            let state = self.states.get(id);
            // At most 64 GPUs: every count fits in a u8.
            let count = |set: GpuSet| u8::try_from(set.count()).unwrap_or(u8::MAX);
            let path = self.topology.domain_path(node.domain);
            out.names.push(node.name.to_string());
            out.paths
                .push(path.into_iter().map(str::to_owned).collect());
            out.gpus.push(count(state.gpus));
            out.free.push(count(state.free()));
            out.reserved.push(count(state.reserved));
            out.allocated.push(count(state.allocated));
            out.unhealthy.push(count(state.unhealthy));
            out.cordoned.push(state.cordoned);
            out.free_mask.push(state.free().mask());
            out.reserved_mask.push(state.reserved.mask());
            out.allocated_mask.push(state.allocated.mask());
            out.unhealthy_mask.push(state.unhealthy.mask());
            out.shared_mask.push(state.shared.mask());
        }
        out.resources = self.resource_columns();
        out
    }

    /// GPU counts over the cluster.
    pub fn stats(&mut self, now: f64) -> ClusterStats {
        self.reclaim(now);
        let totals = self.states.totals();
        ClusterStats {
            total: totals.total,
            healthy: totals.total - totals.unhealthy,
            free: totals.free,
            reserved: totals.reserved,
            allocated: totals.allocated,
            unhealthy: totals.unhealthy,
            resources: self.resource_totals(false),
            free_resources: self.resource_totals(true),
            shared: totals.shared,
        }
    }

    pub(crate) fn demand(&self, request: &GangRequest) -> CoreResult<Demand> {
        let coarsest_depth = match &request.required_level {
            None => 0,
            Some(level) => self.topology.depth_of(level).ok_or_else(|| {
                let levels: Vec<&str> = (0..=self.topology.node_depth())
                    .rev()
                    .map(|depth| self.topology.level_name(depth))
                    .collect();
                invalid(format!(
                    "unknown required_level {level:?}; the levels are {}",
                    levels.join(", ")
                ))
            })?,
        };
        let coarsest_depth = coarsest_depth.max(self.config.max_level_depth());
        request.check_gpu_less()?;
        request.check_fraction()?;
        Layers::resolve(&self.topology, &request.slices, coarsest_depth)?;
        self.topology
            .resources()
            .names()
            .resolve(&request.resources)?;
        Ok(Demand {
            pods: request.pods,
            gpus_per_pod: request.gpus_per_pod,
            min_pods: request.min_pods.unwrap_or(request.pods),
            coarsest_depth,
        })
    }

    /// Runs `search` over the view the request calls for. The selector's pool must exist
    /// (`plan` makes it).
    pub(crate) fn with_search<R>(
        &self,
        request: &GangRequest,
        search: impl FnOnce(&dyn SearchOps) -> R,
    ) -> CoreResult<R> {
        let state = (&self.topology, &self.states, &self.capacity);
        search_over(state, request, false, search)
    }

    /// [`Engine::with_search`] for a removal set: resources asked always counted.
    pub(crate) fn with_removal_search<R>(
        &self,
        request: &GangRequest,
        search: impl FnOnce(&dyn SearchOps) -> R,
    ) -> CoreResult<R> {
        let state = (&self.topology, &self.states, &self.capacity);
        search_over(state, request, true, search)
    }

    /// A what-if copy of the GPU state and its derived views, over the same topology.
    pub(crate) fn scratch_copy(&self) -> Scratch<'_> {
        Scratch {
            topology: &self.topology,
            states: self.states.clone(),
            capacity: {
                // Its resource changes are not noted: it must count node by node.
                let mut capacity = self.capacity.clone();
                capacity.drop_shapes();
                capacity
            },
        }
    }

    /// Everything a search needs first: expired holds reclaimed, the tree settled, the
    /// request validated, its selector's pool made.
    pub(crate) fn prepare(&mut self, request: &GangRequest, now: f64) -> CoreResult<Demand> {
        self.reclaim(now);
        self.settle();
        let demand = self.demand(request)?;
        let (topology, states) = (&self.topology, &self.states);
        self.capacity.ensure_pool(topology, states, &request.filter);
        self.keep_shape(request, &[demand.pods, demand.min_pods])?;
        Ok(demand)
    }

    pub(crate) fn plan(
        &mut self,
        request: &GangRequest,
        now: f64,
    ) -> CoreResult<(Demand, Option<Plan>)> {
        let demand = self.prepare(request, now)?;
        let policy = self.policy();
        let plan = self.with_search(request, |search| search.plan(&demand, policy))??;
        Ok((demand, plan))
    }

    pub(crate) fn placement(&self, plan: &Plan) -> Placement {
        let domain = plan.item.path(&self.topology);
        Placement {
            gpu_milli: None,
            pods: self.planned_pods(plan).collect(),
            level: self.topology.level_name(plan.depth).to_owned(),
            domain: domain.into_iter().map(String::from).collect(),
            slices: self.planned_slices(plan).collect(),
            groups: Vec::new(),
            spares: Vec::new(),
        }
    }

    /// A plan's pods as placement pods (node names shared, affinities set).
    pub(crate) fn planned_pods<'p>(
        &'p self,
        plan: &'p Plan,
    ) -> impl Iterator<Item = PodPlacement> + 'p {
        plan.pods.iter().map(|pod| PodPlacement {
            node: Arc::clone(&self.topology.node(pod.node).name),
            gpus: pod.gpus,
            affinity: self.affinity_of(pod.node, pod.gpus),
        })
    }

    /// A plan's innermost slice paths.
    pub(crate) fn planned_slices<'p>(
        &'p self,
        plan: &'p Plan,
    ) -> impl Iterator<Item = Vec<String>> + 'p {
        plan.slices.iter().map(|item| {
            let path = item.path(&self.topology);
            path.into_iter().map(String::from).collect()
        })
    }

    /// The finest intra-node level holding all of `gpus` on `node` (`None`: the node).
    pub(crate) fn affinity_of(&self, node: NodeId, gpus: GpuSet) -> Option<LevelName> {
        let groups = self.topology.node(node).gpu_topology.as_deref()?;
        (!gpus.is_empty()).then(|| groups.affinity(gpus)).flatten()
    }

    /// Where the gang would go now; changes nothing but expired reservations.
    pub fn place(&mut self, request: &GangRequest, now: f64) -> CoreResult<Option<Placement>> {
        let (_, plan) = self.plan(&request.placed(), now)?;
        Ok(plan.map(|plan| request.split_spares(self.placement(&plan))))
    }

    /// Recomputes every derived view and cross-checks nodes against the ledger.
    pub fn check_invariants(&self) -> CoreResult<()> {
        self.capacity
            .check(&self.topology, &self.states)
            .map_err(internal)?;
        let view = self.capacity.cluster_view(&self.states);
        if let Some(index) = view.index().filter(|index| !index.is_stale()) {
            Search::new(&self.topology, &view, 1)
                .check_ties(index)
                .map_err(internal)?;
        }
        for selector in self.capacity.pool_selectors() {
            let Some(pool) = self.capacity.selector_view(&self.states, selector) else {
                continue;
            };
            if let Some(index) = pool.index().filter(|index| !index.is_stale()) {
                Search::new(&self.topology, &pool, 1)
                    .check_ties(index)
                    .map_err(internal)?;
            }
        }
        self.ledger.check_holders().map_err(internal)?;
        self.check_resources().map_err(internal)?;
        self.check_shares().map_err(internal)?;
        (self.states.resource_use())
            .check_index(self.topology.resources().capacities())
            .map_err(internal)?;
        if self.states.totals() != self.states.recount() {
            return Err(internal("the GPU totals drifted from the nodes"));
        }
        if !self.states.unhealthy_mirrored() {
            return Err(internal("the packed unhealthy GPUs drifted from the nodes"));
        }
        if let Some((_, node)) = (self.topology.nodes())
            .find(|&(id, node)| self.states.get(id).tainted != node.tainted())
        {
            return Err(internal(format!(
                "node {:?}'s taint flag drifted",
                node.name
            )));
        }
        let slots = self.topology.node_slots();
        let mut reserved = vec![GpuSet::EMPTY; slots];
        let mut allocated = vec![GpuSet::EMPTY; slots];
        for (_, hold) in self.ledger.live_holds() {
            let lost = ranks::lost_ranks(&self.topology, &self.states, hold);
            if !lost.is_empty() && !ranks::may_have_lost(&self.states, hold) {
                return Err(internal(
                    "a hold with lost ranks passed the quick lost test",
                ));
            }
            for &(node, gpus) in &hold.gpus_by_node {
                let index = node as usize;
                if (reserved[index] | allocated[index]).intersects(gpus) {
                    return Err(internal("a GPU is held twice"));
                }
                match hold.state {
                    HoldState::Reserved => reserved[index] |= gpus,
                    HoldState::Committed => allocated[index] |= gpus,
                }
            }
        }
        for (id, node) in self.topology.nodes() {
            let index = id as usize;
            let state = self.states.get(id);
            let consistent = state.reserved == reserved[index]
                && state.allocated == allocated[index]
                && !state.reserved.intersects(state.unhealthy)
                && state.gpus == GpuSet::first(node.gpus)
                && (state.reserved | state.allocated | state.unhealthy) & !state.gpus
                    == GpuSet::EMPTY;
            if !consistent {
                return Err(internal(format!(
                    "node {:?} disagrees with the ledger",
                    node.name
                )));
            }
        }
        Ok(())
    }
}

/// A what-if copy of the GPU state and its views (see [`Engine::scratch_copy`]).
#[derive(Debug)]
pub(crate) struct Scratch<'a> {
    pub topology: &'a Topology,
    pub states: NodeStates,
    pub capacity: Capacity,
}

impl Scratch<'_> {
    /// Holds `pods`' GPUs as reserved on this copy, its views updated (what a reservation
    /// would do, for counting copies).
    pub fn take(&mut self, pods: impl IntoIterator<Item = (NodeId, GpuSet)>) {
        let mut changes = Changes::new();
        for (node, gpus) in pods {
            self.states
                .update(node, &mut changes, |state| state.reserved |= gpus);
        }
        self.capacity.apply(self.topology, &changes);
    }

    /// Ends (`free`) or holds again allocated GPUs on this copy, its views updated: what
    /// removing an allocation would do, for what-if removals.
    pub fn set_allocated(&mut self, pods: &[(NodeId, GpuSet)], free: bool) {
        let mut changes = Changes::new();
        for &(node, gpus) in pods {
            self.states.update(node, &mut changes, |state| match free {
                true => state.allocated &= !gpus,
                false => state.allocated |= gpus,
            });
        }
        self.capacity.apply(self.topology, &changes);
    }

    /// Runs `search` over the view `request` calls for on this copy.
    pub fn with_search<R>(
        &self,
        request: &GangRequest,
        search: impl FnOnce(&dyn SearchOps) -> R,
    ) -> CoreResult<R> {
        search_over(
            (self.topology, &self.states, &self.capacity),
            request,
            false,
            search,
        )
    }
}
