//! Placing multi-role gangs (docs/roles.md): the unit goes into one domain, the
//! finest level that holds it, trying that level's candidates in rule 3's order (over every
//! usable node; a candidate needs the unit's GPUs free). Inside a candidate the groups are
//! placed in order (total GPUs descending, name), each by the single-gang rules with its own
//! selector and slices on a what-if overlay where the earlier groups' GPUs are taken; a group
//! whose colocation anchor is already placed goes inside the anchor's rank-0 domain of the
//! colocation level; when it finds no room there, the candidate is tried once more with that
//! follower placed there just before its anchor (module `trial`). Beyond that retry there is
//! no backtracking inside a candidate: the first where every group and every colocation
//! succeeds wins, else the next candidate, then the next level. If no
//! level holds the full unit and a group is elastic, the coarsest level is tried again with
//! every elastic group at its `min_pods` (a job starts with its minimum members, as
//! Volcano's `minTaskMember` has it).

use std::sync::Arc;

use crate::capacity::{AnyView, Capacity};
use crate::config::Policy;
use crate::engine::Engine;
use crate::error::{CoreError, CoreResult, internal, invalid};
use crate::model::MultiGangRequest;
use crate::model::{Placement, Reservation};
use crate::resources::Amounts;
use crate::search::{Item, Plan, Search};
use crate::shapes::{Layers, level_list};
use crate::state::NodeStates;
use crate::topology::Topology;

use crate::engine::transactions::{
    NewHold, Owner, check_owner, check_ttl, gpus_by_node, held_gpus,
};

mod defrag;
mod explain;
mod preemption;
pub(crate) mod snapshot;
mod trial;

use trial::Trial;

/// A multi-role request resolved against the topology.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    /// Depth of the coarsest level the unit may span.
    pub coarsest_depth: usize,
    /// Group indices in placing order.
    pub order: Vec<usize>,
    /// Each group's slice layers (request order).
    pub layers: Vec<Layers>,
    /// Each group's per-pod resources besides GPUs (request order; empty: none).
    pub needs: Vec<Amounts>,
    /// `(group, anchor, depth)` per colocation.
    colocations: Vec<(usize, usize, usize)>,
}

/// Where a multi-role gang goes: its domain and each group's plan, in request order.
#[derive(Debug)]
pub(crate) struct RolesPlan {
    depth: usize,
    item: Item,
    groups: Vec<Plan>,
}

impl RolesPlan {
    /// Every group's pods, groups in request order.
    pub(crate) fn pods(&self) -> impl Iterator<Item = &crate::search::PlannedPod> {
        self.groups.iter().flat_map(|group| &group.pods)
    }
}

/// The first group that failed in a candidate, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GroupFailure {
    /// Index into the request's groups.
    pub group: usize,
    /// One sentence.
    pub why: String,
    /// Its pods that had room (inside the anchor's domain for a broken colocation).
    pub held: u64,
    /// Its pods wanted.
    pub wanted: u64,
}

/// One level tried: the first candidate (if any) and why it failed.
#[derive(Debug, Clone)]
pub(crate) struct LevelTrial {
    pub depth: usize,
    pub first: Option<(Item, GroupFailure)>,
}

/// What `plan_roles` found.
#[derive(Debug)]
pub(crate) struct RolesOutcome {
    pub plan: Option<RolesPlan>,
    /// Levels tried, finest first (the full unit; not the elastic retry).
    pub trials: Vec<LevelTrial>,
}

impl Engine {
    /// Resolves level names (required, slice and colocation levels).
    pub(crate) fn resolve_roles(&self, request: &MultiGangRequest) -> CoreResult<Resolved> {
        let depth_of = |level: &str, what: &str| {
            self.topology.depth_of(level).ok_or_else(|| {
                invalid(format!(
                    "unknown {what} {level:?}; the levels are {}",
                    level_list(&self.topology)
                ))
            })
        };
        let coarsest_depth = match &request.required_level {
            Some(level) => depth_of(level, "required_level")?,
            None => 0,
        }
        .max(self.config.max_level_depth());
        let layers = request
            .groups
            .iter()
            .map(|group| Layers::resolve(&self.topology, &group.slices, coarsest_depth))
            .collect::<CoreResult<Vec<Layers>>>()?;
        let names = self.topology.resources().names();
        let needs = (request.groups.iter())
            .map(|group| names.resolve(&group.resources))
            .collect::<CoreResult<Vec<Amounts>>>()?;
        let colocations = request
            .colocate
            .iter()
            .map(|c| Ok((c.group, c.anchor, depth_of(&c.level, "colocate level")?)))
            .collect::<CoreResult<Vec<_>>>()?;
        Ok(Resolved {
            coarsest_depth,
            order: request.placing_order(),
            layers,
            needs,
            colocations,
        })
    }

    /// Expired holds reclaimed, the tree settled, the request resolved, its pools made.
    pub(crate) fn prepare_roles(
        &mut self,
        request: &MultiGangRequest,
        now: f64,
    ) -> CoreResult<Resolved> {
        self.reclaim(now);
        self.settle();
        let resolved = self.resolve_roles(request)?;
        for group in &request.groups {
            let (topology, states) = (&self.topology, &self.states);
            self.capacity.ensure_pool(topology, states, &group.filter);
        }
        let order = request.order_filter();
        self.capacity
            .ensure_pool(&self.topology, &self.states, &order);
        Ok(resolved)
    }

    /// The search of the module comment, on the current state.
    pub(crate) fn plan_roles(
        &self,
        request: &MultiGangRequest,
        resolved: &Resolved,
    ) -> CoreResult<RolesOutcome> {
        let state = (&self.topology, &self.states, &self.capacity);
        plan_roles_on(state, self.policy(), request, resolved)
    }

    /// How many disjoint copies of the multi-role gang `reserve_many` would place now (owner
    /// caps aside): placements on a what-if copy, each taking its GPUs, until none fits.
    pub fn capacity_for_roles(&mut self, request: &MultiGangRequest, now: f64) -> CoreResult<u64> {
        let request = &*request.placed();
        let resolved = self.prepare_roles(request, now)?;
        let policy = self.policy();
        let mut what_if = self.scratch_copy();
        let mut copies = 0u64;
        loop {
            let state = (what_if.topology, &what_if.states, &what_if.capacity);
            let Some(plan) = plan_roles_on(state, policy, request, &resolved)?.plan else {
                return Ok(copies);
            };
            let pods = plan.groups.iter().flat_map(|group| &group.pods);
            what_if.take(pods.map(|pod| (pod.node, pod.gpus)));
            for (group, need) in plan.groups.iter().zip(&resolved.needs) {
                if !need.is_empty() {
                    let pods: Vec<_> = group.pods.iter().map(|pod| (pod.node, pod.gpus)).collect();
                    what_if.use_resources(&pods, need, None);
                }
            }
            copies += 1;
            if copies > crate::limits::MAX_GANG_GPUS {
                return Err(internal("capacity_for did not converge"));
            }
        }
    }

    /// The placement of a multi-role plan: the groups' pods in request order.
    pub(crate) fn roles_placement(
        &self,
        request: &MultiGangRequest,
        plan: &RolesPlan,
    ) -> Placement {
        let mut placement = Placement {
            gpu_milli: None,
            pods: Vec::new(),
            level: self.topology.level_name(plan.depth).to_owned(),
            domain: plan
                .item
                .path(&self.topology)
                .into_iter()
                .map(String::from)
                .collect(),
            slices: Vec::new(),
            groups: Vec::with_capacity(plan.groups.len()),
            spares: Vec::new(),
        };
        let pods = plan.groups.iter().map(|group| group.pods.len()).sum();
        placement.pods.reserve(pods);
        for (group, group_plan) in request.groups.iter().zip(&plan.groups) {
            let count = group_plan.pods.len() as u64;
            placement.groups.push((group.name.clone(), count));
            placement.pods.extend(self.planned_pods(group_plan));
            placement.slices.extend(self.planned_slices(group_plan));
        }
        placement
    }

    /// Where the multi-role gang would go now; changes nothing but expired reservations.
    pub fn place_roles(
        &mut self,
        asked: &MultiGangRequest,
        now: f64,
    ) -> CoreResult<Option<Placement>> {
        let request = &*asked.placed(); // spares count as pods (docs/repair.md "Spares")
        let resolved = self.prepare_roles(request, now)?;
        let outcome = self.plan_roles(request, &resolved)?;
        Ok(outcome
            .plan
            .map(|plan| asked.split_spares(self.roles_placement(request, &plan))))
    }

    /// Places the multi-role gang and holds all its groups' GPUs until `now + ttl`.
    pub fn reserve_roles(
        &mut self,
        request: &Arc<MultiGangRequest>,
        ttl: f64,
        owner: Owner<'_>,
        now: f64,
    ) -> CoreResult<Reservation> {
        check_ttl(ttl)?;
        check_owner(owner)?;
        self.reclaim(now);
        let asked = request;
        let request = &*asked.placed(); // spares count as pods (docs/repair.md "Spares")
        self.resolve_roles(request)?;
        self.check_cap(owner, request.min_gpus())?;
        let resolved = self.prepare_roles(request, now)?;
        let outcome = self.plan_roles(request, &resolved)?;
        let Some(plan) = outcome.plan else {
            return Err(CoreError::Unschedulable(self.roles_reason(
                request,
                &resolved,
                &outcome.trials,
            )));
        };
        let pods = plan.groups.iter().flat_map(|group| &group.pods);
        let held = gpus_by_node(pods.map(|pod| (pod.node, pod.gpus)))
            .ok_or_else(|| internal("a multi-role plan took one GPU twice"))?;
        self.check_cap(owner, held_gpus(&held))?;
        let placement = Arc::new(asked.split_spares(self.roles_placement(request, &plan)));
        let new = NewHold {
            placement,
            expires_at: now + ttl,
            owner,
            terms: request.terms,
            since: now,
            request: None,
            roles: Some(Arc::clone(asked)),
            pod_resources: None,
        };
        self.hold(held, new)
    }
}

/// Refuses `call` (preemption, defragmentation) for a unit with spares: its removal sets do
/// not count them yet (docs/repair.md "Spares"). Resources besides GPUs are counted.
pub(crate) fn refuse_unsupported_roles(request: &MultiGangRequest, call: &str) -> CoreResult<()> {
    match request.has_spares() {
        true => Err(invalid(format!(
            "{call} does not take gangs with spares yet; place them with place_gang or reserve"
        ))),
        false => Ok(()),
    }
}

/// The search of the module comment on one state (the engine's, or a what-if copy's).
fn plan_roles_on(
    (topology, states, capacity): (&Topology, &NodeStates, &Capacity),
    policy: Policy,
    request: &MultiGangRequest,
    resolved: &Resolved,
) -> CoreResult<RolesOutcome> {
    let views = group_views(capacity, states, request)?;
    let cluster = order_view(capacity, states, request)?;
    let order = Search::new(topology, &cluster, 1);
    let mut trials = Vec::new();
    for depth in (resolved.coarsest_depth..=topology.node_depth()).rev() {
        let trial = Trial::new((topology, states), request, resolved, &views, false);
        let (found, first) = trial.at_level(&order, depth, request.total_gpus(), policy)?;
        trials.push(LevelTrial { depth, first });
        if found.is_some() {
            return Ok(RolesOutcome {
                plan: found,
                trials,
            });
        }
    }
    let mut plan = None;
    if request.is_elastic() {
        let trial = Trial::new((topology, states), request, resolved, &views, true);
        let depth = resolved.coarsest_depth;
        plan = trial.at_level(&order, depth, request.min_gpus(), policy)?.0;
    }
    Ok(RolesOutcome { plan, trials })
}

/// The view candidate domains are ordered over (see `MultiGangRequest::order_filter`).
pub(crate) fn order_view<'c>(
    capacity: &'c Capacity,
    states: &'c NodeStates,
    request: &MultiGangRequest,
) -> CoreResult<AnyView<'c>> {
    let view = capacity.view_for(states, &request.order_filter());
    view.ok_or_else(|| internal("the order's pool was dropped"))
}

/// Each group's view of one state (its selector's pool must exist).
pub(crate) fn group_views<'c>(
    capacity: &'c Capacity,
    states: &'c NodeStates,
    request: &MultiGangRequest,
) -> CoreResult<Vec<AnyView<'c>>> {
    request
        .groups
        .iter()
        .map(|group| {
            let view = capacity.view_for(states, &group.filter);
            view.ok_or_else(|| internal("a selector lost its pool"))
        })
        .collect()
}

/// Every group inside the one candidate `item` of `depth` on one state (`elastic`: elastic
/// groups at their `min_pods`), or `None` where a group or colocation fails: what
/// preemption calls a fit.
pub(crate) fn plan_roles_in(
    (topology, states, capacity): (&Topology, &NodeStates, &Capacity),
    request: &MultiGangRequest,
    resolved: &Resolved,
    (depth, item): (usize, Item),
    elastic: bool,
) -> CoreResult<Option<RolesPlan>> {
    let views = group_views(capacity, states, request)?;
    let trial = Trial::new((topology, states), request, resolved, &views, elastic);
    let groups = trial.in_candidate(depth, item)?.ok();
    Ok(groups.map(|groups| RolesPlan {
        depth,
        item,
        groups,
    }))
}
