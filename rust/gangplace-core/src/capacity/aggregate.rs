//! Capacity aggregates: how many pods of a given size a domain can hold, without visiting its
//! nodes.
//!
//! Every domain keeps a histogram of its *feasible* nodes (not cordoned) by their number of
//! free healthy GPUs, plus the sum of those GPUs. The capacity for pods of `p` GPUs is then
//! `sum_k hist[k] * floor(k / p)`: at most 65 multiply-adds whatever the domain's size, and a
//! node change costs one histogram update per ancestor (O(levels)).

use crate::limits::MAX_GPUS_PER_NODE;

const BUCKETS: usize = MAX_GPUS_PER_NODE as usize + 1;

/// `PODS_PER_NODE[g][k] = floor(k / g)` for `g` in `1..=64`: capacities are counted on every
/// step of a search, and a table read is several times cheaper than a division.
static PODS_PER_NODE: [[u8; BUCKETS]; BUCKETS] = pods_per_node();

/// `floor(free / gpus_per_pod)` from the table (both at most 64; `gpus_per_pod` >= 1).
pub fn pods_on_node(free: u32, gpus_per_pod: u32) -> u32 {
    PODS_PER_NODE
        .get(gpus_per_pod as usize)
        .and_then(|row| row.get(free as usize))
        .map_or_else(|| free / gpus_per_pod.max(1), |&pods| u32::from(pods))
}

const fn pods_per_node() -> [[u8; BUCKETS]; BUCKETS] {
    let mut table = [[0u8; BUCKETS]; BUCKETS];
    let mut size = 1;
    while size < BUCKETS {
        let mut free = 0;
        while free < BUCKETS {
            // free / size <= 64 fits a u8 (`try_from` is not const).
            #[allow(clippy::cast_possible_truncation)]
            let pods = (free / size) as u8;
            table[size][free] = pods;
            free += 1;
        }
        size += 1;
    }
    table
}

/// Histogram of feasible nodes by free healthy GPUs, and their total.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Aggregate {
    free_gpus: u64,
    nodes_by_free: [u32; BUCKETS],
    /// Bit `k` set when `nodes_by_free[k] > 0`, so that capacities visit only the buckets in
    /// use (a handful on real nodes) instead of all 65.
    used_buckets: u128,
}

impl Default for Aggregate {
    fn default() -> Self {
        Self {
            free_gpus: 0,
            nodes_by_free: [0; BUCKETS],
            used_buckets: 0,
        }
    }
}

impl Aggregate {
    /// Counts one more feasible node with `free` free healthy GPUs.
    pub fn add_node(&mut self, free: u32) {
        self.nodes_by_free[free as usize] += 1;
        self.used_buckets |= 1 << free;
        self.free_gpus += u64::from(free);
    }

    /// Forgets one feasible node that had `free` free healthy GPUs.
    pub fn remove_node(&mut self, free: u32) {
        self.nodes_by_free[free as usize] -= 1;
        if self.nodes_by_free[free as usize] == 0 {
            self.used_buckets &= !(1 << free);
        }
        self.free_gpus -= u64::from(free);
    }

    /// A node's feasible free GPUs went from `before` to `after` (`None`: not feasible).
    pub fn change(&mut self, before: Option<u32>, after: Option<u32>) {
        if let Some(free) = before {
            self.remove_node(free);
        }
        if let Some(free) = after {
            self.add_node(free);
        }
    }

    /// Free healthy GPUs summed over the feasible nodes (also those too small for a pod).
    pub fn free_gpus(&self) -> u64 {
        self.free_gpus
    }

    /// Feasible nodes with exactly `free` free healthy GPUs.
    pub fn nodes_with_free(&self, free: u32) -> u32 {
        self.nodes_by_free.get(free as usize).copied().unwrap_or(0)
    }

    /// Pods of `gpus_per_pod` GPUs (>= 1) that fit, a pod never spanning nodes.
    pub fn capacity(&self, gpus_per_pod: u32) -> u64 {
        let Some(per_node) = PODS_PER_NODE.get(gpus_per_pod as usize) else {
            return 0;
        };
        let mut buckets = self.used_buckets & (u128::MAX << gpus_per_pod.min(127));
        let mut pods = 0;
        while buckets != 0 {
            let free = buckets.trailing_zeros() as usize;
            buckets &= buckets - 1;
            pods += u64::from(self.nodes_by_free[free]) * u64::from(per_node[free]);
        }
        pods
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_counts_whole_pods_per_node() {
        let mut aggregate = Aggregate::default();
        for free in [8, 7, 3, 0] {
            aggregate.add_node(free);
        }
        assert_eq!(aggregate.free_gpus(), 18);
        assert_eq!(aggregate.capacity(1), 18);
        assert_eq!(aggregate.capacity(4), 3); // 2 + 1 + 0 + 0
        assert_eq!(aggregate.capacity(8), 1);
        assert_eq!(aggregate.capacity(9), 0);
        aggregate.change(Some(8), None);
        assert_eq!(aggregate.capacity(8), 0);
        assert_eq!(aggregate.free_gpus(), 10);
    }
}
