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
//! Ranks are positions in path order at each depth, assigned when the topology is settled
//! after nodes were added or removed (the index is rebuilt then); between such changes the
//! entries move incrementally, one B-tree update per changed domain or node.

use std::collections::{BTreeSet, HashMap};

use crate::topology::{DomainId, NodeId};

/// The entries of one level.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LevelIndex {
    by_free: BTreeSet<(u64, u32)>,
    /// Rank -> domain or node id at this level.
    ids: Vec<u32>,
}

impl LevelIndex {
    /// Ids at this level with at least `free` free GPUs, fewest first, then in path order.
    pub fn at_least(&self, free: u64) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.by_free
            .range((free, 0)..)
            .map(|&(free, rank)| (free, self.ids[rank as usize]))
    }

    /// The most free GPUs of any entry (0 when empty).
    pub fn most_free(&self) -> u64 {
        self.by_free.last().map_or(0, |&(free, _)| free)
    }

    fn push(&mut self, free: Option<u64>) -> u32 {
        let rank = u32::try_from(self.ids.len()).unwrap_or(u32::MAX);
        if let Some(free) = free {
            self.by_free.insert((free, rank));
        }
        rank
    }

    fn moved(&mut self, rank: u32, before: Option<u64>, after: Option<u64>) {
        if before == after {
            return;
        }
        if let Some(free) = before {
            self.by_free.remove(&(free, rank));
        }
        if let Some(free) = after {
            self.by_free.insert((free, rank));
        }
    }
}

/// The indexes of every level, and the rank of every domain and node.
#[derive(Debug, Default, Clone)]
pub struct FreeIndex {
    levels: Vec<LevelIndex>,
    domain_rank: Vec<u32>,
    node_rank: Vec<u32>,
    /// Set when nodes or domains were added or removed: ranks are stale until rebuilt.
    stale: bool,
    /// During a batch: domain -> (depth, free before the batch, free now). A mutation that
    /// touches many nodes moves each domain's entry once, at the end, instead of once per
    /// node (no search runs in between).
    pending: Option<HashMap<DomainId, PendingMove>>,
}

/// A deferred domain move: (depth, free before the batch, free now).
type PendingMove = (usize, Option<u64>, Option<u64>);

/// Equal when the entries and ranks are (a pending batch is not part of the value).
impl PartialEq for FreeIndex {
    fn eq(&self, other: &Self) -> bool {
        self.levels == other.levels
            && self.domain_rank == other.domain_rank
            && self.node_rank == other.node_rank
            && self.stale == other.stale
    }
}

impl Eq for FreeIndex {}

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

    /// Marks the index for a rebuild at the next settle.
    pub fn invalidate(&mut self) {
        self.stale = true;
    }

    /// Starts a rebuild for `depths` levels and arenas of the given sizes.
    pub fn begin_rebuild(&mut self, depths: usize, domains: usize, nodes: usize) {
        self.levels = vec![LevelIndex::default(); depths];
        self.domain_rank = vec![u32::MAX; domains];
        self.node_rank = vec![u32::MAX; nodes];
        self.stale = false;
    }

    /// Appends the next domain of `depth` in path order.
    pub fn push_domain(&mut self, depth: usize, id: DomainId, free: Option<u64>) {
        let level = &mut self.levels[depth];
        let rank = level.push(free);
        level.ids.push(id);
        self.domain_rank[id as usize] = rank;
    }

    /// Appends the next node in path order; `free` is `None` for a cordoned node.
    pub fn push_node(&mut self, depth: usize, id: NodeId, free: Option<u64>) {
        let level = &mut self.levels[depth];
        let rank = level.push(free);
        level.ids.push(id);
        self.node_rank[id as usize] = rank;
    }

    /// Defers domain moves until [`FreeIndex::end_batch`].
    pub fn begin_batch(&mut self) {
        if !self.stale && self.pending.is_none() {
            self.pending = Some(HashMap::new());
        }
    }

    /// Applies the deferred domain moves: one per domain touched since `begin_batch`.
    pub fn end_batch(&mut self) {
        let Some(pending) = self.pending.take() else {
            return;
        };
        for (id, (depth, before, after)) in pending {
            let rank = self.domain_rank[id as usize];
            self.levels[depth].moved(rank, before, after);
        }
    }

    /// A domain's free GPUs changed (`None`: not indexed).
    pub fn domain_moved(
        &mut self,
        depth: usize,
        id: DomainId,
        before: Option<u64>,
        after: Option<u64>,
    ) {
        if let Some(pending) = &mut self.pending {
            pending.entry(id).or_insert((depth, before, after)).2 = after;
            return;
        }
        if !self.stale {
            let rank = self.domain_rank[id as usize];
            self.levels[depth].moved(rank, before, after);
        }
    }

    /// A node's free GPUs or feasibility changed (`None`: cordoned).
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

    /// A node's position in path order (for ranking pods). Only valid when not stale.
    pub fn node_rank(&self, id: NodeId) -> u32 {
        self.node_rank[id as usize]
    }
}
