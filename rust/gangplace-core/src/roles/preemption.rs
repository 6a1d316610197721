//! Priority preemption for multi-role gangs (docs/preemption.md "Priorities, preemption and
//! defragmentation", rules P1-P6, and "Multi-role gangs", 7): the same rules over the whole
//! unit. Where a single gang fits a domain by a capacity count, a unit fits a domain when
//! every group and every colocation succeeds there by the placement rules (`plan_roles_in`),
//! tried on a what-if copy of the state where the removed candidates' healthy GPUs are free.
//! That fit is not monotone in free GPUs (the groups are placed greedily), so P4's
//! restoration pass is repeated until one restores nothing: the set stays 1-minimal.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Resolved, RolesPlan, group_views, order_view, plan_roles_in};
use crate::capacity::AnyView;
use crate::capacity::CapacityView;
use crate::engine::removal::Purpose;
use crate::engine::{Engine, Scratch};
use crate::error::{CoreResult, internal};
use crate::ids::{HoldId, NodeId};
use crate::model::{AnyRequest, MultiGangRequest};
use crate::model::{PreemptionPlan, RemovalLimits};
use crate::resources::Amounts;
use crate::search::removal::{Candidates, RemovalKey, removal_key};
use crate::search::{Item, Search};
use crate::shares::{WHOLE_GPU_MILLI, share_id};

/// The set chosen in one domain: members (indices into the candidates) in removal order.
pub(super) struct UnitChoice {
    pub item: Item,
    pub members: Vec<usize>,
    pub free_after: u64,
}

/// A candidate touching a domain: what it frees on its usable nodes there, in thousandths
/// (P4's order: healthy GPUs whole and shares of healthy GPUs, docs/preemption.md P8), and
/// the most GPUs that could come free there (its healthy GPUs and the GPUs it shares).
type Touching = (usize, u64, u64);

impl Engine {
    /// Which allocations to end, and where the multi-role unit then goes (rules P1-P6 over
    /// the whole unit). Changes nothing but expired reservations (and selector pools).
    pub fn plan_preemption_roles(
        &mut self,
        request: &Arc<MultiGangRequest>,
        limits: &RemovalLimits,
        now: f64,
    ) -> CoreResult<Option<PreemptionPlan>> {
        super::refuse_unsupported_roles(request, "plan_preemption")?;
        let resolved = self.prepare_roles(request, now)?;
        let unit = AnyRequest::Roles(Arc::clone(request));
        if let Some(plan) = self.plan_roles(request, &resolved)?.plan {
            return Ok(Some(PreemptionPlan {
                request: unit,
                placement: Arc::new(self.roles_placement(request, &plan)),
                victims: Vec::new(),
                victim_gpus: 0,
                max_victim_priority: None,
                chosen_victims: false,
            }));
        }
        let priority = request.terms.priority;
        let resources = request
            .groups
            .iter()
            .any(|group| !group.resources.is_empty());
        let candidates =
            self.counted_candidates(priority, limits, Purpose::Preemption, now, resources);
        let mut search = UnitSearch::new(self, request, &resolved, &candidates)?;
        let Some((choice, plan)) = search.find(limits.max_members)? else {
            return Ok(None);
        };
        let members = choice.members.iter().map(|&m| &candidates[m]);
        let mut victims: Vec<HoldId> = members.clone().map(|c| c.id).collect();
        victims.sort_unstable();
        Ok(Some(PreemptionPlan {
            request: unit,
            placement: Arc::new(self.roles_placement(request, &plan)),
            victims,
            victim_gpus: members.clone().map(|c| c.held).sum(),
            max_victim_priority: members.map(|c| c.priority).max(),
            chosen_victims: limits.only_holds.is_some(),
        }))
    }

    /// Per node id: whether some group of the unit may use it (uncordoned, its selector).
    pub(super) fn unit_nodes(&self, request: &MultiGangRequest) -> CoreResult<Vec<bool>> {
        let views = group_views(&self.capacity, &self.states, request)?;
        let slots = self.topology.nodes().map(|(id, _)| id as usize + 1).max();
        let mut usable = vec![false; slots.unwrap_or(0)];
        for (id, _) in self.topology.nodes() {
            usable[id as usize] = views.iter().any(|view| view.node_free(id).is_some());
        }
        Ok(usable)
    }
}

/// P3-P6 for one unit on a what-if copy of the state.
pub(super) struct UnitSearch<'e> {
    request: &'e MultiGangRequest,
    resolved: &'e Resolved,
    candidates: &'e Candidates,
    what_if: Scratch<'e>,
    usable: Vec<bool>,
}

impl<'e> UnitSearch<'e> {
    /// A search for `request`'s removal sets among `candidates` on a copy of `engine`'s
    /// state (the request prepared: its pools made).
    pub(super) fn new(
        engine: &'e Engine,
        request: &'e MultiGangRequest,
        resolved: &'e Resolved,
        candidates: &'e Candidates,
    ) -> CoreResult<Self> {
        Ok(Self {
            request,
            resolved,
            candidates,
            what_if: engine.scratch_copy(),
            usable: engine.unit_nodes(request)?,
        })
    }

    /// The levels tried, finest first, then the elastic retry at the coarsest: `(depth,
    /// elastic)`.
    pub(super) fn tries(
        request: &MultiGangRequest,
        resolved: &Resolved,
        node_depth: usize,
    ) -> Vec<(usize, bool)> {
        let coarsest = resolved.coarsest_depth;
        let mut tries: Vec<(usize, bool)> =
            (coarsest..=node_depth).rev().map(|d| (d, false)).collect();
        if request.is_elastic() {
            tries.push((coarsest, true));
        }
        tries
    }

    /// Every choice (P3-P4) at `depth`, each with the unit's plan once its members are
    /// removed; items in id order.
    pub(super) fn all_at(
        &mut self,
        depth: usize,
        elastic: bool,
    ) -> CoreResult<Vec<(UnitChoice, RolesPlan)>> {
        let mut found = Vec::new();
        for (item, touching) in self.touched(depth) {
            let Some(choice) = self.choose(depth, item, touching, elastic)? else {
                continue;
            };
            self.remove(&choice.members, true);
            let plan = self.fit(depth, choice.item, elastic);
            self.remove(&choice.members, false);
            let plan = plan?.ok_or_else(|| internal("a chosen set no longer fits"))?;
            found.push((choice, plan));
        }
        Ok(found)
    }

    /// The best choice (P5) at the finest level with one, then the elastic retry at the
    /// coarsest level; with the unit's plan once the choice's members are removed.
    fn find(&mut self, max_members: Option<usize>) -> CoreResult<Option<(UnitChoice, RolesPlan)>> {
        let node_depth = self.what_if.topology.node_depth();
        for (depth, elastic) in Self::tries(self.request, self.resolved, node_depth) {
            let mut best: Option<(RemovalKey<'e>, UnitChoice)> = None;
            for (item, touching) in self.touched(depth) {
                let Some(choice) = self.choose(depth, item, touching, elastic)? else {
                    continue;
                };
                if max_members.is_some_and(|most| choice.members.len() > most) {
                    continue;
                }
                let key = self.key(&choice);
                if best.as_ref().is_none_or(|(held, _)| key < *held) {
                    best = Some((key, choice));
                }
            }
            if let Some((_, choice)) = best {
                self.remove(&choice.members, true);
                let plan = self.fit(depth, choice.item, elastic);
                self.remove(&choice.members, false);
                let plan = plan?.ok_or_else(|| internal("a chosen set no longer fits"))?;
                return Ok(Some((choice, plan)));
            }
        }
        Ok(None)
    }

    /// The items of `depth` that candidates touch (a healthy GPU freed on a usable node),
    /// with those candidates by index and what each frees there; items in id order (the
    /// choice never depends on it: P5's key ends with the path).
    fn touched(&self, depth: usize) -> Vec<(Item, Vec<Touching>)> {
        let view = order_view(&self.what_if.capacity, &self.what_if.states, self.request)
            .unwrap_or_else(|_| {
                AnyView::Cluster(self.what_if.capacity.cluster_view(&self.what_if.states))
            });
        let search = Search::new(self.what_if.topology, &view, 1);
        let mut touched: BTreeMap<Item, BTreeMap<usize, (u64, u64)>> = BTreeMap::new();
        for candidate in 0..self.candidates.len() {
            let entries = self.candidates.entries(candidate);
            for (at, &(node, gpus)) in entries.zip(self.candidates.freed(candidate)) {
                // A candidate touches with healthy GPUs or, for a unit asking resources, with
                // the resources it frees there (pods without GPUs).
                let given = self
                    .candidates
                    .amounts_at(at)
                    .is_some_and(|a| !a.is_empty());
                let shares = self.candidates.shares_at(at);
                let reach = u64::from(gpus.count()) + shares.len() as u64;
                if (reach == 0 && !given) || !self.is_usable(node) {
                    continue;
                }
                let item = search.item_of(node, depth);
                let freed = touched
                    .entry(item)
                    .or_default()
                    .entry(candidate)
                    .or_default();
                let milli = shares.iter().map(|&(_, back, _)| back).sum::<u64>();
                freed.0 += u64::from(gpus.count()) * WHOLE_GPU_MILLI + milli;
                freed.1 += reach;
            }
        }
        let touched = touched.into_iter();
        let listed = |by_candidate: BTreeMap<usize, (u64, u64)>| {
            let entries = by_candidate.into_iter();
            entries
                .map(|(candidate, (milli, reach))| (candidate, milli, reach))
                .collect()
        };
        touched
            .map(|(item, by_candidate)| (item, listed(by_candidate)))
            .collect()
    }

    fn is_usable(&self, node: NodeId) -> bool {
        self.usable.get(node as usize).copied().unwrap_or(false)
    }

    /// P3 and P4 in one item: `None` unless the unit fits with every touching candidate
    /// removed; else greedy removal in P4's order until it fits, then restoration passes in
    /// reverse order of removal until one restores nothing. Leaves the copy as it found it.
    fn choose(
        &mut self,
        depth: usize,
        item: Item,
        mut touching: Vec<Touching>,
        elastic: bool,
    ) -> CoreResult<Option<UnitChoice>> {
        // Counting first: with every touching candidate removed the item must have the
        // unit's GPUs free (most items of fine levels fail here, without a what-if change).
        let need = match elastic {
            true => self.request.min_gpus(),
            false => self.request.total_gpus(),
        };
        let freed: u64 = touching.iter().map(|&(_, _, reach)| reach).sum();
        if self.free_now(item) + freed < need {
            return Ok(None);
        }
        let all: Vec<usize> = touching
            .iter()
            .map(|&(candidate, _, _)| candidate)
            .collect();
        self.remove(&all, true);
        let fits_all = self.fit(depth, item, elastic);
        self.remove(&all, false);
        if fits_all?.is_none() {
            return Ok(None);
        }
        touching.sort_unstable_by(|a, b| self.removal_order(*a, *b));
        let mut removed: Vec<usize> = Vec::new();
        for &(candidate, _, _) in &touching {
            if self.fit(depth, item, elastic)?.is_some() {
                break;
            }
            self.remove(&[candidate], true);
            removed.push(candidate);
        }
        let removed = self.restore_passes(depth, item, elastic, removed)?;
        let free_after = self.free_now(item);
        self.remove(&removed, false);
        Ok(Some(UnitChoice {
            item,
            members: removed,
            free_after,
        }))
    }

    /// P4's restorations, repeated until a pass restores nothing; the members stay removed
    /// on the copy.
    fn restore_passes(
        &mut self,
        depth: usize,
        item: Item,
        elastic: bool,
        mut removed: Vec<usize>,
    ) -> CoreResult<Vec<usize>> {
        let mut restored = true;
        while restored {
            restored = false;
            for slot in (0..removed.len()).rev() {
                let candidate = removed[slot];
                self.remove(&[candidate], false);
                if self.fit(depth, item, elastic)?.is_some() {
                    removed.remove(slot);
                    restored = true;
                } else {
                    self.remove(&[candidate], true);
                }
            }
        }
        Ok(removed)
    }

    /// Removes (`free`) or puts back candidates on the copy: their GPUs, their resources
    /// when the unit asks some (docs/resources.md "Node resources"), and their shares
    /// (docs/preemption.md P8).
    fn remove(&mut self, members: &[usize], free: bool) {
        for &member in members {
            self.what_if
                .set_allocated(self.candidates.freed(member), free);
            let given = self.candidates.freed_resources(member);
            if !given.is_empty() {
                self.what_if.give_resources(&given, free);
            }
            let shares = self.shares_of(member);
            if !shares.is_empty() {
                let given: Vec<(NodeId, &Amounts)> = shares.iter().map(|(n, a)| (*n, a)).collect();
                self.what_if.give_resources(&given, free);
            }
        }
    }

    /// Candidate `member`'s shares of healthy GPUs, per node, as the share resources they use.
    fn shares_of(&self, member: usize) -> Vec<(NodeId, Amounts)> {
        let entries = self
            .candidates
            .entries(member)
            .zip(self.candidates.freed(member));
        let with_shares = entries.filter(|&(at, _)| !self.candidates.shares_at(at).is_empty());
        with_shares
            .map(|(at, &(node, _))| {
                let shares = self.candidates.shares_at(at).iter();
                let pairs = shares
                    .map(|&(gpu, back, _)| (share_id(gpu), back))
                    .collect();
                (node, Amounts::from_pairs(pairs))
            })
            .collect()
    }

    /// The unit inside `item` on the copy as it is now.
    fn fit(&self, depth: usize, item: Item, elastic: bool) -> CoreResult<Option<RolesPlan>> {
        let state = (
            self.what_if.topology,
            &self.what_if.states,
            &self.what_if.capacity,
        );
        plan_roles_in(state, self.request, self.resolved, (depth, item), elastic)
    }

    /// Free healthy GPUs of the usable nodes inside `item` on the copy.
    fn free_now(&self, item: Item) -> u64 {
        let topology = self.what_if.topology;
        match item {
            Item::Node(id) => match self.is_usable(id) {
                true => u64::from(self.what_if.states.get(id).free().count()),
                false => 0,
            },
            Item::Domain(id) => {
                let domain = topology.domain(id);
                let nodes = domain.child_nodes.iter().map(|&node| Item::Node(node));
                let domains = domain
                    .child_domains
                    .iter()
                    .map(|&child| Item::Domain(child));
                nodes.chain(domains).map(|child| self.free_now(child)).sum()
            }
        }
    }

    /// P4's order (`crate::search::removal::removal_order`).
    fn removal_order(&self, (a, freed_a, _): Touching, (b, freed_b, _): Touching) -> Ordering {
        let (x, y) = (&self.candidates[a], &self.candidates[b]);
        crate::search::removal::removal_order((x, freed_a), (y, freed_b))
    }

    /// P5's key of a choice.
    fn key(&self, choice: &UnitChoice) -> RemovalKey<'e> {
        let members = choice.members.iter().map(|&m| &self.candidates[m]);
        let path = choice.item.path(self.what_if.topology);
        removal_key(members, choice.free_after, path)
    }
}
