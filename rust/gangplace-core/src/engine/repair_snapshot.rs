//! What snapshot format version 6 adds after the roles (module `roles_snapshot`): per hold,
//! in the body's order, the allocation a repair reservation repairs and the ranks its pods
//! replace (README "Repair after failures"). `check_invariants` checks the links on restore.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::ids::HoldId;
use crate::ledger::{Hold, RepairLink};

/// One entry per hold of the body: `None` unless it is a repair reservation.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct Repairs {
    pub holds: Vec<Option<(u128, Vec<u64>)>>,
}

/// The repair entry of a live hold.
pub(super) fn hold_repair(hold: &Hold) -> Option<(u128, Vec<u64>)> {
    let link = hold.repair.as_deref()?;
    Some((link.allocation.bits(), link.ranks.clone()))
}

/// A restored hold's repair link.
pub(super) fn repair_from(entry: Option<(u128, Vec<u64>)>) -> Option<Arc<RepairLink>> {
    entry.map(|(allocation, ranks)| {
        Arc::new(RepairLink {
            allocation: HoldId::from_bits(allocation),
            ranks,
        })
    })
}
