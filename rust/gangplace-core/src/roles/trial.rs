//! One attempt at placing every group of a multi-role gang inside candidates (docs/roles.md
//! "Multi-role gangs", rule 3): the groups in placing order, each by the single-gang rules on
//! a what-if overlay of the earlier groups' GPUs, a colocated group inside its anchor's rank-0
//! domain; and room for a follower, the candidate tried once more with a follower that did
//! not fit there placed in that domain just before its anchor.

use std::collections::BTreeMap;

use crate::capacity::{AnyView, CapacityView, Overlay, ResourceFit};
use crate::config::Policy;
use crate::error::{CoreResult, internal};
use crate::ids::{GpuSet, NodeId};
use crate::model::MultiGangRequest;
use crate::resources::Amounts;
use crate::search::{Item, Plan, Search};
use crate::state::NodeStates;
use crate::topology::Topology;

use super::{GroupFailure, Resolved, RolesPlan};

/// A follower placed in its anchor's rank-0 domain just before the anchor (the second try of
/// a candidate, docs/roles.md, rule 3).
#[derive(Debug, Clone, Copy)]
struct Pin {
    group: usize,
    anchor: usize,
    depth: usize,
    domain: Item,
}

/// A pod placed by an earlier group of the trial: its node, its GPUs and its group.
type Taken = (NodeId, GpuSet, usize);

/// One attempt at placing every group of a request, candidate after candidate.
pub(super) struct Trial<'e, 'v> {
    topology: &'e Topology,
    /// The nodes' states: what the holds use of their resources (docs/resources.md "Node resources").
    states: &'e NodeStates,
    request: &'e MultiGangRequest,
    resolved: &'e Resolved,
    views: &'e [AnyView<'v>],
    /// The elastic retry: elastic groups at their `min_pods`.
    elastic: bool,
}

/// Why a try of a candidate failed, and the follower to pin for a second try.
type Refusal = (GroupFailure, Option<Pin>);

pub(super) type Found = (Option<RolesPlan>, Option<(Item, GroupFailure)>);

impl<'e, 'v> Trial<'e, 'v> {
    pub(super) fn new(
        (topology, states): (&'e Topology, &'e NodeStates),
        request: &'e MultiGangRequest,
        resolved: &'e Resolved,
        views: &'e [AnyView<'v>],
        elastic: bool,
    ) -> Self {
        Self {
            topology,
            states,
            request,
            resolved,
            views,
            elastic,
        }
    }

    /// The candidates of `depth` with `need` free GPUs, in order: the first where every
    /// group fits, and the first candidate's failure.
    pub(super) fn at_level<V: CapacityView>(
        &self,
        order: &Search<'_, V>,
        depth: usize,
        need: u64,
        policy: Policy,
    ) -> CoreResult<Found> {
        let mut first = None;
        let found = order.find_candidate(depth, need, policy, &mut |item| {
            // Only the first candidate's failure is reported: the others may be refused by
            // counting alone.
            if first.is_some() && self.cannot_fit(item) {
                return None;
            }
            self.outcome(depth, item, &mut first)
        });
        Ok((found.transpose()?, first))
    }

    /// One candidate tried: the plan, or its failure kept if it is the first.
    fn outcome(
        &self,
        depth: usize,
        item: Item,
        first: &mut Option<(Item, GroupFailure)>,
    ) -> Option<CoreResult<RolesPlan>> {
        match self.in_candidate(depth, item) {
            Ok(Ok(groups)) => Some(Ok(RolesPlan {
                depth,
                item,
                groups,
            })),
            Ok(Err(failure)) => {
                first.get_or_insert((item, failure));
                None
            }
            Err(error) => Some(Err(error)),
        }
    }

    /// Whether counting alone shows that `item` cannot hold the unit: the groups sharing a
    /// selector need more free GPUs than it has there, or more pods of one size than it
    /// holds (each pod of size `g` takes one of the `floor(free / g)` of its node, so later
    /// groups would find too few). Never true where the placement would succeed.
    fn cannot_fit(&self, item: Item) -> bool {
        let groups = &self.request.groups;
        let mut seen: Vec<usize> = Vec::new();
        for (index, group) in groups.iter().enumerate() {
            if seen
                .iter()
                .any(|&other| groups[other].filter == group.filter)
            {
                continue;
            }
            seen.push(index);
            let sharing: Vec<usize> = (index..groups.len())
                .filter(|&other| groups[other].filter == group.filter)
                .collect();
            let search = Search::new(self.topology, &self.views[index], 1);
            let gpus: u64 = sharing
                .iter()
                .map(|&g| self.size(g) * u64::from(groups[g].gpus_per_pod))
                .sum();
            if gpus > search.free_gpus(item) {
                return true;
            }
            for &g in &sharing {
                let size = groups[g].gpus_per_pod;
                let pods: u64 = sharing
                    .iter()
                    .filter(|&&other| groups[other].gpus_per_pod == size)
                    .map(|&other| self.size(other))
                    .sum();
                let sized = Search::new(self.topology, &self.views[index], size);
                if pods > sized.capacity(item) {
                    return true;
                }
            }
        }
        false
    }

    /// Every group inside one candidate, in placing order; their plans in request order.
    pub(super) fn in_candidate(
        &self,
        depth: usize,
        item: Item,
    ) -> CoreResult<Result<Vec<Plan>, GroupFailure>> {
        for &group in &self.resolved.order {
            let search = self.search(group, &self.views[group], &[]);
            let pods = self.size(group);
            if !search.holds(item, pods) {
                let held = search.pods_up_to(item, pods);
                let why = format!("holds {held} of its {pods} pods");
                let wanted = pods;
                return Ok(Err(GroupFailure {
                    group,
                    why,
                    held,
                    wanted,
                }));
            }
        }
        match self.place_all(depth, item, None)? {
            Ok(plans) => Ok(Ok(plans)),
            // Room for a follower (docs/roles.md, rule 3): once more with the
            // follower placed in its anchor's rank-0 domain just before the anchor; if that
            // fails too, the first try's failure is the candidate's.
            Err((failure, Some(pin))) => {
                Ok(self.place_all(depth, item, Some(pin))?.map_err(|_| failure))
            }
            Err((failure, None)) => Ok(Err(failure)),
        }
    }

    /// Every group inside the candidate in placing order (with `pin`, its follower placed in
    /// its domain just before its anchor); on a failure, the follower to pin for a second
    /// try when the group that failed did not fit in its anchor's rank-0 domain.
    fn place_all(
        &self,
        depth: usize,
        item: Item,
        pin: Option<Pin>,
    ) -> CoreResult<Result<Vec<Plan>, Refusal>> {
        let count = self.request.groups.len();
        // Every pod of the groups placed so far (a node may appear more than once).
        let mut taken: Vec<Taken> = Vec::new();
        let mut plans: Vec<Option<Plan>> = (0..count).map(|_| None).collect();
        for &group in &self.resolved.order {
            if pin.is_some_and(|pin| pin.group == group) {
                continue; // placed at its anchor's turn
            }
            // The pinned follower goes just before its anchor, in its forced domain.
            let follower = pin
                .filter(|pin| pin.anchor == group)
                .map(|pin| (pin.group, Some((pin.depth, pin.domain))));
            for (group, forced) in follower.into_iter().chain([(group, None)]) {
                let probe = self.search(group, &self.views[group], &[]);
                let (target, anchor) = match forced {
                    Some(target) => (target, None),
                    None => self.target(group, depth, item, &plans, &probe),
                };
                let placed = match pin {
                    Some(pin) if group == pin.anchor && self.resolved.layers[group].is_empty() => {
                        self.place_anchor_first(group, (depth, item), target, pin, &taken)?
                    }
                    _ => {
                        self.place_group(group, (depth, item), target, &taken, self.size(group))?
                    }
                };
                match placed {
                    Ok(plan) => {
                        taken.extend(plan.pods.iter().map(|pod| (pod.node, pod.gpus, group)));
                        plans[group] = Some(plan);
                    }
                    Err(failure) => {
                        let retry = anchor.filter(|_| pin.is_none()).map(|anchor| Pin {
                            group,
                            anchor,
                            depth: target.0,
                            domain: target.1,
                        });
                        return Ok(Err((failure, retry)));
                    }
                }
            }
        }
        let plans: Vec<Plan> = plans.into_iter().flatten().collect();
        if plans.len() != count {
            return Err(internal("a group was not placed"));
        }
        if let Some(failure) = self.broken_colocation(depth, &plans) {
            return Ok(Err((failure, None)));
        }
        Ok(Ok(plans))
    }

    /// Pods a group takes in this trial: all it asks for, or its `min_pods` in the elastic
    /// retry.
    fn size(&self, group: usize) -> u64 {
        let request = &self.request.groups[group];
        match self.elastic {
            true => request.min_pods.unwrap_or(request.pods),
            false => request.pods,
        }
    }

    /// The single-gang search of one group over `view`, its pods also bounded by the
    /// nodes' free resources less `taken` (sorted by node) when it asks some.
    fn search<'s, V: CapacityView>(
        &self,
        group: usize,
        view: &'s V,
        taken: &'s [(NodeId, Amounts)],
    ) -> Search<'s, V>
    where
        'e: 's,
    {
        let request = &self.request.groups[group];
        let layers = self.resolved.layers[group];
        let need = &self.resolved.needs[group];
        let fit = (!need.is_empty()).then(|| {
            let capacities = self.topology.resources().capacities();
            ResourceFit::new(need, capacities, self.states.resource_use()).with_taken(taken)
        });
        Search::new(self.topology, view, request.gpus_per_pod)
            .with_shape(layers, self.request.spread)
            .with_resources(fit)
    }

    /// What the `taken` pods use of each node's resources, by node (empty when `group`
    /// asks none: its counts do not read them).
    fn taken_resources(&self, group: usize, taken: &[Taken]) -> Vec<(NodeId, Amounts)> {
        if self.resolved.needs[group].is_empty() {
            return Vec::new();
        }
        let mut by_node: BTreeMap<NodeId, Amounts> = BTreeMap::new();
        for &(node, _, earlier) in taken {
            let need = &self.resolved.needs[earlier];
            if !need.is_empty() {
                let sum = by_node.entry(node).or_default();
                *sum = sum.plus(need);
            }
        }
        by_node.into_iter().collect()
    }

    /// The anchor of a pinned follower (without slices): as many of its pods as the pin's
    /// domain still holds go there first, the rest by rules 4-6 in its own `target` (the
    /// candidate unless it follows another group), all ranked together by rule 6.
    fn place_anchor_first(
        &self,
        group: usize,
        candidate: (usize, Item),
        target: (usize, Item),
        pin: Pin,
        taken: &[Taken],
    ) -> CoreResult<Result<Plan, GroupFailure>> {
        let wanted = self.size(group);
        let domain = (pin.depth, pin.domain);
        let inside = match self.place_group(group, candidate, domain, taken, wanted)? {
            Ok(plan) => return Ok(Ok(plan)),
            Err(failure) if failure.held == 0 => {
                return self.place_group(group, candidate, target, taken, wanted);
            }
            Err(failure) => failure.held,
        };
        let mut pods = match self.place_group(group, candidate, domain, taken, inside)? {
            Ok(first) => first.pods,
            Err(failure) => return Ok(Err(failure)),
        };
        let mut more = taken.to_vec();
        more.extend(pods.iter().map(|pod| (pod.node, pod.gpus, group)));
        match self.place_group(group, candidate, target, &more, wanted - inside)? {
            Ok(rest) => pods.extend(rest.pods),
            Err(failure) => return Ok(Err(failure)),
        }
        self.search(group, &self.views[group], &[])
            .rank_pods(&mut pods);
        Ok(Ok(Plan {
            depth: target.0,
            item: target.1,
            pods,
            slices: Vec::new(),
        }))
    }

    /// `wanted` pods of one group inside `target` (the candidate or its anchor's domain),
    /// seeing the GPUs and resources already `taken`.
    fn place_group(
        &self,
        group: usize,
        (depth, item): (usize, Item),
        (target_depth, target): (usize, Item),
        taken: &[Taken],
        wanted: u64,
    ) -> CoreResult<Result<Plan, GroupFailure>> {
        let view = &self.views[group];
        let resources = self.taken_resources(group, taken);
        let probe = self.search(group, view, &resources);
        // Every pod placed so far lies in the candidate; only a colocation's target needs
        // the ones inside it.
        let whole = (target_depth, target) == (depth, item);
        let mut inside: Vec<(NodeId, GpuSet)> = taken
            .iter()
            .map(|&(node, gpus, _)| (node, gpus))
            .filter(|&(node, _)| whole || probe.item_of(node, target_depth) == target)
            .collect();
        if inside.is_empty() {
            // Nothing taken where it goes: the view itself (its aggregates) answers.
            return self.plan_group(&probe, group, (depth, item), (target_depth, target), wanted);
        }
        inside.sort_unstable_by_key(|&(node, _)| node);
        let size = self.request.groups[group].gpus_per_pod;
        let mut overlay = Overlay::within(self.topology, view, size, inside.len(), target_depth);
        for run in inside.chunk_by(|a, b| a.0 == b.0) {
            let node = run[0].0;
            let gpus = run.iter().fold(GpuSet::EMPTY, |all, &(_, gpus)| all | gpus);
            if let Some(free) = view.node_free(node) {
                overlay.set_node(node, Some(free & !gpus));
            }
        }
        let search = self.search(group, &overlay, &resources);
        self.plan_group(
            &search,
            group,
            (depth, item),
            (target_depth, target),
            wanted,
        )
    }

    /// Rules 4-6 for one group inside `target`, or why it does not fit there.
    fn plan_group<V: CapacityView>(
        &self,
        search: &Search<'_, V>,
        group: usize,
        candidate: (usize, Item),
        (target_depth, target): (usize, Item),
        wanted: u64,
    ) -> CoreResult<Result<Plan, GroupFailure>> {
        if !search.holds(target, wanted) {
            let held = search.pods_up_to(target, wanted);
            let place = match (target_depth, target) == candidate {
                true => String::from("after the earlier groups"),
                false => format!(
                    "in {} {} (its colocation)",
                    self.topology.level_name(target_depth),
                    target.path(self.topology).join("/")
                ),
            };
            let why = format!("has room for {held} of its {wanted} pods {place}");
            return Ok(Err(GroupFailure {
                group,
                why,
                held,
                wanted,
            }));
        }
        search.plan_in(target_depth, target, wanted).map(Ok)
    }

    /// Where a group goes: inside the rank-0 domain of its first placed anchor at a
    /// colocation level finer than the candidate's (with that anchor), else the candidate.
    fn target<V: CapacityView>(
        &self,
        group: usize,
        depth: usize,
        item: Item,
        plans: &[Option<Plan>],
        search: &Search<'_, V>,
    ) -> ((usize, Item), Option<usize>) {
        let anchored = self
            .resolved
            .colocations
            .iter()
            .find_map(|&(g, anchor, at)| {
                let placed = plans.get(anchor)?.as_ref()?;
                let first = placed.pods.first()?;
                let target = (at, search.item_of(first.node, at));
                (g == group && at > depth).then_some((target, Some(anchor)))
            });
        anchored.unwrap_or(((depth, item), None))
    }

    /// The first colocation that the plans break, as the failure of its group.
    fn broken_colocation(&self, depth: usize, plans: &[Plan]) -> Option<GroupFailure> {
        let view = self.views.first()?;
        let search = Search::new(self.topology, view, 1);
        self.resolved
            .colocations
            .iter()
            .filter(|&&(_, _, at)| at > depth)
            .find_map(|&(group, anchor, at)| {
                let first = plans[anchor].pods.first()?;
                let home = search.item_of(first.node, at);
                let pods = &plans[group].pods;
                let inside = pods
                    .iter()
                    .filter(|pod| search.item_of(pod.node, at) == home)
                    .count();
                (inside < pods.len()).then(|| GroupFailure {
                    group,
                    held: inside as u64,
                    wanted: pods.len() as u64,
                    why: format!(
                        "is not all in the {} of rank 0 of group \"{}\"",
                        self.topology.level_name(at),
                        self.request.groups[anchor].name
                    ),
                })
            })
    }
}
