//! Defragmentation as operations: `plan_defrag` (a pure query: which movable jobs to move to
//! the edge, and where, so that a gang fits) and `apply_defrag` (one re-validated mutation).
//! docs/preemption.md, rules D1-D4.

use std::collections::HashMap;
use std::sync::Arc;

use crate::capacity::TakenShares;
use crate::engine::Engine;
use crate::engine::removal::Purpose;
use crate::engine::transactions::{NewHold, Owner, check_owner, check_ttl, held_gpus};
use crate::error::{CoreResult, internal, texts};
use crate::ids::{GpuSet, HoldId, NodeId};
use crate::ledger::{Ending, Hold};
use crate::model::AnyRequest;
use crate::model::{
    DefragOptions, DefragPlan, GangRequest, Move, Placement, RemovalLimits, Reservation,
};
use crate::search::removal::{Candidate, Candidates, Choice, World, WorldShares};
use crate::search::{Demand, Item, Plan};
use crate::shares::WHOLE_GPU_MILLI;
use crate::state::Changes;

/// A choice that passed D2: the gang's plan, the moves' plans and the evictions.
struct Accepted {
    choice: Choice,
    gang: Plan,
    moves: Vec<(usize, Plan)>,
    evictions: Vec<usize>,
}

impl Engine {
    /// Which movable jobs to move where so that `request` fits (docs/preemption.md, D1-D4). Changes
    /// nothing but expired reservations (and selector pools, which are caches).
    pub fn plan_defrag(
        &mut self,
        request: &Arc<GangRequest>,
        limits: &RemovalLimits,
        options: DefragOptions,
        now: f64,
    ) -> CoreResult<Option<DefragPlan>> {
        super::refuse_unsupported_shapes(request, "plan_defrag")?;
        let (demand, plan) = self.plan(request, now)?;
        if let Some(plan) = plan {
            let placement = Arc::new(request.split_spares(self.placement(&plan)));
            let gang = AnyRequest::Gang(Arc::clone(request));
            return Ok(Some(self.defrag_plan(gang, placement, &[], Vec::new())));
        }
        let priority = request.terms.priority;
        let candidates = self.candidates(priority, limits, Purpose::Defragmentation, now);
        let node_depth = self.topology.node_depth();
        for depth in (demand.coarsest_depth..=node_depth).rev() {
            let choices = self.with_removal_search(request, |search| {
                search.removal_choices(&candidates, depth, demand.pods)
            })?;
            let mut best: Option<(DefragKey, Accepted)> = None;
            for choice in choices {
                self.capacity
                    .ensure_pool(&self.topology, &self.states, &request.filter);
                let Some(accepted) =
                    self.accept(request, &demand, &candidates, depth, choice, options)?
                else {
                    continue;
                };
                if limits
                    .max_members
                    .is_some_and(|most| accepted.moves.len() > most)
                {
                    continue;
                }
                let key = self.defrag_key(&candidates, &accepted);
                if best.as_ref().is_none_or(|(held, _)| key < *held) {
                    best = Some((key, accepted));
                }
            }
            if let Some((_, accepted)) = best {
                let moves: Vec<(&Candidate, &Plan)> = accepted
                    .moves
                    .iter()
                    .map(|(member, plan)| (&candidates[*member], plan))
                    .collect();
                let evictions: Vec<HoldId> = accepted
                    .evictions
                    .iter()
                    .map(|&m| candidates[m].id)
                    .collect();
                // A fractional gang's placement carries its share (docs/preemption.md D5).
                let placement = Arc::new(request.split_spares(self.placement(&accepted.gang)));
                let gang = AnyRequest::Gang(Arc::clone(request));
                return Ok(Some(self.defrag_plan(gang, placement, &moves, evictions)));
            }
        }
        Ok(None)
    }

    /// The plan of a gang (or unit) at `placement`, with its moves and evictions.
    pub(crate) fn defrag_plan(
        &self,
        request: AnyRequest,
        placement: Arc<Placement>,
        moves: &[(&Candidate, &Plan)],
        mut evictions: Vec<HoldId>,
    ) -> DefragPlan {
        let moved_gpus = moves.iter().map(|(candidate, _)| candidate.held).sum();
        let mut moves: Vec<Move> = moves
            .iter()
            .filter_map(|(candidate, target)| {
                let hold = self.ledger.live(candidate.id)?;
                // A fractional mover keeps its share (docs/preemption.md D5).
                let mut placed = self.placement(target);
                placed.gpu_milli = hold.placement.gpu_milli;
                Some(Move {
                    allocation: candidate.id,
                    source: Arc::clone(&hold.placement),
                    target: Arc::new(placed),
                })
            })
            .collect();
        moves.sort_unstable_by_key(|step| step.allocation);
        evictions.sort_unstable();
        DefragPlan {
            request,
            placement,
            moves,
            evictions,
            moved_gpus,
        }
    }

    /// D3's key: (moves, moved GPUs in thousandths, evictions, path of the gang's domain).
    fn defrag_key(&self, candidates: &Candidates, accepted: &Accepted) -> DefragKey {
        let moved = accepted
            .moves
            .iter()
            .map(|(m, _)| candidates[*m].held_milli)
            .sum();
        let path = accepted.choice.item.path(&self.topology);
        (
            accepted.moves.len(),
            moved,
            accepted.evictions.len(),
            path.into_iter().map(str::to_owned).collect(),
        )
    }

    /// D2: the choice is accepted if every member can be placed again outside the gang's
    /// domain, biggest first, each seeing the GPUs the gang and the earlier moves take.
    fn accept(
        &mut self,
        request: &Arc<GangRequest>,
        demand: &Demand,
        candidates: &Candidates,
        depth: usize,
        choice: Choice,
        options: DefragOptions,
    ) -> CoreResult<Option<Accepted>> {
        let members = choice.members.clone();
        let gang = self.with_removal_search(request, |search| {
            search.place_after_removal(candidates, &members, depth, choice.item, demand.pods)
        })??;
        let pods: Vec<(NodeId, GpuSet)> = gang.pods.iter().map(|p| (p.node, p.gpus)).collect();
        let priority = request.terms.priority;
        let placed = (choice.item, pods.as_slice());
        let Some((moves, evictions)) =
            self.move_members(priority, candidates, &members, placed, options)?
        else {
            return Ok(None);
        };
        Ok(Some(Accepted {
            choice,
            gang,
            moves,
            evictions,
        }))
    }

    /// D2 for a set: every member placed again outside the gang's domain `item` (whose
    /// `pods` the gang takes), biggest first (thousandths held), each seeing the GPUs and
    /// shares the earlier moves take; a member that cannot move is evicted instead when
    /// allowed. `None`: the set is refused.
    pub(crate) fn move_members(
        &mut self,
        priority: i32,
        candidates: &Candidates,
        members: &[usize],
        (item, pods): (Item, &[(NodeId, GpuSet)]),
        options: DefragOptions,
    ) -> CoreResult<Option<Relocation>> {
        let (mut world, mut shares) = self.defrag_world(candidates, members, item, pods)?;
        let mut order = members.to_vec();
        let biggest = |m: usize| {
            (
                std::cmp::Reverse(candidates[m].held_milli),
                candidates[m].id,
            )
        };
        order.sort_unstable_by_key(|&m| biggest(m));
        let (mut moves, mut evictions) = (Vec::new(), Vec::new());
        for member in order {
            match self.replace(candidates[member].id, (&world, &shares), options)? {
                Some((plan, milli)) => {
                    for pod in &plan.pods {
                        let free = world.get(&pod.node).copied().flatten();
                        let free = free.unwrap_or_else(|| self.states.get(pod.node).free());
                        world.insert(pod.node, Some(free & !pod.gpus));
                        // A share takes its room on its GPU, a whole pod all of it (so no
                        // later share lands there: docs/preemption.md D5).
                        for gpu in pod.gpus.iter() {
                            let taken = shares.taken.entry((pod.node, gpu)).or_default();
                            *taken += milli.unwrap_or(WHOLE_GPU_MILLI);
                            if milli.is_some() && free.contains(gpu) {
                                shares.started.insert((pod.node, gpu));
                            }
                        }
                    }
                    moves.push((member, plan));
                }
                None if options.evict_unplaceable
                    && self.evictable(priority, candidates[member].id) =>
                {
                    evictions.push(member);
                }
                None => return Ok(None),
            }
        }
        Ok(Some((moves, evictions)))
    }

    /// Whether a member that cannot move may be preempted instead, for a request of
    /// `priority`.
    fn evictable(&self, priority: i32, id: HoldId) -> bool {
        self.ledger
            .live(id)
            .is_some_and(|hold| hold.terms.preemptible && hold.terms.priority < priority)
    }

    /// The state moves are placed on: the members removed (their healthy GPUs free, their
    /// shares given back, a GPU whose every share is given back free), the gang's domain
    /// unusable (so it holds the gang's GPUs and nothing moves into it).
    fn defrag_world(
        &self,
        candidates: &Candidates,
        members: &[usize],
        item: Item,
        gang: &[(NodeId, GpuSet)],
    ) -> CoreResult<(World, WorldShares)> {
        let mut world = World::new();
        let mut free_up = |node: NodeId, gpus: GpuSet| {
            let free = world.get(&node).copied().flatten();
            let free = free.unwrap_or_else(|| self.states.get(node).free());
            world.insert(node, Some(free | gpus));
        };
        for &member in members {
            for &(node, gpus) in candidates.freed(member) {
                free_up(node, gpus);
            }
        }
        let mut shares = WorldShares::default();
        for ((node, gpu), (back, used)) in candidates.freed_shares(members) {
            shares.given_back.insert((node, gpu), back);
            if back >= used {
                free_up(node, GpuSet::single(gpu));
            }
        }
        for node in self.nodes_under(item) {
            world.insert(node, None);
        }
        if gang
            .iter()
            .any(|&(node, _)| world.get(&node) != Some(&None))
        {
            return Err(internal("the gang's placement left its domain"));
        }
        Ok((world, shares))
    }

    /// Where allocation `id` would go again by its own request on `world` (a fractional one
    /// by the room its shares see, D5): the same number of pods, never coarser than its
    /// level now unless `allow_downgrade`; with the thousandths each pod takes of its GPU
    /// (`None`: whole GPUs).
    fn replace(
        &mut self,
        id: HoldId,
        world: (&World, &WorldShares),
        options: DefragOptions,
    ) -> CoreResult<Option<(Plan, Option<u64>)>> {
        let Some(hold) = self.ledger.live(id) else {
            return Ok(None);
        };
        let Some(request) = hold.request.clone().filter(|request| request.spares == 0) else {
            // Held from a placement (no request to place it by again), or with spares (a move
            // does not carry them yet: docs/repair.md "Spares").
            return Ok(None);
        };
        let pods = hold.placement.pods.len() as u64;
        let level_now = self.topology.depth_of(&hold.placement.level).unwrap_or(0);
        let mut demand = self.demand(&request)?;
        demand.pods = pods;
        demand.min_pods = pods;
        if !options.allow_downgrade {
            demand.coarsest_depth = demand.coarsest_depth.max(level_now);
        }
        self.capacity
            .ensure_pool(&self.topology, &self.states, &request.filter);
        let policy = self.policy();
        let milli = request.gpu_milli.map(u64::from);
        // Shares the earlier moves started on a free GPU keep it usable for more shares
        // (never for a whole pod: `world` no longer has it free).
        let shared_world = milli.map(|_| with_started(world.0, &world.1.started));
        let on = shared_world.as_ref().unwrap_or(world.0);
        let plan = self.with_search(&request, |search| {
            search.plan_in_world((on, Some(world.1)), &demand, policy)
        })??;
        Ok(plan.map(|plan| (plan, milli)))
    }

    /// Moves and evicts atomically after re-validating everything (docs/preemption.md, D4); on any change
    /// since the plan, [`CoreError::Conflict`] and nothing changes. Returns the gang's
    /// reservation and, per moved allocation id, its new reservation.
    pub fn apply_defrag(
        &mut self,
        plan: &DefragPlan,
        ttl: f64,
        owner: Owner<'_>,
        now: f64,
    ) -> CoreResult<(Reservation, Vec<(HoldId, Reservation)>)> {
        check_ttl(ttl)?;
        check_owner(owner)?;
        self.reclaim(now);
        let terms = plan.request.terms();
        let priority = terms.priority;
        for step in &plan.moves {
            let same = self.ledger.live(step.allocation).is_some_and(|hold| {
                (Arc::ptr_eq(&hold.placement, &step.source) || *hold.placement == *step.source)
                    && hold.ended.is_empty()
            });
            if !same {
                return Err(texts::mover_changed(step.allocation));
            }
        }
        let moved: Vec<HoldId> = plan.moves.iter().map(|step| step.allocation).collect();
        let (mut freed, mut returned) = self.check_victims(&moved, |hold| {
            hold.terms.movable && hold.terms.priority <= priority && hold.pod_resources.is_empty()
        })?;
        let (evicted_freed, evicted_returned) = self.check_victims(&plan.evictions, |hold| {
            hold.terms.preemptible && hold.terms.priority < priority
        })?;
        for (node, gpus) in evicted_freed {
            *freed.entry(node).or_default() |= gpus;
        }
        for (who, gpus) in evicted_returned {
            *returned.entry(who).or_default() += gpus;
        }
        // The movers' and evicted jobs' shares are given back; a GPU whose shares all are is
        // free (docs/preemption.md D5).
        let leaving: Vec<HoldId> = moved.iter().chain(&plan.evictions).copied().collect();
        let given_back = self.shares_given_back(&leaving);
        let freed = self.freed_whole(freed, &given_back);
        // Shares hold no whole GPU: each pod's GPU needs room, the movers' GPUs counted free,
        // and no move may take a GPU the gang shares (docs/preemption.md D5).
        let (gang, shared) = match plan.placement.gpu_milli {
            Some(milli) => {
                self.check_shares_after(&plan.placement, milli, &freed, &given_back, None)?;
                (Vec::new(), self.shared_gpus(&plan.placement)?)
            }
            None => (self.check_target(&plan.placement, &freed)?, Vec::new()),
        };
        // Movers ask no resources: the gang's must be free now (docs/resources.md "Node resources").
        self.check_target_resources(&plan.request, &plan.placement, &plan.evictions)?;
        let mut taken: HashMap<NodeId, GpuSet> = HashMap::new();
        let mut targets = Vec::with_capacity(plan.moves.len());
        claim(&mut taken, &gang)?;
        claim(&mut taken, &shared)?;
        // A fractional move's GPUs may be shared with other fractional moves, never taken
        // whole by another target.
        let mut shared_by_moves: HashMap<NodeId, GpuSet> = HashMap::new();
        let mut earlier = TakenShares::new();
        for step in &plan.moves {
            let held = match step.target.gpu_milli {
                None => self.check_target(&step.target, &freed)?,
                Some(milli) => {
                    let room = (&freed, &given_back, Some(&mut earlier));
                    self.check_shares_after(&step.target, milli, room.0, room.1, room.2)?;
                    let gpus = self.shared_gpus(&step.target)?;
                    refuse_overlap(&taken, &gpus)?;
                    for (node, set) in gpus {
                        *shared_by_moves.entry(node).or_default() |= set;
                    }
                    Vec::new()
                }
            };
            refuse_overlap(&shared_by_moves, &held)?;
            claim(&mut taken, &held)?;
            targets.push(held);
        }
        let own = returned.get(&owner.map(Arc::from)).copied().unwrap_or(0);
        self.check_cap_after(owner, held_gpus(&gang), own)?;
        let moved_holds: Vec<Hold> = moved
            .iter()
            .map(|&id| self.ledger.live(id).cloned())
            .collect::<Option<_>>()
            .ok_or_else(|| internal("a moved allocation vanished"))?;
        let ids = self.new_ids(1 + plan.moves.len())?;
        let mut changes = Changes::new();
        for &id in &moved {
            let (states, ledger) = (&mut self.states, &mut self.ledger);
            ledger.end(states, &mut changes, id, Ending::Migrated);
        }
        for &id in &plan.evictions {
            let (states, ledger) = (&mut self.states, &mut self.ledger);
            ledger.end(states, &mut changes, id, Ending::Preempted);
        }
        let (request, roles) = match &plan.request {
            AnyRequest::Gang(request) => (Some(Arc::clone(request)), None),
            AnyRequest::Roles(request) => (None, Some(Arc::clone(request))),
        };
        let new = NewHold {
            placement: Arc::clone(&plan.placement),
            expires_at: now + ttl,
            owner,
            terms,
            since: now,
            request,
            roles,
            pod_resources: None,
        };
        let reservation = self.hold_into(&mut changes, ids[0], gang, new);
        let mut replaced = Vec::with_capacity(plan.moves.len());
        let steps = plan
            .moves
            .iter()
            .zip(targets)
            .zip(moved_holds)
            .zip(&ids[1..]);
        for (((step, held), old), &id) in steps {
            let new = NewHold {
                placement: Arc::clone(&step.target),
                expires_at: now + ttl,
                owner: old.owner.as_deref(),
                terms: old.terms,
                since: now,
                request: old.request.clone(),
                roles: old.roles.clone(),
                pod_resources: None,
            };
            let moved_to = self.hold_into(&mut changes, id, held, new);
            replaced.push((step.allocation, moved_to));
        }
        self.apply(&changes);
        Ok((reservation, replaced))
    }
}

/// D2's outcome for a set: each moved member (an index into the candidates) with its new
/// plan, and the members evicted instead.
pub(crate) type Relocation = (Vec<(usize, Plan)>, Vec<usize>);

/// D3's key: moves, moved GPUs, evictions, path.
type DefragKey = (usize, u64, usize, Vec<String>);

/// Records `held` as taken, refusing a GPU two targets of one plan take.
impl Engine {
    /// The GPUs a fractional placement's pods share, per node (a GPU several share, once).
    fn shared_gpus(&self, placement: &Placement) -> CoreResult<Vec<(NodeId, GpuSet)>> {
        let mut by_node: std::collections::BTreeMap<NodeId, GpuSet> = Default::default();
        for pod in &placement.pods {
            let node = self.pod_node(placement, &pod.node)?;
            *by_node.entry(node).or_default() |= pod.gpus;
        }
        Ok(by_node.into_iter().collect())
    }
}

/// `world` with the free GPUs earlier moves took shares on counted free again (a
/// fractional search reads their room from the shares).
fn with_started(world: &World, started: &std::collections::BTreeSet<(NodeId, u32)>) -> World {
    let mut shared = world.clone();
    for &(node, gpu) in started {
        if let Some(Some(free)) = shared.get_mut(&node) {
            *free |= GpuSet::single(gpu);
        }
    }
    shared
}

/// Refuses `held` when it names a GPU of `taken`.
fn refuse_overlap(taken: &HashMap<NodeId, GpuSet>, held: &[(NodeId, GpuSet)]) -> CoreResult<()> {
    for &(node, gpus) in held {
        if taken
            .get(&node)
            .is_some_and(|already| already.intersects(gpus))
        {
            return Err(texts::targets_overlap());
        }
    }
    Ok(())
}

fn claim(taken: &mut HashMap<NodeId, GpuSet>, held: &[(NodeId, GpuSet)]) -> CoreResult<()> {
    for &(node, gpus) in held {
        let already = taken.entry(node).or_default();
        if already.intersects(gpus) {
            return Err(texts::targets_overlap());
        }
        *already |= gpus;
    }
    Ok(())
}
