//! P3-P5 from a kept index instead of every candidate (docs/preemption.md "How a plan finds
//! its set"): the same choice as [`super::find`], found by visiting only the domains whose
//! lower bound could beat the best set found so far.
//!
//! Every node and domain carries a [`Summary`] of the allocations touching it that could
//! ever be candidates (committed, preemptible; whole GPUs or shares, docs/preemption.md P8):
//! the lowest (priority, thousandths held) and the most GPUs one of them holds or shares. From it and the free GPUs of the view, a lower bound
//! on P5's key (without the path) of any set chosen inside follows (see [`bound`]). The
//! levels are walked finest first as P6 asks; at one level, a best-first descent from the
//! root expands the domain of least (bound, first path rank) until that pair is not below
//! the best (key, path rank) found: each domain it reaches at the level is chosen in exactly
//! as the planner chooses (P3-P4, over the candidates touching it, gathered by the caller).
//! Bounds hold for any subset of those allocations, so exempt owners, exempt allocations, a
//! minimum runtime and priorities at or above the request's only make the descent visit
//! more, never choose differently.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::planner::ShortKey;
use super::{Candidates, Choice, Found, Planner, place_after_removal};
use crate::capacity::CapacityView;
use crate::error::CoreResult;
use crate::ids::{DomainId, NodeId, ROOT};
use crate::search::{Demand, Item, Search};
use crate::shapes::Spread;
use crate::shares::WHOLE_GPU_MILLI;
use crate::topology::Topology;

/// The allocations touching a node or domain that could be candidates of preemption, summed
/// up: `lowest`, the least (priority, thousandths of GPUs held in total); `most_held`, the
/// most GPUs one holds or shares in total (0: none); `shares`, whether one is fractional.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// The least (priority, thousandths held) among them.
    pub lowest: (i32, u64),
    /// The most GPUs one of them holds or shares in total (the most its removal frees).
    pub most_held: u64,
    /// Whether one of them holds shares (its removal may free a GPU whole while holding
    /// less than a whole GPU of it).
    pub shares: bool,
}

impl Default for Summary {
    fn default() -> Self {
        Self {
            lowest: (i32::MAX, u64::MAX),
            most_held: 0,
            shares: false,
        }
    }
}

impl Summary {
    /// The summary of both.
    pub fn with(self, other: Summary) -> Summary {
        Summary {
            lowest: self.lowest.min(other.lowest),
            most_held: self.most_held.max(other.most_held),
            shares: self.shares || other.shares,
        }
    }

    /// Adds one allocation of `priority` holding `held_milli` thousandths over `reach` GPUs
    /// (`shares`: a fractional one).
    pub fn add(&mut self, priority: i32, (held_milli, reach): (u64, u64), shares: bool) {
        *self = self.with(Summary {
            lowest: (priority, held_milli),
            most_held: reach,
            shares,
        });
    }
}

/// The kept summaries, per node and per domain.
pub trait Summaries {
    /// A node's.
    fn node(&self, node: NodeId) -> Summary;
    /// A domain's: of every node under it.
    fn domain(&self, domain: DomainId) -> Summary;
    /// The fewest of the summed allocations of a priority below `below` whose GPUs inside
    /// `item` (not in total) reach `lacking`; `None` when all of them together do not.
    fn fewest_reaching(&self, item: Item, lacking: u64, below: i32) -> Option<u64>;
    /// How many of the summed allocations of a priority below `below` touch `item` (at
    /// least its candidates).
    fn touching(&self, item: Item, below: i32) -> usize;
}

/// What the descent answers: not applicable (the caller plans over every candidate), or the
/// search's answer, with the candidates its members index.
#[derive(Debug)]
pub enum Descent {
    /// The view has no path ranks, the gang is split or balanced, or some domain holds it
    /// already (the bounds would not hold); or the bounds prune too little and the descent
    /// read more candidates than its budget (reading every candidate once is cheaper).
    NotApplicable,
    /// No level has a set.
    NoneFound,
    /// The set found, and the candidates of its domain.
    Found(Box<Candidates>, Found),
}

/// A lower bound on P5's short key of any set chosen in an item whose candidates are summed
/// up by `summary`, for a gang of `need` GPUs where the item has `free_now` (no item holds
/// the gang as it is). At least one member, and at least `fewest`; its members free at least
/// the GPUs missing, each at most `most_held`, so (without shares) together they hold at
/// least that many; if its highest priority is the lowest one, every member has it and holds
/// at least the least thousandths held at it; the free GPUs after are at least those now and
/// those the gang needs. Held amounts are in thousandths, as P5's key counts them
/// (docs/preemption.md P8); a share may free a whole GPU while holding less of it.
fn bound(summary: Summary, need: u64, free_now: u64, fewest: u64) -> ShortKey {
    let lacking = need.saturating_sub(free_now);
    let members = lacking
        .div_ceil(summary.most_held.max(1))
        .max(fewest)
        .max(1);
    let (priority, least_held) = summary.lowest;
    let held = least_held.saturating_mul(members);
    let held = match summary.shares {
        true => held,
        false => held.max(lacking.saturating_mul(WHOLE_GPU_MILLI)),
    };
    let members = usize::try_from(members).unwrap_or(usize::MAX);
    (priority, members, held, need.max(free_now))
}

/// The rank of the first node or domain of `depth` under `item` in path order (none when
/// the item has nothing under it): children are sorted by name, so the first child with
/// something under it holds it.
fn first_rank<V: CapacityView>(search: &Search<'_, V>, item: Item, depth: usize) -> Option<u32> {
    let ranks = search.view().ranks()?;
    match item {
        Item::Node(node) => Some(ranks.node_rank(node)),
        Item::Domain(id) if search.topology().domain(id).depth == depth => {
            Some(ranks.domain_rank(id))
        }
        Item::Domain(id) => {
            children(search.topology(), id).find_map(|child| first_rank(search, child, depth))
        }
    }
}

/// The children of domain `id`, in path order.
fn children(topology: &Topology, id: DomainId) -> impl Iterator<Item = Item> + '_ {
    let domain = topology.domain(id);
    let domains = (domain.child_domains.iter()).map(|&child| Item::Domain(child));
    domains.chain(domain.child_nodes.iter().map(|&node| Item::Node(node)))
}

/// The descent's state at one level: the frontier and the budget left.
struct Level<'s, 'a, V> {
    search: &'s Search<'a, V>,
    summaries: &'s dyn Summaries,
    priority: i32,
    need: u64,
    depth: usize,
    frontier: BinaryHeap<Reverse<(ShortKey, u32, Item)>>,
    /// Candidates still allowed to be gathered.
    budget: usize,
}

/// The budget ran out.
struct GaveUp;

impl<V: CapacityView> Level<'_, '_, V> {
    /// Puts `item` on the frontier, unless nothing under it could be a candidate or beat
    /// the best (key, path rank) found so far.
    fn push(&mut self, item: Item, best: Option<(ShortKey, u32)>) {
        let summary = match item {
            Item::Node(node) => self.summaries.node(node),
            Item::Domain(id) => self.summaries.domain(id),
        };
        if summary.most_held == 0 || summary.lowest.0 >= self.priority {
            return;
        }
        let Some(rank) = first_rank(self.search, item, self.depth) else {
            return;
        };
        let free_now = self.search.free_gpus(item);
        // An item of the level is bounded by the GPUs each allocation has inside it; one
        // whose allocations cannot free the GPUs missing even all together is left out.
        let at_level = self.at_level(item);
        let fewest = match at_level {
            true => {
                let lacking = self.need.saturating_sub(free_now);
                let fewest = self.summaries.fewest_reaching(item, lacking, self.priority);
                let Some(fewest) = fewest else {
                    return;
                };
                fewest
            }
            false => 0,
        };
        let mut key = bound(summary, self.need, free_now, fewest);
        if !at_level {
            // A domain of the level below it may have fewer free GPUs than it (more missing:
            // the other bounds still hold), and then as few free GPUs after as the gang needs.
            key.3 = self.need;
        }
        if best.is_none_or(|best| (key, rank) < best) {
            self.frontier.push(Reverse((key, rank, item)));
        }
    }

    /// The best set of this level (P5: least short key, then path), with its candidates.
    fn best(
        &mut self,
        gather: &mut dyn FnMut(Item) -> Candidates,
        pods: u64,
        max_members: Option<usize>,
    ) -> Result<Option<(Candidates, Choice)>, GaveUp> {
        let mut best: Option<((ShortKey, u32), Candidates, Choice)> = None;
        self.push(Item::Domain(ROOT), None);
        while let Some(Reverse((key, rank, item))) = self.frontier.pop() {
            if best
                .as_ref()
                .is_some_and(|(found, ..)| (key, rank) >= *found)
            {
                break;
            }
            if let Item::Domain(id) = item
                && !self.at_level(item)
            {
                for child in children(self.search.topology(), id) {
                    self.push(child, best.as_ref().map(|(found, ..)| *found));
                }
                continue;
            }
            // Known before reading them: give up without paying for them.
            if self.summaries.touching(item, self.priority) > self.budget {
                return Err(GaveUp);
            }
            let candidates = gather(item);
            self.budget = self.budget.checked_sub(candidates.len()).ok_or(GaveUp)?;
            let planner = Planner::new(self.search, &candidates, self.search.gpus_per_pod());
            let Some((key, choice)) = planner.choice_in(self.depth, item, pods) else {
                continue;
            };
            if max_members.is_some_and(|most| choice.members.len() > most) {
                continue;
            }
            if best.as_ref().is_none_or(|(found, ..)| (key, rank) < *found) {
                best = Some(((key, rank), candidates, choice));
            }
        }
        Ok(best.map(|(_, candidates, choice)| (candidates, choice)))
    }

    /// Whether `item` is of the level searched.
    fn at_level(&self, item: Item) -> bool {
        match item {
            Item::Node(_) => true,
            Item::Domain(id) => self.search.topology().domain(id).depth == self.depth,
        }
    }
}

/// Whether no domain of the coarsest level holds the gang as it is (so none below does):
/// read from the index when no domain there has the GPUs (as good as always when a plan
/// must preempt), else counted.
fn holds_nowhere<V: CapacityView>(search: &Search<'_, V>, demand: &Demand) -> bool {
    let need = demand.pods.saturating_mul(u64::from(demand.gpus_per_pod));
    let index = search.view().index();
    let most_free = index.map(|index| index.level(demand.coarsest_depth).most_free());
    most_free.is_some_and(|most| most < need)
        || search.largest_capacity(demand.coarsest_depth).capacity < demand.pods
}

/// P3-P6 as [`super::find`] answers them, from the summaries: `priority` is the request's
/// (candidates rank strictly below it), `gather` lists the candidates touching an item,
/// sorted by id, as the caller's rules (P1-P2, P7) make them; past `budget` candidates
/// gathered, the descent gives up ([`Descent::NotApplicable`]).
pub fn find_by_descent<V: CapacityView>(
    search: &Search<'_, V>,
    demand: &Demand,
    (summaries, priority, budget): (&dyn Summaries, i32, usize),
    gather: &mut dyn FnMut(Item) -> Candidates,
    max_members: Option<usize>,
) -> CoreResult<Descent> {
    let applicable = search.view().ranks().is_some()
        && search.layers().is_empty()
        && search.split() == Spread::Pack
        && holds_nowhere(search, demand);
    if !applicable {
        return Ok(Descent::NotApplicable);
    }
    let pods = demand.pods;
    let node_depth = search.topology().node_depth();
    let need = pods.saturating_mul(u64::from(demand.gpus_per_pod));
    let mut budget = budget;
    for depth in (demand.coarsest_depth..=node_depth).rev() {
        if search
            .view()
            .largest_domain(depth)
            .is_some_and(|most| most < need)
        {
            continue;
        }
        let mut level = Level {
            search,
            summaries,
            priority,
            need,
            depth,
            frontier: BinaryHeap::new(),
            budget,
        };
        let Ok(best) = level.best(gather, pods, max_members) else {
            return Ok(Descent::NotApplicable);
        };
        budget = level.budget;
        if let Some((candidates, choice)) = best {
            let plan = place_after_removal(
                search,
                &candidates,
                &choice.members,
                depth,
                choice.item,
                pods,
            )?;
            let found = Found {
                depth,
                choice,
                plan,
            };
            return Ok(Descent::Found(Box::new(candidates), found));
        }
    }
    Ok(Descent::NoneFound)
}
