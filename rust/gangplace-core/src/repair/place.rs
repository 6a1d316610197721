//! Placing a repair's classes (docs/repair.md "Repair after failures", R2 and R7): each class of
//! lost ranks in turn inside its target, by rules 4-6 (and F1-F2 for shares of a GPU), seeing
//! the GPUs, resources and shares the earlier classes took; and a class's capacity for
//! `explain_repair`.

use std::collections::BTreeMap;

use super::{Freed, Knobs, RepairClass};
use crate::capacity::{CapacityView, Overlay, ResourceFit, ShareFit, TakenShares};
use crate::engine::Engine;
use crate::error::CoreResult;
use crate::ids::{GpuSet, NodeId};
use crate::model::PodPlacement;
use crate::resources::Amounts;
use crate::search::{Item, Plan, Search};
use crate::shapes::Layers;

/// What the classes placed so far took, which each later class sees (R2): GPUs, resources
/// besides GPUs, and shares of GPUs (R7).
#[derive(Debug, Default)]
struct Taken {
    gpus: BTreeMap<NodeId, GpuSet>,
    resources: BTreeMap<NodeId, Amounts>,
    shares: TakenShares,
}

impl Taken {
    /// Records what `class`'s planned pods take.
    fn record(&mut self, class: &RepairClass, plan: &Plan) {
        for pod in &plan.pods {
            match class.milli {
                // A share takes room on its GPU, not the GPU.
                Some(milli) => {
                    for gpu in pod.gpus.iter() {
                        *self.shares.entry((pod.node, gpu)).or_default() += u64::from(milli);
                    }
                }
                None => *self.gpus.entry(pod.node).or_default() |= pod.gpus,
            }
            if !class.need.is_empty() {
                let sum = self.resources.entry(pod.node).or_default();
                *sum = sum.plus(&class.need);
            }
        }
    }

    /// The resources taken, per node.
    fn resources(&self) -> Vec<(NodeId, Amounts)> {
        let taken = self.resources.iter();
        taken
            .map(|(&node, amounts)| (node, amounts.clone()))
            .collect()
    }
}

impl Engine {
    /// Every class placed in turn (its slice's domain, or `target`), each seeing the GPUs and
    /// resources the earlier ones took; `(rank, pod)` in rank order, or `None` if one does
    /// not fit. `freed`: what a what-if preemption's victims give back.
    pub(super) fn place_classes(
        &self,
        classes: &[RepairClass],
        target: (usize, Item),
        knobs: Knobs,
        freed: &Freed,
    ) -> CoreResult<Option<Vec<(u64, PodPlacement)>>> {
        let mut taken = Taken::default();
        let mut replacements = Vec::new();
        for class in classes {
            let target = match &class.slice {
                None => target,
                Some(path) => match self.resolve_path(path) {
                    (depth, item, true) => (depth, item),
                    _ => return Ok(None),
                },
            };
            let Some(plan) = self.place_class(class, target, knobs, &taken, freed)? else {
                return Ok(None);
            };
            taken.record(class, &plan);
            let pods = self.planned_pods(&plan);
            replacements.extend(class.ranks.iter().copied().zip(pods));
        }
        replacements.sort_by_key(|&(rank, _)| rank);
        Ok(Some(replacements))
    }

    /// One class inside `target` by rules 4-6 (and F1-F2 for shares), on its selector's view
    /// plus `freed` less `taken` (GPUs, resources when the class asks some, and shares).
    fn place_class(
        &self,
        class: &RepairClass,
        (depth, item): (usize, Item),
        knobs: Knobs,
        taken: &Taken,
        freed: &Freed,
    ) -> CoreResult<Option<Plan>> {
        let view = self.capacity.view_for(&self.states, &class.selector);
        let view = view.ok_or_else(|| crate::error::internal("a selector lost its pool"))?;
        let pods = class.ranks.len() as u64;
        let size = class.gpus_per_pod;
        let mut overlay = Overlay::new(&self.topology, &view, size);
        for &node in taken.gpus.keys().chain(freed.gpus.keys()) {
            if let Some(free) = view.node_free(node) {
                let more = freed.gpus.get(&node).copied().unwrap_or_default();
                let less = taken.gpus.get(&node).copied().unwrap_or_default();
                overlay.set_node(node, Some((free | more) & !less));
            }
        }
        let taken_resources = taken.resources();
        let fit = self.class_fit(class).map(|fit| {
            fit.with_taken(&taken_resources)
                .with_freed(&freed.resources)
        });
        let share = ShareFit::of(class.milli, &self.states)
            .map(|fit| fit.with_taken(&taken.shares).with_given_back(&freed.shares));
        let made = || {
            Search::new(&self.topology, &overlay, size)
                .with_shape(Layers::NONE, knobs.spread)
                .with_numa(knobs.numa)
                .with_resources(fit)
                .with_shares(share)
        };
        let counting = made(); // counts node by node
        let kept = (self.repair_counts(class, knobs)).map(|base| {
            self.overlaid_counts(base, &counting, (&taken.gpus, &taken_resources), freed)
        });
        let search = match &kept {
            Some(counts) => made().with_overlaid_counts(counts),
            None => counting,
        };
        #[cfg(feature = "testing")]
        if kept.is_some() {
            // The kept counts through the what-if view are the node-by-node counts.
            let (with, without) = (search.capacity(item), made().capacity(item));
            assert_eq!(with, without, "overlaid counts of {item:?}");
        }
        if !search.holds(item, pods) {
            return Ok(None);
        }
        search.plan_in(depth, item, pods).map(Some)
    }

    /// Pods of the class's size (up to its count) that `target` holds now on its view.
    pub(super) fn class_capacity(
        &self,
        class: &RepairClass,
        (_, item): (usize, Item),
        knobs: Knobs,
    ) -> u64 {
        let Some(view) = self.capacity.view_for(&self.states, &class.selector) else {
            return 0;
        };
        let search = Search::new(&self.topology, &view, class.gpus_per_pod)
            .with_shape(Layers::NONE, knobs.spread)
            .with_numa(knobs.numa)
            .with_resources(self.class_fit(class))
            .with_shares(ShareFit::of(class.milli, &self.states))
            .with_counts(self.repair_counts(class, knobs));
        search.pods_up_to(item, class.ranks.len() as u64)
    }

    /// How the class's pods count by the nodes' free resources (`None`: it asks none).
    fn class_fit<'a>(&'a self, class: &'a RepairClass) -> Option<ResourceFit<'a>> {
        (!class.need.is_empty()).then(|| {
            ResourceFit::new(
                &class.need,
                self.topology.resources().capacities(),
                self.states.resource_use(),
            )
        })
    }
}
