//! Who must make room for a gang: the removal sets of priority preemption and of
//! defragmentation, as pure computations over a capacity view (docs/preemption.md "Priorities,
//! preemption and defragmentation", rules P1-P6). Nothing here changes the cluster: the engine
//! turns a choice into a plan, and applying a plan is one re-validated mutation.
//!
//! A [`Candidate`] is an allocation that may be removed, with the healthy GPUs it would return
//! per node. At one depth, [`Planner::choices`] considers every domain (or node) that some
//! candidate touches and that would hold the gang with all the candidates touching it
//! removed (P3), and finds its set greedily (P4): candidates ordered by (priority ascending,
//! GPUs freed inside the domain per GPU held in total descending, `since` descending, id)
//! are removed one at a time until the gang fits; then, in reverse order of removal, each one
//! whose restoration keeps the fit is restored. Capacity only grows as GPUs are freed, so the
//! result is 1-minimal: restoring any single member breaks the fit.

mod descent;
mod most_held;
mod planner;
mod tally;

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

pub use descent::{Descent, Summaries, Summary, find_by_descent};
pub use planner::Planner;

use crate::capacity::{CapacityView, Overlay, TakenShares};
use crate::config::Policy;
use crate::error::CoreResult;
use crate::ids::{GpuSet, HoldId, NodeId};
use crate::resources::Amounts;
use crate::search::{Demand, Item, Plan, Search};
use crate::shares::WHOLE_GPU_MILLI;

/// An allocation that may be removed, as the planner sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Its id.
    pub id: HoldId,
    /// Its priority.
    pub priority: i32,
    /// When it was committed.
    pub since: f64,
    /// Whole GPUs it holds in total, healthy or not (none for a fractional allocation).
    pub held: u64,
    /// What it holds in thousandths of a GPU: 1,000 per whole GPU, plus its shares
    /// (docs/preemption.md P8): P4's order and P5's key count this.
    pub held_milli: u64,
    /// The GPUs it holds or has a share of: the most GPUs its removal could free (bounds).
    pub reach: u64,
    /// Where, in [`Candidates::freed`], its per-node healthy GPUs are (the GPUs its removal
    /// returns to the pool).
    pub freed: std::ops::Range<usize>,
}

/// A share a candidate gives back on one GPU of an entry's node: `(GPU, its thousandths,
/// the thousandths used on that GPU in all)`. The GPU is free again once every share on it is
/// given back (docs/preemption.md P8).
pub type SharedBack = (u32, u64, u64);

/// One node's part of a candidate: its healthy GPUs there, what it gives back of the node's
/// resources (`None`: not counted) and its shares of healthy GPUs there.
pub type NodePart = (NodeId, GpuSet, Option<Amounts>, Vec<SharedBack>);

/// The candidates of one plan, sorted by id, and their freed GPUs in one buffer (one
/// allocation for all of them, not one each); for a request asking resources besides GPUs,
/// also what each entry frees of them (docs/resources.md "Node resources"), entry by entry;
/// for fractional candidates, the shares each entry gives back.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Candidates {
    list: Vec<Candidate>,
    gpus: Vec<(NodeId, GpuSet)>,
    /// Empty, or one per entry of `gpus`: the resources that entry's node gets back.
    amounts: Vec<Amounts>,
    /// Empty (no candidate has shares), or one range into `shares` per entry of `gpus` up to
    /// the last one with shares.
    share_ranges: Vec<std::ops::Range<usize>>,
    shares: Vec<SharedBack>,
}

impl Candidates {
    /// Adds a candidate whose removal frees `freed` (per node, healthy GPUs).
    pub fn push(
        &mut self,
        id: HoldId,
        priority: i32,
        since: f64,
        held: u64,
        freed: impl Iterator<Item = (NodeId, GpuSet)>,
    ) {
        let start = self.gpus.len();
        self.gpus.extend(freed);
        self.listed(id, (priority, since, held), start);
    }

    /// Adds a candidate whose removal frees `freed` (per node: healthy GPUs, resources).
    pub fn push_with_resources(
        &mut self,
        id: HoldId,
        terms: (i32, f64, u64),
        freed: impl Iterator<Item = (NodeId, GpuSet, Amounts)>,
    ) {
        let start = self.gpus.len();
        for (node, gpus, amounts) in freed {
            self.gpus.push((node, gpus));
            self.amounts.push(amounts);
        }
        self.listed(id, terms, start);
    }

    /// Adds a candidate by its parts per node (`resources`: whether the amounts are
    /// counted), holding `held` whole GPUs and, with its shares, `held_milli` thousandths
    /// over `reach` GPUs.
    pub fn push_parts(
        &mut self,
        id: HoldId,
        (priority, since, held): (i32, f64, u64),
        (held_milli, reach): (u64, u64),
        parts: impl Iterator<Item = NodePart>,
    ) {
        let start = self.gpus.len();
        for (node, gpus, amounts, shares) in parts {
            if let Some(amounts) = amounts {
                self.amounts.push(amounts);
            }
            if !shares.is_empty() {
                let entry = self.gpus.len();
                let at = self.shares.len();
                self.share_ranges.resize(entry, at..at);
                self.shares.extend(shares);
                self.share_ranges.push(at..self.shares.len());
            }
            self.gpus.push((node, gpus));
        }
        self.listed(id, (priority, since, held), start);
        if let Some(last) = self.list.last_mut() {
            (last.held_milli, last.reach) = (held_milli, reach);
        }
    }

    /// Lists a candidate whose entries start at `start` and end at the last one pushed.
    fn listed(&mut self, id: HoldId, (priority, since, held): (i32, f64, u64), start: usize) {
        self.list.push(Candidate {
            id,
            priority,
            since,
            held,
            held_milli: held.saturating_mul(WHOLE_GPU_MILLI),
            reach: held,
            freed: start..self.gpus.len(),
        });
    }

    /// The shares entry `at` gives back (none for whole GPUs).
    pub fn shares_at(&self, at: usize) -> &[SharedBack] {
        match self.share_ranges.get(at) {
            Some(range) => &self.shares[range.clone()],
            None => &[],
        }
    }

    /// Whether any candidate gives back shares.
    pub fn any_shares(&self) -> bool {
        !self.shares.is_empty()
    }

    /// The shares the `members`' removal gives back, per `(node, GPU)`, with the thousandths
    /// used there in all.
    pub fn freed_shares(&self, members: &[usize]) -> BTreeMap<(NodeId, u32), (u64, u64)> {
        let mut by_gpu: BTreeMap<(NodeId, u32), (u64, u64)> = BTreeMap::new();
        for &member in members {
            for at in self.entries(member) {
                for &(gpu, back, used) in self.shares_at(at) {
                    let sum = by_gpu.entry((self.gpus[at].0, gpu)).or_insert((0, used));
                    sum.0 += back;
                }
            }
        }
        by_gpu
    }

    /// Sorts the candidates by id, so that nothing depends on the order they were found in.
    /// A radix sort of the ids' top 64 bits (8 passes of 8 bits), then any run of equal top
    /// bits (as good as never: ids are random) by the whole id: linear, where a comparison
    /// sort of the thousands of candidates of a full cluster cost more than the plan itself.
    pub fn sort_by_id(&mut self) {
        let top = |id: HoldId| (id.bits() >> 64) as u64;
        let mut keys: Vec<(u64, usize)> = (self.list.iter().enumerate())
            .map(|(index, candidate)| (top(candidate.id), index))
            .collect();
        let mut spare = keys.clone();
        for shift in (0..64).step_by(8) {
            let digit = |key: u64| ((key >> shift) & 0xff) as usize;
            let mut starts = [0usize; 257];
            for &(key, _) in &keys {
                starts[digit(key) + 1] += 1;
            }
            for bucket in 1..starts.len() {
                starts[bucket] += starts[bucket - 1];
            }
            for &(key, index) in &keys {
                let at = &mut starts[digit(key)];
                spare[*at] = (key, index);
                *at += 1;
            }
            std::mem::swap(&mut keys, &mut spare);
        }
        for run in keys.chunk_by_mut(|a, b| a.0 == b.0) {
            run.sort_unstable_by_key(|&(_, index)| self.list[index].id);
        }
        self.list = keys
            .iter()
            .map(|&(_, index)| self.list[index].clone())
            .collect();
    }

    /// The GPUs candidate `index`'s removal frees, per node.
    pub fn freed(&self, index: usize) -> &[(NodeId, GpuSet)] {
        &self.gpus[self.list[index].freed.clone()]
    }

    /// Where candidate `index`'s entries are (positions for [`Candidates::amounts_at`]).
    pub fn entries(&self, index: usize) -> std::ops::Range<usize> {
        self.list[index].freed.clone()
    }

    /// The resources candidate `index`'s removal gives back, per node (none when resources
    /// are not counted).
    pub fn freed_resources(&self, index: usize) -> Vec<(NodeId, &Amounts)> {
        (self.entries(index))
            .filter_map(|at| Some((self.gpus[at].0, self.amounts_at(at)?)))
            .filter(|(_, amounts)| !amounts.is_empty())
            .collect()
    }

    /// The resources entry `at` gives back (`None` when resources are not counted).
    pub fn amounts_at(&self, at: usize) -> Option<&Amounts> {
        self.amounts.get(at)
    }

    /// The resources the `members`' removal gives back, per node, sorted by node (empty when
    /// resources are not counted).
    pub fn freed_amounts(&self, members: &[usize]) -> Vec<(NodeId, Amounts)> {
        let mut by_node: BTreeMap<NodeId, Amounts> = BTreeMap::new();
        for &member in members {
            for at in self.entries(member) {
                if let Some(amounts) = self.amounts_at(at) {
                    let sum = by_node.entry(self.gpus[at].0).or_default();
                    *sum = sum.plus(amounts);
                }
            }
        }
        by_node.into_iter().collect()
    }
}

impl std::ops::Deref for Candidates {
    type Target = [Candidate];

    fn deref(&self) -> &[Candidate] {
        &self.list
    }
}

/// The set chosen in one domain at one depth.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    /// The domain (or node).
    pub item: Item,
    /// Indices into the candidates, in removal order.
    pub members: Vec<usize>,
    /// Free healthy GPUs of the domain's usable nodes once the members are removed.
    pub free_after: u64,
}

/// P4's order between two candidates, each with what it frees inside the domain (healthy
/// GPUs and shares of healthy GPUs, in thousandths): priority ascending, then thousandths
/// freed per thousandth held in total descending, then `since` descending (least work
/// lost), then id.
pub fn removal_order((x, freed_x): (&Candidate, u64), (y, freed_y): (&Candidate, u64)) -> Ordering {
    // freed_x / held_x > freed_y / held_y, compared exactly by cross-multiplication.
    x.priority
        .cmp(&y.priority)
        .then_with(|| {
            let left = u128::from(freed_x) * u128::from(y.held_milli.max(1));
            let right = u128::from(freed_y) * u128::from(x.held_milli.max(1));
            right.cmp(&left)
        })
        .then_with(|| y.since.total_cmp(&x.since))
        .then_with(|| x.id.cmp(&y.id))
}

/// P5's key: (highest member priority, member count, thousandths of GPUs the members hold,
/// free healthy GPUs of the domain after removal, path). Smaller is better.
pub type RemovalKey<'a> = (i32, usize, u64, u64, Vec<&'a str>);

/// P5's key of a set of `members` in the domain at `path`.
pub fn removal_key<'c, 'a>(
    members: impl Iterator<Item = &'c Candidate> + Clone,
    free_after: u64,
    path: Vec<&'a str>,
) -> RemovalKey<'a> {
    let highest = members
        .clone()
        .map(|c| c.priority)
        .max()
        .unwrap_or(i32::MIN);
    let count = members.clone().count();
    let held = members.map(|c| c.held_milli).sum();
    (highest, count, held, free_after, path)
}

/// A preemption found: the depth and domain, the set, and the placement it makes room for.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// Depth of the chosen level.
    pub depth: usize,
    /// The chosen domain and set.
    pub choice: Choice,
    /// The gang's placement once the set is removed (its pods may be fewer for elastic gangs).
    pub plan: Plan,
}

/// P3-P6: the first level (finest first, none coarser than the demand's) with a choice, and
/// its best choice by P5; sets larger than `max_members` are discarded. `None` when no level
/// yields one.
pub fn find<V: CapacityView>(
    search: &Search<'_, V>,
    demand: &Demand,
    candidates: &Candidates,
    max_members: Option<usize>,
) -> CoreResult<Option<Found>> {
    let planner = Planner::new(search, candidates, demand.gpus_per_pod);
    let mut pods = demand.pods;
    let mut found = best_choice(&planner, search, pods, demand.coarsest_depth, max_members);
    if found.is_none() && demand.min_pods < demand.pods {
        let base = search.largest_capacity(demand.coarsest_depth).capacity;
        let widest = base.max(planner.largest_with_all_removed(demand.coarsest_depth));
        if widest >= demand.min_pods {
            pods = widest.min(demand.pods);
            found = best_choice(&planner, search, pods, demand.coarsest_depth, max_members);
        }
    }
    let Some((depth, choice)) = found else {
        return Ok(None);
    };
    let plan = place_after_removal(
        search,
        candidates,
        &choice.members,
        depth,
        choice.item,
        pods,
    )?;
    Ok(Some(Found {
        depth,
        choice,
        plan,
    }))
}

/// The best choice (P5) at one depth alone, as (member count, highest member priority).
pub fn best_at<V: CapacityView>(
    search: &Search<'_, V>,
    candidates: &Candidates,
    depth: usize,
    pods: u64,
) -> Option<(u64, i32)> {
    let planner = Planner::new(search, candidates, search.gpus_per_pod());
    let best = planner.best(depth, pods, None)?;
    let members = best.members.iter().map(|&m| &candidates[m]);
    let highest = members.clone().map(|c| c.priority).max();
    Some((best.members.len() as u64, highest.unwrap_or(i32::MIN)))
}

fn best_choice<V: CapacityView>(
    planner: &Planner<'_, '_, V>,
    search: &Search<'_, V>,
    pods: u64,
    coarsest_depth: usize,
    max_members: Option<usize>,
) -> Option<(usize, Choice)> {
    let node_depth = search.topology().node_depth();
    (coarsest_depth..=node_depth)
        .rev()
        .find_map(|depth| Some((depth, planner.best(depth, pods, max_members)?)))
}

/// Rules 4-6 inside `item` on the state where `members` are removed.
pub fn place_after_removal<V: CapacityView>(
    search: &Search<'_, V>,
    candidates: &Candidates,
    members: &[usize],
    depth: usize,
    item: Item,
    pods: u64,
) -> CoreResult<Plan> {
    let mut overlay = Overlay::new(search.topology(), search.view(), search.gpus_per_pod());
    for &member in members {
        for &(node, gpus) in candidates.freed(member) {
            overlay.free(node, gpus);
        }
    }
    // A shared GPU whose every share is given back is free again (P8).
    let shares = candidates.freed_shares(members);
    for (&(node, gpu), &(back, used)) in &shares {
        if back >= used && search.view().node_free(node).is_some() {
            overlay.free(node, GpuSet::single(gpu));
        }
    }
    let gpus_per_pod = search.gpus_per_pod();
    // Their resources too, for a request that asks some (docs/resources.md "Node resources").
    let freed = candidates.freed_amounts(members);
    let fit = search.fit().map(|fit| fit.with_freed(&freed));
    // A fraction's pods count the victims' GPUs, freed whole, and the shares given back by
    // their room (P8).
    let given_back: TakenShares = (shares.iter())
        .map(|(&at, &(back, _))| (at, back))
        .collect();
    let share = search.share.map(|share| share.with_given_back(&given_back));
    Search::new(search.topology(), &overlay, gpus_per_pod)
        .with_shape(search.layers(), search.split())
        .with_numa(search.numa())
        .with_resources(fit)
        .with_shares(share)
        .plan_in(depth, item, pods)
}

/// A what-if state shared by several searches with different views: per node replaced,
/// its free GPUs (`None`: unusable). Applied to a view, it touches only the nodes that view
/// may use, so a selector's view keeps its members.
pub type World = HashMap<NodeId, Option<GpuSet>>;

/// The shares of a what-if [`World`] (docs/preemption.md D5): those given back (removed
/// fractional allocations) and those taken (placements made on it: a share its thousandths,
/// a whole pod all of its GPU), per `(node, GPU)`, and the GPUs free in the world on which a
/// share was taken (they count as free for further shares, their room lessened, as a
/// repair's earlier classes' shares do: docs/repair.md R7).
#[derive(Debug, Clone, Default)]
pub struct WorldShares {
    /// Thousandths given back.
    pub given_back: TakenShares,
    /// Thousandths taken.
    pub taken: TakenShares,
    /// GPUs a share was taken on while free.
    pub started: std::collections::BTreeSet<(NodeId, u32)>,
}

/// The search of `demand` on `search`'s view with `world` applied (and, for a fractional
/// demand, its shares: docs/preemption.md D5).
pub fn plan_in_world<V: CapacityView>(
    search: &Search<'_, V>,
    (world, shares): (&World, Option<&WorldShares>),
    demand: &Demand,
    policy: Policy,
) -> CoreResult<Option<Plan>> {
    let mut overlay = Overlay::new(search.topology(), search.view(), search.gpus_per_pod());
    let mut replaced: Vec<(&NodeId, &Option<GpuSet>)> = world.iter().collect();
    replaced.sort_unstable_by_key(|(node, _)| **node);
    for (&node, &free) in replaced {
        if search.view().node_free(node).is_some() {
            overlay.set_node(node, free);
        }
    }
    let share = match shares {
        Some(shares) => (search.share).map(|share| {
            share
                .with_taken(&shares.taken)
                .with_given_back(&shares.given_back)
        }),
        None => search.share,
    };
    Search::new(search.topology(), &overlay, search.gpus_per_pod())
        .with_shape(search.layers(), search.split())
        .with_numa(search.numa())
        .with_shares(share)
        .plan(demand, policy)
}

/// Every choice at `depth` (P3-P4), with its P5 key's path, for defragmentation to rank.
pub fn all_at<V: CapacityView>(
    search: &Search<'_, V>,
    candidates: &Candidates,
    depth: usize,
    pods: u64,
) -> Vec<Choice> {
    Planner::new(search, candidates, search.gpus_per_pod()).choices(depth, pods)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::Candidates;
    use crate::ids::HoldId;

    proptest! {
        /// The radix sort orders by the whole id, also when ids share their top 64 bits.
        #[test]
        fn sort_by_id_is_a_sort_by_id(
            tops in proptest::collection::vec(0u64..4, 0..60),
            lows in proptest::collection::vec(any::<u64>(), 60),
            spread in any::<bool>(),
        ) {
            let mut candidates = Candidates::default();
            for (index, &top) in tops.iter().enumerate() {
                // Few distinct top halves (runs to order by the low half), or random ones.
                let top = if spread { top.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ lows[index] } else { top };
                let id = HoldId::from_bits((u128::from(top) << 64) | u128::from(lows[index]));
                candidates.push(id, 0, 0.0, 1, std::iter::empty());
            }
            let mut expected: Vec<HoldId> = candidates.iter().map(|c| c.id).collect();
            expected.sort_unstable();
            candidates.sort_by_id();
            let sorted: Vec<HoldId> = candidates.iter().map(|c| c.id).collect();
            prop_assert_eq!(sorted, expected);
        }
    }
}
