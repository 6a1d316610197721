//! How a domain's pods are counted while its candidates are removed and restored
//! (docs/preemption.md P3-P4): node by node, from the free GPUs now plus those the removals
//! give back; for a request asking resources besides GPUs, what they give back of them too
//! (docs/resources.md "Node resources"); for a fractional gang, by the room of the GPUs, each
//! GPU a victim frees holding `1000 / gpu_milli` more pods, and each shared GPU the room its
//! given-back shares leave (P8); a shared GPU all of whose shares are given back is free.

use super::SharedBack;
use crate::capacity::{ResourceFit, ShareFit};
use crate::ids::NodeId;
use crate::resources::Amounts;
use crate::shares::WHOLE_GPU_MILLI;

/// A shared GPU of a slot's node, as removals change it: `(GPU, thousandths used now,
/// thousandths given back)`.
pub(super) type SharedGpu = (u32, u64, u64);

/// One candidate's GPUs on one usable node of a domain; `slot` numbers the domain's nodes;
/// `at` is the entry's position in the candidates (its resources).
#[derive(Debug, Clone, Copy)]
pub(super) struct Entry {
    pub candidate: usize,
    pub slot: usize,
    pub freed: u32,
    pub at: usize,
}

/// Per node slot of a domain: the node, its free GPUs now, the pods of a fractional gang it
/// holds now, and what removals give back (GPUs; resources when the request asks some).
#[derive(Debug, Default)]
pub(super) struct Slots {
    pub nodes: Vec<NodeId>,
    pub node_free: Vec<u32>,
    pub shares_now: Vec<u64>,
    pub extra: Vec<u32>,
    pub extra_amounts: Vec<Amounts>,
    /// Empty (no entry gives back shares), or per slot the shared GPUs entries give back
    /// shares on.
    pub shared: Vec<Vec<SharedGpu>>,
}

/// How one search counts a node's pods.
#[derive(Debug, Clone, Copy)]
pub(super) struct Counting<'f> {
    pub gpus_per_pod: u32,
    pub fit: Option<ResourceFit<'f>>,
    pub share: Option<ShareFit<'f>>,
}

impl Counting<'_> {
    /// What given-back shares add on one node: the shared GPUs freed whole, and the pods
    /// they add (a whole-GPU gang counts the GPUs freed whole; a fractional gang the room
    /// the shares leave).
    #[cold]
    #[inline(never)]
    pub fn share_effect(&self, shared: &[SharedGpu]) -> (u32, u64) {
        let given = shared.iter().filter(|&&(_, _, back)| back > 0);
        let whole = given
            .clone()
            .filter(|&&(_, used, back)| back >= used)
            .count();
        let whole = u32::try_from(whole).unwrap_or(u32::MAX);
        match &self.share {
            Some(share) => {
                let milli = share.milli.max(1);
                let room = |used: u64| WHOLE_GPU_MILLI.saturating_sub(used) / milli;
                let gain =
                    given.map(|&(_, used, back)| room(used.saturating_sub(back)) - room(used));
                (whole, gain.sum())
            }
            None => (whole, 0),
        }
    }

    /// Pods node `node` holds with `free` GPUs free now, `freed` given back whole, `shared`
    /// shared GPUs changed by given-back shares (see [`Counting::pods`]).
    #[cold]
    #[inline(never)]
    pub fn pods_with_shares(
        &self,
        node: NodeId,
        (free, freed): (u32, u32),
        (shares_now, shared): (u64, &[SharedGpu]),
        extra: Option<&Amounts>,
    ) -> u64 {
        let (whole, gain) = match shared.is_empty() {
            true => (0, 0),
            false => self.share_effect(shared),
        };
        let whole = if self.share.is_some() { 0 } else { whole };
        self.pods(node, (free, freed + whole), shares_now + gain, extra)
    }

    /// Pods node `node` holds with `free` GPUs free now and `freed` more given back (for a
    /// fractional gang: `shares_now` pods now, each freed GPU holding its share of pods),
    /// and, for a request asking resources, `extra` of them given back: as the search counts
    /// a node.
    pub fn pods(
        &self,
        node: NodeId,
        (free, freed): (u32, u32),
        shares_now: u64,
        extra: Option<&Amounts>,
    ) -> u64 {
        let by_gpus = match (&self.share, self.gpus_per_pod) {
            (Some(share), _) => {
                let per_gpu = WHOLE_GPU_MILLI / share.milli.max(1);
                shares_now + u64::from(freed) * per_gpu
            }
            (None, 0) => u64::MAX, // pods without GPUs: their resources count them
            (None, size) => u64::from((free + freed) / size),
        };
        match &self.fit {
            Some(fit) if by_gpus > 0 => {
                static NONE: Amounts = Amounts::none();
                by_gpus.min(fit.pods_with_extra(node, extra.unwrap_or(&NONE)))
            }
            _ => by_gpus,
        }
    }
}

/// A domain's running capacity (pods) and free GPUs while its candidates are removed and
/// restored, over a scratch's slots.
#[derive(Debug)]
pub(super) struct Tally<'f> {
    pub counting: Counting<'f>,
    pub capacity: u64,
    pub free: u64,
}

impl Tally<'_> {
    #[inline]
    fn pods_on(&self, slots: &Slots, slot: usize) -> u64 {
        let gpus = (slots.node_free[slot], slots.extra[slot]);
        let shares_now = slots.shares_now.get(slot).copied().unwrap_or(0);
        let extra = slots.extra_amounts.get(slot);
        let node = slots.nodes[slot];
        match slots.shared.get(slot) {
            Some(shared) if !shared.is_empty() => {
                let shared = (shares_now, shared.as_slice());
                (self.counting).pods_with_shares(node, gpus, shared, extra)
            }
            _ => (self.counting).pods(node, gpus, shares_now, extra),
        }
    }

    /// Gives back (`free`) or takes again one entry's `shares` on its slot; returns how many
    /// more shared GPUs are free whole after than before.
    #[cold]
    #[inline(never)]
    fn change_shares(
        &self,
        slots: &mut Slots,
        slot: usize,
        shares: &[SharedBack],
        free: bool,
    ) -> i64 {
        let Some(shared) = slots.shared.get_mut(slot) else {
            return 0;
        };
        let before = self.counting.share_effect(shared).0;
        for &(gpu, back, _) in shares {
            if let Some(row) = shared.iter_mut().find(|(g, _, _)| *g == gpu) {
                row.2 = if free { row.2 + back } else { row.2 - back };
            }
        }
        i64::from(self.counting.share_effect(shared).0) - i64::from(before)
    }

    /// Frees (`free`) or holds again one entry's GPUs (and resources, `amounts`; shares,
    /// `shares`).
    pub fn apply(
        &mut self,
        slots: &mut Slots,
        entry: Entry,
        (amounts, shares): (Option<&Amounts>, &[SharedBack]),
        free: bool,
    ) {
        let slot = entry.slot;
        let before = self.pods_on(slots, slot);
        let whole = match shares.is_empty() {
            true => 0,
            false => self.change_shares(slots, slot, shares, free),
        };
        slots.extra[slot] = match free {
            true => slots.extra[slot] + entry.freed,
            false => slots.extra[slot] - entry.freed,
        };
        if let (Some(amounts), Some(extra)) = (amounts, slots.extra_amounts.get_mut(slot)) {
            *extra = match free {
                true => extra.plus(amounts),
                false => extra.minus(amounts),
            };
        }
        self.capacity = self.capacity + self.pods_on(slots, slot) - before;
        self.free = self.free.saturating_add_signed(whole);
        let freed = u64::from(entry.freed);
        self.free = match free {
            true => self.free + freed,
            false => self.free - freed,
        };
    }
}
