//! The version 9 part of a snapshot (docs/resources.md "Fractions of a GPU"): the thousandths of a GPU
//! every live hold's pods use, and the check that a restored fractional hold fits its GPUs.

use serde::{Deserialize, Serialize};

use crate::engine::Engine;
use crate::engine::records::bad;
use crate::error::CoreResult;
use crate::ledger::Hold;
use crate::shares::{WHOLE_GPU_MILLI, split};

/// Every live hold's `gpu_milli`, holds by id (empty in older formats: whole GPUs).
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct ShareRecords {
    pub holds: Vec<Option<u16>>,
}

impl Engine {
    /// The version 9 records of this engine.
    pub(crate) fn share_records(&self) -> ShareRecords {
        let holds = self.ledger.live_holds_by_id().into_iter();
        ShareRecords {
            holds: holds.map(|(_, hold)| hold.placement.gpu_milli).collect(),
        }
    }

    /// Checks that a restored hold's shares fit: each on a GPU of its node held by no whole
    /// pod, healthy for a reservation, the GPU's shares at most a whole GPU.
    pub(crate) fn check_restored_shares(&self, hold: &Hold, committed: bool) -> CoreResult<()> {
        if let Some(milli) = hold.placement.gpu_milli
            && !(1..WHOLE_GPU_MILLI).contains(&u64::from(milli))
        {
            return Err(bad("a hold's gpu_milli is out of range"));
        }
        for (node, amounts) in &hold.resources_by_node {
            let state = self.states.get(*node);
            for (gpu, milli) in split(amounts).1 {
                let busy = state.reserved | state.allocated | !state.gpus;
                let unhealthy = !committed && state.unhealthy.contains(gpu);
                let used = self.states.shares().used(*node, gpu);
                if busy.contains(gpu) || unhealthy || used + milli > WHOLE_GPU_MILLI {
                    return Err(bad("a hold shares a GPU it cannot share"));
                }
            }
        }
        Ok(())
    }
}
