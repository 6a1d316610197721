//! Who may be removed, and for what: the candidates of preemption and defragmentation, which
//! the preemption, defragmentation, repair and multi-role operations and `explain` share. The
//! sets themselves are chosen by [`crate::search::removal`].

use std::collections::BTreeMap;

use super::Engine;
use crate::ids::{GpuSet, HoldId, NodeId};
use crate::ledger::{Hold, HoldState};
use crate::model::RemovalLimits;
use crate::resources::Amounts;
use crate::search::Item;
use crate::search::removal::{Candidates, NodePart, SharedBack};
use crate::shares::split;

/// Which allocations may be removed, and for what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// Victims of preemption: preemptible, priority strictly below the request's; whole-GPU
    /// and fractional allocations (docs/preemption.md P8).
    Preemption,
    /// Movers of defragmentation: movable, priority at most the request's, no ended rank;
    /// whole-GPU and fractional allocations (docs/preemption.md D5).
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
            if self.removable((id, hold), (priority, only.is_some()), limits, purpose, now) {
                self.push_candidate(&mut candidates, (id, hold), resources);
            }
        }
        candidates.sort_by_id();
        candidates
    }

    /// Whether allocation `id` may be removed by `purpose` for a request of `priority`
    /// (`chosen`: the caller named the candidates, docs/preemption.md P7).
    fn removable(
        &self,
        (id, hold): (HoldId, &Hold),
        (priority, chosen): (i32, bool),
        limits: &RemovalLimits,
        purpose: Purpose,
        now: f64,
    ) -> bool {
        let eligible = match purpose {
            // Removal sets count the shares a fractional victim gives back (docs/preemption.md
            // P8).
            Purpose::Preemption => {
                hold.terms.preemptible && (chosen || hold.terms.priority < priority)
            }
            // A hold with ended ranks no longer matches its request (docs/transactions.md E4).
            // Moves re-place GPUs and shares only: holds whose pods ask resources stay put.
            Purpose::Defragmentation => {
                hold.terms.movable
                    && hold.terms.priority <= priority
                    && hold.ended.is_empty()
                    && hold.pod_resources.is_empty()
            }
        };
        let exempt = hold
            .owner
            .as_deref()
            .is_some_and(|owner| limits.exempt_owners.iter().any(|e| e == owner))
            || (!limits.exempt_holds.is_empty() && limits.exempt_holds.binary_search(&id).is_ok());
        let old_enough = now - hold.since >= limits.min_runtime;
        hold.state == HoldState::Committed && eligible && !exempt && old_enough
    }

    /// Adds allocation `id` to `candidates`: the healthy GPUs it frees per node, and with
    /// `resources` what it frees of the nodes' other resources.
    fn push_candidate(
        &self,
        candidates: &mut Candidates,
        (id, hold): (HoldId, &Hold),
        resources: bool,
    ) {
        let states = &self.states;
        let terms = (hold.terms.priority, hold.since, hold.gpu_count());
        if hold.placement.gpu_milli.is_some() {
            let parts = self.shared_parts(hold, resources);
            return candidates.push_parts(id, terms, hold.shares_held(), parts.into_iter());
        }
        let freed = hold
            .gpus_by_node
            .iter()
            .map(|&(node, gpus)| (node, gpus & !states.unhealthy(node)));
        match resources {
            false => candidates.push(id, terms.0, terms.1, terms.2, freed),
            true => candidates.push_with_resources(id, terms, self.freed_with_resources(hold)),
        }
    }

    /// A fractional allocation's parts per node (docs/preemption.md P8): no whole GPU, its
    /// shares of healthy GPUs (each with the thousandths used there in all), its resources
    /// besides shares when `resources`.
    fn shared_parts(&self, hold: &Hold, resources: bool) -> Vec<NodePart> {
        let by_node = hold.resources_by_node.iter();
        let part = |(node, amounts): &(NodeId, Amounts)| {
            let (named, shares) = split(amounts);
            let unhealthy = self.states.unhealthy(*node);
            let back: Vec<SharedBack> = (shares.iter())
                .filter(|&&(gpu, _)| !unhealthy.contains(gpu))
                .map(|&(gpu, quantity)| (gpu, quantity, self.states.shares().used(*node, gpu)))
                .collect();
            (*node, GpuSet::EMPTY, resources.then_some(named), back)
        };
        by_node.map(part).collect()
    }

    /// The candidates of preemption for a request of `priority` asking only GPUs, touching
    /// `item` (its nodes in the view or not), sorted by id: [`Engine::candidates`] for the
    /// holds with GPUs or shares there alone, without named candidates (P7).
    pub(crate) fn candidates_in(
        &self,
        item: Item,
        (priority, limits, now): (i32, &RemovalLimits, f64),
    ) -> Candidates {
        let nodes = self.nodes_under(item);
        let holders = |node: NodeId| {
            let whole = self.ledger.holders_of(node).iter();
            whole.chain(self.ledger.sharers_of(node)).map(|&(id, _)| id)
        };
        let mut ids: Vec<HoldId> = nodes.iter().flat_map(|&node| holders(node)).collect();
        ids.sort_unstable();
        ids.dedup();
        let mut candidates = Candidates::default();
        let purpose = Purpose::Preemption;
        for id in ids {
            let Some(hold) = self.ledger.live(id) else {
                continue;
            };
            if self.removable((id, hold), (priority, false), limits, purpose, now) {
                self.push_candidate(&mut candidates, (id, hold), false);
            }
        }
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
