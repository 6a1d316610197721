//! How many pods of a fractional request each node holds, and the GPU each takes (docs/resources.md
//! "Fractions of a GPU"): a count over the node states and their GPU shares.

use std::collections::BTreeMap;

use crate::ids::{GpuSet, NodeId};
use crate::shares::WHOLE_GPU_MILLI;
use crate::state::NodeStates;

/// Shares taken on a what-if view, per `(node, GPU)`, in thousandths (a repair's earlier
/// classes: docs/repair.md "Repair after failures", fractions).
pub type TakenShares = BTreeMap<(NodeId, u32), u64>;

/// How the pods of a fractional request fit node by node: each usable GPU (free, or shared
/// and healthy) holds `floor((1000 - used) / gpu_milli)` of them.
#[derive(Debug, Clone, Copy)]
pub struct ShareFit<'a> {
    /// Thousandths of a GPU each pod asks (`1..=999`).
    pub milli: u64,
    /// The nodes' states (their shared GPUs and health) and shares.
    pub states: &'a NodeStates,
    /// Shares taken besides the states' on this what-if view (`None`: none).
    pub taken: Option<&'a TakenShares>,
    /// Shares of the states' given back on this what-if view (victims removed; `None`: none).
    pub given_back: Option<&'a TakenShares>,
}

impl<'a> ShareFit<'a> {
    /// The fit of a request asking `gpu_milli` thousandths per pod (`None`: whole GPUs).
    pub fn of(gpu_milli: Option<u16>, states: &'a NodeStates) -> Option<Self> {
        let milli = u64::from(gpu_milli?);
        Some(Self {
            milli,
            states,
            taken: None,
            given_back: None,
        })
    }

    /// This fit with `taken` shares used besides the states' (their GPUs are free or shared
    /// in the view: a taken share only lessens a GPU's room).
    pub fn with_taken(self, taken: &'a TakenShares) -> Self {
        Self {
            taken: Some(taken),
            ..self
        }
    }

    /// This fit with `given_back` shares of the states' ended (docs/preemption.md P8).
    pub fn with_given_back(self, given_back: &'a TakenShares) -> Self {
        Self {
            given_back: Some(given_back),
            ..self
        }
    }

    /// The GPUs of node `id` a fraction may use, given its feasible free GPUs `free`: those,
    /// and its healthy shared ones.
    fn usable(&self, id: NodeId, free: GpuSet) -> GpuSet {
        let state = self.states.get(id);
        free | (state.shared & !state.unhealthy)
    }

    /// Room left on GPU `gpu` of node `id`, in thousandths.
    fn room(&self, id: NodeId, gpu: u32) -> u64 {
        let taken = self.taken.and_then(|taken| taken.get(&(id, gpu)).copied());
        let back = self
            .given_back
            .and_then(|back| back.get(&(id, gpu)).copied());
        let used = self.states.shares().used(id, gpu) + taken.unwrap_or(0);
        let used = used.saturating_sub(back.unwrap_or(0));
        WHOLE_GPU_MILLI.saturating_sub(used)
    }

    /// Pods of this size that node `id` holds, its feasible free GPUs being `free`.
    pub fn pods(&self, id: NodeId, free: GpuSet) -> u64 {
        let usable = self.usable(id, free).iter();
        usable.map(|gpu| self.room(id, gpu) / self.milli).sum()
    }

    /// The GPU of each of `pods` pods on node `id` (feasible free GPUs `free`), pod by pod:
    /// the usable GPU with the least room that still holds one (best fit), ties to the lowest
    /// index (docs/resources.md "Fractions of a GPU", rule F2). `None` when they do not all fit.
    pub fn choose(&self, id: NodeId, free: GpuSet, pods: u64) -> Option<Vec<u32>> {
        let mut room: Vec<(u32, u64)> = (self.usable(id, free).iter())
            .map(|gpu| (gpu, self.room(id, gpu)))
            .collect();
        let mut chosen = Vec::with_capacity(usize::try_from(pods).ok()?);
        for _ in 0..pods {
            let fitting = room.iter_mut().filter(|(_, left)| *left >= self.milli);
            let best = fitting.min_by_key(|&&mut (gpu, left)| (left, gpu))?;
            best.1 -= self.milli;
            chosen.push(best.0);
        }
        Some(chosen)
    }
}
