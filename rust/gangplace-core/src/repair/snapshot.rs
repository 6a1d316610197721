//! What snapshot format version 6 adds after the roles (module `roles_snapshot`): per hold,
//! in the body's order, its request's spare count, its placement's spares, and for a repair
//! reservation the allocation it repairs, the ranks its pods replace and the spares it takes
//! (docs/repair.md "Repair after failures", "Spares"). `check_invariants` checks the links on
//! restore.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::engine::records::{bad, pod_from_record};
use crate::error::CoreResult;
use crate::ids::HoldId;
use crate::ledger::{Hold, RepairLink};
use crate::model::PodPlacement;

/// One entry per hold of the body.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Repairs {
    pub holds: Vec<HoldRepairs>,
}

/// A hold's spares and repair link.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct HoldRepairs {
    /// The request's `spares` (0 without a request).
    pub request_spares: u64,
    /// The placement's spare pods.
    pub spares: Vec<(String, Vec<u32>)>,
    /// A repair reservation's link.
    pub link: Option<LinkRecord>,
    /// A multi-role request's spares per group (empty when none has spares).
    pub group_spares: Vec<u64>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct LinkRecord {
    allocation: u128,
    ranks: Vec<u64>,
    spares: Vec<(u64, String, Vec<u32>)>,
}

fn pod_record(pod: &PodPlacement) -> (String, Vec<u32>) {
    (pod.node.to_string(), pod.gpus.iter().collect())
}

/// The entry of a live hold.
pub(crate) fn hold_repairs(hold: &Hold) -> HoldRepairs {
    HoldRepairs {
        request_spares: hold.request.as_deref().map_or(0, |request| request.spares),
        group_spares: (hold.roles.as_deref())
            .filter(|roles| roles.has_spares())
            .map_or_else(Vec::new, |roles| {
                roles.groups.iter().map(|g| g.spares).collect()
            }),
        spares: hold.placement.spares.iter().map(pod_record).collect(),
        link: hold.repair.as_deref().map(|link| LinkRecord {
            allocation: link.allocation.bits(),
            ranks: link.ranks.clone(),
            spares: (link.spares.iter())
                .map(|(rank, pod)| {
                    let (node, gpus) = pod_record(pod);
                    (*rank, node, gpus)
                })
                .collect(),
        }),
    }
}

/// A restored hold's spare pods (affinities are set by the caller).
pub(crate) fn spares_from(entry: &HoldRepairs) -> CoreResult<Vec<PodPlacement>> {
    let pods = entry.spares.iter();
    pods.map(|(node, gpus)| pod_from_record(node.clone(), gpus))
        .collect()
}

/// A restored hold's repair link.
pub(crate) fn link_from(entry: Option<LinkRecord>) -> CoreResult<Option<Arc<RepairLink>>> {
    let Some(record) = entry else {
        return Ok(None);
    };
    let spares = record.spares.into_iter();
    let spares = spares
        .map(|(rank, node, gpus)| Ok((rank, pod_from_record(node, &gpus)?)))
        .collect::<CoreResult<Vec<_>>>()?;
    if !spares.windows(2).all(|pair| pair[0].0 < pair[1].0) {
        return Err(bad("a repair link lists its spares out of rank order"));
    }
    Ok(Some(Arc::new(RepairLink {
        allocation: HoldId::from_bits(record.allocation),
        ranks: record.ranks,
        spares,
    })))
}
