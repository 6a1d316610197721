//! The planner: P3-P5 at one depth, over the candidates touching each domain (or node).
//!
//! The candidates' GPU sets on usable nodes are kept in path order of the nodes, so the
//! entries of any one domain, at any depth, are consecutive (a [`Span`]), and the spans of a
//! depth come in path order. Choosing in one domain reuses one set of buffers ([`Scratch`]),
//! so trying every touched domain of a level allocates nothing per domain. For a request
//! asking resources besides GPUs, a node's pods also count what the removals give back of
//! them (docs/resources.md "Node resources"), through the search's [`ResourceFit`].

use std::cmp::Ordering;

use super::most_held::MostHeld;
use super::tally::{Counting, Entry, SharedGpu, Slots, Tally};
use super::{Candidates, Choice, SharedBack, removal_order};
use crate::capacity::CapacityView;
use crate::ids::{GpuSet, NodeId};
use crate::resources::Amounts;
use crate::search::{Item, Search};
use crate::shares::WHOLE_GPU_MILLI;

/// A candidate GPU set on a usable node, as the planner keeps it (in path order).
#[derive(Debug, Clone, Copy)]
struct Held {
    node: NodeId,
    candidate: usize,
    freed: u32,
    at: usize,
}

/// The entries of one domain at one depth: a span of the planner's entries in path order.
#[derive(Debug, Clone, Copy)]
struct Span {
    item: Item,
    start: usize,
    end: usize,
}

/// One candidate touching a domain: its thousandths freed there and its entries (`start..end` in
/// the domain's entries sorted by candidate).
#[derive(Debug, Clone, Copy)]
struct Touching {
    candidate: usize,
    freed: u64,
    start: usize,
    end: usize,
}

/// The buffers of one domain's choice, reused from one domain to the next.
#[derive(Debug, Default)]
struct Scratch {
    entries: Vec<Entry>,
    slots: Slots,
    touching: Vec<Touching>,
    removed: Vec<Touching>,
    /// The choice's members, in removal order.
    members: Vec<usize>,
}

/// The entries in path order of their nodes (`rank`: a node's position in path order,
/// below `slots`), then in their own order (candidate order): a counting sort, linear in
/// the entries and the slots.
fn by_rank(helds: Vec<Held>, rank: impl Fn(NodeId) -> usize, slots: usize) -> Vec<Held> {
    let Some(&first) = helds.first() else {
        return helds;
    };
    let ranks: Vec<usize> = helds.iter().map(|held| rank(held.node)).collect();
    debug_assert!(
        ranks.iter().all(|&rank| rank < slots),
        "a node rank out of range"
    );
    // Where each rank's entries start, from counts shifted by one.
    let mut starts = vec![0usize; slots + 1];
    for &rank in &ranks {
        starts[rank.min(slots - 1) + 1] += 1;
    }
    for slot in 1..starts.len() {
        starts[slot] += starts[slot - 1];
    }
    let mut ordered = vec![first; helds.len()];
    for (held, rank) in helds.into_iter().zip(ranks) {
        let at = &mut starts[rank.min(slots - 1)];
        ordered[*at] = held;
        *at += 1;
    }
    ordered
}

/// P5's key without its path: (highest member priority, member count, thousandths of GPUs
/// the members hold, free healthy GPUs of the domain after removal). Smaller is better.
pub(super) type ShortKey = (i32, usize, u64, u64);

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

impl<'s, 'a, V: CapacityView> Planner<'s, 'a, V> {
    /// A planner over `search`'s view for these candidates.
    pub fn new(search: &'s Search<'a, V>, candidates: &'s Candidates, gpus_per_pod: u32) -> Self {
        let view = search.view();
        let mut helds: Vec<Held> = Vec::new();
        for candidate in 0..candidates.len() {
            let entries = candidates.entries(candidate);
            for (at, &(node, gpus)) in entries.zip(candidates.freed(candidate)) {
                if view.node_free(node).is_some() {
                    let freed = gpus.count();
                    helds.push(Held {
                        node,
                        candidate,
                        freed,
                        at,
                    });
                }
            }
        }
        let slots = search.topology().node_slots();
        let ordered = match view.ranks() {
            // A few entries (one domain's, docs/preemption.md "How a plan finds its set"):
            // a comparison sort, not a count over every node slot.
            Some(ranks) if helds.len() < slots / 16 => {
                helds.sort_unstable_by_key(|held| (ranks.node_rank(held.node), held.candidate));
                helds
            }
            Some(ranks) => by_rank(helds, |node| ranks.node_rank(node) as usize, slots),
            None => {
                helds.sort_by_cached_key(|held| {
                    (search.item_path(Item::Node(held.node)), held.candidate)
                });
                helds
            }
        };
        Self {
            search,
            candidates,
            gpus_per_pod,
            ordered,
        }
    }

    /// The spans of the items of `depth` that candidates touch, in path order.
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
        debug_assert!(
            spans.windows(2).all(|pair| {
                self.search.item_path(pair[0].item) < self.search.item_path(pair[1].item)
            }),
            "spans out of path order"
        );
        spans
    }

    fn node_free(&self, node: NodeId) -> u32 {
        self.search.view().node_free(node).map_or(0, GpuSet::count)
    }

    /// How this search counts a node's pods.
    fn counting(&self) -> Counting<'a> {
        Counting {
            gpus_per_pod: self.gpus_per_pod,
            fit: self.search.fit(),
            share: self.search.share,
        }
    }

    /// The pods of a fractional gang node `node` holds now (0 for whole GPUs: unused).
    fn shares_now(&self, node: NodeId) -> u64 {
        let free = self.search.view().node_free(node);
        (self.search.share.as_ref()).map_or(0, |share| share.pods(node, free.unwrap_or_default()))
    }

    /// The fewest free GPUs a domain holding `pods` needs: none known for shares, which
    /// partly used GPUs also hold (docs/preemption.md P8).
    fn need_gpus(&self, pods: u64) -> u64 {
        match self.search.share {
            Some(_) => 0,
            None => pods.saturating_mul(u64::from(self.gpus_per_pod)),
        }
    }

    /// Pods the span's item would hold with every candidate touching it removed.
    fn capacity_with_all_removed(&self, span: &Span) -> u64 {
        let counting = self.counting();
        let mut capacity = self.search.capacity(span.item);
        let entries = &self.ordered[span.start..span.end];
        let any_shares = self.candidates.any_shares();
        let mut index = 0;
        while index < entries.len() {
            let node = entries[index].node;
            let mut freed = 0u32;
            let mut amounts: Option<Amounts> = None;
            let mut shared: Vec<SharedGpu> = Vec::new();
            while index < entries.len() && entries[index].node == node {
                freed += entries[index].freed;
                if let Some(more) = self.candidates.amounts_at(entries[index].at) {
                    amounts = Some(amounts.unwrap_or_default().plus(more));
                }
                if any_shares {
                    give_back(&mut shared, self.candidates.shares_at(entries[index].at));
                }
                index += 1;
            }
            let (free, now) = (self.node_free(node), self.shares_now(node));
            let before = counting.pods(node, (free, 0), now, None);
            let shared = (now, &shared[..]);
            capacity +=
                counting.pods_with_shares(node, (free, freed), shared, amounts.as_ref()) - before;
        }
        capacity
    }

    /// The spans of `depth` that would hold `pods` with all their candidates removed (P3),
    /// in path order; none when no domain of `depth` is large enough.
    fn feasible(&self, depth: usize, pods: u64) -> impl Iterator<Item = Span> + '_ {
        let spans = match self.may_fit(depth, pods) {
            true => self.spans(depth),
            false => Vec::new(),
        };
        spans
            .into_iter()
            .filter(move |span| self.capacity_with_all_removed(span) >= pods)
    }

    /// P3-P4 at `depth`: for every item that holds `pods` with all its candidates removed,
    /// the 1-minimal set found greedily. Items in path order.
    pub fn choices(&self, depth: usize, pods: u64) -> Vec<Choice> {
        let mut scratch = Scratch::default();
        self.feasible(depth, pods)
            .map(|span| {
                let free_after = self.choose(&span, pods, &mut scratch);
                Choice {
                    item: span.item,
                    members: scratch.members.clone(),
                    free_after,
                }
            })
            .collect()
    }

    /// P3-P5 at `depth`: the best of [`Planner::choices`] by P5's key, among those with at
    /// most `max_members` members. The spans come in path order, so the first of equal
    /// short keys has the smallest path, P5's last tie-break: no path is built. A domain
    /// whose key cannot be below the best so far ([`Planner::lower_bound`]) is skipped.
    pub fn best(&self, depth: usize, pods: u64, max_members: Option<usize>) -> Option<Choice> {
        if !self.may_fit(depth, pods) {
            return None;
        }
        let mut scratch = Scratch::default();
        let mut best: Option<(ShortKey, Choice)> = None;
        for span in self.spans(depth) {
            if let Some((best_key, _)) = &best
                && self.lower_bound(&span, pods) >= Some(*best_key)
            {
                continue;
            }
            if self.capacity_with_all_removed(&span) < pods {
                continue;
            }
            let free_after = self.choose(&span, pods, &mut scratch);
            let members = &scratch.members;
            if max_members.is_some_and(|most| members.len() > most) {
                continue;
            }
            let key = self.short_key(members, free_after);
            if best.as_ref().is_none_or(|(best_key, _)| key < *best_key) {
                let choice = Choice {
                    item: span.item,
                    members: members.clone(),
                    free_after,
                };
                best = Some((key, choice));
            }
        }
        best.map(|(_, choice)| choice)
    }

    /// P3-P4 in `item` alone (an item of `depth`), with P5's short key: `None` when no
    /// candidate touches it or it would not hold `pods` with all of them removed. Only the
    /// candidates touching `item` matter, so a planner over just those answers as one over
    /// every candidate would.
    pub(super) fn choice_in(
        &self,
        depth: usize,
        item: Item,
        pods: u64,
    ) -> Option<(ShortKey, Choice)> {
        let span = self
            .spans(depth)
            .into_iter()
            .find(|span| span.item == item)?;
        if self.capacity_with_all_removed(&span) < pods {
            return None;
        }
        let mut scratch = Scratch::default();
        let free_after = self.choose(&span, pods, &mut scratch);
        let key = self.short_key(&scratch.members, free_after);
        let members = scratch.members;
        Some((
            key,
            Choice {
                item,
                members,
                free_after,
            },
        ))
    }

    /// A key no choice in the span can be below (`None` when the item holds the pods
    /// already, so its choice may be empty). A choice has at least one member then, and
    /// its members free at least the GPUs the item lacks (`pods` x GPUs per pod less its
    /// free GPUs now), each at most the GPUs it holds or shares: so at least
    /// `ceil(lacking / most reached)` members. Its highest priority is at least the lowest
    /// touching one; at that priority, its thousandths held are at least that many times the
    /// fewest held by a touching candidate of that priority; the free GPUs after are at
    /// least the item's now plus the fewest one entry frees, and at least what the gang
    /// needs.
    fn lower_bound(&self, span: &Span, pods: u64) -> Option<ShortKey> {
        if self.search.capacity(span.item) >= pods {
            return None;
        }
        let (mut priority, mut held, mut freed) = (i32::MAX, u64::MAX, u32::MAX);
        let mut most = MostHeld::default();
        let mut last = usize::MAX;
        for entry in &self.ordered[span.start..span.end] {
            let candidate = &self.candidates[entry.candidate];
            match candidate.priority.cmp(&priority) {
                Ordering::Less => (priority, held) = (candidate.priority, candidate.held_milli),
                Ordering::Equal => held = held.min(candidate.held_milli),
                Ordering::Greater => {}
            }
            freed = freed.min(entry.freed);
            if entry.candidate != last {
                // A candidate on several nodes may be counted more than once: that only
                // makes the bound weaker, never wrong. A fractional one frees at most the
                // GPUs it shares (P8).
                most.add(candidate.reach);
                last = entry.candidate;
            }
        }
        let need = self.need_gpus(pods);
        let free_now = self.search.free_gpus(span.item);
        let members = most.fewest_reaching(need.saturating_sub(free_now)).max(1);
        let held = held.saturating_mul(members as u64);
        let free_after = (free_now + u64::from(freed)).max(need);
        Some((priority, members, held, free_after))
    }

    /// Whether a domain of `depth` can hold `pods` at all (however much is removed).
    fn may_fit(&self, depth: usize, pods: u64) -> bool {
        let need = self.need_gpus(pods);
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

    /// Fills the scratch with the span's entries (nodes numbered) and tallies its item.
    fn tally(&self, span: &Span, scratch: &mut Scratch) -> Tally<'a> {
        scratch.entries.clear();
        let slots = &mut scratch.slots;
        slots.nodes.clear();
        slots.node_free.clear();
        slots.shares_now.clear();
        let mut last_node = None;
        for held in &self.ordered[span.start..span.end] {
            if last_node != Some(held.node) {
                last_node = Some(held.node);
                slots.nodes.push(held.node);
                slots.node_free.push(self.node_free(held.node));
                if self.search.share.is_some() {
                    slots.shares_now.push(self.shares_now(held.node));
                }
            }
            scratch.entries.push(Entry {
                candidate: held.candidate,
                slot: slots.node_free.len() - 1,
                freed: held.freed,
                at: held.at,
            });
        }
        slots.extra.clear();
        slots.extra.resize(slots.node_free.len(), 0);
        slots.shared.iter_mut().for_each(Vec::clear);
        if self.candidates.any_shares() {
            slots.shared.resize_with(slots.node_free.len(), Vec::new);
            for entry in &scratch.entries {
                let shared = &mut slots.shared[entry.slot];
                for &(gpu, _, used) in self.candidates.shares_at(entry.at) {
                    if !shared.iter().any(|&(g, _, _)| g == gpu) {
                        shared.push((gpu, used, 0));
                    }
                }
            }
        }
        slots.extra_amounts.clear();
        let fit = self.search.fit();
        if fit.is_some() {
            slots
                .extra_amounts
                .resize(slots.node_free.len(), Amounts::none());
        }
        Tally {
            counting: self.counting(),
            capacity: self.search.capacity(span.item),
            free: self.search.free_gpus(span.item),
        }
    }

    /// P4 in one item: its members (in removal order) left in `scratch.members`; returns the
    /// item's free healthy GPUs once they are removed.
    fn choose(&self, span: &Span, pods: u64, scratch: &mut Scratch) -> u64 {
        let mut tally = self.tally(span, scratch);
        let Scratch {
            entries,
            slots,
            touching,
            removed,
            members,
        } = scratch;
        let parts = |entry: &Entry| {
            let at = entry.at;
            (
                self.candidates.amounts_at(at),
                self.candidates.shares_at(at),
            )
        };
        entries.sort_unstable_by_key(|entry| entry.candidate);
        touching.clear();
        for (index, entry) in entries.iter().enumerate() {
            let milli = self.freed_milli(entry);
            match touching.last_mut() {
                Some(last) if last.candidate == entry.candidate => {
                    last.freed += milli;
                    last.end = index + 1;
                }
                _ => touching.push(Touching {
                    candidate: entry.candidate,
                    freed: milli,
                    start: index,
                    end: index + 1,
                }),
            }
        }
        touching.sort_unstable_by(|a, b| self.removal_order(a, b));
        removed.clear();
        for &candidate in touching.iter() {
            if tally.capacity >= pods {
                break;
            }
            for entry in &entries[candidate.start..candidate.end] {
                tally.apply(slots, *entry, parts(entry), true);
            }
            removed.push(candidate);
        }
        // Restoration, last removed first: whoever can be put back without breaking the
        // fit is; the others are the members (collected backwards, then reversed).
        members.clear();
        for candidate in removed.iter().rev() {
            let own = &entries[candidate.start..candidate.end];
            for entry in own {
                tally.apply(slots, *entry, parts(entry), false);
            }
            if tally.capacity < pods {
                for entry in own {
                    tally.apply(slots, *entry, parts(entry), true);
                }
                members.push(candidate.candidate);
            }
        }
        members.reverse();
        tally.free
    }

    /// The thousandths entry `entry` frees: its healthy GPUs whole, and its shares (P8).
    fn freed_milli(&self, entry: &Entry) -> u64 {
        let shares = self.candidates.shares_at(entry.at).iter();
        u64::from(entry.freed) * WHOLE_GPU_MILLI + shares.map(|&(_, back, _)| back).sum::<u64>()
    }

    /// P4's order: priority ascending, then thousandths freed inside the item per thousandth
    /// held in total descending, then `since` descending (least work lost), then id.
    fn removal_order(&self, a: &Touching, b: &Touching) -> Ordering {
        let (x, y) = (&self.candidates[a.candidate], &self.candidates[b.candidate]);
        removal_order((x, a.freed), (y, b.freed))
    }

    /// P5's key of a set of members, without the path.
    fn short_key(&self, members: &[usize], free_after: u64) -> ShortKey {
        let members = members.iter().map(|&m| &self.candidates[m]);
        let highest = members.clone().map(|c| c.priority).max();
        let held = members.clone().map(|c| c.held_milli).sum();
        (highest.unwrap_or(i32::MIN), members.len(), held, free_after)
    }
}

/// Adds shares given back on one node to `shared` (one row per GPU).
fn give_back(shared: &mut Vec<SharedGpu>, shares: &[SharedBack]) {
    for &(gpu, back, used) in shares {
        match shared.iter_mut().find(|(g, _, _)| *g == gpu) {
            Some(row) => row.2 += back,
            None => shared.push((gpu, used, back)),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{Held, by_rank};
    use crate::ids::GpuSet;

    proptest! {
        /// The counting sort is a stable sort by node rank.
        #[test]
        fn by_rank_is_a_stable_sort_by_rank(ranks in proptest::collection::vec(0u32..20, 0..80)) {
            let helds: Vec<Held> = (ranks.iter().enumerate())
                .map(|(candidate, &node)| Held { node, candidate, freed: GpuSet::first(1).count(), at: candidate })
                .collect();
            let mut expected = helds.clone();
            expected.sort_by_key(|held| held.node);
            let ordered = by_rank(helds, |node| node as usize, 20);
            let pairs = |helds: &[Held]| helds.iter().map(|h| (h.node, h.candidate)).collect::<Vec<_>>();
            prop_assert_eq!(pairs(&ordered), pairs(&expected));
        }
    }
}
