//! What the engine adds to holds for node resources (docs/resources.md "Node resources"): the amounts a
//! hold's pods ask, what it uses per node, the invariant check, and the re-check of a plan's
//! resources.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::Engine;
use crate::capacity::ResourceFit;
use crate::error::{CoreResult, texts};
use crate::ids::{HoldId, NodeId};
use crate::ledger::Hold;
use crate::model::{AnyRequest, GangRequest, Placement};
use crate::resources::Amounts;
use crate::search::Item;
use crate::shares::{share_id, split};

impl Engine {
    /// The per-pod amounts of a request (empty when it asks none). Its names were checked
    /// when it was placed.
    pub(crate) fn request_resources(&self, request: Option<&GangRequest>) -> Arc<[Amounts]> {
        let names = self.topology.resources().names();
        match request.map(|request| names.resolve(&request.resources)) {
            Some(Ok(amounts)) if !amounts.is_empty() => Arc::from(vec![amounts]),
            _ => Arc::from(Vec::new()),
        }
    }

    /// What each pod, then each spare, of a multi-role placement asks besides GPUs: its
    /// group's resources (docs/resources.md "Node resources"; spares group by group after the pods, as
    /// `split_spares` lists them); empty when no group asks any. Names were checked when it
    /// was placed.
    pub(crate) fn roles_resources(
        &self,
        request: &crate::model::MultiGangRequest,
        placement: &Placement,
    ) -> Arc<[Amounts]> {
        let names = self.topology.resources().names();
        let needs: Vec<Amounts> = (request.groups.iter())
            .map(|group| names.resolve(&group.resources).unwrap_or_default())
            .collect();
        if needs.iter().all(Amounts::is_empty) {
            return Arc::from(Vec::new());
        }
        let kept = |at: usize| placement.groups.get(at).map_or(0, |&(_, pods)| pods);
        let times = |count: u64| usize::try_from(count).unwrap_or(0);
        let mut asks = Vec::with_capacity(placement.pods.len() + placement.spares.len());
        for (at, need) in needs.iter().enumerate() {
            asks.extend(std::iter::repeat_n(need.clone(), times(kept(at))));
        }
        for (at, (group, need)) in request.groups.iter().zip(&needs).enumerate() {
            let spares = match group.innermost_slice() {
                Some(inner) => kept(at) / inner.max(1) * group.spares,
                None if kept(at) > 0 => group.spares,
                None => 0,
            };
            asks.extend(std::iter::repeat_n(need.clone(), times(spares)));
        }
        Arc::from(asks)
    }

    /// What the live pods (ranks not in `ended`) and spares of `placement` use per node, by
    /// node id, each pod asking `per_pod` (one entry: all alike; else by rank, then the
    /// spares in order after the pods) and, for a fractional placement, its share of its GPU
    /// (docs/resources.md "Fractions of a GPU"). Only pods on nodes the hold still has (`member`)
    /// count: a node removed under an allocation takes its pods' use with it.
    pub(crate) fn resources_by_node(
        &self,
        placement: &Placement,
        per_pod: &[Amounts],
        ended: &[u64],
        member: &dyn Fn(NodeId) -> bool,
    ) -> Vec<(NodeId, Amounts)> {
        let milli = placement.gpu_milli.map(u64::from);
        if per_pod.iter().all(Amounts::is_empty) && milli.is_none() {
            return Vec::new();
        }
        let held_on = |name: &str| {
            let node = self.topology.node_id(name)?;
            member(node).then_some(node)
        };
        let live = (0u64..)
            .zip(&placement.pods)
            .filter(|(rank, _)| ended.binary_search(rank).is_err());
        // A spare's slot in `per_pod` follows the pods'.
        let spares = (placement.pods.len() as u64..).zip(&placement.spares);
        let mut pods_on: BTreeMap<NodeId, u64> = BTreeMap::new();
        let mut sums: BTreeMap<NodeId, Amounts> = BTreeMap::new();
        let mut shares: BTreeMap<NodeId, BTreeMap<u32, u64>> = BTreeMap::new();
        for (slot, pod) in live.chain(spares) {
            let Some(node) = held_on(&pod.node) else {
                continue;
            };
            if let Some(milli) = milli {
                for gpu in pod.gpus.iter() {
                    *shares.entry(node).or_default().entry(gpu).or_default() += milli;
                }
            }
            if per_pod.len() == 1 {
                *pods_on.entry(node).or_default() += 1;
            } else if let Some(amounts) = usize::try_from(slot).ok().and_then(|at| per_pod.get(at))
            {
                let sum = sums.entry(node).or_default();
                *sum = sum.plus(amounts);
            }
        }
        if let [uniform] = per_pod {
            sums = (pods_on.into_iter())
                .map(|(node, pods)| (node, uniform.times(pods)))
                .collect();
        }
        for (node, gpus) in shares {
            let pairs = gpus.into_iter().map(|(gpu, milli)| (share_id(gpu), milli));
            let sum = sums.entry(node).or_default();
            *sum = sum.plus(&Amounts::from_pairs(pairs.collect()));
        }
        sums.into_iter()
            .filter(|(_, amounts)| !amounts.is_empty())
            .collect()
    }

    /// A hold's use per node as [`Engine::resources_by_node`] computes it from its pods, on
    /// the nodes where it holds GPUs or resources.
    pub(crate) fn hold_resources(&self, hold: &Hold) -> Vec<(NodeId, Amounts)> {
        let member = |node: NodeId| holds_on(hold, node);
        self.resources_by_node(&hold.placement, &hold.pod_resources, &hold.ended, &member)
    }

    /// The live holds with GPUs or resources on node `id`, by id (pods without GPUs hold
    /// only resources there: docs/resources.md "Node resources").
    pub(crate) fn holds_touching(&self, id: NodeId) -> Vec<HoldId> {
        let mut holders = self.ledger.hold_ids_on(id);
        let with_resources = (self.ledger.live_holds())
            .filter(|(_, hold)| hold.resources_by_node.iter().any(|&(on, _)| on == id));
        holders.extend(with_resources.map(|(hold, _)| hold));
        holders.sort_unstable();
        holders.dedup();
        holders
    }

    /// Keeps the pod counts of `request`'s shape current when its resources bind on the
    /// cluster's own view (no selector, no fraction), with the domains holding each of
    /// `sizes` pods, so that its search reads them (`capacity::shapes`).
    pub(crate) fn keep_shape(&mut self, request: &GangRequest, sizes: &[u64]) -> CoreResult<()> {
        if !request.filter.is_plain() || request.gpu_milli.is_some() {
            return Ok(());
        }
        let need = self.asked(request)?;
        let state = (&self.topology, &self.states, &self.capacity);
        if !super::search_ops::resources_bind(state, request, &need) {
            return Ok(());
        }
        let key = super::search_ops::shape_key(request, need);
        self.capacity
            .ensure_shape(&self.topology, &self.states, key, sizes);
        Ok(())
    }

    /// Refuses a preemption plan whose pods' resources no longer fit: on each node, what the
    /// gang's pods there ask must be within what is free once the `victims` end (`Conflict`:
    /// the plan is stale; docs/resources.md "Node resources").
    pub(crate) fn check_target_resources(
        &self,
        request: &AnyRequest,
        placement: &Placement,
        victims: &[HoldId],
    ) -> CoreResult<()> {
        let per_pod = match request {
            AnyRequest::Gang(request) => self.request_resources(Some(request)),
            AnyRequest::Roles(request) => self.roles_resources(request, placement),
        };
        let asked = self.resources_by_node(placement, &per_pod, &[], &|_| true);
        self.check_asked_resources(asked, victims)
    }

    /// Refuses `asked` (per node) unless each node's free resources, once the `victims` end,
    /// hold it (`Conflict`: the plan is stale), nodes checked in name order. Shares of GPUs
    /// among them are left to [`Engine::check_placement_shares`] (their room is per GPU).
    pub(crate) fn check_asked_resources(
        &self,
        asked: Vec<(NodeId, Amounts)>,
        victims: &[HoldId],
    ) -> CoreResult<()> {
        if asked.is_empty() {
            return Ok(());
        }
        let mut freed: BTreeMap<NodeId, Amounts> = BTreeMap::new();
        for hold in victims.iter().filter_map(|&id| self.ledger.live(id)) {
            for (node, amounts) in &hold.resources_by_node {
                let sum = freed.entry(*node).or_default();
                *sum = sum.plus(&split(amounts).0);
            }
        }
        let names = self.topology.resources().names();
        let mut asked = asked;
        asked.sort_by(|a, b| {
            self.topology
                .node(a.0)
                .name
                .cmp(&self.topology.node(b.0).name)
        });
        for (node, asks) in asked {
            let asks = split(&asks).0;
            let capacity = self.topology.resources().capacity(node);
            let used = self.states.resource_use().used(node);
            let used = used.minus(freed.get(&node).unwrap_or(&Amounts::none()));
            let free = capacity.minus(&used);
            if !asks.within(&free) {
                let name = &self.topology.node(node).name;
                return Err(texts::plan_resources_short(
                    name,
                    &names.named(&free),
                    &names.named(&asks),
                ));
            }
        }
        Ok(())
    }

    /// Sets live hold `id`'s asks to `asks` and its use per node to what its live pods and
    /// spares ask now (after its placement changed: spares dropped or added, a repair
    /// merged), counting pods on the nodes it holds something on and on `also`.
    pub(crate) fn resync_resources(
        &mut self,
        changes: &mut crate::state::Changes,
        id: HoldId,
        asks: Arc<[Amounts]>,
        also: &[NodeId],
    ) {
        let Some(hold) = self.ledger.live(id) else {
            return;
        };
        // A fractional hold uses its shares like resources, even when it asks nothing else
        // and held nothing (its every pod's node removed before a repair).
        let shares = hold.placement.gpu_milli.is_some();
        if asks.is_empty() && hold.resources_by_node.is_empty() && !shares {
            return;
        }
        let member = |node: NodeId| holds_on(hold, node) || also.contains(&node);
        let by_node = self.resources_by_node(&hold.placement, &asks, &hold.ended, &member);
        (self.ledger).set_resources(&mut self.states, changes, id, asks, by_node);
    }

    /// After the spares at `dropped` (positions among its spares before) left allocation
    /// `id` (docs/repair.md "Spares", S3): its asks lose their slots and its use per node what they
    /// asked.
    pub(crate) fn spares_dropped(
        &mut self,
        changes: &mut crate::state::Changes,
        id: HoldId,
        dropped: &[usize],
    ) {
        let Some(hold) = self.ledger.live(id).filter(|_| !dropped.is_empty()) else {
            return;
        };
        if hold.pod_resources.is_empty() {
            return;
        }
        let pods = hold.placement.pods.len();
        let asks = asks_without_spares(pods, &hold.pod_resources, dropped);
        self.resync_resources(changes, id, asks, &[]);
    }

    /// Whether every hold's use per node is what its pods ask and every node's use is the
    /// sum of its holds' (for `check_invariants`).
    pub(crate) fn check_resources(&self) -> Result<(), String> {
        let mut expected: BTreeMap<NodeId, Amounts> = BTreeMap::new();
        for (id, hold) in self.ledger.live_holds() {
            if self.hold_resources(hold) != hold.resources_by_node {
                return Err(format!("hold {id}'s resources per node are stale"));
            }
            for (node, amounts) in &hold.resources_by_node {
                let sum = expected.entry(*node).or_default();
                *sum = sum.plus(&split(amounts).0); // shares: `check_shares`
            }
        }
        expected.retain(|_, amounts| !amounts.is_empty());
        for (node, used) in self.states.resource_use().all() {
            let want = expected.remove(&node).unwrap_or_default();
            if *used != want {
                return Err(format!("node slot {node}'s resource use is stale"));
            }
        }
        match expected.is_empty() {
            true => Ok(()),
            false => Err("a hold uses resources on a node slot without use".into()),
        }
    }
}

impl Engine {
    /// The pods of `request`'s need that node `id`'s free resources hold (`u64::MAX` when it
    /// asks none).
    fn resource_pods(&self, request: &GangRequest, id: NodeId) -> u64 {
        let names = self.topology.resources().names();
        let Ok(need) = names.resolve(&request.resources) else {
            return u64::MAX;
        };
        if need.is_empty() {
            return u64::MAX;
        }
        let fit = ResourceFit::new(
            &need,
            self.topology.resources().capacities(),
            self.states.resource_use(),
        );
        fit.pods(id)
    }

    /// Node `id`'s resources by name: its capacity, or (`free`) what no hold uses, floored at
    /// zero (a node whose resources shrank under running pods).
    pub(crate) fn node_resources(&self, id: NodeId, free: bool) -> Vec<(String, u64)> {
        let capacity = self.topology.resources().capacity(id);
        let used = self.states.resource_use().used(id);
        let names = self.topology.resources().names();
        let mut named: Vec<(String, u64)> = (capacity.pairs().iter())
            .map(|&(resource, quantity)| {
                let left = match free {
                    true => quantity.saturating_sub(used.get(resource)),
                    false => quantity,
                };
                (names.name(resource).to_owned(), left)
            })
            .collect();
        named.sort();
        named
    }

    /// The cluster's resources by name, summed over its nodes: capacities, or (`free`) what
    /// no hold uses; a name no node offers any of now is left out.
    pub(crate) fn resource_totals(&self, free: bool) -> Vec<(String, u64)> {
        let names = self.topology.resources().names();
        let totals = self.states.resource_use().totals();
        let mut named: Vec<(String, u64)> = (0..)
            .zip(totals)
            .filter(|&(_, &(capacity, _))| capacity > 0)
            .map(|(id, &(capacity, left))| {
                (
                    names.name(id).to_owned(),
                    if free { left } else { capacity },
                )
            })
            .collect();
        named.sort();
        named
    }

    /// Per resource name (sorted), every node's capacity and free amount, nodes in name
    /// order (`gpu_state`).
    pub(crate) fn resource_columns(&self) -> Vec<(String, Vec<u64>, Vec<u64>)> {
        let names = self.topology.resources().names();
        let nodes = self.topology.nodes_by_name();
        let mut columns: Vec<(String, Vec<u64>, Vec<u64>)> = (0..)
            .zip(self.states.resource_use().totals())
            .filter(|&(_, &(capacity, _))| capacity > 0)
            .map(|(resource, _)| {
                let in_use = self.states.resource_use();
                let capacity = |id: NodeId| self.topology.resources().capacity(id).get(resource);
                let free = |id: NodeId| capacity(id).saturating_sub(in_use.used(id).get(resource));
                (
                    names.name(resource).to_owned(),
                    nodes.iter().map(|&(id, _)| capacity(id)).collect(),
                    nodes.iter().map(|&(id, _)| free(id)).collect(),
                )
            })
            .collect();
        columns.sort_by(|a, b| a.0.cmp(&b.0));
        columns
    }

    /// Whether node `id` has the free GPUs for a pod of `request` but not the resources.
    pub(crate) fn resources_hold_no_pod(&self, request: &GangRequest, id: NodeId) -> bool {
        !request.resources.is_empty() && self.resource_pods(request, id) == 0
    }

    /// The resource that keeps the most usable nodes of `item` below the pods their free
    /// GPUs hold (then the first name); `None` when none does or nothing is asked.
    pub(crate) fn limited_by(&self, request: &GangRequest, item: Item) -> Option<String> {
        let names = self.topology.resources().names();
        let need = names.resolve(&request.resources).ok()?;
        if need.is_empty() {
            return None;
        }
        let fit = ResourceFit::new(
            &need,
            self.topology.resources().capacities(),
            self.states.resource_use(),
        );
        let mut bound: BTreeMap<String, u64> = BTreeMap::new();
        for node in self.nodes_under(item) {
            let state = self.states.get(node);
            if state.cordoned || !self.topology.node(node).admits(&request.filter) {
                continue;
            }
            let shares = crate::capacity::ShareFit::of(request.gpu_milli, &self.states);
            let gpu_pods = match (shares, request.gpus_per_pod) {
                (Some(fit), _) => fit.pods(node, state.free()), // fractions: their GPUs' room
                (None, 0) => u64::MAX, // pods without GPUs: every node is bound by its resources
                (None, size) => u64::from(state.free_count() / size),
            };
            let (pods, _) = fit.pods_with_bound(node);
            if pods < gpu_pods {
                // The bounding resource: the fewest pods, then the first name (ids depend
                // on the order names were declared, which a restore does not keep).
                let bounding = (need.pairs().iter())
                    .filter(|&&(resource, _)| fit.pods_of(node, resource) == pods)
                    .map(|&(resource, _)| names.name(resource))
                    .min()
                    .unwrap_or("?");
                *bound.entry(bounding.to_owned()).or_default() += 1;
            }
        }
        let most = bound.values().copied().max()?;
        bound
            .into_iter()
            .find(|&(_, count)| count == most)
            .map(|(name, _)| name)
    }
}

impl Engine {
    /// Every node under `item`.
    pub(crate) fn nodes_under(&self, item: Item) -> Vec<NodeId> {
        match item {
            Item::Node(node) => vec![node],
            Item::Domain(id) => self.topology.nodes_under(id),
        }
    }
}

/// Whether `hold` holds GPUs or resources on `node` (a pod of it there still runs).
pub(crate) fn holds_on(hold: &Hold, node: NodeId) -> bool {
    (hold.gpus_by_node.iter()).any(|&(on, _)| on == node)
        || (hold.resources_by_node.iter()).any(|&(on, _)| on == node)
}

/// `hold`'s asks without the slots of its spares at `dropped` (positions in its spares
/// before they were dropped): per-slot asks keep their ranks' and the other spares'.
pub(crate) fn asks_without_spares(
    hold_pods: usize,
    asks: &[Amounts],
    dropped: &[usize],
) -> Arc<[Amounts]> {
    if asks.len() <= 1 {
        return Arc::from(asks);
    }
    let kept = asks
        .iter()
        .enumerate()
        .filter(|&(slot, _)| slot < hold_pods || !dropped.contains(&(slot - hold_pods)));
    kept.map(|(_, amounts)| amounts.clone()).collect()
}
