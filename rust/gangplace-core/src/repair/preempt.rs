//! Repairs that preempt (docs/repair.md "Repair after failures", R6): when the lost ranks fit nowhere
//! a repair may reach, `plan_repair(preempt=True)` frees room inside the placement's own
//! domain by the preemption rules, at the allocation's priority. Candidates are the
//! allocations `plan_preemption` would consider (preemptible, strictly lower priority) with
//! healthy GPUs inside the domain (or, when the lost pods ask resources besides GPUs, some
//! of those resources: docs/resources.md "Node resources"); they are removed on a what-if in P4's order (priority
//! ascending, GPUs freed inside the domain per GPU held descending, newest first, id) until
//! every class fits, then restored in reverse order while the repair still fits, pass after
//! pass until one restores nothing: the set is 1-minimal.

use std::collections::BTreeMap;

use super::{Freed, Knobs, RepairClass};
use crate::engine::Engine;
use crate::engine::removal::Purpose;
use crate::error::{CoreResult, internal};
use crate::ids::{GpuSet, HoldId, NodeId};
use crate::ledger::Hold;
use crate::model::{PodPlacement, RemovalLimits};
use crate::search::removal::{Candidates, removal_order};
use crate::shares::WHOLE_GPU_MILLI;

/// Victims (sorted by id) and the replacements once they are gone.
type Preempted = (Vec<HoldId>, Vec<(u64, PodPlacement)>);

impl Engine {
    /// Rule R6 for `hold`'s `classes`, or `None` when even every candidate gone is not enough.
    pub(super) fn repair_by_preemption(
        &self,
        hold: &Hold,
        classes: &[RepairClass],
        knobs: Knobs,
        now: f64,
    ) -> CoreResult<Option<Preempted>> {
        let (depth, item, exact) = self.resolve_path(&hold.placement.domain);
        // Removal sets count whole GPUs: a fractional allocation's repair finds no victims
        // (docs/repair.md R6).
        if !exact || hold.placement.gpu_milli.is_some() {
            return Ok(None);
        }
        let limits = RemovalLimits::default();
        let resources = classes.iter().any(|class| !class.need.is_empty());
        let priority = hold.terms.priority;
        let candidates =
            self.counted_candidates(priority, &limits, Purpose::WholePreemption, now, resources);
        let inside = |node: NodeId| {
            let path = self.topology.node_path(node);
            let domain = &hold.placement.domain;
            domain.len() <= path.len() && domain.iter().zip(&path).all(|(a, b)| a == b)
        };
        let mut touching: Vec<(usize, u64)> = (0..candidates.len())
            .filter_map(|index| {
                let freed = candidates
                    .freed(index)
                    .iter()
                    .filter(|&&(node, _)| inside(node));
                let freed: u64 = freed.map(|&(_, gpus)| u64::from(gpus.count())).sum();
                let gives_back =
                    || (candidates.freed_resources(index).iter()).any(|&(node, _)| inside(node));
                // P4's order counts thousandths (docs/preemption.md P8).
                (freed > 0 || gives_back()).then_some((index, freed * WHOLE_GPU_MILLI))
            })
            .collect();
        let fits = |members: &[usize]| {
            let freed = freed_by(&candidates, members);
            self.place_classes(classes, (depth, item), knobs, &freed)
        };
        let all: Vec<usize> = touching.iter().map(|&(index, _)| index).collect();
        if fits(&all)?.is_none() {
            return Ok(None);
        }
        touching.sort_unstable_by(|&(a, freed_a), &(b, freed_b)| {
            removal_order((&candidates[a], freed_a), (&candidates[b], freed_b))
        });
        let mut removed: Vec<usize> = Vec::new();
        for &(index, _) in &touching {
            if fits(&removed)?.is_some() {
                break;
            }
            removed.push(index);
        }
        let mut restored = true;
        while restored {
            restored = false;
            for slot in (0..removed.len()).rev() {
                let mut rest = removed.clone();
                rest.remove(slot);
                if fits(&rest)?.is_some() {
                    removed = rest;
                    restored = true;
                }
            }
        }
        let replacements = fits(&removed)?.ok_or_else(|| internal("a repair lost its fit"))?;
        let mut victims: Vec<HoldId> = removed.iter().map(|&m| candidates[m].id).collect();
        victims.sort_unstable();
        Ok(Some((victims, replacements)))
    }
}

/// The healthy GPUs and the resources `members` would free, per node.
fn freed_by(candidates: &Candidates, members: &[usize]) -> Freed {
    let mut gpus: BTreeMap<NodeId, GpuSet> = BTreeMap::new();
    for &member in members {
        for &(node, freed) in candidates.freed(member) {
            *gpus.entry(node).or_default() |= freed;
        }
    }
    Freed {
        gpus,
        resources: candidates.freed_amounts(members),
    }
}
