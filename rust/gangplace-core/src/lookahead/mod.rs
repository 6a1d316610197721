//! Looking ahead (docs/preemption.md "Looking ahead", rules L1-L3): where a gang would go once some
//! allocations have ended, with some GPUs kept out of its way, and a reservation that keeps
//! out of given GPUs. A scheduler's backfill builds on both: the blocked head's *shadow
//! placement* is `place_after` over the running jobs grouped by predicted end, and a job that
//! passes the head reserves `avoiding` the shadow placement's GPUs.
//!
//! Both work on the engine's own state under a temporary overlay: released allocations'
//! GPUs are cleared from `allocated` (and the resources besides GPUs and the shares of GPUs
//! their pods use given back, docs/resources.md "Node resources" and "Fractions of a GPU"),
//! avoided free GPUs are marked `reserved`, avoided shared GPUs have their room filled (a
//! share up to a whole GPU, so that no pod takes part of them; released shares there stay),
//! and every change is undone before the call returns (also on errors), so nothing outside
//! the call ever sees it. The views are updated through the same change lists as any
//! mutation, so each step costs the nodes it touches, not the cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::engine::Engine;
use crate::error::{CoreError, CoreResult, invalid};
use crate::ids::{GpuSet, HoldId, NodeId};
use crate::ledger::HoldState;
use crate::model::{GangRequest, Placement, PodPlacement, Reservation};
use crate::resources::{Amounts, ResourceId};
use crate::search::{Demand, Plan};
use crate::shares::{WHOLE_GPU_MILLI, share_gpu, share_id, split};
use crate::state::Changes;

/// One temporary change of one node.
#[derive(Debug, Clone)]
enum Step {
    /// GPUs marked reserved, GPUs cleared from allocated.
    Gpus {
        node: NodeId,
        blocked: GpuSet,
        freed: GpuSet,
    },
    /// Resources and shares given back by the released allocation `hold`.
    Given {
        node: NodeId,
        hold: HoldId,
        amounts: Amounts,
    },
    /// Shares taken to fill the room of avoided shared GPUs.
    Filled { node: NodeId, amounts: Amounts },
}

/// The temporary changes made so far, undone in reverse order.
#[derive(Debug, Default)]
struct Overlay {
    steps: Vec<Step>,
    avoid: BTreeMap<NodeId, GpuSet>,
    /// Allocations whose resources are given back (each once, whatever groups name it).
    released: BTreeSet<HoldId>,
}

impl Overlay {
    fn new(avoid: &[(NodeId, GpuSet)]) -> Self {
        let mut merged: BTreeMap<NodeId, GpuSet> = BTreeMap::new();
        for &(node, gpus) in avoid {
            *merged.entry(node).or_default() |= gpus;
        }
        Self {
            steps: Vec::new(),
            avoid: merged,
            released: BTreeSet::new(),
        }
    }

    /// Marks the avoided GPUs that are free now as reserved, and fills the room of the
    /// avoided shared ones.
    fn block_avoided(&mut self, engine: &mut Engine) {
        let avoided: Vec<(NodeId, GpuSet)> = self.avoid.iter().map(|(&n, &g)| (n, g)).collect();
        let mut changes = Changes::new();
        for (node, gpus) in avoided {
            let state = engine.states.get(node);
            let (blocked, shared) = (gpus & state.free(), gpus & state.shared);
            self.push(engine, &mut changes, node, blocked, GpuSet::EMPTY);
            let fill = shared.iter().map(|gpu| {
                let used = engine.states.shares().used(node, gpu);
                (share_id(gpu), WHOLE_GPU_MILLI.saturating_sub(used))
            });
            let amounts = Amounts::from_pairs(fill.filter(|&(_, room)| room > 0).collect());
            if !amounts.is_empty() {
                (engine.states).use_resources(node, &amounts, true, &mut changes);
                self.steps.push(Step::Filled { node, amounts });
            }
        }
        engine.apply(&changes);
    }

    /// Frees the live committed allocations among `ids` on this overlay: their GPUs (avoided
    /// ones among them stay blocked), the resources besides GPUs their pods use and their
    /// shares of GPUs (those on avoided GPUs stay, keeping them blocked).
    fn release(&mut self, engine: &mut Engine, ids: &[HoldId]) {
        let mut changes = Changes::new();
        for &id in ids {
            let Some(hold) = (engine.ledger.live(id)).filter(|h| h.state == HoldState::Committed)
            else {
                continue;
            };
            let held: Vec<(NodeId, GpuSet)> = hold.gpus_by_node.iter().copied().collect();
            // Named in an earlier group: its resources are back already.
            let given = match self.released.insert(id) {
                true => hold.resources_by_node.clone(),
                false => Vec::new(),
            };
            for (node, gpus) in held {
                let state = engine.states.get(node);
                let avoided = self.avoid.get(&node).copied().unwrap_or_default();
                let blocked = gpus & avoided & !state.unhealthy;
                self.push(engine, &mut changes, node, blocked, gpus);
            }
            for (node, amounts) in given {
                let avoided = self.avoid.get(&node).copied().unwrap_or_default();
                let kept = |&(resource, _): &(ResourceId, u64)| {
                    share_gpu(resource).is_none_or(|gpu| !avoided.contains(gpu))
                };
                let amounts =
                    Amounts::from_pairs(amounts.pairs().iter().copied().filter(kept).collect());
                if amounts.is_empty() {
                    continue;
                }
                (engine.states).use_resources(node, &amounts, false, &mut changes);
                self.steps.push(Step::Given {
                    node,
                    hold: id,
                    amounts,
                });
            }
        }
        engine.apply(&changes);
    }

    /// One node's change, recorded; the views are updated by the caller, once per batch.
    /// Only what actually changes is recorded: an allocation named in two groups is freed
    /// once, so undoing the later group leaves the earlier group's release in place.
    fn push(
        &mut self,
        engine: &mut Engine,
        changes: &mut Changes,
        node: NodeId,
        blocked: GpuSet,
        freed: GpuSet,
    ) {
        let state = engine.states.get(node);
        let freed = freed & state.allocated;
        let blocked = blocked & !state.reserved;
        if blocked.is_empty() && freed.is_empty() {
            return;
        }
        engine.states.update(node, changes, |state| {
            state.allocated &= !freed;
            state.reserved |= blocked;
        });
        self.steps.push(Step::Gpus {
            node,
            blocked,
            freed,
        });
    }

    /// Undoes the changes after the first `keep`.
    fn undo_to(&mut self, engine: &mut Engine, keep: usize) {
        let mut changes = Changes::new();
        while self.steps.len() > keep {
            let Some(step) = self.steps.pop() else { break };
            let states = &mut engine.states;
            match step {
                Step::Gpus {
                    node,
                    blocked,
                    freed,
                } => states.update(node, &mut changes, |state| {
                    state.reserved &= !blocked;
                    state.allocated |= freed;
                }),
                Step::Given {
                    node,
                    hold,
                    amounts,
                } => {
                    self.released.remove(&hold);
                    states.use_resources(node, &amounts, true, &mut changes);
                }
                Step::Filled { node, amounts } => {
                    states.use_resources(node, &amounts, false, &mut changes);
                }
            }
        }
        engine.apply(&changes);
    }
}

impl Engine {
    /// The first `k` (0 ..= `releases.len()`) such that the gang fits once the allocations
    /// of `releases[..k]` have ended, with the GPUs of `avoid` kept out of its way, and where
    /// it goes then (docs/preemption.md "Looking ahead", L1). A pure query; `None` when it does not fit
    /// even with every group released. Ids of no live allocation are ignored.
    pub fn place_after(
        &mut self,
        request: &GangRequest,
        releases: &[Vec<HoldId>],
        avoid: &[PodPlacement],
        now: f64,
    ) -> CoreResult<Option<(usize, Placement)>> {
        let avoid = self.avoided(avoid)?;
        let placed = request.placed();
        let demand = self.prepare(&placed, now)?;
        let mut overlay = Overlay::new(&avoid);
        overlay.block_avoided(self);
        let found = self.first_prefix(&placed, &demand, releases, &mut overlay);
        let placement = match &found {
            Ok(Some((_, plan))) => Some(request.split_spares(self.placement(plan))),
            _ => None,
        };
        overlay.undo_to(self, 0);
        Ok(found?
            .zip(placement)
            .map(|((k, _), placement)| (k, placement)))
    }

    /// Places and holds the gang as `reserve` does, with the GPUs of `avoid` kept out of its
    /// way (docs/preemption.md "Looking ahead", L2); they stay as they were.
    pub fn reserve_avoiding(
        &mut self,
        request: &Arc<GangRequest>,
        ttl: f64,
        owner: Option<&str>,
        avoid: &[PodPlacement],
        now: f64,
    ) -> CoreResult<Reservation> {
        if avoid.is_empty() {
            return self.reserve(request, ttl, owner, now); // nothing to keep out of the way
        }
        let avoid = self.avoided(avoid)?;
        self.reclaim(now);
        let mut overlay = Overlay::new(&avoid);
        overlay.block_avoided(self);
        let reservation = self.reserve(request, ttl, owner, now);
        overlay.undo_to(self, 0);
        reservation
    }

    /// `avoid`'s pods as node ids and GPUs (L3: an unknown node or a GPU the node does not
    /// have is refused).
    fn avoided(&self, avoid: &[PodPlacement]) -> CoreResult<Vec<(NodeId, GpuSet)>> {
        let mut ids = Vec::with_capacity(avoid.len());
        for pod in avoid {
            let node = (self.topology.node_id(&pod.node))
                .ok_or_else(|| CoreError::UnknownNode(pod.node.to_string()))?;
            if let Some(gpu) = (pod.gpus & !self.states.get(node).gpus).lowest() {
                let name = &pod.node;
                return Err(invalid(format!("avoid: node {name:?} has no GPU {gpu}")));
            }
            ids.push((node, pod.gpus));
        }
        Ok(ids)
    }

    /// The GPUs held by the live allocations among `ids`, whole or shared (asked for a group
    /// only when the search reaches it, so a long list of groups costs what the search reads
    /// of it).
    fn released_gpus(&self, ids: &[HoldId]) -> Vec<(NodeId, GpuSet)> {
        let mut gpus = Vec::new();
        for id in ids {
            if let Some(hold) = self.ledger.live(*id)
                && hold.state == HoldState::Committed
            {
                gpus.extend(hold.gpus_by_node.iter().copied());
                for (node, amounts) in &hold.resources_by_node {
                    let shared = split(amounts).1.into_iter();
                    let shared =
                        shared.fold(GpuSet::EMPTY, |set, (gpu, _)| set | GpuSet::single(gpu));
                    if !shared.is_empty() {
                        gpus.push((*node, shared));
                    }
                }
            }
        }
        gpus
    }

    /// The smallest prefix of `groups` after which `demand` fits, and its plan. Fitting is
    /// monotone in the prefix (releasing only adds free GPUs), so the search starts at the
    /// first prefix with enough free GPUs in total, gallops forward, then bisects.
    fn first_prefix(
        &mut self,
        placed: &GangRequest,
        demand: &Demand,
        groups: &[Vec<HoldId>],
        overlay: &mut Overlay,
    ) -> CoreResult<Option<(usize, Plan)>> {
        // Too few free GPUs in total now: no search can fit it (the scheduler asks for a
        // blocked head, so this is the common case).
        let enough_at = self.enough_gpus_at(placed, groups);
        if enough_at == 0
            && let Some(plan) = self.plan_now(placed, demand)?
        {
            return Ok(Some((0, plan)));
        }
        let mut prefix = Prefix::new();
        let (mut low, mut step) = (0usize, 1usize);
        let mut k = enough_at.max(1);
        let (high, mut best) = loop {
            if k > groups.len() {
                return Ok(None);
            }
            prefix.set(self, overlay, groups, k);
            if let Some(plan) = self.plan_now(placed, demand)? {
                break (k, plan);
            }
            if k == groups.len() {
                return Ok(None);
            }
            low = k;
            k = (k + step).min(groups.len());
            step *= 2;
        };
        let mut high = high;
        while high - low > 1 {
            let middle = low + (high - low) / 2;
            prefix.set(self, overlay, groups, middle);
            match self.plan_now(placed, demand)? {
                Some(plan) => (high, best) = (middle, plan),
                None => low = middle,
            }
        }
        Ok(Some((high, best)))
    }

    /// The first prefix length with at least the gang's fewest GPUs free in total (a lower
    /// bound: GPUs in the wrong places may not help; a shared GPU counts as freed by every
    /// release of a share of it, more than its last share's can); `groups.len() + 1` when
    /// none has.
    fn enough_gpus_at(&self, placed: &GangRequest, groups: &[Vec<HoldId>]) -> usize {
        let need = placed.min_gpus();
        let mut free = self.states.totals().free;
        for (index, group) in groups.iter().enumerate() {
            if free >= need {
                return index;
            }
            for (node, gpus) in self.released_gpus(group) {
                free += u64::from((gpus & !self.states.get(node).unhealthy).count());
            }
        }
        if free >= need {
            groups.len()
        } else {
            groups.len() + 1
        }
    }

    fn plan_now(&self, placed: &GangRequest, demand: &Demand) -> CoreResult<Option<Plan>> {
        let policy = self.policy();
        self.with_search(placed, |search| search.plan(demand, policy))?
    }
}

/// Which prefix of the groups the overlay holds released: where each released group's
/// steps begin, so that moving back undoes exactly the later groups.
struct Prefix {
    starts: Vec<usize>,
}

impl Prefix {
    fn new() -> Self {
        Self { starts: Vec::new() }
    }

    /// Makes the overlay hold exactly `groups[..k]` released.
    fn set(
        &mut self,
        engine: &mut Engine,
        overlay: &mut Overlay,
        groups: &[Vec<HoldId>],
        k: usize,
    ) {
        if k < self.starts.len() {
            overlay.undo_to(engine, self.starts[k]);
            self.starts.truncate(k);
        }
        while self.starts.len() < k {
            self.starts.push(overlay.steps.len());
            overlay.release(engine, &groups[self.starts.len() - 1]);
        }
    }
}
