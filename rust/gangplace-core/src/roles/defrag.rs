//! Defragmentation for multi-role gangs (docs/preemption.md "Priorities, preemption and
//! defragmentation", rules D1-D4, and "Multi-role gangs", 7): the sets of P3-P4 over the whole
//! unit (module `roles_preemption`), each accepted by D2 as for a single gang (its movers
//! placed again outside the unit's domain, on the state where the unit's GPUs are held), and
//! D3's smallest set at the first level with one.

use std::sync::Arc;

use super::preemption::UnitSearch;
use crate::engine::Engine;
use crate::engine::removal::Purpose;
use crate::error::CoreResult;
use crate::ids::{GpuSet, HoldId, NodeId};
use crate::model::{AnyRequest, MultiGangRequest};
use crate::model::{DefragOptions, DefragPlan, RemovalLimits};
use crate::search::Plan;
use crate::search::removal::Candidate;

/// D3's key: moves, moved GPUs, evictions, path of the unit's domain.
type DefragKey = (usize, u64, usize, Vec<String>);

impl Engine {
    /// Which movable jobs to move where so that the multi-role unit fits (D1-D4 over the
    /// whole unit). Changes nothing but expired reservations (and selector pools).
    pub fn plan_defrag_roles(
        &mut self,
        request: &Arc<MultiGangRequest>,
        limits: &RemovalLimits,
        options: DefragOptions,
        now: f64,
    ) -> CoreResult<Option<DefragPlan>> {
        super::refuse_unsupported_roles(request, "plan_defrag")?;
        let resolved = self.prepare_roles(request, now)?;
        let unit = AnyRequest::Roles(Arc::clone(request));
        if let Some(plan) = self.plan_roles(request, &resolved)?.plan {
            let placement = Arc::new(self.roles_placement(request, &plan));
            return Ok(Some(self.defrag_plan(unit, placement, &[], Vec::new())));
        }
        let priority = request.terms.priority;
        let candidates = self.candidates(priority, limits, Purpose::Defragmentation, now);
        let node_depth = self.topology.node_depth();
        for (depth, elastic) in UnitSearch::tries(request, &resolved, node_depth) {
            let found =
                UnitSearch::new(self, request, &resolved, &candidates)?.all_at(depth, elastic)?;
            let mut best: Option<(DefragKey, _)> = None;
            for (choice, plan) in found {
                let pods: Vec<(NodeId, GpuSet)> =
                    plan.pods().map(|pod| (pod.node, pod.gpus)).collect();
                let placed = (choice.item, pods.as_slice());
                let Some((moves, evictions)) =
                    self.move_members(priority, &candidates, &choice.members, placed, options)?
                else {
                    continue;
                };
                if limits.max_members.is_some_and(|most| moves.len() > most) {
                    continue;
                }
                // Thousandths, as D3 counts them (docs/preemption.md D5).
                let moved = moves.iter().map(|(m, _)| candidates[*m].held_milli).sum();
                let path = choice.item.path(&self.topology);
                let path = path.into_iter().map(str::to_owned).collect();
                let key = (moves.len(), moved, evictions.len(), path);
                if best.as_ref().is_none_or(|(held, _)| key < *held) {
                    best = Some((key, (plan, moves, evictions)));
                }
            }
            if let Some((_, (plan, moves, evictions))) = best {
                let moves: Vec<(&Candidate, &Plan)> = moves
                    .iter()
                    .map(|(member, target)| (&candidates[*member], target))
                    .collect();
                let evictions: Vec<HoldId> = evictions.iter().map(|&m| candidates[m].id).collect();
                let placement = Arc::new(self.roles_placement(request, &plan));
                return Ok(Some(self.defrag_plan(unit, placement, &moves, evictions)));
            }
        }
        Ok(None)
    }
}
