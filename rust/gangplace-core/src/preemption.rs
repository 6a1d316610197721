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
    /// Per node it holds GPUs on, in node id order: the healthy ones, which its removal
    /// returns to the pool.
    pub freed: Vec<(NodeId, GpuSet)>,
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

/// One candidate's GPUs on one usable node of a domain.
#[derive(Debug, Clone, Copy)]
struct Entry {
    candidate: usize,
    node: NodeId,
    freed: u32,
}

/// The removal sets of one search (one view, one pod size).
#[derive(Debug)]
pub struct Planner<'s, 'a, V> {
    search: &'s Search<'a, V>,
    candidates: &'s [Candidate],
    gpus_per_pod: u32,
}

/// A domain's running capacity while its candidates are removed and restored.
struct Tally<'v, V> {
    view: &'v V,
    gpus_per_pod: u32,
    extra: HashMap<NodeId, u32>,
    capacity: u64,
    free: u64,
}

impl<V: CapacityView> Tally<'_, V> {
    fn pods_on(&self, node: NodeId, extra: u32) -> u64 {
        let free = self.view.node_free(node).map_or(0, GpuSet::count);
        u64::from((free + extra) / self.gpus_per_pod)
    }

    /// Frees (`free`) or holds again one entry's GPUs.
    fn apply(&mut self, entry: Entry, free: bool) {
        let extra = self.extra.get(&entry.node).copied().unwrap_or(0);
        let before = self.pods_on(entry.node, extra);
        let after_extra = if free {
            extra + entry.freed
        } else {
            extra - entry.freed
        };
        let after = self.pods_on(entry.node, after_extra);
        self.extra.insert(entry.node, after_extra);
        self.capacity = self.capacity + after - before;
        let freed = u64::from(entry.freed);
        self.free = if free {
            self.free + freed
        } else {
            self.free - freed
        };
    }
}

impl<'s, 'a, V: CapacityView> Planner<'s, 'a, V> {
    /// A planner over `search`'s view for these candidates.
    pub fn new(search: &'s Search<'a, V>, candidates: &'s [Candidate], gpus_per_pod: u32) -> Self {
        Self {
            search,
            candidates,
            gpus_per_pod,
        }
    }

    /// The candidates' GPUs on usable nodes, grouped by the item of `depth` holding them;
    /// items in id order (the choice among them never depends on this order).
    fn entries_by_item(&self, depth: usize) -> Vec<(Item, Vec<Entry>)> {
        let view = self.search.view();
        let mut groups: HashMap<Item, Vec<Entry>> = HashMap::new();
        for (candidate, held) in self.candidates.iter().enumerate() {
            for &(node, gpus) in &held.freed {
                if view.node_free(node).is_none() {
                    continue;
                }
                let entry = Entry {
                    candidate,
                    node,
                    freed: gpus.count(),
                };
                groups
                    .entry(self.search.item_of(node, depth))
                    .or_default()
                    .push(entry);
            }
        }
        let mut items: Vec<(Item, Vec<Entry>)> = groups.into_iter().collect();
        items.sort_unstable_by_key(|(item, _)| *item);
        items
    }

    fn tally(&self, item: Item) -> Tally<'a, V> {
        Tally {
            view: self.search.view(),
            gpus_per_pod: self.gpus_per_pod,
            extra: HashMap::new(),
            capacity: self.search.capacity(item),
            free: self.search.free_gpus(item),
        }
    }

    /// Pods `item` would hold with every candidate touching it removed.
    fn capacity_with_all_removed(&self, item: Item, entries: &[Entry]) -> u64 {
        let mut tally = self.tally(item);
        for &entry in entries {
            tally.apply(entry, true);
        }
        tally.capacity
    }

    /// P3-P4 at `depth`: for every item that holds `pods` with all its candidates removed,
    /// the 1-minimal set found greedily. Items in id order.
    pub fn choices(&self, depth: usize, pods: u64) -> Vec<Choice> {
        self.entries_by_item(depth)
            .into_iter()
            .filter(|(item, entries)| self.capacity_with_all_removed(*item, entries) >= pods)
            .map(|(item, entries)| self.choose(item, &entries, pods))
            .collect()
    }

    /// The largest capacity any touched item of `depth` reaches with all its candidates
    /// removed (the elastic fallback, P6).
    pub fn largest_with_all_removed(&self, depth: usize) -> u64 {
        self.entries_by_item(depth)
            .iter()
            .map(|(item, entries)| self.capacity_with_all_removed(*item, entries))
            .max()
            .unwrap_or(0)
    }

    /// P4 in one item.
    fn choose(&self, item: Item, entries: &[Entry], pods: u64) -> Choice {
        let mut inside: HashMap<usize, (u64, Vec<Entry>)> = HashMap::new();
        for &entry in entries {
            let slot = inside.entry(entry.candidate).or_default();
            slot.0 += u64::from(entry.freed);
            slot.1.push(entry);
        }
        let mut order: Vec<usize> = inside.keys().copied().collect();
        order.sort_unstable_by(|&a, &b| self.removal_order(a, inside[&a].0, b, inside[&b].0));
        let mut tally = self.tally(item);
        let mut removed = Vec::new();
        for &candidate in &order {
            if tally.capacity >= pods {
                break;
            }
            for &entry in &inside[&candidate].1 {
                tally.apply(entry, true);
            }
            removed.push(candidate);
        }
        let mut kept = vec![true; removed.len()];
        for (slot, &candidate) in removed.iter().enumerate().rev() {
            let own = &inside[&candidate].1;
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
            .filter_map(|(candidate, kept)| kept.then_some(candidate))
            .collect();
        Choice {
            item,
            members,
            free_after: tally.free,
        }
    }

    /// P4's order: priority ascending, then GPUs freed inside the item per GPU held in total
    /// descending, then `since` descending (least work lost), then id.
    fn removal_order(&self, a: usize, freed_a: u64, b: usize, freed_b: u64) -> Ordering {
        let (x, y) = (&self.candidates[a], &self.candidates[b]);
        // freed_a / held_a > freed_b / held_b, compared exactly by cross-multiplication.
        x.priority
            .cmp(&y.priority)
            .then_with(|| {
                let left = u128::from(freed_a) * u128::from(y.held.max(1));
                let right = u128::from(freed_b) * u128::from(x.held.max(1));
                right.cmp(&left)
            })
            .then_with(|| y.since.total_cmp(&x.since))
            .then_with(|| x.id.cmp(&y.id))
    }

    /// P5's key of a choice: (highest member priority, member count, GPUs the members hold,
    /// free healthy GPUs of the item after removal, path). Smaller is better.
    pub fn key(&self, choice: &Choice) -> (i32, usize, u64, u64, Vec<&'a str>) {
        let members = choice.members.iter().map(|&m| &self.candidates[m]);
        let highest = members
            .clone()
            .map(|c| c.priority)
            .max()
            .unwrap_or(i32::MIN);
        let held = members.map(|c| c.held).sum();
        let path = self.search.item_path(choice.item);
        (highest, choice.members.len(), held, choice.free_after, path)
    }
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
    candidates: &[Candidate],
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
    candidates: &[Candidate],
    depth: usize,
    pods: u64,
) -> Option<(u64, i32)> {
    let planner = Planner::new(search, candidates, search.gpus_per_pod());
    let best = planner
        .choices(depth, pods)
        .into_iter()
        .min_by(|a, b| planner.key(a).cmp(&planner.key(b)))?;
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
            .min_by(|a, b| planner.key(a).cmp(&planner.key(b)))
            .map(|choice| (depth, choice))
    })
}

/// Rules 4-6 inside `item` on the state where `members` are removed.
pub fn place_after_removal<V: CapacityView>(
    search: &Search<'_, V>,
    candidates: &[Candidate],
    members: &[usize],
    depth: usize,
    item: Item,
    pods: u64,
) -> CoreResult<Plan> {
    let mut overlay = Overlay::new(search.topology(), search.view());
    for &member in members {
        for &(node, gpus) in &candidates[member].freed {
            overlay.free(node, gpus);
        }
    }
    let gpus_per_pod = search.gpus_per_pod();
    Search::new(search.topology(), &overlay, gpus_per_pod).plan_in(depth, item, pods)
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
    let mut overlay = Overlay::new(search.topology(), search.view());
    let mut replaced: Vec<(&NodeId, &Option<GpuSet>)> = world.iter().collect();
    replaced.sort_unstable_by_key(|(node, _)| **node);
    for (&node, &free) in replaced {
        if search.view().node_free(node).is_some() {
            overlay.set_node(node, free);
        }
    }
    Search::new(search.topology(), &overlay, search.gpus_per_pod()).plan(demand, policy)
}

/// Every choice at `depth` (P3-P4), with its P5 key's path, for defragmentation to rank.
pub fn all_at<V: CapacityView>(
    search: &Search<'_, V>,
    candidates: &[Candidate],
    depth: usize,
    pods: u64,
) -> Vec<Choice> {
    Planner::new(search, candidates, search.gpus_per_pod()).choices(depth, pods)
}
