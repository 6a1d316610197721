//! Repairs that preempt (docs/repair.md "Repair after failures", R6): when the lost ranks fit nowhere
//! a repair may reach, `plan_repair(preempt=True)` frees room inside the placement's own
//! domain by the preemption rules, at the allocation's priority. Candidates are the
//! allocations `plan_preemption` would consider (preemptible, strictly lower priority) with
//! healthy GPUs or shares of them inside the domain (docs/preemption.md P8; or, when the lost
//! pods ask resources besides GPUs, some of those resources: docs/resources.md "Node
//! resources"); they are removed on a what-if in P4's order (priority ascending, thousandths
//! freed inside the domain per thousandth held descending, newest first, id) until every
//! class fits, then restored in reverse order while the repair still fits, pass after
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
        if !exact {
            return Ok(None);
        }
        let limits = RemovalLimits::default();
        let resources = classes.iter().any(|class| !class.need.is_empty());
        let priority = hold.terms.priority;
        // Victims may be fractional: their shares are given back (docs/preemption.md P8).
        let candidates =
            self.counted_candidates(priority, &limits, Purpose::Preemption, now, resources);
        let inside = |node: NodeId| {
            let path = self.topology.node_path(node);
            let domain = &hold.placement.domain;
            domain.len() <= path.len() && domain.iter().zip(&path).all(|(a, b)| a == b)
        };
        let mut touching: Vec<(usize, u64)> = (0..candidates.len())
            .filter_map(|index| {
                let freed = freed_inside(&candidates, index, &inside);
                let gives_back =
                    || (candidates.freed_resources(index).iter()).any(|&(node, _)| inside(node));
                (freed > 0 || gives_back()).then_some((index, freed))
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

/// What candidate `index` frees on the nodes `inside` accepts, in thousandths (P4's order,
/// docs/preemption.md P8): its healthy GPUs whole, and its shares of healthy GPUs.
fn freed_inside(candidates: &Candidates, index: usize, inside: &impl Fn(NodeId) -> bool) -> u64 {
    let entries = candidates.entries(index).zip(candidates.freed(index));
    let inside_entries = entries.filter(|&(_, &(node, _))| inside(node));
    let milli = |(at, &(_, gpus)): (usize, &(NodeId, GpuSet))| {
        let shares = candidates.shares_at(at).iter().map(|&(_, back, _)| back);
        u64::from(gpus.count()) * WHOLE_GPU_MILLI + shares.sum::<u64>()
    };
    inside_entries.map(milli).sum()
}

/// The healthy GPUs, the resources and the shares `members` would free, per node; a shared
/// GPU all of whose shares they hold is freed whole (P8).
fn freed_by(candidates: &Candidates, members: &[usize]) -> Freed {
    let mut gpus: BTreeMap<NodeId, GpuSet> = BTreeMap::new();
    for &member in members {
        for &(node, freed) in candidates.freed(member) {
            *gpus.entry(node).or_default() |= freed;
        }
    }
    let mut shares = crate::capacity::TakenShares::new();
    for ((node, gpu), (back, used)) in candidates.freed_shares(members) {
        shares.insert((node, gpu), back);
        if back >= used {
            *gpus.entry(node).or_default() |= GpuSet::single(gpu);
        }
    }
    Freed {
        gpus,
        resources: candidates.freed_amounts(members),
        shares,
    }
}
