//! The first tier of repair (README "Repair after failures", R2; "Spares"): lost ranks taken
//! by the allocation's own spares. Lost ranks in rank order each take the first spare not
//! taken yet that is on an uncordoned node and, for a slice gang, inside the rank's innermost
//! slice domain (spares in the order the allocation lists them).

use crate::ledger::Hold;
use crate::model::PodPlacement;
use crate::state::NodeStates;
use crate::topology::Topology;

/// The innermost slice domain of `rank` for a slice gang (`None` otherwise).
pub(crate) fn slice_of(hold: &Hold, rank: u64) -> Option<&[String]> {
    let request = hold.request.as_deref()?;
    let inner = request.slices.last()?.pods_per_slice;
    let index = usize::try_from(rank / inner).ok()?;
    hold.placement.slices.get(index).map(Vec::as_slice)
}

/// `(rank, spare)` for every lost rank a spare takes, in rank order.
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
    let usable: Vec<Option<Vec<&str>>> = spares
        .iter()
        .map(|spare| {
            let node = topology.node_id(&spare.node)?;
            (!states.get(node).cordoned).then(|| topology.node_path(node))
        })
        .collect();
    let mut taken = vec![false; spares.len()];
    let mut matches = Vec::new();
    for &rank in lost {
        let within = slice_of(hold, rank).unwrap_or(&[]);
        let found = (0..spares.len()).find(|&index| {
            !taken[index]
                && usable[index].as_ref().is_some_and(|path| {
                    within.len() <= path.len() && within.iter().zip(path).all(|(a, b)| a == b)
                })
        });
        if let Some(index) = found {
            taken[index] = true;
            matches.push((rank, spares[index].clone()));
        }
    }
    matches
}
