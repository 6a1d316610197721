//! Rule 3, best-fit: the domain (or node) with the fewest free healthy GPUs that holds the
//! gang, then the one whose parent has the fewest, then the grandparent's, and so on up to
//! the root, then the smallest path.
//!
//! How it is found fast with an index: at a domain level, the entries with enough free GPUs
//! are read fewest first; the first that holds the gang fixes the least free count, and only
//! the run of entries with that same count is compared by ancestors (stopping at the first
//! common ancestor), capacity being checked only for an entry that would win. At the node
//! level every node with enough free GPUs holds the gang, so the nodes are not read one by
//! one: the deepest domains are read fewest first instead, keeping those with a node of
//! exactly the least free count (their aggregates count nodes by free GPUs), and the
//! winner's first such node in name order is taken.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use super::{Item, Search};
use crate::capacity::{CapacityView, FreeIndex};
use crate::ids::{DomainId, NodeId, ROOT};

/// Deepest domains read in rule 3's order at the node level before the remembered winners
/// take over (they cost a walk of the tree when not yet remembered, a run of 64 does not).
const RUN_BUDGET: usize = 64;

/// Equally free domains compared one by one before the remembered winner is asked
/// ([`Search::tied_domain`]). Test builds ask at once, so that every differential test runs
/// the remembered path.
const DOMAIN_RUN_BUDGET: usize = if cfg!(feature = "testing") { 1 } else { 64 };

/// The most domains a search compares when a shape's kept counts list those holding the
/// gang (`capacity::shapes`); more, and it reads the free-GPU index instead.
const HOLDING_BUDGET: usize = 64;

impl<V: CapacityView> Search<'_, V> {
    /// Best-fit through the index: per level, finest first, the least free entry that holds
    /// `pods`, ties broken by ancestors (unless `by_ancestry` is false: `best-fit-path`) then
    /// path.
    pub(super) fn best_fit_indexed(
        &self,
        index: &FreeIndex,
        pods: u64,
        coarsest_depth: usize,
        by_ancestry: bool,
    ) -> Option<(usize, Item)> {
        let need = pods * u64::from(self.gpus_per_pod);
        let node_depth = self.topology.node_depth();
        (coarsest_depth..=node_depth).rev().find_map(|depth| {
            if !self.level_may_hold(depth, pods) {
                return None;
            }
            let item = match (by_ancestry, depth == node_depth) {
                (true, true) if self.counted() => self.best_node_numa(index, need, pods),
                (true, true) => self.best_node_indexed(index, need),
                (true, false) => self.best_domain_indexed(index, depth, need, pods),
                (false, _) => index
                    .level(depth)
                    .at_least(need)
                    .map(|(_, id)| self.item_at(depth, id))
                    .find(|&item| self.holds(item, pods)),
            };
            item.map(|item| (depth, item))
        })
    }

    /// A domain level: the first entry that holds `pods` fixes the least free count; the
    /// rest of that run is compared by ancestors, and capacity is checked only for an entry
    /// that would win.
    fn best_domain_indexed(
        &self,
        index: &FreeIndex,
        depth: usize,
        need: u64,
        pods: u64,
    ) -> Option<Item> {
        if let Some(holding) = self.kept_holding(depth, pods) {
            return self.best_of_holding(index, holding);
        }
        let mut entries = index.level(depth).at_least(need);
        let (least, first) = entries.find(|&(_, id)| self.holds(Item::Domain(id), pods))?;
        let mut best = Item::Domain(first);
        let mut remembered_tried = false;
        for (read, (_, id)) in entries.take_while(|&(free, _)| free == least).enumerate() {
            if read >= DOMAIN_RUN_BUDGET && !remembered_tried {
                // A long run of equally free domains: rule 3's winner among all of them
                // (remembered per domain), which is the answer when it holds the gang.
                remembered_tried = true;
                let winner = self
                    .tied_domain(index, ROOT, depth, least)
                    .map(Item::Domain);
                if let Some(winner) = winner.filter(|&winner| self.holds(winner, pods)) {
                    return Some(winner);
                }
            }
            let item = Item::Domain(id);
            // With kept counts `holds` is one read, cheaper than the ancestry: asked first.
            let wins = match self.counts.is_some() {
                true => self.holds(item, pods) && self.ancestry_order(item, best) == Ordering::Less,
                false => {
                    self.ancestry_order(item, best) == Ordering::Less && self.holds(item, pods)
                }
            };
            if wins {
                best = item;
            }
        }
        Some(best)
    }

    /// The domains of `depth` holding `pods`, when the kept counts list them (no slices:
    /// holding then needs more than pods) and they are few enough to compare them all.
    fn kept_holding(&self, depth: usize, pods: u64) -> Option<&BTreeSet<DomainId>> {
        if !self.layers.is_empty() {
            return None;
        }
        let holding = self.counts?.holding(depth, pods)?;
        (holding.len() <= HOLDING_BUDGET).then_some(holding)
    }

    /// Rule 3's pick among `holding`, every one of which holds the gang: the fewest free
    /// GPUs, then the ancestors' (as the index scan compares a run of equally free domains),
    /// then path order.
    fn best_of_holding(&self, index: &FreeIndex, holding: &BTreeSet<DomainId>) -> Option<Item> {
        let key = |&&a: &&DomainId, &&b: &&DomainId| {
            (self.view.domain_free(a).cmp(&self.view.domain_free(b)))
                .then_with(|| self.ancestry_order(Item::Domain(a), Item::Domain(b)))
                .then_with(|| index.domain_rank(a).cmp(&index.domain_rank(b)))
        };
        holding.iter().min_by(key).copied().map(Item::Domain)
    }

    /// Among the domains of `depth` under `domain` with exactly `free` free GPUs, rule 3's
    /// pick: the one whose parent has the fewest free GPUs, then its grandparent, ... up to
    /// `domain`, then the smallest path. Built from the children's picks (remembered until a
    /// change below), entering only children with at least `free` free GPUs.
    pub(super) fn tied_domain(
        &self,
        index: &FreeIndex,
        domain: DomainId,
        depth: usize,
        free: u64,
    ) -> Option<DomainId> {
        let children = &self.topology.domain(domain).child_domains;
        if self.topology.domain(domain).depth + 1 == depth {
            let equal = |&&child: &&DomainId| self.view.domain_free(child) == free;
            return children.iter().find(equal).copied();
        }
        if let Some(known) = index.ties().domain(domain, depth, free) {
            return known;
        }
        let roomy = children
            .iter()
            .filter(|&&child| self.view.domain_free(child) >= free);
        let winner = roomy.fold(None, |best, &child| {
            let Some(found) = self.tied_domain(index, child, depth, free) else {
                return best;
            };
            match best {
                Some(best)
                    if self.ancestry_order(Item::Domain(found), Item::Domain(best))
                        != Ordering::Less =>
                {
                    Some(best)
                }
                _ => Some(found),
            }
        });
        index.ties().set_domain(domain, depth, free, winner);
        winner
    }

    /// The node level: every node with at least `need` free GPUs holds the gang, so rule 3
    /// picks among the nodes with the least such count by their ancestors. The deepest
    /// domains holding such a node are read fewest free first and their run of equally free
    /// ones compared by ancestry; past [`RUN_BUDGET`] domains read, the pick comes from the
    /// remembered winner of each domain instead (module `capacity::ties`), so a long run of
    /// equally free racks costs the same as a short one.
    fn best_node_indexed(&self, index: &FreeIndex, need: u64) -> Option<Item> {
        let node_depth = self.topology.node_depth();
        let (least, _) = index.level(node_depth).at_least(need).next()?;
        let least = u32::try_from(least).ok()?;
        let parents = index.level(node_depth - 1).at_least(u64::from(least));
        let mut best: Option<(u64, DomainId)> = None;
        for (read, (free, id)) in parents.enumerate() {
            if read >= RUN_BUDGET {
                return self.tied_winner(index, ROOT, least).map(Item::Node);
            }
            match best {
                Some((run, _)) if free != run => break,
                Some((_, other)) => {
                    let fuller = self.ancestry_order(Item::Domain(id), Item::Domain(other));
                    if fuller == Ordering::Less && self.has_node_with_free(id, least) {
                        best = Some((free, id));
                    }
                }
                None if self.has_node_with_free(id, least) => best = Some((free, id)),
                None => {}
            }
        }
        let (_, parent) = best?;
        self.first_node_with_free(parent, least).map(Item::Node)
    }

    /// Among the nodes of `domain` with exactly `free` free GPUs, rule 3's pick: the one whose
    /// parent has the fewest free GPUs, then its grandparent, ... up to `domain`, then the
    /// smallest path. Built from the children's picks (remembered until a change below), so
    /// only the children holding such a node are visited.
    pub(super) fn tied_winner(
        &self,
        index: &FreeIndex,
        domain: DomainId,
        free: u32,
    ) -> Option<NodeId> {
        if self.view.nodes_with_free(domain, free) == Some(0) {
            return None;
        }
        if let Some(known) = index.ties().get(domain, free) {
            return known;
        }
        let children = &self.topology.domain(domain).child_domains;
        let winner = match children.is_empty() {
            true => self.first_node_with_free(domain, free),
            false => children.iter().fold(None, |best, &child| {
                let Some(node) = self.tied_winner(index, child, free) else {
                    return best;
                };
                match best {
                    Some(best)
                        if self.ancestry_order(Item::Node(node), Item::Node(best))
                            != Ordering::Less =>
                    {
                        Some(best)
                    }
                    _ => Some(node),
                }
            }),
        };
        index.ties().set(domain, free, winner);
        winner
    }

    /// The node level with `numa="single"` or resources: not every node with enough free
    /// GPUs holds the gang, so the deepest domains holding a node of each free count (fewest first) are
    /// taken in rule 3's order, and the first whose nodes of that count hold it wins (its
    /// first such node in name order).
    fn best_node_numa(&self, index: &FreeIndex, need: u64, pods: u64) -> Option<Item> {
        // A deepest domain whose NUMA count (an aggregate on the cluster's view) is short of
        // the pods has no node that holds them.
        let worth = |domain: DomainId| self.holds_pods(Item::Domain(domain), pods);
        let mut visit = |node: Item| self.holds_pods(node, pods).then_some(node);
        if self.has_shares() && need == 0 {
            // Fractions (docs/resources.md "Fractions of a GPU"): of the nodes without a free GPU only
            // the shared ones can hold a pod; they come from the shares, not from a walk over
            // every full node. The nodes with a free GPU follow in the index's order.
            if let Some(found) = self.best_shared_full_node(pods) {
                return Some(found);
            }
            return self.nodes_by_ancestry_in(index, 1, &worth, &mut visit);
        }
        self.nodes_by_ancestry_in(index, need, &worth, &mut visit)
    }

    /// Whether every remembered tie winner of `index` is the one rule 3 picks now, found by
    /// reading the domain's nodes one by one (invariant checks).
    pub fn check_ties(&self, index: &FreeIndex) -> Result<(), String> {
        for (domain, free, remembered) in index.ties().current() {
            let mut nodes = Vec::new();
            let mut stack = vec![domain];
            while let Some(id) = stack.pop() {
                let current = self.topology.domain(id);
                stack.extend(current.child_domains.iter().rev());
                nodes.extend(current.child_nodes.iter().copied());
            }
            let with_free = nodes.into_iter().filter(|&node| {
                self.view
                    .node_free(node)
                    .is_some_and(|gpus| gpus.count() == free)
            });
            let fresh = with_free.fold(None, |best: Option<NodeId>, node| match best {
                Some(best)
                    if self.ancestry_order(Item::Node(node), Item::Node(best))
                        != Ordering::Less =>
                {
                    Some(best)
                }
                _ => Some(node),
            });
            if fresh != remembered {
                return Err(format!(
                    "the remembered tie winner of domain #{domain} for {free} free GPUs is stale"
                ));
            }
        }
        for (domain, depth, free, remembered) in index.ties().current_domains() {
            let mut found: Option<DomainId> = None;
            let mut stack = vec![domain];
            let mut below = Vec::new();
            while let Some(id) = stack.pop() {
                let current = self.topology.domain(id);
                if current.depth == depth {
                    below.push(id);
                } else {
                    stack.extend(current.child_domains.iter().rev());
                }
            }
            for id in below
                .into_iter()
                .filter(|&id| self.view.domain_free(id) == free)
            {
                let beats = |best: DomainId| {
                    self.ancestry_order(Item::Domain(id), Item::Domain(best)) == Ordering::Less
                };
                if found.is_none_or(beats) {
                    found = Some(id);
                }
            }
            if found != remembered {
                return Err(format!(
                    "the remembered winner of domain #{domain} at depth {depth} for {free} free \
                     GPUs is stale"
                ));
            }
        }
        Ok(())
    }

    pub(super) fn has_node_with_free(&self, domain: DomainId, free: u32) -> bool {
        match self.view.nodes_with_free(domain, free) {
            Some(count) => count > 0,
            None => self.first_node_with_free(domain, free).is_some(),
        }
    }

    /// The first usable node (in name order) of a deepest domain with exactly `free` free
    /// GPUs.
    fn first_node_with_free(&self, domain: DomainId, free: u32) -> Option<NodeId> {
        let nodes = &self.topology.domain(domain).child_nodes;
        nodes.iter().copied().find(|&node| {
            self.view
                .node_free(node)
                .is_some_and(|gpus| gpus.count() == free)
        })
    }

    /// Best-fit by walking: the domains that fit form a subtree under the root, so a
    /// breadth-first walk that enters only fitting domains finds the finest fitting level.
    /// Used for views without an index (what-if overlays, some selector views).
    pub(super) fn best_fit_walk(
        &self,
        pods: u64,
        coarsest_depth: usize,
        by_ancestry: bool,
    ) -> Option<(usize, Item)> {
        let mut fitting = vec![Item::Domain(ROOT)];
        let mut depth = 0;
        loop {
            let next: Vec<Item> = fitting
                .iter()
                .flat_map(|&item| self.children(item))
                .filter(|&child| self.holds(child, pods))
                .collect();
            if next.is_empty() {
                break;
            }
            fitting = next;
            depth += 1;
        }
        if depth < coarsest_depth {
            return None;
        }
        let best = fitting.into_iter().reduce(|best, item| {
            let order = self.free_gpus(item).cmp(&self.free_gpus(best));
            let order = match by_ancestry {
                true => order.then_with(|| self.ancestry_order(item, best)),
                false => order,
            };
            if order == Ordering::Less { item } else { best }
        })?;
        Some((depth, best))
    }

    /// Rule 3's order between two candidates of one depth past their own free GPUs: their
    /// parents' free GPUs, then their grandparents', and so on up to the root (`Less`: `a`'s
    /// ancestry is fuller). Equal from the first common ancestor up; path order breaks the
    /// remaining ties, which the callers get by visiting candidates in path order.
    pub(super) fn ancestry_order(&self, a: Item, b: Item) -> Ordering {
        let (mut above_a, mut above_b) = (self.parent(a), self.parent(b));
        while let (Some(x), Some(y)) = (above_a, above_b) {
            if x == y {
                return Ordering::Equal;
            }
            let order = self.view.domain_free(x).cmp(&self.view.domain_free(y));
            if order != Ordering::Equal {
                return order;
            }
            above_a = self.topology.domain(x).parent;
            above_b = self.topology.domain(y).parent;
        }
        Ordering::Equal
    }

    /// The item of `depth` with this id (a node at the node depth).
    pub(super) fn item_at(&self, depth: usize, id: u32) -> Item {
        if depth == self.topology.node_depth() {
            Item::Node(id)
        } else {
            Item::Domain(id)
        }
    }

    /// The domain directly above an item (`None` for the root).
    fn parent(&self, item: Item) -> Option<DomainId> {
        match item {
            Item::Node(id) => Some(self.topology.node(id).domain),
            Item::Domain(id) => self.topology.domain(id).parent,
        }
    }
}
