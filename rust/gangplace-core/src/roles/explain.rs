//! Explanations of multi-role gangs: `explain_roles` and the `Unschedulable.reason` of a unit
//! (per level tried, its first candidate and the first group that failed there; then the
//! group that cannot fit even alone). The frame and the one-gang explanations are
//! [`crate::engine::explain`]'s.

use super::{LevelTrial, Resolved};
use crate::capacity::ResourceFit;
use crate::engine::Engine;
use crate::engine::explain::{Explanation, LevelExplanation, counted, name_text};
use crate::error::CoreResult;
use crate::model::MultiGangRequest;
use crate::search::Search;

impl Engine {
    /// Explains a multi-role gang: per level tried, its first candidate and the first group
    /// that failed there (as [`LevelExplanation::capacity`] and `needed`: that group's pods
    /// with room and wanted); `excluded` counts nodes for the group placed first.
    pub fn explain_roles(&mut self, asked: &MultiGangRequest, now: f64) -> CoreResult<Explanation> {
        let request = &*asked.placed(); // spares count as pods (docs/repair.md "Spares")
        let resolved = self.prepare_roles(request, now)?;
        let outcome = self.plan_roles(request, &resolved)?;
        let placement = outcome
            .plan
            .as_ref()
            .map(|plan| asked.split_spares(self.roles_placement(request, plan)));
        let mut levels: Vec<LevelExplanation> = outcome
            .trials
            .iter()
            .map(|trial| {
                let (domain, capacity, needed) = match &trial.first {
                    Some((item, failure)) => {
                        (Some(self.item_path(*item)), failure.held, failure.wanted)
                    }
                    None => (None, 0, request.total_pods()),
                };
                LevelExplanation {
                    level: self.topology.level_name(trial.depth).to_owned(),
                    domain,
                    capacity,
                    needed,
                    gpus_to_free: None,
                    preemption: None,
                    cheapest: None,
                    limited_by: None,
                }
            })
            .collect();
        let summary = match &placement {
            Some(placement) => {
                if let Some(level) = levels.last_mut() {
                    level.domain = Some(placement.domain.clone());
                    (level.capacity, level.needed) = (request.total_pods(), request.total_pods());
                    level.gpus_to_free = Some(0);
                }
                format!(
                    "multi-role gang{} of {} groups ({} GPUs) fits: {} at level {} {}",
                    name_text(&request.name),
                    request.groups.len(),
                    request.total_gpus(),
                    counted(placement.pods.len() as u64, "pod"),
                    placement.level,
                    placement.domain.join("/")
                )
            }
            None => self.roles_reason(request, &resolved, &outcome.trials),
        };
        let failed_group = match (&placement, outcome.trials.last()) {
            (None, Some(trial)) => match &trial.first {
                Some((_, failure)) => {
                    let group = request.groups[failure.group].name.clone();
                    Some((group, self.trial_text(request, trial)))
                }
                // No candidate had the unit's GPUs: name a group that cannot fit even alone.
                None => (self.lone_failure(request, &resolved, trial.depth)).map(|lone| {
                    let text = self.lone_text(trial.depth, lone);
                    (request.groups[lone.0].name.clone(), text)
                }),
            },
            _ => None,
        };
        let first = resolved.order.first().map(|&index| &request.groups[index]);
        Ok(Explanation {
            placement,
            levels,
            excluded: first
                .map(|group| self.exclusions(group))
                .unwrap_or_default(),
            summary,
            failed_group,
        })
    }

    /// `Unschedulable.reason` of a multi-role gang: per level tried, finest first, its first
    /// candidate and the first group that failed there; then the first group (placing order)
    /// that no domain of the coarsest level tried holds even alone, if any.
    pub(crate) fn roles_reason(
        &self,
        request: &MultiGangRequest,
        resolved: &Resolved,
        trials: &[LevelTrial],
    ) -> String {
        let name = name_text(&request.name);
        let mut levels: Vec<String> = trials
            .iter()
            .map(|trial| self.trial_text(request, trial))
            .collect();
        let depth = trials.last().map(|trial| trial.depth);
        if let Some((depth, lone)) =
            depth.and_then(|depth| Some((depth, self.lone_failure(request, resolved, depth)?)))
        {
            let group = &request.groups[lone.0].name;
            levels.push(format!("group \"{group}\" {}", self.lone_text(depth, lone)));
        }
        format!(
            "multi-role gang{name} of {} groups ({} GPUs) does not fit: {}",
            request.groups.len(),
            request.total_gpus(),
            levels.join("; ")
        )
    }

    /// The first group, in placing order, that no domain of `depth` holds even alone (at its
    /// smallest accepted size): `(group, pods the best such domain holds, pods wanted)`.
    fn lone_failure(
        &self,
        request: &MultiGangRequest,
        resolved: &Resolved,
        depth: usize,
    ) -> Option<(usize, u64, u64)> {
        resolved.order.iter().find_map(|&index| {
            let group = &request.groups[index];
            let view = self.capacity.view_for(&self.states, &group.filter)?;
            let need = &resolved.needs[index];
            let fit = (!need.is_empty()).then(|| {
                let capacities = self.topology.resources().capacities();
                ResourceFit::new(need, capacities, self.states.resource_use())
            });
            let search = Search::new(&self.topology, &view, group.gpus_per_pod)
                .with_shape(resolved.layers[index], request.spread)
                .with_resources(fit);
            let wanted = group.min_pods.unwrap_or(group.pods);
            let held = search.largest_capacity(depth).capacity.min(wanted);
            (held < wanted).then_some((index, held, wanted))
        })
    }

    /// "cannot fit even alone: the best rack holds 2 of its 3 pods".
    fn lone_text(&self, depth: usize, (_, held, wanted): (usize, u64, u64)) -> String {
        let place = match depth {
            0 => String::from("the cluster"),
            _ => format!("the best {}", self.topology.level_name(depth)),
        };
        format!("cannot fit even alone: {place} holds {held} of its {wanted} pods")
    }

    /// One level of the reason.
    pub(crate) fn trial_text(&self, request: &MultiGangRequest, trial: &LevelTrial) -> String {
        let level = self.topology.level_name(trial.depth);
        match &trial.first {
            None => format!("no {level} has {} free GPUs", request.total_gpus()),
            Some((item, failure)) => {
                let path = item.path(&self.topology);
                let place = match path.is_empty() {
                    true => String::from("the cluster"),
                    false => format!("{level} {}", path.join("/")),
                };
                format!(
                    "in {place}, group \"{}\" {}",
                    request.groups[failure.group].name, failure.why
                )
            }
        }
    }
}
