//! Explanations: why a gang fits or not. For every level tried, the domain that could hold
//! the most pods and how many; the nodes excluded and why; and the GPUs that would have to be
//! freed in each level's best domain for the gang to fit there.
//!
//! The levels part is also the text of `Unschedulable.reason` (computed without visiting
//! nodes); the node counts and the freeing figures visit the nodes of the cluster and of the
//! best domains, so `explain` costs O(nodes): a diagnostic, not a scheduling-loop call.

use super::Engine;
use super::removal::Purpose;
use crate::error::CoreResult;
use crate::model::{GangRequest, Placement, RemovalLimits};
use crate::search::{Demand, Item, LevelBest};
use serde::{Deserialize, Serialize};

/// One level tried.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LevelExplanation {
    /// `node`, a level name, or `cluster`.
    pub level: String,
    /// Path of the domain holding the most pods (node name appended at level `node`); `None`
    /// when no domain of the level holds a pod.
    pub domain: Option<Vec<String>>,
    /// Pods it can hold now.
    pub capacity: u64,
    /// Pods the gang needs.
    pub needed: u64,
    /// Fewest held GPUs that would have to be freed in that domain for the gang to fit;
    /// `Some(0)` when it fits; `None` when it cannot fit even with every GPU freed.
    pub gpus_to_free: Option<u64>,
    /// When the gang does not fit: what `plan_preemption` would take at this level alone (by
    /// its rules, without limits): the victim count and the highest victim priority. `None`
    /// when it fits, or when no preemption at this level makes room.
    pub preemption: Option<(u64, i32)>,
    /// The domain of this level that needs the fewest held GPUs freed for the gang to fit
    /// (then the smallest path), and how many; `None` when no domain could hold it even
    /// emptied. It may differ from `domain`: the largest domain is not always the cheapest.
    pub cheapest: Option<(Vec<String>, u64)>,
    /// A request with resources besides GPUs: the resource that keeps the most nodes of
    /// `domain` below the pods their free GPUs hold (then the first name), if any does.
    pub limited_by: Option<String>,
}

/// Nodes that cannot take even one pod of the gang, by the first reason that applies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exclusions {
    /// Cordoned.
    pub cordoned: u64,
    /// Lacking a selector label, or outside the request's required affinity.
    pub selector_mismatch: u64,
    /// With a taint the request does not tolerate.
    pub untolerated_taints: u64,
    /// Too few healthy GPUs for one pod, even if all were free.
    pub unhealthy: u64,
    /// Enough healthy GPUs, too few of them free.
    pub too_few_free: u64,
    /// `numa="single"`: enough free GPUs, but no NUMA group holds a pod.
    pub numa_split: u64,
    /// Enough free GPUs, too few free resources besides GPUs for one pod.
    pub resources: u64,
}

/// Why a gang fits where it does, or does not fit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Explanation {
    /// Where it would go now (what `place_gang` answers).
    pub placement: Option<Placement>,
    /// The levels tried, finest first.
    pub levels: Vec<LevelExplanation>,
    /// Excluded nodes by reason.
    pub excluded: Exclusions,
    /// The one-line summary: `Unschedulable.reason` when the gang does not fit.
    pub summary: String,
    /// Multi-role gangs that do not fit: the first group that failed in the first candidate
    /// of the coarsest level tried, and why (`None` otherwise, or when that level had no
    /// candidate with enough free GPUs).
    pub failed_group: Option<(String, String)>,
}

impl Engine {
    /// Explains `request` against the current state (after reclaiming expired holds).
    pub fn explain(&mut self, asked: &GangRequest, now: f64) -> CoreResult<Explanation> {
        let request = &*asked.placed(); // spares count as pods (docs/repair.md "Spares")
        let (demand, plan) = self.plan(request, now)?;
        let placement = plan.map(|plan| asked.split_spares(self.placement(&plan)));
        let bests = self.level_bests(request, &demand)?;
        let summary = match &placement {
            Some(placement) => format!(
                "gang{} of {} x {} fits: {} at level {} {}",
                quoted_name(request),
                counted(asked.pods, "pod"),
                pod_size(request),
                counted(placement.pods.len() as u64, "pod"),
                placement.level,
                placement.domain.join("/")
            ),
            None => self.reason_text(request, &demand, &bests),
        };
        let preemption =
            self.preemption_by_level(request, &demand, &bests, placement.is_some(), now)?;
        let levels = bests
            .iter()
            .zip(preemption)
            .map(|(best, preemption)| LevelExplanation {
                level: self.topology.level_name(best.depth).to_owned(),
                domain: best.item.map(|item| self.item_path(item)),
                capacity: best.capacity,
                needed: demand.pods,
                gpus_to_free: best
                    .item
                    .filter(|_| request.resources.is_empty())
                    .and_then(|item| self.gpus_to_free(item, request, demand.pods)),
                preemption,
                cheapest: match request.resources.is_empty() {
                    true => self.cheapest_at(best.depth, request, demand.pods),
                    false => None, // GPU what-ifs do not free resources
                },
                limited_by: best.item.and_then(|item| self.limited_by(request, item)),
            })
            .collect::<Vec<LevelExplanation>>();
        let summary = match &placement {
            Some(_) => summary,
            None => summary + &cheapest_text(&levels),
        };
        Ok(Explanation {
            placement,
            levels,
            excluded: self.exclusions(request),
            summary,
            failed_group: None,
        })
    }

    /// Per level tried: what preemption at that level alone would take (none if it fits).
    fn preemption_by_level(
        &self,
        request: &GangRequest,
        demand: &Demand,
        bests: &[LevelBest],
        fits: bool,
        now: f64,
    ) -> CoreResult<Vec<Option<(u64, i32)>>> {
        if fits || !request.slices.is_empty() || !request.resources.is_empty() {
            return Ok(vec![None; bests.len()]);
        }
        let limits = RemovalLimits::default();
        let candidates = self.candidates(request.terms.priority, &limits, Purpose::Preemption, now);
        self.with_search(request, |search| {
            bests
                .iter()
                .map(|best| search.removal_at(best.depth, demand.pods, &candidates))
                .collect()
        })
    }

    pub(crate) fn item_path(&self, item: Item) -> Vec<String> {
        let path = item.path(&self.topology);
        path.into_iter().map(str::to_owned).collect()
    }

    fn level_bests(&self, request: &GangRequest, demand: &Demand) -> CoreResult<Vec<LevelBest>> {
        let depths = (demand.coarsest_depth..=self.topology.node_depth()).rev();
        self.with_search(request, |search| {
            depths.map(|depth| search.largest_capacity(depth)).collect()
        })
    }

    /// Why a request has no placement: the best domain of each level tried, finest first.
    pub fn unschedulable_reason(
        &self,
        request: &GangRequest,
        demand: &Demand,
    ) -> CoreResult<String> {
        let bests = self.level_bests(request, demand)?;
        Ok(self.reason_text(request, demand, &bests))
    }

    fn reason_text(&self, request: &GangRequest, demand: &Demand, bests: &[LevelBest]) -> String {
        let unit = if request.slices.is_empty() {
            "pod"
        } else {
            "slice"
        };
        let tried: Vec<String> = bests
            .iter()
            .map(|best| {
                let level = self.topology.level_name(best.depth);
                match best.item {
                    None => format!("no {level} holds a {unit}"),
                    Some(item) => {
                        let path = self.item_path(item);
                        let where_ = if path.is_empty() {
                            String::new()
                        } else {
                            format!(" {}", path.join("/"))
                        };
                        let limited = self.limited_by(request, item);
                        format!(
                            "best {level}{where_} holds {} of {}{}",
                            best.capacity,
                            demand.pods,
                            limited.map_or_else(String::new, |name| format!(", limited by {name}"))
                        )
                    }
                }
            })
            .collect();
        let minimum = match request.min_pods {
            Some(min) if min < request.pods => format!(", at least {min}"),
            _ => String::new(),
        };
        let bounded = match self.config.max_level() {
            Some(level) if demand.coarsest_depth == self.config.max_level_depth() => format!(
                "; no placement spans more than one {level} (max_level: fabrics that never join)"
            ),
            _ => String::new(),
        };
        format!(
            "gang{} of {} x {}{}{minimum} does not fit: {}{bounded}",
            quoted_name(request),
            counted(request.pods, "pod"),
            pod_size(request),
            slices_text(request),
            tried.join("; ")
        )
    }

    pub(crate) fn exclusions(&self, request: &GangRequest) -> Exclusions {
        let size = request.whole_gpus(); // a fraction needs room, not a free GPU
        let shares = crate::capacity::ShareFit::of(request.gpu_milli, &self.states);
        let mut excluded = Exclusions::default();
        for (id, node) in self.topology.nodes() {
            let state = self.states.get(id);
            if state.cordoned {
                excluded.cordoned += 1;
            } else if request
                .filter
                .labels_exclude(|key| node.labels.get(key).map(|v| &**v))
            {
                excluded.selector_mismatch += 1;
            } else if !request.filter.tolerates(&node.taints) {
                excluded.untolerated_taints += 1;
            } else if state.healthy_count() < size {
                excluded.unhealthy += 1;
            } else if state.free_count() < size
                || shares.is_some_and(|fit| fit.pods(id, state.free()) == 0)
            {
                excluded.too_few_free += 1;
            } else if request.numa == crate::shapes::Numa::Single
                && node
                    .gpu_topology
                    .as_deref()
                    .is_some_and(|groups| groups.numa_capacity(state.free(), size) == 0)
            {
                excluded.numa_split += 1;
            } else if self.resources_hold_no_pod(request, id) {
                excluded.resources += 1;
            }
        }
        excluded
    }

    /// The domain (or node) at `depth` needing the fewest held GPUs freed to hold `pods`
    /// pods, ties by path: one pass over the nodes per level (an explanation, not a search).
    fn cheapest_at(
        &self,
        depth: usize,
        request: &GangRequest,
        pods: u64,
    ) -> Option<(Vec<String>, u64)> {
        if !request.slices.is_empty() {
            return None; // What-ifs of freeing GPUs count pods, not slices.
        }
        let mut items = vec![Item::Domain(crate::ids::ROOT)];
        for _ in 0..depth {
            items = items
                .into_iter()
                .flat_map(|item| match item {
                    Item::Domain(id) => {
                        let domain = self.topology.domain(id);
                        let domains = domain.child_domains.iter().map(|&d| Item::Domain(d));
                        let nodes = domain.child_nodes.iter().map(|&n| Item::Node(n));
                        domains.chain(nodes).collect::<Vec<_>>()
                    }
                    Item::Node(_) => Vec::new(),
                })
                .collect();
        }
        items
            .into_iter()
            .filter_map(|item| {
                let cost = self.gpus_to_free(item, request, pods)?;
                Some((cost, self.item_path(item)))
            })
            .min()
            .map(|(cost, path)| (path, cost))
    }

    /// The fewest held GPUs to free under `item` so that it holds `pods` pods.
    fn gpus_to_free(&self, item: Item, request: &GangRequest, pods: u64) -> Option<u64> {
        if !request.slices.is_empty() || request.gpu_milli.is_some() {
            return None; // What-ifs of freeing GPUs count whole pods, not slices or shares.
        }
        let size = u64::from(request.gpus_per_pod);
        let mut capacity = 0u64;
        let mut costs: Vec<u64> = Vec::new();
        let mut stack = vec![item];
        while let Some(item) = stack.pop() {
            let id = match item {
                Item::Node(id) => id,
                Item::Domain(id) => {
                    let domain = self.topology.domain(id);
                    stack.extend(domain.child_domains.iter().map(|&d| Item::Domain(d)));
                    stack.extend(domain.child_nodes.iter().map(|&n| Item::Node(n)));
                    continue;
                }
            };
            let state = self.states.get(id);
            if state.cordoned || !self.topology.node(id).admits(&request.filter) {
                continue;
            }
            let free = u64::from(state.free_count());
            let healthy = u64::from(state.healthy_count());
            let (now, most) = (free / size, healthy / size);
            capacity += now;
            for extra in 1..=most.saturating_sub(now) {
                // The first extra pod needs the node topped up to a multiple of the pod
                // size; each further one a whole pod's GPUs (non-decreasing, so taking the
                // cheapest costs over all nodes is optimal).
                costs.push(if extra == 1 {
                    (now + 1) * size - free
                } else {
                    size
                });
            }
        }
        let deficit = pods.saturating_sub(capacity);
        if deficit == 0 {
            return Some(0);
        }
        if (costs.len() as u64) < deficit {
            return None;
        }
        costs.sort_unstable();
        Some(costs.iter().take(usize::try_from(deficit).ok()?).sum())
    }
}

fn quoted_name(request: &GangRequest) -> String {
    name_text(&request.name)
}

/// ` "name"`, or nothing for an empty name.
pub(crate) fn name_text(name: &str) -> String {
    if name.is_empty() {
        String::new()
    } else {
        format!(" \"{name}\"")
    }
}

/// `1 pod`, `2 pods`: a count with its noun, singular or plural as English wants.
pub(crate) fn counted(count: u64, noun: &str) -> String {
    if count == 1 {
        format!("1 {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

/// ` in slices of 16 pods per rack, 4 per node` (empty without slices).
fn slices_text(request: &GangRequest) -> String {
    let layers: Vec<String> = request
        .slices
        .iter()
        .enumerate()
        .map(|(position, layer)| match position {
            0 => format!(
                "{} per {}",
                counted(layer.pods_per_slice, "pod"),
                layer.level
            ),
            _ => format!("{} per {}", layer.pods_per_slice, layer.level),
        })
        .collect();
    if layers.is_empty() {
        return String::new();
    }
    format!(" in slices of {}", layers.join(", "))
}

/// `; freeing 4 held GPUs in rack s1/r2 would fit it`: the domain of any level tried needing
/// the fewest held GPUs freed (the finest level on ties), or nothing when none would do.
fn cheapest_text(levels: &[LevelExplanation]) -> String {
    let cheapest = levels
        .iter()
        .filter_map(|level| {
            let (path, cost) = level.cheapest.as_ref()?;
            Some((*cost, level, path))
        })
        .min_by_key(|&(cost, _, _)| cost);
    match cheapest {
        None => String::new(),
        Some((cost, level, path)) => {
            let place = if path.is_empty() {
                "the cluster".to_owned()
            } else {
                format!("{} {}", level.level, path.join("/"))
            };
            format!(
                "; freeing {} in {place} would fit it",
                counted(cost, "held GPU")
            )
        }
    }
}

/// What each pod asks of GPUs, for messages: `2 GPUs`, or `460 thousandths of a GPU`.
fn pod_size(request: &GangRequest) -> String {
    match request.gpu_milli {
        Some(milli) => format!("{milli} thousandths of a GPU"),
        None => counted(u64::from(request.gpus_per_pod), "GPU"),
    }
}
