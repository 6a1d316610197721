//! The node level's free-GPU entries: per free count, the ranks of the nodes that have it, as
//! a bitset with a summary word per 64 words.
//!
//! A node has at most 64 GPUs (`GpuSet`), so its free count is one of 65 buckets, and an
//! entry's move is two bit operations instead of a B-tree removal and insertion (issue 51:
//! those were the largest single cost of a large release and of every commit). Entries are
//! read in the same order as the B-tree gave them: fewest free GPUs first, then by rank.

/// The ranks of one free count.
#[derive(Debug, Default, Clone)]
struct RankSet {
    words: Vec<u64>,
    /// Bit `w % 64` of word `w / 64`: whether `words[w]` is not empty.
    summary: Vec<u64>,
    len: usize,
}

impl RankSet {
    fn insert(&mut self, rank: u32) {
        let word = rank as usize / 64;
        if self.words.len() <= word {
            self.words.resize(word + 1, 0);
            self.summary.resize(word / 64 + 1, 0);
        }
        let bit = 1u64 << (rank % 64);
        if self.words[word] & bit == 0 {
            self.words[word] |= bit;
            self.summary[word / 64] |= 1u64 << (word % 64);
            self.len += 1;
        }
    }

    fn remove(&mut self, rank: u32) {
        let word = rank as usize / 64;
        let bit = 1u64 << (rank % 64);
        if let Some(bits) = self.words.get_mut(word)
            && *bits & bit != 0
        {
            *bits &= !bit;
            if *bits == 0 {
                self.summary[word / 64] &= !(1u64 << (word % 64));
            }
            self.len -= 1;
        }
    }

    /// The first rank at or after `from`.
    fn next_from(&self, from: usize) -> Option<u32> {
        let word = from / 64;
        let here = self.words.get(word)? & (u64::MAX << (from % 64));
        if here != 0 {
            return Some(rank_of(word, here));
        }
        let next = self.next_word(word + 1)?;
        Some(rank_of(next, self.words[next]))
    }

    /// The first non-empty word at or after `from`.
    fn next_word(&self, from: usize) -> Option<usize> {
        let mut group = from / 64;
        let mut bits = self.summary.get(group)? & (u64::MAX << (from % 64));
        loop {
            if bits != 0 {
                return Some(group * 64 + bits.trailing_zeros() as usize);
            }
            group += 1;
            bits = *self.summary.get(group)?;
        }
    }
}

fn rank_of(word: usize, bits: u64) -> u32 {
    u32::try_from(word * 64 + bits.trailing_zeros() as usize).unwrap_or(u32::MAX)
}

/// Every node entry `(free, rank)`, bucketed by free count.
#[derive(Debug, Default, Clone)]
pub struct Buckets {
    by_free: Vec<RankSet>,
}

impl Buckets {
    pub fn insert(&mut self, free: u64, rank: u32) {
        let at = usize::try_from(free).unwrap_or(usize::MAX);
        if self.by_free.len() <= at {
            self.by_free.resize_with(at + 1, RankSet::default);
        }
        self.by_free[at].insert(rank);
    }

    pub fn remove(&mut self, free: u64, rank: u32) {
        if let Some(set) = usize::try_from(free)
            .ok()
            .and_then(|at| self.by_free.get_mut(at))
        {
            set.remove(rank);
        }
    }

    /// The most free GPUs of any entry (0 when empty).
    pub fn most_free(&self) -> u64 {
        let most = self.by_free.iter().rposition(|set| set.len > 0);
        most.map_or(0, |at| at as u64)
    }

    /// The entries with at least `free` free GPUs, fewest first, then by rank.
    pub fn at_least(&self, free: u64) -> BucketEntries<'_> {
        BucketEntries {
            buckets: self,
            free: usize::try_from(free).unwrap_or(usize::MAX),
            from: 0,
        }
    }
}

/// Compared by their entries (the bitsets' lengths depend on the order of the moves).
impl PartialEq for Buckets {
    fn eq(&self, other: &Self) -> bool {
        self.at_least(0).eq(other.at_least(0))
    }
}

impl Eq for Buckets {}

/// The iterator of [`Buckets::at_least`].
pub struct BucketEntries<'a> {
    buckets: &'a Buckets,
    free: usize,
    from: usize,
}

impl Iterator for BucketEntries<'_> {
    type Item = (u64, u32);

    fn next(&mut self) -> Option<(u64, u32)> {
        let sets = &self.buckets.by_free;
        while self.free < sets.len() {
            let set = &sets[self.free];
            if set.len > 0
                && let Some(rank) = set.next_from(self.from)
            {
                self.from = rank as usize + 1;
                return Some((self.free as u64, rank));
            }
            self.free += 1;
            self.from = 0;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// The buckets answer as a B-tree of `(free, rank)` does, through inserts and removals
    /// across word and summary boundaries.
    #[test]
    fn answers_as_a_btree() {
        let mut buckets = Buckets::default();
        let mut tree = BTreeSet::new();
        let mut seed = 7u64;
        for step in 0..20_000u32 {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let rank = ((seed >> 33) % 9_000) as u32;
            let free = (seed >> 20) % 65;
            if step % 3 == 0 {
                let old: Vec<_> = tree.iter().filter(|&&(_, r)| r == rank).copied().collect();
                for (f, r) in old {
                    tree.remove(&(f, r));
                    buckets.remove(f, r);
                }
            } else if !tree.iter().any(|&(_, r)| r == rank) {
                tree.insert((free, rank));
                buckets.insert(free, rank);
            }
            if step % 997 == 0 {
                for from in [0, 1, 8, 33, 64] {
                    let want: Vec<_> = tree.range((from, 0)..).copied().collect();
                    assert_eq!(buckets.at_least(from).collect::<Vec<_>>(), want);
                }
                assert_eq!(buckets.most_free(), tree.last().map_or(0, |&(f, _)| f));
            }
        }
    }
}
