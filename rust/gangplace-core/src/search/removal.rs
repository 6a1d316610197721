//! Who must make room for a gang: the removal sets of priority preemption and of
//! defragmentation, as pure computations over a capacity view (README, "Priorities,
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

use std::cmp::Ordering;
use std::collections::HashMap;

use crate::capacity::{CapacityView, Overlay};
use crate::config::Policy;
use crate::error::CoreResult;
use crate::ids::{GpuSet, HoldId, NodeId};
use crate::search::{Demand, Item, Plan, Search};

/// An allocation that may be removed, as the planner sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Its id.
    pub id: HoldId,
    /// Its priority.
    pub priority: i32,
    /// When it was committed.
    pub since: f64,
    /// GPUs it holds in total, healthy or not.
    pub held: u64,
    /// Where, in [`Candidates::freed`], its per-node healthy GPUs are (the GPUs its removal
    /// returns to the pool).
    pub freed: std::ops::Range<usize>,
}

/// The candidates of one plan, sorted by id, and their freed GPUs in one buffer (one
/// allocation for all of them, not one each).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Candidates {
    list: Vec<Candidate>,
    gpus: Vec<(NodeId, GpuSet)>,
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
        let freed = start..self.gpus.len();
        self.list.push(Candidate {
            id,
            priority,
            since,
            held,
            freed,
        });
    }

    /// Sorts the candidates by id, so that nothing depends on the order they were found in.
    pub fn sort_by_id(&mut self) {
        self.list.sort_unstable_by_key(|candidate| candidate.id);
    }

    /// The GPUs candidate `index`'s removal frees, per node.
    pub fn freed(&self, index: usize) -> &[(NodeId, GpuSet)] {
        &self.gpus[self.list[index].freed.clone()]
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

/// One candidate's GPUs on one usable node of a domain; `slot` numbers the domain's nodes.
#[derive(Debug, Clone, Copy)]
struct Entry {
    candidate: usize,
    slot: usize,
    freed: u32,
}

/// A candidate GPU set on a usable node, as the planner keeps it (in path order).
#[derive(Debug, Clone, Copy)]
struct Held {
    node: NodeId,
    candidate: usize,
    freed: u32,
}

/// The entries of one domain at one depth: a span of the planner's entries in path order.
#[derive(Debug, Clone, Copy)]
struct Span {
    item: Item,
    start: usize,
    end: usize,
}

/// The removal sets of one search (one view, one pod size).
#[derive(Debug)]
pub struct Planner<'s, 'a, V> {
    search: &'s Search<'a, V>,
    candidates: &'s Candidates,
    gpus_per_pod: u32,
    /// Every candidate GPU set on a usable node, in path order of the nodes (then
    /// candidate): the entries of any one domain, at any depth, are consecutive.
    ordered: Vec<Held>,
}

/// A domain's running capacity while its candidates are removed and restored.
struct Tally {
    gpus_per_pod: u32,
    node_free: Vec<u32>,
    extra: Vec<u32>,
    capacity: u64,
    free: u64,
}

impl Tally {
    fn pods_on(&self, slot: usize, extra: u32) -> u64 {
        u64::from((self.node_free[slot] + extra) / self.gpus_per_pod)
    }

    /// Frees (`free`) or holds again one entry's GPUs.
    fn apply(&mut self, entry: Entry, free: bool) {
        let extra = self.extra[entry.slot];
        let before = self.pods_on(entry.slot, extra);
        let after_extra = if free {
            extra + entry.freed
        } else {
            extra - entry.freed
        };
        let after = self.pods_on(entry.slot, after_extra);
        self.extra[entry.slot] = after_extra;
        self.capacity = self.capacity + after - before;
        let freed = u64::from(entry.freed);
        self.free = if free {
            self.free + freed
        } else {
            self.free - freed
        };
    }
}

/// One candidate touching a domain: its GPUs freed there and its entries (`start..end` in
/// the domain's entries sorted by candidate).
#[derive(Debug, Clone, Copy)]
struct Touching {
    candidate: usize,
    freed: u64,
    start: usize,
    end: usize,
}

impl<'s, 'a, V: CapacityView> Planner<'s, 'a, V> {
    /// A planner over `search`'s view for these candidates.
    pub fn new(search: &'s Search<'a, V>, candidates: &'s Candidates, gpus_per_pod: u32) -> Self {
        let view = search.view();
        let mut keyed: Vec<(u64, Held)> = Vec::new();
        let ranks = view.ranks();
        for candidate in 0..candidates.len() {
            for &(node, gpus) in candidates.freed(candidate) {
                if view.node_free(node).is_some() {
                    let rank = ranks.map_or(0, |ranks| u64::from(ranks.node_rank(node)));
                    let key = (rank << 32) | candidate as u64;
                    let freed = gpus.count();
                    keyed.push((
                        key,
                        Held {
                            node,
                            candidate,
                            freed,
                        },
                    ));
                }
            }
        }
        match ranks {
            Some(_) => keyed.sort_unstable_by_key(|&(key, _)| key),
            None => keyed.sort_by_cached_key(|&(_, held)| {
                (search.item_path(Item::Node(held.node)), held.candidate)
            }),
        }
        Self {
            search,
            candidates,
            gpus_per_pod,
            ordered: keyed.into_iter().map(|(_, held)| held).collect(),
        }
    }

    /// The spans of the items of `depth` that candidates touch, in path order (the choice
    /// among them never depends on this order).
    fn spans(&self, depth: usize) -> Vec<Span> {
        let mut spans: Vec<Span> = Vec::new();
        let mut last_node = None;
        for (index, held) in self.ordered.iter().enumerate() {
            if last_node == Some(held.node) {
                if let Some(span) = spans.last_mut() {
                    span.end = index + 1;
                }
                continue;
            }
            last_node = Some(held.node);
            let item = self.search.item_of(held.node, depth);
            match spans.last_mut() {
                Some(span) if span.item == item => span.end = index + 1,
                _ => spans.push(Span {
                    item,
                    start: index,
                    end: index + 1,
                }),
            }
        }
        spans
    }

    fn node_free(&self, node: NodeId) -> u32 {
        self.search.view().node_free(node).map_or(0, GpuSet::count)
    }

    /// Pods the span's item would hold with every candidate touching it removed.
    fn capacity_with_all_removed(&self, span: &Span) -> u64 {
        let size = self.gpus_per_pod;
        let mut capacity = self.search.capacity(span.item);
        let entries = &self.ordered[span.start..span.end];
        let mut index = 0;
        while index < entries.len() {
            let node = entries[index].node;
            let mut freed = 0u32;
            while index < entries.len() && entries[index].node == node {
                freed += entries[index].freed;
                index += 1;
            }
            let free = self.node_free(node);
            capacity += u64::from((free + freed) / size) - u64::from(free / size);
        }
        capacity
    }

    /// P3-P4 at `depth`: for every item that holds `pods` with all its candidates removed,
    /// the 1-minimal set found greedily. Items in path order.
    pub fn choices(&self, depth: usize, pods: u64) -> Vec<Choice> {
        if !self.may_fit(depth, pods) {
            return Vec::new();
        }
        self.spans(depth)
            .into_iter()
            .filter(|span| self.capacity_with_all_removed(span) >= pods)
            .map(|span| self.choose(&span, pods))
            .collect()
    }

    /// Whether a domain of `depth` can hold `pods` at all (however much is removed).
    fn may_fit(&self, depth: usize, pods: u64) -> bool {
        let need = pods.saturating_mul(u64::from(self.gpus_per_pod));
        self.search
            .view()
            .largest_domain(depth)
            .is_none_or(|largest| largest >= need)
    }

    /// The largest capacity any touched item of `depth` reaches with all its candidates
    /// removed (the elastic fallback, P6).
    pub fn largest_with_all_removed(&self, depth: usize) -> u64 {
        self.spans(depth)
            .iter()
            .map(|span| self.capacity_with_all_removed(span))
            .max()
            .unwrap_or(0)
    }

    /// The span's entries with their nodes numbered, and a tally of its item.
    fn tally(&self, span: &Span) -> (Vec<Entry>, Tally) {
        let mut entries = Vec::with_capacity(span.end - span.start);
        let mut node_free: Vec<u32> = Vec::new();
        let mut last_node = None;
        for held in &self.ordered[span.start..span.end] {
            if last_node != Some(held.node) {
                last_node = Some(held.node);
                node_free.push(self.node_free(held.node));
            }
            entries.push(Entry {
                candidate: held.candidate,
                slot: node_free.len() - 1,
                freed: held.freed,
            });
        }
        let tally = Tally {
            gpus_per_pod: self.gpus_per_pod,
            extra: vec![0; node_free.len()],
            node_free,
            capacity: self.search.capacity(span.item),
            free: self.search.free_gpus(span.item),
        };
        (entries, tally)
    }

    /// P4 in one item.
    fn choose(&self, span: &Span, pods: u64) -> Choice {
        let (mut entries, mut tally) = self.tally(span);
        entries.sort_unstable_by_key(|entry| entry.candidate);
        let mut touching: Vec<Touching> = Vec::new();
        for (index, entry) in entries.iter().enumerate() {
            match touching.last_mut() {
                Some(last) if last.candidate == entry.candidate => {
                    last.freed += u64::from(entry.freed);
                    last.end = index + 1;
                }
                _ => touching.push(Touching {
                    candidate: entry.candidate,
                    freed: u64::from(entry.freed),
                    start: index,
                    end: index + 1,
                }),
            }
        }
        touching.sort_unstable_by(|a, b| self.removal_order(a, b));
        let mut removed: Vec<Touching> = Vec::new();
        for &candidate in &touching {
            if tally.capacity >= pods {
                break;
            }
            for &entry in &entries[candidate.start..candidate.end] {
                tally.apply(entry, true);
            }
            removed.push(candidate);
        }
        let mut kept = vec![true; removed.len()];
        for (slot, candidate) in removed.iter().enumerate().rev() {
            let own = &entries[candidate.start..candidate.end];
            for &entry in own {
                tally.apply(entry, false);
            }
            if tally.capacity >= pods {
                kept[slot] = false;
            } else {
                for &entry in own {
                    tally.apply(entry, true);
                }
            }
        }
        let members = removed
            .into_iter()
            .zip(kept)
            .filter_map(|(candidate, kept)| kept.then_some(candidate.candidate))
            .collect();
        Choice {
            item: span.item,
            members,
            free_after: tally.free,
        }
    }

    /// P4's order: priority ascending, then GPUs freed inside the item per GPU held in total
    /// descending, then `since` descending (least work lost), then id.
    fn removal_order(&self, a: &Touching, b: &Touching) -> Ordering {
        let (x, y) = (&self.candidates[a.candidate], &self.candidates[b.candidate]);
        removal_order((x, a.freed), (y, b.freed))
    }

    /// P5's key of a choice: (highest member priority, member count, GPUs the members hold,
    /// free healthy GPUs of the item after removal, path). Smaller is better.
    pub fn key(&self, choice: &Choice) -> RemovalKey<'a> {
        let members = choice.members.iter().map(|&m| &self.candidates[m]);
        let path = self.search.item_path(choice.item);
        removal_key(members, choice.free_after, path)
    }
}

/// P4's order between two candidates, each with the healthy GPUs it frees inside the domain:
/// priority ascending, then GPUs freed per GPU held in total descending, then `since`
/// descending (least work lost), then id.
pub fn removal_order((x, freed_x): (&Candidate, u64), (y, freed_y): (&Candidate, u64)) -> Ordering {
    // freed_x / held_x > freed_y / held_y, compared exactly by cross-multiplication.
    x.priority
        .cmp(&y.priority)
        .then_with(|| {
            let left = u128::from(freed_x) * u128::from(y.held.max(1));
            let right = u128::from(freed_y) * u128::from(x.held.max(1));
            right.cmp(&left)
        })
        .then_with(|| y.since.total_cmp(&x.since))
        .then_with(|| x.id.cmp(&y.id))
}

/// P5's key: (highest member priority, member count, GPUs the members hold, free healthy
/// GPUs of the domain after removal, path). Smaller is better.
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
    let held = members.map(|c| c.held).sum();
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
    let best = planner
        .choices(depth, pods)
        .into_iter()
        .min_by_key(|choice| planner.key(choice))?;
    let (highest, count, ..) = planner.key(&best);
    Some((count as u64, highest))
}

fn best_choice<V: CapacityView>(
    planner: &Planner<'_, '_, V>,
    search: &Search<'_, V>,
    pods: u64,
    coarsest_depth: usize,
    max_members: Option<usize>,
) -> Option<(usize, Choice)> {
    let node_depth = search.topology().node_depth();
    (coarsest_depth..=node_depth).rev().find_map(|depth| {
        planner
            .choices(depth, pods)
            .into_iter()
            .filter(|choice| max_members.is_none_or(|most| choice.members.len() <= most))
            .min_by_key(|choice| planner.key(choice))
            .map(|choice| (depth, choice))
    })
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
    let gpus_per_pod = search.gpus_per_pod();
    Search::new(search.topology(), &overlay, gpus_per_pod)
        .with_shape(search.layers(), search.split())
        .with_numa(search.numa())
        .plan_in(depth, item, pods)
}

/// A what-if state shared by several searches with different views: per node replaced,
/// its free GPUs (`None`: unusable). Applied to a view, it touches only the nodes that view
/// may use, so a selector's view keeps its members.
pub type World = HashMap<NodeId, Option<GpuSet>>;

/// The search of `demand` on `search`'s view with `world` applied.
pub fn plan_in_world<V: CapacityView>(
    search: &Search<'_, V>,
    world: &World,
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
    Search::new(search.topology(), &overlay, search.gpus_per_pod())
        .with_shape(search.layers(), search.split())
        .with_numa(search.numa())
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
