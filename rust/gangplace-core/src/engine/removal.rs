//! Who may be removed, and for what: the candidates of preemption and defragmentation, which
//! the preemption, defragmentation, repair and multi-role operations and `explain` share. The
//! sets themselves are chosen by [`crate::search::removal`].

use std::collections::BTreeMap;

use super::Engine;
use crate::ids::{GpuSet, HoldId, NodeId};
use crate::ledger::{Hold, HoldState};
use crate::model::RemovalLimits;
use crate::resources::Amounts;
use crate::search::removal::Candidates;
use crate::shares::split;

/// Which allocations may be removed, and for what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// Victims of preemption: preemptible, priority strictly below the request's.
    Preemption,
    /// Movers of defragmentation: movable, priority at most the request's, no ended rank.
    Defragmentation,
}

impl Engine {
    /// The live allocations that `purpose` may remove for `request`, by id.
    pub(crate) fn candidates(
        &self,
        priority: i32,
        limits: &RemovalLimits,
        purpose: Purpose,
        now: f64,
    ) -> Candidates {
        self.counted_candidates(priority, limits, purpose, now, false)
    }

    /// [`Engine::candidates`], with what each frees of the nodes' resources besides GPUs
    /// when `resources` (a request asking some, docs/resources.md "Node resources"): an entry for every
    /// node where it holds GPUs or resources.
    pub(crate) fn counted_candidates(
        &self,
        priority: i32,
        limits: &RemovalLimits,
        purpose: Purpose,
        now: f64,
        resources: bool,
    ) -> Candidates {
        let mut candidates = Candidates::default();
        let only = limits
            .only_holds
            .as_deref()
            .filter(|_| purpose == Purpose::Preemption);
        let holds: Box<dyn Iterator<Item = (HoldId, &Hold)>> = match only {
            // docs/preemption.md P7: the caller's candidates, whatever their priority.
            Some(ids) => Box::new(
                ids.iter()
                    .filter_map(|&id| Some((id, self.ledger.live(id)?))),
            ),
            // Any order here: the candidates are sorted by id below, before anything decides.
            None => Box::new(self.ledger.live_holds()),
        };
        for (id, hold) in holds {
            let eligible = match purpose {
                // Fractional holds free shares, which removal sets do not count (docs/resources.md
                // "Fractions of a GPU"): never victims, never moved.
                Purpose::Preemption => {
                    hold.terms.preemptible
                        && (only.is_some() || hold.terms.priority < priority)
                        && hold.placement.gpu_milli.is_none()
                }
                // A hold with ended ranks no longer matches its request (docs/transactions.md E4).
                Purpose::Defragmentation => {
                    // Moves re-place GPUs only: holds whose pods ask resources stay put.
                    hold.terms.movable
                        && hold.terms.priority <= priority
                        && hold.ended.is_empty()
                        && hold.pod_resources.is_empty()
                        && hold.placement.gpu_milli.is_none()
                }
            };
            let exempt = hold
                .owner
                .as_deref()
                .is_some_and(|owner| limits.exempt_owners.iter().any(|e| e == owner))
                || (!limits.exempt_holds.is_empty()
                    && limits.exempt_holds.binary_search(&id).is_ok());
            let old_enough = now - hold.since >= limits.min_runtime;
            if hold.state != HoldState::Committed || !eligible || exempt || !old_enough {
                continue;
            }
            let states = &self.states;
            let freed = hold
                .gpus_by_node
                .iter()
                .map(|&(node, gpus)| (node, gpus & !states.unhealthy(node)));
            let terms = (hold.terms.priority, hold.since, hold.gpu_count());
            match resources {
                false => candidates.push(id, terms.0, terms.1, terms.2, freed),
                true => candidates.push_with_resources(id, terms, self.freed_with_resources(hold)),
            }
        }
        candidates.sort_by_id();
        candidates
    }

    /// Per node where `hold` holds GPUs or resources, by node: its healthy GPUs there and its
    /// resources there (shares of GPUs aside: fractional holds are never candidates).
    fn freed_with_resources(&self, hold: &Hold) -> impl Iterator<Item = (NodeId, GpuSet, Amounts)> {
        let mut by_node: BTreeMap<NodeId, (GpuSet, Amounts)> = BTreeMap::new();
        for &(node, gpus) in hold.gpus_by_node.iter() {
            by_node.entry(node).or_default().0 = gpus & !self.states.unhealthy(node);
        }
        for (node, amounts) in &hold.resources_by_node {
            by_node.entry(*node).or_default().1 = split(amounts).0;
        }
        by_node
            .into_iter()
            .map(|(node, (gpus, amounts))| (node, gpus, amounts))
    }
}
