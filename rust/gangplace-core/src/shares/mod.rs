//! Fractions of a GPU (docs/resources.md "Fractions of a GPU"): each GPU's used thousandths, and what a
//! fractional request is (module `request`); how many such pods a node holds and the GPU each
//! takes are derived views ([`crate::capacity::ShareFit`]).
//!
//! A fractional pod uses GPU `i` of its node as a resource of that node: `gpu_milli`
//! thousandths of the resource [`share_id`]`(i)`, an id above every name's. What a hold
//! uses therefore travels with its other resources (pods that end, nodes that leave,
//! snapshots), and [`crate::state::NodeStates`] keeps those ids here, in [`GpuShares`],
//! rather than with the named resources. A GPU with any share is *shared*: never free for a
//! whole-GPU pod, and free again when its last share ends.

use std::collections::BTreeSet;

use crate::ids::{GpuSet, NodeId};
pub use crate::resources::FIRST_SHARE_ID;
use crate::resources::{Amounts, ResourceId};

mod request;

pub use request::checked_milli;

/// A whole GPU, in thousandths.
pub const WHOLE_GPU_MILLI: u64 = 1000;

/// The resource id that holds shares of GPU `gpu` (GPU indices are below 64).
pub fn share_id(gpu: u32) -> ResourceId {
    FIRST_SHARE_ID + ResourceId::try_from(gpu).unwrap_or(0xFF)
}

/// The GPU whose share resource `id` is (`None` for a named resource).
pub fn share_gpu(id: ResourceId) -> Option<u32> {
    id.checked_sub(FIRST_SHARE_ID).map(u32::from)
}

/// `amounts` split into its named resources and its GPU shares (`(gpu, thousandths)`).
pub fn split(amounts: &Amounts) -> (Amounts, Vec<(u32, u64)>) {
    let mut shares = Vec::new();
    let mut named = Vec::new();
    for &(id, quantity) in amounts.pairs() {
        match share_gpu(id) {
            Some(gpu) => shares.push((gpu, quantity)),
            None => named.push((id, quantity)),
        }
    }
    (Amounts::from_pairs(named), shares)
}

/// The used thousandths of every shared GPU: per node slot its shared GPUs, sorted by index
/// (a dense table, so that counting a node's shares reads no map), and the slots with any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuShares {
    by_node: Vec<Vec<(u32, u64)>>,
    nodes: BTreeSet<NodeId>,
}

impl GpuShares {
    fn on_node(&self, id: NodeId) -> &[(u32, u64)] {
        self.by_node.get(id as usize).map_or(&[], Vec::as_slice)
    }

    /// The used thousandths of GPU `gpu` of node `id`.
    pub fn used(&self, id: NodeId, gpu: u32) -> u64 {
        let mut on_node = self.on_node(id).iter();
        on_node
            .find(|&&(shared, _)| shared == gpu)
            .map_or(0, |&(_, used)| used)
    }

    /// The GPUs of node `id` with a share.
    pub fn shared(&self, id: NodeId) -> GpuSet {
        let gpus = self.on_node(id).iter();
        gpus.fold(GpuSet::EMPTY, |set, &(gpu, _)| set | GpuSet::single(gpu))
    }

    /// The node slots with a share, ascending.
    pub fn nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes.iter().copied()
    }

    /// The shared GPUs of node `id` with their used thousandths, by GPU index.
    pub fn on(&self, id: NodeId) -> Vec<(u32, u64)> {
        self.on_node(id).to_vec()
    }

    /// Adds (`take`) or removes `milli` thousandths of GPU `gpu` of node `id`.
    pub fn change(&mut self, id: NodeId, gpu: u32, milli: u64, take: bool) {
        let slot = id as usize;
        if slot >= self.by_node.len() {
            self.by_node.resize(slot + 1, Vec::new());
        }
        let on_node = &mut self.by_node[slot];
        let at = match on_node.binary_search_by_key(&gpu, |&(shared, _)| shared) {
            Ok(at) => at,
            Err(at) => {
                on_node.insert(at, (gpu, 0));
                at
            }
        };
        let used = &mut on_node[at].1;
        *used = match take {
            true => used.saturating_add(milli),
            false => used.saturating_sub(milli),
        };
        if *used == 0 {
            on_node.remove(at);
        }
        match on_node.is_empty() {
            true => self.nodes.remove(&id),
            false => self.nodes.insert(id),
        };
    }

    /// Forgets node `id` (its node was removed).
    pub fn clear(&mut self, id: NodeId) {
        if let Some(on_node) = self.by_node.get_mut(id as usize) {
            on_node.clear();
        }
        self.nodes.remove(&id);
    }

    /// Every share, by node slot then GPU (for the invariant check).
    pub fn all(&self) -> impl Iterator<Item = (NodeId, u32, u64)> + '_ {
        let nodes = self.nodes.iter();
        nodes.flat_map(|&id| {
            self.on_node(id)
                .iter()
                .map(move |&(gpu, used)| (id, gpu, used))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_ids_round_trip_above_names() {
        assert_eq!(share_gpu(share_id(0)), Some(0));
        assert_eq!(share_gpu(share_id(63)), Some(63));
        assert_eq!(share_gpu(FIRST_SHARE_ID - 1), None);
    }

    #[test]
    fn shares_come_and_go() {
        let mut shares = GpuShares::default();
        shares.change(3, 1, 460, true);
        shares.change(3, 1, 300, true);
        assert_eq!(shares.used(3, 1), 760);
        assert_eq!(shares.shared(3), GpuSet::single(1));
        shares.change(3, 1, 760, false);
        assert_eq!(shares.shared(3), GpuSet::EMPTY);
        assert_eq!(shares.all().count(), 0);
    }
}
