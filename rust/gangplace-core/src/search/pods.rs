//! Rule 1's pod counts of a search: from the aggregates when only GPUs count, node by node
//! when NUMA groups, resources besides GPUs or fractions do (the aggregates then bound the
//! counts), or from a shape's kept counts ([`crate::capacity::ShapeCount`]) when the search has them.

use super::{Item, Search};
use crate::capacity::CapacityView;
use crate::ids::GpuSet;
use crate::shapes::Numa;

impl<V: CapacityView> Search<'_, V> {
    /// Whether capacities are counted node by node (NUMA groups, resources or fractions),
    /// the aggregates' counts being only bounds.
    #[inline(always)]
    pub(super) fn counted(&self) -> bool {
        self.numa == Numa::Single || self.fit.is_some() || self.share.is_some()
    }

    /// Pods of this search's size that fit in `item` (rule 1).
    #[inline(always)]
    pub fn capacity(&self, item: Item) -> u64 {
        match self.counted() {
            true => self.numa_count(item, u64::MAX),
            false => self.plain_capacity(item),
        }
    }

    /// Pods that fit in `item` counted node by node, up to `cap`: a node's from its NUMA
    /// groups (with `numa="single"`) and its free resources (with resources), a domain's from
    /// the NUMA aggregates when the view has them and no resource is asked (one read;
    /// inlined, as rule 4 reads every child's), else by visiting its children.
    #[inline(always)]
    pub(super) fn numa_count(&self, item: Item, cap: u64) -> u64 {
        if let Some(counts) = self.counts {
            return match item {
                Item::Node(id) => counts.node(id).min(cap),
                Item::Domain(id) => counts.domain(id, cap),
            };
        }
        match item {
            Item::Node(id) => self.view.node_free(id).map_or(0, |free| {
                let groups = self.topology.node(id).gpu_topology.as_deref();
                let pods = match (groups, self.numa) {
                    (Some(groups), Numa::Single) => {
                        u64::from(groups.numa_capacity(free, self.gpus_per_pod))
                    }
                    _ => self.gpu_pods(free),
                };
                let pods = match &self.share {
                    Some(share) => share.pods(id, free).min(cap),
                    None => pods.min(cap),
                };
                match &self.fit {
                    Some(fit) if pods > 0 => pods.min(fit.pods(id)),
                    _ => pods,
                }
            }),
            Item::Domain(id) => {
                let aggregate = match (&self.fit, &self.share) {
                    (None, None) => self.view.domain_numa_capacity(id, self.gpus_per_pod),
                    _ => None,
                };
                match aggregate {
                    Some(pods) => pods.min(cap),
                    None => self.numa_count_children(item, cap),
                }
            }
        }
    }

    /// [`Self::numa_count`] of a domain by visiting its children while `cap` is not reached,
    /// only those whose plain capacity (the aggregates', an upper bound) is not zero; with
    /// shares every child domain (its free whole GPUs bound no count of shares).
    #[inline(never)]
    pub(super) fn numa_count_children(&self, item: Item, cap: u64) -> u64 {
        let mut total = 0;
        for child in self.children(item) {
            let bounded = !matches!((child, &self.share), (Item::Domain(_), Some(_)));
            if bounded && self.plain_capacity(child) == 0 {
                continue;
            }
            total += self.numa_count(child, cap - total);
            if total >= cap {
                return cap;
            }
        }
        total
    }

    /// Pods of this size in `item` without the NUMA rule: the aggregates' count (no bound
    /// for pods without GPUs, which their resources count).
    pub(super) fn plain_capacity(&self, item: Item) -> u64 {
        match item {
            Item::Domain(_) if self.gpus_per_pod == 0 => u64::MAX,
            Item::Domain(id) => self.view.domain_capacity(id, self.gpus_per_pod),
            Item::Node(id) => self.view.node_free(id).map_or(0, |free| match &self.share {
                Some(share) => share.pods(id, free),
                None => self.gpu_pods(free),
            }),
        }
    }

    /// Pods of this size that `free` GPUs hold (unbounded for pods without GPUs).
    #[inline(always)]
    pub(super) fn gpu_pods(&self, free: GpuSet) -> u64 {
        match self.gpus_per_pod {
            0 => u64::MAX,
            size => u64::from(free.count() / size),
        }
    }

    /// Whether `item` holds `pods` pods by capacity (`numa="single"`: counting per NUMA
    /// group, stopping once enough are found, after the plain count as a quick bound).
    pub(super) fn holds_pods(&self, item: Item, pods: u64) -> bool {
        match (self.counted(), self.counts.is_some()) {
            (false, _) => self.capacity(item) >= pods,
            (true, true) => self.numa_count(item, pods) >= pods, // kept counts: one read
            // Free whole GPUs bound no count of shares (a GPU holds several; a shared one is
            // not free): counted node by node (docs/resources.md "Fractions of a GPU").
            (true, false) if self.share.is_some() => self.numa_count(item, pods) >= pods,
            (true, false) => {
                self.plain_capacity(item) >= pods && self.numa_count(item, pods) >= pods
            }
        }
    }

    /// Whether some domain of `depth` may hold `pods`: with `numa="single"`, `false` when
    /// the NUMA aggregates' largest capacity at that depth is smaller (a domain depth only).
    pub(super) fn level_may_hold(&self, depth: usize, pods: u64) -> bool {
        if self.numa != Numa::Single || depth >= self.topology.node_depth() {
            return true;
        }
        let largest = self
            .view
            .largest_numa_capacity(self.topology, depth, self.gpus_per_pod);
        largest.is_none_or(|largest| largest >= pods)
    }
}
