//! Slices (docs/shapes.md "Slices"): how many slices a domain holds, and how a slice gang is spread.
//!
//! Layer `i` of a request has a depth `d_i` and a size `k_i` (pods per slice), outermost
//! first, each inner size dividing the outer one. The slices of layer `i` a domain `D` holds:
//!
//! - at `d_i` or finer (`D` lies inside one domain of layer `i`'s level): the whole inner
//!   slices it holds, regrouped: `floor(units_{i+1}(D) * k_{i+1} / k_i)`, where the innermost
//!   layer counts pods, `floor(capacity(D) / k_i)`;
//! - coarser than `d_i`: the sum over its children.
//!
//! A gang of `p` pods fits in `D` when `D` holds `p / k_1` outermost slices. Counting stops as
//! soon as that many are found, and a child with fewer pods than one slice is never entered
//! (a slice is made of pods), so a fit test costs the domains it needs, not the subtree.

use super::{Child, Item, LevelBest, PlannedPod, Search};
use crate::capacity::CapacityView;
use crate::error::CoreResult;
use crate::ids::ROOT;

impl<V: CapacityView> Search<'_, V> {
    /// Whether `item` holds `pods` pods: by capacity, or in whole outermost slices.
    pub fn holds(&self, item: Item, pods: u64) -> bool {
        if self.layers.is_empty() {
            return self.holds_pods(item, pods);
        }
        let need = pods / self.layers.outer_size();
        self.units(item, 0, need) >= need
    }

    /// The most pods, up to `most`, that `item` holds: by capacity, or in whole outermost
    /// slices.
    pub fn pods_up_to(&self, item: Item, most: u64) -> u64 {
        if self.layers.is_empty() {
            return self.capacity(item).min(most);
        }
        let outer = self.layers.outer_size();
        self.units(item, 0, most / outer) * outer
    }

    /// The depth of an item (the node depth for a node).
    fn depth(&self, item: Item) -> usize {
        match item {
            Item::Domain(id) => self.topology.domain(id).depth,
            Item::Node(_) => self.topology.node_depth(),
        }
    }

    /// Slices of layer `layer` that `item` holds, counted up to `cap` (the count, or `cap`
    /// if it reaches it).
    fn units(&self, item: Item, layer: usize, cap: u64) -> u64 {
        let layers = self.layers.as_slice();
        let (depth, size) = layers[layer];
        if self.depth(item) >= depth {
            let pods = match layers.get(layer + 1) {
                Some(&(_, inner)) => {
                    let per_slice = size / inner;
                    self.units(item, layer + 1, cap.saturating_mul(per_slice)) * inner
                }
                None => self.capacity(item),
            };
            return (pods / size).min(cap);
        }
        let mut total = 0;
        for child in self.children(item) {
            if self.capacity(child) < size {
                continue;
            }
            total += self.units(child, layer, cap - total);
            if total >= cap {
                return cap;
            }
        }
        total
    }

    /// Rule 7 with slices: the most pods in whole outermost slices of one domain at `depth`
    /// (the first such domain in path order), pruned where a subtree cannot beat the best.
    pub(super) fn largest_in_slices(&self, depth: usize) -> LevelBest {
        let outer = self.layers.outer_size();
        let mut best = LevelBest {
            depth,
            item: None,
            capacity: 0,
        };
        let mut stack = vec![(Item::Domain(ROOT), 0)];
        while let Some((item, item_depth)) = stack.pop() {
            let bound = self.capacity(item) / outer * outer;
            if bound == 0 || (best.item.is_some() && bound <= best.capacity) {
                continue;
            }
            if item_depth == depth {
                let pods = self.units(item, 0, u64::MAX) * outer;
                if pods > best.capacity {
                    best.capacity = pods;
                    best.item = Some(item);
                }
                continue;
            }
            let children: Vec<Item> = self.children(item).collect();
            stack.extend(
                children
                    .into_iter()
                    .rev()
                    .map(|child| (child, item_depth + 1)),
            );
        }
        best
    }

    /// Rule 4 with slices: `units` slices of layer `layer` spread over `item` like pods over
    /// children (one child takes all remaining if it can, the tightest such; otherwise the
    /// largest is filled); inside a domain of the layer's level its slices become slices of
    /// the next layer, and inside the innermost one pods follow rules 4 and 5.
    pub(super) fn spread_slices(
        &self,
        item: Item,
        layer: usize,
        units: u64,
        out: &mut Vec<PlannedPod>,
    ) -> CoreResult<()> {
        let layers = self.layers.as_slice();
        let (depth, size) = layers[layer];
        if self.depth(item) >= depth {
            return match layers.get(layer + 1) {
                Some(&(_, inner)) => {
                    self.spread_slices(item, layer + 1, units * (size / inner), out)
                }
                None => self.spread(item, units * size, out),
            };
        }
        let children = Child::in_path_order(
            self.children(item)
                .filter(|&child| self.capacity(child) >= size)
                .map(|child| (self.units(child, layer, u64::MAX), child)),
        );
        self.distribute(children, units, |child, units| {
            self.spread_slices(child, layer, units, out)
        })
    }

    /// The domain (or node) of every innermost slice of ranked pods, in rank order (empty
    /// without slices).
    pub(super) fn slice_items(&self, pods: &[PlannedPod]) -> Vec<Item> {
        let Some((depth, size)) = self.layers.innermost() else {
            return Vec::new();
        };
        let step = usize::try_from(size).unwrap_or(usize::MAX);
        pods.iter()
            .step_by(step.max(1))
            .map(|pod| self.item_of(pod.node, depth))
            .collect()
    }
}
