//! Kept pod counts for a repair's searches (issue 50, item 2): a class asking resources
//! besides GPUs on the cluster's own view has its shape's counts kept
//! ([`crate::capacity::ShapeCount`]), and each class's what-if view (the GPUs and resources
//! the earlier classes took, what a what-if preemption's victims gave back) reads them through
//! [`OverlaidCounts`]: only the nodes those change are counted again, so a widened target is
//! weighed in one read per domain instead of a visit of its nodes.

use std::collections::BTreeSet;

use super::{Freed, Knobs, RepairClass};
use crate::capacity::{CapacityView, OverlaidCounts, ShapeCount, ShapeKey};
use crate::engine::Engine;
use crate::ids::{GpuSet, NodeId};
use crate::resources::Amounts;
use crate::search::{Item, Search};

impl Engine {
    /// Keeps the shape counts of every class that asks resources on the cluster's own view.
    pub(super) fn keep_repair_shapes(&mut self, classes: &[RepairClass], knobs: Knobs) {
        for class in classes {
            if let Some(key) = repair_shape(class, knobs) {
                let (topology, states) = (&self.topology, &self.states);
                self.capacity.ensure_shape(topology, states, key, &[]);
            }
        }
    }

    /// The class's kept counts, if it has a shape and they are current.
    pub(super) fn repair_counts(&self, class: &RepairClass, knobs: Knobs) -> Option<&ShapeCount> {
        repair_shape(class, knobs).and_then(|key| self.capacity.shape(&key))
    }

    /// `base` seen through `search`'s what-if view: the counts of the nodes `taken` and
    /// `freed` change (GPUs or resources), counted by `search` (which reads no kept counts).
    pub(super) fn overlaid_counts<'a, V: CapacityView>(
        &self,
        base: &'a ShapeCount,
        search: &Search<'_, V>,
        (taken, taken_resources): (
            &std::collections::BTreeMap<NodeId, GpuSet>,
            &[(NodeId, Amounts)],
        ),
        freed: &Freed,
    ) -> OverlaidCounts<'a> {
        let mut changed: BTreeSet<NodeId> = taken.keys().copied().collect();
        changed.extend(freed.gpus.keys().copied());
        changed.extend(taken_resources.iter().map(|&(node, _)| node));
        changed.extend(freed.resources.iter().map(|&(node, _)| node));
        let counts = changed
            .into_iter()
            .map(|node| (node, search.capacity(Item::Node(node))));
        OverlaidCounts::new(&self.topology, base, counts)
    }
}

/// The shape whose counts a class's searches may read: pods of its size asking its
/// resources, with its NUMA rule, on the cluster's own view (no selector).
fn repair_shape(class: &RepairClass, knobs: Knobs) -> Option<ShapeKey> {
    // Shares are counted node by node (docs/resources.md "Fractions of a GPU").
    let counted = !class.need.is_empty() && class.selector.is_plain() && class.milli.is_none();
    counted.then(|| ShapeKey {
        gpus_per_pod: class.gpus_per_pod,
        numa: knobs.numa,
        need: class.need.clone(),
    })
}
