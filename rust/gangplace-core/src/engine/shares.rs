//! What the engine adds for fractions of a GPU (docs/resources.md "Fractions of a GPU"): checking a
//! fractional placement against the GPUs' room, the holds sharing a GPU, and the invariant
//! check of the shares.

use std::collections::BTreeMap;

use super::Engine;
use crate::capacity::TakenShares;
use crate::error::{CoreError, CoreResult, invalid, texts};
use crate::ids::{GpuSet, HoldId, NodeId};
use crate::model::{AdoptedPod, Placement};
use crate::resources::Amounts;
use crate::shares::{WHOLE_GPU_MILLI, share_id, split};

impl Engine {
    /// Checks that every pod of a fractional `placement` names one GPU of its node that is
    /// healthy, held by no whole pod (but those of `freed`, a preemption's victims'), and has
    /// room for its share beside the shares there and the placement's other pods on it
    /// (`Conflict` otherwise: the placement is stale).
    pub(crate) fn check_placement_shares(
        &self,
        placement: &Placement,
        milli: u16,
        freed: &std::collections::HashMap<NodeId, GpuSet>,
    ) -> CoreResult<()> {
        self.check_shares_after(placement, milli, freed, &TakenShares::new(), None)
    }

    /// [`Engine::check_placement_shares`] with the shares `given_back` (victims' or movers'
    /// shares, docs/preemption.md P8, D5) counted free and, with `earlier`, the shares earlier
    /// placements of the same mutation take counted used (this placement's are added to it).
    pub(crate) fn check_shares_after(
        &self,
        placement: &Placement,
        milli: u16,
        freed: &std::collections::HashMap<NodeId, GpuSet>,
        given_back: &TakenShares,
        earlier: Option<&mut TakenShares>,
    ) -> CoreResult<()> {
        if !placement.spares.is_empty() {
            return Err(invalid("a placement of fractional pods has no spares"));
        }
        let mut asked: BTreeMap<(NodeId, u32), u64> = BTreeMap::new();
        let mut shares: Vec<(NodeId, u32)> = Vec::with_capacity(placement.pods.len());
        for pod in &placement.pods {
            let node = self.pod_node(placement, &pod.node)?;
            let (Some(gpu), 1) = (pod.gpus.lowest(), pod.gpus.count()) else {
                return Err(one_gpu(&pod.node, pod.gpus.count()));
            };
            let state = self.states.get(node);
            if !state.gpus.contains(gpu) {
                return Err(texts::gpu_out_of_range(gpu, &pod.node));
            }
            let freed = freed.get(&node).copied().unwrap_or_default();
            let whole = (state.reserved | state.allocated) & !freed;
            if state.unhealthy.contains(gpu) || whole.contains(gpu) {
                return Err(texts::placement_gpu_busy(
                    gpu,
                    &pod.node,
                    state.unhealthy.contains(gpu),
                ));
            }
            *asked.entry((node, gpu)).or_default() += u64::from(milli);
            shares.push((node, gpu));
        }
        // The first pod (in rank order) whose GPU would pass a whole GPU.
        for (node, gpu) in shares {
            let asked = asked.get(&(node, gpu)).copied().unwrap_or_default();
            let back = given_back.get(&(node, gpu)).copied().unwrap_or(0);
            let used = self.states.shares().used(node, gpu).saturating_sub(back);
            let used = used
                + earlier
                    .as_ref()
                    .and_then(|e| e.get(&(node, gpu)))
                    .unwrap_or(&0);
            if used + asked > WHOLE_GPU_MILLI {
                let name = &self.topology.node(node).name;
                return Err(texts::share_room(gpu, name, WHOLE_GPU_MILLI - used, asked));
            }
        }
        if let Some(earlier) = earlier {
            for ((node, gpu), asked) in asked {
                *earlier.entry((node, gpu)).or_default() += asked;
            }
        }
        Ok(())
    }

    /// The live holds with a share of GPU `gpu` of node `id`, by id.
    pub(crate) fn holds_sharing(&self, id: NodeId, gpu: u32) -> Vec<HoldId> {
        let share = share_id(gpu);
        let sharing = |&hold: &HoldId| {
            self.ledger.live(hold).is_some_and(|hold| {
                let on_node = hold.resources_by_node.iter().filter(|(on, _)| *on == id);
                on_node
                    .into_iter()
                    .any(|(_, amounts)| amounts.get(share) > 0)
            })
        };
        self.holds_touching(id)
            .into_iter()
            .filter(sharing)
            .collect()
    }

    /// The shared GPUs of node `id` with their used thousandths, by GPU index.
    pub(crate) fn node_shares(&self, id: NodeId) -> Vec<(u32, u64)> {
        self.states.shares().on(id)
    }

    /// Whether every GPU's shares are its holds' sum, at most a whole GPU, marked shared on
    /// its node and held by no whole pod (for `check_invariants`).
    pub(crate) fn check_shares(&self) -> Result<(), String> {
        let mut expected: BTreeMap<(NodeId, u32), u64> = BTreeMap::new();
        for (_, hold) in self.ledger.live_holds() {
            for (node, amounts) in &hold.resources_by_node {
                for (gpu, milli) in split(amounts).1 {
                    *expected.entry((*node, gpu)).or_default() += milli;
                }
            }
        }
        let actual: BTreeMap<(NodeId, u32), u64> = (self.states.shares().all())
            .map(|(node, gpu, used)| ((node, gpu), used))
            .collect();
        if actual != expected {
            return Err("the GPU shares differ from the holds' sum".into());
        }
        if let Some(((node, gpu), _)) = actual.iter().find(|&(_, &used)| used > WHOLE_GPU_MILLI) {
            return Err(format!(
                "GPU {gpu} of node slot {node} is shared past a whole GPU"
            ));
        }
        for (id, _) in self.topology.nodes() {
            let state = self.states.get(id);
            if state.shared != self.states.shares().shared(id) {
                return Err(format!("node slot {id}'s shared GPUs are stale"));
            }
            if state.shared.intersects(state.reserved | state.allocated) {
                return Err(format!("node slot {id} holds a shared GPU whole"));
            }
        }
        Ok(())
    }
}

impl Engine {
    /// The node and GPU of each adopted fractional pod, in order: a `(node, 1)` entry takes
    /// the GPU rule F2 would (least room that holds its share, ties to the lowest index;
    /// earlier pods of the call counted), a `PodPlacement` exactly its one GPU, which must
    /// be healthy, held by no whole pod and have room (docs/resources.md "Fractions of a GPU").
    pub(crate) fn adopted_shares(
        &self,
        pods: &[AdoptedPod],
        milli: u16,
    ) -> CoreResult<Vec<(NodeId, GpuSet)>> {
        if pods.is_empty() {
            return Err(invalid("adopt needs at least one pod"));
        }
        let mut asked: BTreeMap<(NodeId, u32), u64> = BTreeMap::new();
        let mut taken = Vec::with_capacity(pods.len());
        for pod in pods {
            let name = pod.node();
            let node = (self.topology.node_id(name))
                .ok_or_else(|| CoreError::UnknownNode(name.to_owned()))?;
            let state = self.states.get(node);
            let room = |gpu: u32| {
                let used = self.states.shares().used(node, gpu);
                let earlier = asked.get(&(node, gpu)).copied().unwrap_or_default();
                WHOLE_GPU_MILLI.saturating_sub(used + earlier)
            };
            let gpu = match *pod {
                AdoptedPod::Count { count: 1, .. } => {
                    let usable = state.free() | (state.shared & !state.unhealthy);
                    let fitting = usable.iter().filter(|&gpu| room(gpu) >= u64::from(milli));
                    let best = fitting.min_by_key(|&gpu| (room(gpu), gpu));
                    best.ok_or_else(|| texts::adopt_no_share(name, milli))?
                }
                AdoptedPod::Gpus { gpus, .. } if gpus.count() == 1 => {
                    let gpu = gpus.lowest().unwrap_or_default();
                    if !state.gpus.contains(gpu) {
                        return Err(super::adopt::not_one_of(name, state.gpus, gpu));
                    }
                    let whole = state.reserved | state.allocated;
                    if state.unhealthy.contains(gpu) || whole.contains(gpu) {
                        let unhealthy = state.unhealthy.contains(gpu);
                        return Err(texts::adopt_gpu_busy(gpu, name, unhealthy));
                    }
                    if room(gpu) < u64::from(milli) {
                        return Err(texts::adopt_share_room(gpu, name, room(gpu), milli));
                    }
                    gpu
                }
                AdoptedPod::Count { count, .. } => return Err(one_gpu(name, count)),
                AdoptedPod::Gpus { gpus, .. } => return Err(one_gpu(name, gpus.count())),
            };
            *asked.entry((node, gpu)).or_default() += u64::from(milli);
            taken.push((node, GpuSet::single(gpu)));
        }
        Ok(taken)
    }
}

/// `InvalidRequest`: a fractional pod names other than one GPU.
fn one_gpu(node: &str, gpus: u32) -> CoreError {
    invalid(format!(
        "a fractional pod on node {node:?} names {gpus} GPUs; it takes part of exactly one"
    ))
}

impl super::Scratch<'_> {
    /// Gives back (`free`) or takes again the resources besides GPUs `given` names, per node
    /// (a what-if removal's: docs/resources.md "Node resources").
    pub fn give_resources(&mut self, given: &[(NodeId, &Amounts)], free: bool) {
        let mut changes = crate::state::Changes::new();
        for &(node, amounts) in given {
            self.states
                .use_resources(node, amounts, !free, &mut changes);
        }
        self.capacity.apply(self.topology, &changes);
    }

    /// Takes what `pods` of a request asking `need` each (and `milli` thousandths of its GPU
    /// for a fraction) use besides whole GPUs on this copy, its views updated.
    pub fn use_resources(&mut self, pods: &[(NodeId, GpuSet)], need: &Amounts, milli: Option<u64>) {
        let mut changes = crate::state::Changes::new();
        for &(node, gpus) in pods {
            let shares = milli
                .into_iter()
                .flat_map(|milli| gpus.iter().map(move |gpu| (share_id(gpu), milli)));
            let amounts = need.plus(&Amounts::from_pairs(shares.collect()));
            self.states
                .use_resources(node, &amounts, true, &mut changes);
        }
        self.capacity.apply(self.topology, &changes);
    }
}
