//! Spares in repairs (docs/repair.md "Repair after failures", R2; "Spares"): the first tier, lost
//! ranks taken by the allocation's own spares (lost ranks in rank order each take the first
//! spare not taken yet that is on an uncordoned node and, for a slice gang, inside the rank's
//! innermost slice domain, spares in the order the allocation lists them); and
//! `reserve_spares`, which holds new spares for an allocation.

use super::{Knobs, RepairClass};
use crate::engine::Engine;
use crate::engine::transactions::{Owner, allocation_of};
use crate::error::{CoreResult, internal, invalid, texts};
use crate::ids::HoldId;
use crate::ledger::Hold;
use crate::limits::MAX_PODS;
use crate::model::Allocation;
use crate::state::Changes;

impl Engine {
    /// Holds `count` new spares for allocation `id` (docs/repair.md "Spares", S5): `count` pods of its
    /// pod size inside its placement's domain, or `count` in every innermost slice domain of a
    /// slice gang, by rules 4-6 with its selector, spread and NUMA policy, each asking what
    /// a pod asks besides GPUs (docs/resources.md "Node resources"); all of them or
    /// [`CoreError::Unschedulable`] and nothing changes.
    pub fn reserve_spares(
        &mut self,
        id: HoldId,
        count: i64,
        caller: Owner<'_>,
        now: f64,
    ) -> CoreResult<Allocation> {
        let count = u64::try_from(count)
            .ok()
            .filter(|count| (1..=MAX_PODS).contains(count))
            .ok_or_else(|| {
                invalid(format!(
                    "count must be between 1 and {MAX_PODS}, got {count}"
                ))
            })?;
        self.reclaim(now);
        self.settle();
        let hold = self.repairable(id, caller)?;
        hold.placement.refuse_fraction("reserve_spares")?; // fractional gangs take no spares
        let Some(request) = hold.request.clone() else {
            return Err(invalid(
                "reserve_spares takes allocations placed from a GangRequest (their pod size)",
            ));
        };
        if request.gpus_per_pod == 0 {
            return Err(invalid(
                "pods without GPUs (gpus_per_pod=0) take neither numa='single' nor spares",
            ));
        }
        let need = (self.topology.resources().names()).resolve(&request.resources)?;
        let classes = spare_classes(hold, (&request, need.clone()), count)?;
        let knobs = Knobs {
            spread: request.spread,
            numa: request.numa,
        };
        let (topology, states) = (&self.topology, &self.states);
        self.capacity.ensure_pool(topology, states, &request.filter);
        let hold = self
            .ledger
            .live(id)
            .ok_or_else(|| internal("a live hold vanished"))?;
        let (depth, item, exact) = self.resolve_path(&hold.placement.domain);
        let placed = match exact {
            true => self.place_classes(&classes, (depth, item), knobs, &Default::default())?,
            false => None,
        };
        let Some(placed) = placed else {
            let sliced = !request.slices.is_empty();
            return Err(texts::no_room_for_spares(
                count,
                request.gpus_per_pod,
                sliced,
            ));
        };
        let gpus = placed.len() as u64 * u64::from(request.gpus_per_pod);
        self.check_cap(hold.owner.as_deref(), gpus)?;
        let mut pods = Vec::with_capacity(placed.len());
        for (_, pod) in placed {
            let node = self.topology.node_id(&pod.node);
            pods.push((
                node.ok_or_else(|| internal("a new spare names no node"))?,
                pod,
            ));
        }
        let mut asks = hold.pod_resources.to_vec();
        if asks.len() > 1 {
            asks.extend(std::iter::repeat_n(need.clone(), pods.len()));
        } else if asks.is_empty() && !need.is_empty() {
            asks.push(need);
        }
        let mut changes = Changes::new();
        let (states, ledger) = (&mut self.states, &mut self.ledger);
        ledger.add_spares(states, &mut changes, id, &pods);
        self.resync_resources(&mut changes, id, asks.into(), &[]);
        self.apply(&changes);
        let hold = self
            .ledger
            .live(id)
            .ok_or_else(|| internal("a live hold vanished"))?;
        Ok(allocation_of(&self.topology, &self.states, id, hold))
    }
}

/// The classes `reserve_spares` places: `count` pods in the placement's domain, or `count` in
/// each innermost slice domain (slices in order), with placeholder ranks that keep the
/// classes in that order.
fn spare_classes(
    hold: &Hold,
    (request, need): (&crate::model::GangRequest, crate::resources::Amounts),
    count: u64,
) -> CoreResult<Vec<RepairClass>> {
    let slices: Vec<Option<Vec<String>>> = match request.slices.is_empty() {
        true => vec![None],
        false => hold.placement.slices.iter().cloned().map(Some).collect(),
    };
    let total = count.checked_mul(slices.len() as u64);
    if total.is_none_or(|total| total > MAX_PODS) {
        return Err(invalid("that many spares exceed the gang limit"));
    }
    Ok((0u64..)
        .zip(slices)
        .map(|(index, slice)| RepairClass {
            gpus_per_pod: request.gpus_per_pod,
            selector: request.filter.clone(),
            ranks: (index * count..(index + 1) * count).collect(),
            slice,
            need: need.clone(),
            milli: None, // a fractional allocation takes no spares (refused above)
        })
        .collect())
}
