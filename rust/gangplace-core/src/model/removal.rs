//! The filters of `plan_preemption` and `plan_defrag` (docs/preemption.md P2, P7, D1).

use crate::error::{CoreResult, invalid};
use crate::ids::HoldId;
use crate::limits::MAX_NAME_BYTES;

/// The filters of `plan_preemption` and `plan_defrag` on which allocations may be removed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RemovalLimits {
    /// At most this many victims (preemption) or moves (defragmentation); `None`: no bound.
    pub max_members: Option<usize>,
    /// Only allocations committed at least this many seconds ago.
    pub min_runtime: f64,
    /// Never allocations of these owners.
    pub exempt_owners: Vec<String>,
    /// Never these allocations, sorted (a scheduler's cool-down after a preemption).
    pub exempt_holds: Vec<HoldId>,
    /// Preemption only: when set, the only candidates, sorted, whatever their priority (the
    /// caller's policy chose them, as a scheduler's queues do; docs/preemption.md P7).
    pub only_holds: Option<Vec<HoldId>>,
}

impl RemovalLimits {
    /// Validated limits: `max_members >= 0`, `min_runtime` finite and `>= 0`, owner names of
    /// 1 to 253 bytes.
    pub fn new(
        max_members: Option<i64>,
        min_runtime: f64,
        exempt_owners: Vec<String>,
        what: &str,
    ) -> CoreResult<Self> {
        let max_members = max_members
            .map(|most| {
                usize::try_from(most)
                    .map_err(|_| invalid(format!("{what} must be >= 0, got {most}")))
            })
            .transpose()?;
        if !(min_runtime.is_finite() && min_runtime >= 0.0) {
            return Err(invalid(format!(
                "min_runtime must be a finite number of seconds >= 0, got {min_runtime}"
            )));
        }
        if let Some(owner) = exempt_owners
            .iter()
            .find(|owner| owner.is_empty() || owner.len() > MAX_NAME_BYTES)
        {
            return Err(invalid(format!(
                "exempt_owners: owner {owner:?} must be 1 to {MAX_NAME_BYTES} bytes long"
            )));
        }
        Ok(Self {
            max_members,
            min_runtime,
            exempt_owners,
            exempt_holds: Vec::new(),
            only_holds: None,
        })
    }

    /// The same limits, never removing the allocations `holds` (sorted here, each once).
    #[must_use]
    pub fn with_exempt_holds(mut self, mut holds: Vec<HoldId>) -> Self {
        holds.sort_unstable();
        holds.dedup();
        self.exempt_holds = holds;
        self
    }

    /// The same limits, victims only among `holds` (sorted here, each once), whatever their
    /// priority; `None` keeps the priority rule (docs/preemption.md P7).
    #[must_use]
    pub fn with_only_holds(mut self, holds: Option<Vec<HoldId>>) -> Self {
        self.only_holds = holds.map(|mut holds| {
            holds.sort_unstable();
            holds.dedup();
            holds
        });
        self
    }
}
