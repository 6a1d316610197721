//! Repair after hardware failures (README "Repair", issue 14): which ranks of an allocation
//! have lost hardware. A rank is lost when its pod's node was removed (the allocation no
//! longer holds GPUs there, even if a node of the same name came back) or one of its GPUs is
//! unhealthy; a GPU marked healthy again un-loses it. Derived from the state whenever an
//! allocation is reported, so it is always current and never stored.

use crate::ledger::Hold;
use crate::state::NodeStates;
use crate::topology::Topology;

/// The sorted ranks of `hold`'s placement that have lost a GPU.
pub(crate) fn lost_ranks(topology: &Topology, states: &NodeStates, hold: &Hold) -> Vec<u64> {
    let mut lost = Vec::new();
    for (rank, pod) in (0u64..).zip(&hold.placement.pods) {
        let held = topology.node_id(&pod.node).and_then(|node| {
            let position = hold
                .gpus_by_node
                .binary_search_by_key(&node, |&(held_on, _)| held_on);
            position.ok().map(|_| node)
        });
        let healthy = held.is_some_and(|node| !states.get(node).unhealthy.intersects(pod.gpus));
        if !healthy {
            lost.push(rank);
        }
    }
    lost
}
