//! Candidate domains of one level, one after another in rule 3's order (best-fit: fewest free
//! healthy GPUs, then the parent's, and so on up to the root, then path; first-fit: path
//! order). Multi-role gangs (docs/roles.md) try them until one holds every group;
//! a single gang only ever needs the first, which `best_fit` finds without listing.
//!
//! With an index, a level's entries are read fewest free first and each run of equal free
//! counts is ordered by ancestry; at the node level the runs are read through the deepest
//! domains, as `best_fit` does, so that a long run of equally free nodes is never sorted.

use std::cmp::Ordering;

use super::{Item, Search};
use crate::capacity::{CapacityView, FreeIndex};
use crate::config::Policy;
use crate::ids::{DomainId, ROOT};

impl<V: CapacityView> Search<'_, V> {
    /// Visits the items of `depth` with at least `need` free GPUs in rule 3's order under
    /// `policy`, until `visit` returns a value, which is returned.
    pub fn find_candidate<R>(
        &self,
        depth: usize,
        need: u64,
        policy: Policy,
        visit: &mut dyn FnMut(Item) -> Option<R>,
    ) -> Option<R> {
        let by_ancestry = policy == Policy::BestFit;
        let node_depth = self.topology.node_depth();
        match (policy, self.view.index()) {
            (Policy::FirstFit, _) => self.in_path_order(Item::Domain(ROOT), 0, depth, need, visit),
            (_, Some(index)) if depth == node_depth && by_ancestry => {
                self.nodes_by_ancestry(index, need, visit)
            }
            (_, Some(index)) => {
                let entries = index.level(depth).at_least(need);
                let items = entries.map(|(free, id)| (free, self.item_at(depth, id)));
                self.in_runs(items, by_ancestry, visit)
            }
            (_, None) => {
                let mut items = Vec::new();
                self.in_path_order(Item::Domain(ROOT), 0, depth, need, &mut |item| {
                    items.push((self.free_gpus(item), item));
                    None::<()>
                });
                items.sort_by_key(|&(free, _)| free);
                self.in_runs(items.into_iter(), by_ancestry, visit)
            }
        }
    }

    /// Depth-first in path order, entering only items with at least `need` free GPUs.
    fn in_path_order<R>(
        &self,
        item: Item,
        depth: usize,
        target: usize,
        need: u64,
        visit: &mut dyn FnMut(Item) -> Option<R>,
    ) -> Option<R> {
        if self.free_gpus(item) < need {
            return None;
        }
        if depth == target {
            return visit(item);
        }
        self.children(item)
            .find_map(|child| self.in_path_order(child, depth + 1, target, need, visit))
    }

    /// Items sorted by free GPUs (path order inside equal counts), each run of equal counts
    /// ordered by ancestry when asked.
    pub(super) fn in_runs<R>(
        &self,
        items: impl Iterator<Item = (u64, Item)>,
        by_ancestry: bool,
        visit: &mut dyn FnMut(Item) -> Option<R>,
    ) -> Option<R> {
        let mut items = items.peekable();
        let mut run: Vec<Item> = Vec::with_capacity(64);
        while let Some((free, first)) = items.next() {
            run.clear();
            run.push(first);
            while let Some(&(next_free, item)) = items.peek() {
                if next_free != free {
                    break;
                }
                run.push(item);
                items.next();
            }
            // Siblings are equal by ancestry: a run under one parent stays in path order.
            if by_ancestry && !self.share_a_parent(&run) {
                // The stable sort's first item is the first least one: found in one pass and
                // visited before the rest is sorted, since it is most often the answer (a
                // gang of pods without GPUs fits the first node it meets).
                let first = (1..run.len()).fold(0, |best, at| {
                    match self.ancestry_order(run[at], run[best]) {
                        Ordering::Less => at,
                        _ => best,
                    }
                });
                let least = run.remove(first);
                if let Some(found) = visit(least) {
                    return Some(found);
                }
                run.sort_by(|&a, &b| self.ancestry_order(a, b));
            }
            if let Some(found) = run.iter().find_map(|&item| visit(item)) {
                return Some(found);
            }
        }
        None
    }

    /// Whether every item of `run` has the same parent.
    fn share_a_parent(&self, run: &[Item]) -> bool {
        let parent = |item: Item| match item {
            Item::Node(id) => Some(self.topology.node(id).domain),
            Item::Domain(id) => self.topology.domain(id).parent,
        };
        let first = run.first().map(|&item| parent(item));
        run.iter().all(|&item| Some(parent(item)) == first)
    }

    /// The node level by ancestry: for each free count from `need` up, the deepest domains
    /// holding a node with exactly that count, in their own rule 3 order, and inside each its
    /// nodes of that count in name order.
    pub(super) fn nodes_by_ancestry<R>(
        &self,
        index: &FreeIndex,
        need: u64,
        visit: &mut dyn FnMut(Item) -> Option<R>,
    ) -> Option<R> {
        self.nodes_by_ancestry_in(index, need, &|_| true, visit)
    }

    /// The same, visiting only the deepest domains `worth` accepts (a quick test that they
    /// can hold what the visitor looks for).
    pub(super) fn nodes_by_ancestry_in<R>(
        &self,
        index: &FreeIndex,
        need: u64,
        worth: &dyn Fn(DomainId) -> bool,
        visit: &mut dyn FnMut(Item) -> Option<R>,
    ) -> Option<R> {
        let node_depth = self.topology.node_depth();
        let mut from = need;
        while let Some((free, _)) = index.level(node_depth).at_least(from).next() {
            let first = from == need;
            from = free + 1;
            let Ok(count) = u32::try_from(free) else {
                return None;
            };
            if first
                && node_depth >= 2
                && let Some(found) = self.first_deepest_pick(index, count, worth, visit)
            {
                return Some(found);
            }
            let parents = index.level(node_depth - 1).at_least(free);
            let parents = parents
                .filter(|&(_, id)| self.has_node_with_free(id, count))
                .map(|(parent_free, id)| (parent_free, Item::Domain(id)));
            let found = self.in_runs(parents, true, &mut |parent| {
                let Item::Domain(parent) = parent else {
                    return None;
                };
                if !worth(parent) {
                    return None;
                }
                self.first_node_with(parent, count, visit)
            });
            if found.is_some() {
                return found;
            }
        }
        None
    }

    /// The walk above's first deepest domain, when the tie memo names it, and its first node
    /// that `visit` accepts among its nodes with `count` free GPUs (the walk's first count),
    /// when it has one.
    ///
    /// The walk's first run is the deepest domains with the fewest free GPUs (at least
    /// `count`) holding such a node, in rule 3's order; the memo's pick among all the deepest
    /// domains with those free GPUs, when it holds such a node, comes first in that run (a
    /// gang of pods without GPUs, which every node's count admits, then costs a few reads
    /// instead of a sort of every run of equally free racks). `None`: the walk decides.
    fn first_deepest_pick<R>(
        &self,
        index: &FreeIndex,
        count: u32,
        worth: &dyn Fn(DomainId) -> bool,
        visit: &mut dyn FnMut(Item) -> Option<R>,
    ) -> Option<R> {
        let node_depth = self.topology.node_depth();
        let (least, _) = index
            .level(node_depth - 1)
            .at_least(u64::from(count))
            .next()?;
        let pick = self.tied_domain(index, ROOT, node_depth - 1, least)?;
        if !self.has_node_with_free(pick, count) || !worth(pick) {
            return None;
        }
        self.first_node_with(pick, count, visit)
    }

    /// The first node of `domain` (in name order) with exactly `count` free GPUs that
    /// `visit` accepts.
    fn first_node_with<R>(
        &self,
        domain: DomainId,
        count: u32,
        visit: &mut dyn FnMut(Item) -> Option<R>,
    ) -> Option<R> {
        let nodes = &self.topology.domain(domain).child_nodes;
        nodes
            .iter()
            .filter(|&&node| {
                let free = self.view.node_free(node);
                free.is_some_and(|gpus| gpus.count() == count)
            })
            .find_map(|&node| visit(Item::Node(node)))
    }
}
