//! What a fractional request is (docs/resources.md "Fractions of a GPU", rule F1): its checks, the
//! whole GPUs it counts, and the refusals of the operations that do not plan fractions.

use crate::error::{CoreResult, invalid};
use crate::model::{GangRequest, Placement};
use crate::shapes::Numa;

use super::WHOLE_GPU_MILLI;

/// Thousandths of a GPU a fractional pod asks, checked: `1..=999` (F1).
pub fn checked_milli(milli: i64) -> CoreResult<u16> {
    u16::try_from(milli)
        .ok()
        .filter(|&milli| (1..WHOLE_GPU_MILLI).contains(&u64::from(milli)))
        .ok_or_else(|| {
            invalid(format!(
                "gpu_milli must be between 1 and 999 thousandths of a GPU (a whole GPU is \
                 gpus_per_pod=1 without gpu_milli), got {milli}"
            ))
        })
}

impl GangRequest {
    /// The same request asking `gpu_milli` thousandths of one GPU per pod (`None`: whole
    /// GPUs), checked against its other fields.
    pub fn with_gpu_milli(self, gpu_milli: Option<i64>) -> CoreResult<Self> {
        let gpu_milli = gpu_milli.map(checked_milli).transpose()?;
        let request = Self { gpu_milli, ..self };
        request.check_fraction()?;
        Ok(request)
    }

    /// A fractional request asks exactly one GPU per pod and neither spares nor one NUMA
    /// group (F1).
    pub fn check_fraction(&self) -> CoreResult<()> {
        if self.gpu_milli.is_none() {
            return Ok(());
        }
        if self.gpus_per_pod != 1 {
            return Err(invalid(format!(
                "gpu_milli asks part of one GPU per pod: gpus_per_pod must be 1, got {}",
                self.gpus_per_pod
            )));
        }
        if self.spares > 0 || self.numa == Numa::Single {
            return Err(invalid(
                "pods asking gpu_milli take neither spares nor numa='single'",
            ));
        }
        Ok(())
    }

    /// Whole GPUs each pod holds: 0 for a fraction (it holds a share, not a GPU).
    pub fn whole_gpus(&self) -> u32 {
        match self.gpu_milli {
            Some(_) => 0,
            None => self.gpus_per_pod,
        }
    }

    /// Refuses `doing` for a fractional request: that operation does not plan shares of
    /// GPUs (docs/resources.md "Fractions of a GPU", what counts them).
    pub fn refuse_fraction(&self, doing: &str) -> CoreResult<()> {
        match self.gpu_milli {
            None => Ok(()),
            Some(milli) => Err(invalid(format!(
                "{doing} does not plan fractions of a GPU; this request asks gpu_milli={milli} \
                 (docs/resources.md \"Fractions of a GPU\")"
            ))),
        }
    }
}

impl Placement {
    /// Refuses `doing` for a placement of fractional pods (as
    /// [`GangRequest::refuse_fraction`]).
    pub fn refuse_fraction(&self, doing: &str) -> CoreResult<()> {
        match self.gpu_milli {
            None => Ok(()),
            Some(milli) => Err(invalid(format!(
                "{doing} does not take fractions of a GPU; this placement's pods use \
                 gpu_milli={milli} (docs/resources.md \"Fractions of a GPU\")"
            ))),
        }
    }
}
