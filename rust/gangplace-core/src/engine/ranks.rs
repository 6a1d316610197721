//! Where a hold's ranks stand, derived from the state: the ranks that lost a GPU or their
//! node (docs/repair.md "Repair after failures"), the innermost slice of a rank, and the spares that
//! can take lost ranks (docs/repair.md "Spares"). Pure functions of the topology, the node states and
//! the hold; every engine module that reads them (transactions, repair, spares) imports them
//! from here, so none of those import each other in a circle.

use crate::ids::NodeId;
use crate::ledger::Hold;
use crate::model::{NodeFilter, PodPlacement};
use crate::state::NodeStates;
use crate::topology::Topology;

/// The sorted ranks of `hold`'s placement that have lost a GPU (an ended rank never has).
pub(crate) fn lost_ranks(topology: &Topology, states: &NodeStates, hold: &Hold) -> Vec<u64> {
    let mut lost = Vec::new();
    for (rank, pod) in (0u64..).zip(&hold.placement.pods) {
        if hold.ended.binary_search(&rank).is_ok() {
            continue;
        }
        let held = topology.node_id(&pod.node).and_then(|node| {
            if pod.gpus.is_empty() || hold.placement.gpu_milli.is_some() {
                // A pod without GPUs (docs/resources.md "Node resources") runs where its resources are,
                // a fractional one where its share is (docs/resources.md "Fractions of a GPU").
                let there = hold.resources_by_node.iter().any(|&(on, _)| on == node);
                return there.then_some(node);
            }
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

/// Whether `hold` may have lost ranks: `false` proves it has none. A hold that holds every
/// GPU its live ranks and spares name, none unhealthy, has none (a removed node takes its
/// GPUs out of `gpus_by_node`); otherwise `lost_ranks` decides. Reads no node names, so a
/// scan over every hold stays cheap.
pub(crate) fn may_have_lost(states: &NodeStates, hold: &Hold) -> bool {
    let unhealthy =
        (hold.gpus_by_node.iter()).any(|&(node, gpus)| states.unhealthy(node).intersects(gpus));
    unhealthy || hold.held_differs()
}

/// The innermost slice domain of `rank` for a slice gang or a sliced group (`None`
/// otherwise).
pub(crate) fn slice_of(hold: &Hold, rank: u64) -> Option<&[String]> {
    let index = slice_index(hold, rank)?;
    hold.placement.slices.get(index).map(Vec::as_slice)
}

/// Where `rank`'s innermost slice is in `placement.slices`: `rank / k` for a slice gang; for
/// a multi-role gang, the slices of the sliced groups before its group, then its own index.
pub(crate) fn slice_index(hold: &Hold, rank: u64) -> Option<usize> {
    if let Some(request) = hold.request.as_deref() {
        let inner = request.slices.last()?.pods_per_slice;
        return usize::try_from(rank / inner).ok();
    }
    let roles = hold.roles.as_deref()?;
    let (mut start, mut slices_before) = (0u64, 0u64);
    for (group, (_, count)) in roles.groups.iter().zip(&hold.placement.groups) {
        let inner = group.slices.last().map(|layer| layer.pods_per_slice);
        if rank < start + count {
            let inner = inner?;
            return usize::try_from(slices_before + (rank - start) / inner).ok();
        }
        start += count;
        slices_before += inner.map_or(0, |inner| count / inner);
    }
    None
}

/// `(rank, spare)` for every lost rank a spare takes, in rank order: a spare of the lost
/// pod's GPU count asking what it asks, on a node carrying the rank's selector.
pub(crate) fn spare_matches(
    topology: &Topology,
    states: &NodeStates,
    hold: &Hold,
    lost: &[u64],
) -> Vec<(u64, PodPlacement)> {
    let spares = &hold.placement.spares;
    if spares.is_empty() {
        return Vec::new();
    }
    let usable: Vec<Option<(NodeId, Vec<&str>)>> = spares
        .iter()
        .map(|spare| {
            let node = topology.node_id(&spare.node)?;
            (!states.get(node).cordoned).then(|| (node, topology.node_path(node)))
        })
        .collect();
    let mut taken = vec![false; spares.len()];
    let mut matches = Vec::new();
    for &rank in lost {
        let within = slice_of(hold, rank).unwrap_or(&[]);
        let pod = usize::try_from(rank)
            .ok()
            .and_then(|r| hold.placement.pods.get(r));
        let size = pod.map_or(0, |pod| pod.gpus.count());
        let selector = selector_of(hold, rank);
        let asks = asks_of(hold, usize::try_from(rank).unwrap_or(usize::MAX));
        let found = (0..spares.len()).find(|&index| {
            !taken[index]
                && spares[index].gpus.count() == size
                && asks_of(hold, hold.placement.pods.len() + index) == asks
                && usable[index].as_ref().is_some_and(|(node, path)| {
                    within.len() <= path.len()
                        && within.iter().zip(path).all(|(a, b)| a == b)
                        && topology.node(*node).admits(selector)
                })
        });
        if let Some(index) = found {
            taken[index] = true;
            matches.push((rank, spares[index].clone()));
        }
    }
    matches
}

/// The filter `rank`'s pods follow: the request's, or its group's for a multi-role gang (a
/// hold placed without a request: the plain filter).
pub(crate) fn selector_of(hold: &Hold, rank: u64) -> &NodeFilter {
    static PLAIN: std::sync::LazyLock<NodeFilter> = std::sync::LazyLock::new(NodeFilter::default);
    if let Some(request) = hold.request.as_deref() {
        return &request.filter;
    }
    let Some(roles) = hold.roles.as_deref() else {
        return &PLAIN;
    };
    let mut end = 0u64;
    for (group, (_, count)) in roles.groups.iter().zip(&hold.placement.groups) {
        end += count;
        if rank < end {
            return &group.filter;
        }
    }
    &PLAIN
}

/// What pod slot `slot` of `hold` asks besides GPUs (docs/resources.md "Node resources"): ranks first,
/// then the spares in order; nothing for a hold whose pods ask nothing.
pub(crate) fn asks_of(hold: &Hold, slot: usize) -> &crate::resources::Amounts {
    static NONE: crate::resources::Amounts = crate::resources::Amounts::none();
    match &*hold.pod_resources {
        [] => &NONE,
        [uniform] => uniform,
        per_slot => per_slot.get(slot).unwrap_or(&NONE),
    }
}
