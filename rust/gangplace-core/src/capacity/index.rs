//! Free-GPU indexes: per level, every domain (or feasible node) ordered by
//! `(free healthy GPUs, rank in path order)`.
//!
//! Best-fit wants, at one level, the domain with the fewest free GPUs among those that can
//! hold the gang, ties broken by path. A domain that holds `pods` pods of `g` GPUs has at
//! least `pods * g` free GPUs, so the answer is the first entry at or after
//! `(pods * g, 0)` whose capacity reaches `pods`. At the node level the first such entry always
//! qualifies (a node's capacity is `floor(free / g)`), so a small gang costs one B-tree
//! descent instead of a walk over every node; at the domain levels the scan stops at the first
//! domain that fits, and a level with no domain that has enough free GPUs costs one lookup.
//!
//! Ranks are positions in path order at each depth, assigned when the index is built (after
//! nodes were added or removed); between such changes the entries move incrementally, two
//! bit operations per changed node (the node level is bucketed by free count: module
//! `buckets`) and one B-tree update per changed domain per mutation.

use std::collections::BTreeSet;

use super::buckets::{BucketEntries, Buckets};
use super::ties::TieMemo;
use crate::ids::{DomainId, NodeId};
use crate::topology::{Topology, Walked};

/// The entries of one level: a B-tree of `(free, rank)` for domains, free-count buckets for
/// nodes (module `buckets`); both read fewest free first, then in path order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entries {
    Tree(BTreeSet<(u64, u32)>),
    Buckets(Buckets),
}

impl Default for Entries {
    fn default() -> Self {
        Self::Tree(BTreeSet::new())
    }
}

/// The entries of one level.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LevelIndex {
    entries: Entries,
    /// Rank -> domain or node id at this level.
    ids: Vec<u32>,
}

/// The iterator of [`LevelIndex::at_least`].
enum AtLeast<'a> {
    Tree(std::collections::btree_set::Range<'a, (u64, u32)>),
    Buckets(BucketEntries<'a>),
}

impl Iterator for AtLeast<'_> {
    type Item = (u64, u32);

    fn next(&mut self) -> Option<(u64, u32)> {
        match self {
            Self::Tree(range) => range.next().copied(),
            Self::Buckets(entries) => entries.next(),
        }
    }
}

impl LevelIndex {
    /// The node level's index (free counts of at most 64 GPUs, bucketed).
    fn of_nodes() -> Self {
        Self {
            entries: Entries::Buckets(Buckets::default()),
            ids: Vec::new(),
        }
    }

    /// Ids at this level with at least `free` free GPUs, fewest first, then in path order.
    pub fn at_least(&self, free: u64) -> impl Iterator<Item = (u64, u32)> + '_ {
        let entries = match &self.entries {
            Entries::Tree(tree) => AtLeast::Tree(tree.range((free, 0)..)),
            Entries::Buckets(buckets) => AtLeast::Buckets(buckets.at_least(free)),
        };
        entries.map(|(free, rank)| (free, self.ids[rank as usize]))
    }

    /// Every id at this level, in path order.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// The most free GPUs of any entry (0 when empty).
    pub fn most_free(&self) -> u64 {
        match &self.entries {
            Entries::Tree(tree) => tree.last().map_or(0, |&(free, _)| free),
            Entries::Buckets(buckets) => buckets.most_free(),
        }
    }

    fn insert(&mut self, free: u64, rank: u32) {
        match &mut self.entries {
            Entries::Tree(tree) => {
                tree.insert((free, rank));
            }
            Entries::Buckets(buckets) => buckets.insert(free, rank),
        }
    }

    fn remove(&mut self, free: u64, rank: u32) {
        match &mut self.entries {
            Entries::Tree(tree) => {
                tree.remove(&(free, rank));
            }
            Entries::Buckets(buckets) => buckets.remove(free, rank),
        }
    }

    fn push(&mut self, id: u32, free: Option<u64>) -> u32 {
        let rank = u32::try_from(self.ids.len()).unwrap_or(u32::MAX);
        if let Some(free) = free {
            self.insert(free, rank);
        }
        self.ids.push(id);
        rank
    }

    fn moved(&mut self, rank: u32, before: Option<u64>, after: Option<u64>) {
        if before == after {
            return;
        }
        if let Some(free) = before {
            self.remove(free, rank);
        }
        if let Some(free) = after {
            self.insert(free, rank);
        }
    }
}

/// The indexes of every level, and the rank of every domain and node.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FreeIndex {
    levels: Vec<LevelIndex>,
    domain_rank: Vec<u32>,
    node_rank: Vec<u32>,
    /// Set when nodes or domains were added or removed: ranks are stale until rebuilt.
    stale: bool,
    /// Rule 3's winner among equally free nodes, per domain and free count (module `ties`).
    ties: TieMemo,
}

impl FreeIndex {
    /// An index waiting for its first build.
    pub fn stale() -> Self {
        Self {
            stale: true,
            ..Self::default()
        }
    }

    /// Whether ranks and entries need a rebuild (they are ignored until then).
    pub fn is_stale(&self) -> bool {
        self.stale
    }

    /// Marks the index for a rebuild.
    pub fn invalidate(&mut self) {
        self.stale = true;
    }

    /// A fresh index: the tree walked in path order, every domain and node given its rank and
    /// entered with the free GPUs the closures give (`None`: not indexed). The topology must
    /// be settled.
    pub fn build(
        topology: &Topology,
        domain_free: impl Fn(DomainId) -> Option<u64>,
        node_free: impl Fn(NodeId) -> Option<u64>,
    ) -> Self {
        let mut levels = vec![LevelIndex::default(); topology.node_depth()];
        levels.push(LevelIndex::of_nodes()); // only nodes are at the node depth
        let mut index = Self {
            levels,
            domain_rank: vec![u32::MAX; topology.domain_slots()],
            node_rank: vec![u32::MAX; topology.node_slots()],
            stale: false,
            ties: TieMemo::new(topology.domain_slots()),
        };
        topology.walk(|walked| match walked {
            Walked::Domain(depth, id) => {
                let rank = index.levels[depth].push(id, domain_free(id));
                index.domain_rank[id as usize] = rank;
            }
            Walked::Node(depth, id) => {
                let rank = index.levels[depth].push(id, node_free(id));
                index.node_rank[id as usize] = rank;
            }
        });
        index
    }

    /// A domain was touched by a mutation: its free GPUs may have changed (`None`: not
    /// indexed), and so may the free GPUs of its nodes, even with the same total.
    pub fn domain_moved(
        &mut self,
        depth: usize,
        id: DomainId,
        before: Option<u64>,
        after: Option<u64>,
    ) {
        self.ties.touch(id);
        if !self.stale {
            let rank = self.domain_rank[id as usize];
            self.levels[depth].moved(rank, before, after);
        }
    }

    /// A node's free GPUs or feasibility changed (`None`: not feasible).
    pub fn node_moved(
        &mut self,
        depth: usize,
        id: NodeId,
        before: Option<u64>,
        after: Option<u64>,
    ) {
        if !self.stale {
            let rank = self.node_rank[id as usize];
            self.levels[depth].moved(rank, before, after);
        }
    }

    /// The index of one level. Only valid when not stale.
    pub fn level(&self, depth: usize) -> &LevelIndex {
        &self.levels[depth]
    }

    /// Rule 3's remembered winners among equally free nodes (module `ties`).
    pub fn ties(&self) -> &TieMemo {
        &self.ties
    }

    /// A domain's position in path order at its depth. Only valid when not stale.
    pub fn domain_rank(&self, id: DomainId) -> u32 {
        self.domain_rank[id as usize]
    }

    /// A node's position in path order (for ranking pods). Only valid when not stale.
    pub fn node_rank(&self, id: NodeId) -> u32 {
        self.node_rank[id as usize]
    }
}
