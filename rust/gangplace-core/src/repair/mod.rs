//! Repair after hardware failures (docs/repair.md "Repair after failures", issue 14).
//!
//! Which ranks of an allocation have lost hardware: a rank is lost when its pod's node was
//! removed (the allocation no longer holds GPUs there, even if a node of the same name came
//! back) or one of its GPUs is unhealthy; a GPU marked healthy again un-loses it. Derived from
//! the state whenever an allocation is reported, so it is always current and never stored.
//!
//! Where the lost ranks go (`plan_repair`, a pure query): all together or not at all. Ranks
//! are grouped into classes that are placed one after another, each seeing the GPUs the
//! earlier ones took: for a slice gang, the lost ranks of each innermost slice, inside that
//! slice's domain (slices in rank order); otherwise the lost ranks of one pod size (and one
//! group's selector for multi-role gangs, and one ask besides GPUs), largest pods first, inside
//! the placement's domain, or with `widen` the smallest enclosing domain up to the request's
//! coarsest level where every class fits. Inside a target the pods follow rules 4-6, counted
//! by the nodes' free resources too (docs/resources.md "Node resources") less what earlier classes
//! took; the new pods go to the lost ranks in rank order. A fractional allocation's lost ranks
//! are pods of its share, placed by rules F1-F2 (docs/resources.md "Fractions of a GPU"), each
//! class seeing the shares the earlier ones took.

mod commit;
mod counts;
mod place;
mod preempt;
pub(crate) mod snapshot;
mod spares;

use std::collections::BTreeMap;

use crate::engine::Engine;
use crate::engine::ranks::{asks_of, lost_ranks, slice_index, spare_matches};
use crate::engine::transactions::Owner;
use crate::error::{CoreError, CoreResult, invalid};
use crate::ids::{DomainId, GpuSet, HoldId, NodeId, ROOT};
use crate::ledger::{Hold, HoldState};
use crate::model::NodeFilter;
use crate::model::{PodPlacement, RepairPlan};
use crate::resources::Amounts;
use crate::search::Item;
use crate::shapes::{Layers, Numa, Spread};
use crate::topology::Topology;

/// Lost ranks placed together: one pod size, one selector, one ask besides GPUs, one target
/// (a slice's domain, or `None`: the placement's domain or the widened one).
#[derive(Debug, Clone)]
pub(super) struct RepairClass {
    pub gpus_per_pod: u32,
    pub selector: NodeFilter,
    pub ranks: Vec<u64>,
    pub slice: Option<Vec<String>>,
    /// What each of its pods asks besides GPUs (empty: nothing).
    pub need: Amounts,
    /// The share of one GPU each of its pods uses (a fractional allocation's; `None`: whole
    /// GPUs).
    pub milli: Option<u16>,
}

/// What a what-if preemption's victims give back, counted free besides the free GPUs and
/// resources: healthy GPUs per node (with the shared GPUs all of whose shares they hold),
/// resources per node sorted by node, and their shares of healthy GPUs (docs/preemption.md
/// P8).
#[derive(Debug, Clone, Default)]
pub(super) struct Freed {
    pub gpus: BTreeMap<NodeId, GpuSet>,
    pub resources: Vec<(NodeId, Amounts)>,
    pub shares: crate::capacity::TakenShares,
}

/// What the pods of a repair follow besides the rules: the request's spread and NUMA policy.
#[derive(Debug, Clone, Copy)]
pub(super) struct Knobs {
    pub spread: Spread,
    pub numa: Numa,
}

/// What both repair queries start from: the lost ranks, those the allocation's spares take,
/// and the classes of the rest.
struct Setup {
    lost: Vec<u64>,
    spared: Vec<(u64, PodPlacement)>,
    classes: Vec<RepairClass>,
    knobs: Knobs,
}

/// Lost ranks per tier of rule R2, as `explain_repair` reports them.
pub type RepairTiers = [(&'static str, u64); 4];

impl Engine {
    /// Where the lost ranks of allocation `id` go (docs/repair.md "Repair after failures"), or
    /// `None` when they do not all fit. Changes nothing but expired reservations (and
    /// selector pools and kept shape counts, which are caches).
    pub fn plan_repair(
        &mut self,
        id: HoldId,
        (widen, preempt): (bool, bool),
        caller: Owner<'_>,
        now: f64,
    ) -> CoreResult<Option<RepairPlan>> {
        let Setup {
            lost,
            spared,
            classes,
            knobs,
        } = self.repair_setup(id, caller, now)?;
        let hold = self.ledger.live(id).ok_or_else(|| unknown(id))?;
        let placement = &hold.placement;
        let plan = |level: &str, domain: Vec<String>, mut replacements: Vec<(u64, _)>| {
            replacements.extend(spared.iter().cloned());
            replacements.sort_by_key(|&(rank, _)| rank);
            RepairPlan {
                allocation: id,
                lost: lost.clone(),
                replacements,
                from_spares: spared.iter().map(|&(rank, _)| rank).collect(),
                level: level.to_owned(),
                domain,
                victims: Vec::new(),
            }
        };
        let no_freed = Freed::default();
        if classes.is_empty() {
            return Ok(Some(plan(
                &placement.level,
                placement.domain.clone(),
                Vec::new(),
            )));
        }
        let (depth, item, exact) = self.resolve_path(&placement.domain);
        for (depth, item) in self.repair_targets(hold, (depth, item, exact), widen, &classes) {
            if let Some(replacements) =
                self.place_classes(&classes, (depth, item), knobs, &no_freed)?
            {
                let sliced = classes.iter().any(|class| class.slice.is_some());
                let (level, domain) = match sliced {
                    true => (placement.level.clone(), placement.domain.clone()),
                    false => (
                        self.topology.level_name(depth).to_owned(),
                        item.path(&self.topology)
                            .into_iter()
                            .map(String::from)
                            .collect(),
                    ),
                };
                return Ok(Some(plan(&level, domain, replacements)));
            }
        }
        if !preempt {
            return Ok(None);
        }
        let found = self.repair_by_preemption(hold, &classes, knobs, now)?;
        Ok(found.map(|(victims, replacements)| RepairPlan {
            victims,
            ..plan(&placement.level, placement.domain.clone(), replacements)
        }))
    }

    /// For each tier of rule R2 (`spares`, `slice`, `domain`, `widened`), how many of the
    /// allocation's lost ranks would fit there, each class counted alone by capacity.
    pub fn explain_repair(
        &mut self,
        id: HoldId,
        caller: Owner<'_>,
        now: f64,
    ) -> CoreResult<RepairTiers> {
        let Setup {
            spared,
            classes,
            knobs,
            ..
        } = self.repair_setup(id, caller, now)?;
        let hold = self.ledger.live(id).ok_or_else(|| unknown(id))?;
        let (depth, item, exact) = self.resolve_path(&hold.placement.domain);
        let widest = self.coarsest_repair_depth(hold);
        let spared = spared.len() as u64;
        let mut tiers = [
            ("spares", spared),
            ("slice", 0),
            ("domain", 0),
            ("widened", 0),
        ];
        for class in &classes {
            let fits = |target: Option<(usize, Item)>| {
                target.map_or(0, |target| self.class_capacity(class, target, knobs))
            };
            match &class.slice {
                Some(path) => {
                    let (depth, item, exact) = self.resolve_path(path);
                    tiers[1].1 += fits(exact.then_some((depth, item)));
                }
                None => {
                    tiers[2].1 += fits(exact.then_some((depth, item)));
                    let above = self.enclosing(depth, item, widest).last().copied();
                    tiers[3].1 += fits(above.or(exact.then_some((depth, item))));
                }
            }
        }
        Ok(tiers)
    }

    /// Reclaims, settles, finds the committed allocation `caller` may see, and splits its
    /// lost ranks into classes (their selectors' pools made).
    fn repair_setup(&mut self, id: HoldId, caller: Owner<'_>, now: f64) -> CoreResult<Setup> {
        self.reclaim(now);
        self.settle();
        let hold = self.repairable(id, caller)?;
        let lost = lost_ranks(&self.topology, &self.states, hold);
        let spared = spare_matches(&self.topology, &self.states, hold, &lost);
        let rest: Vec<u64> = lost
            .iter()
            .copied()
            .filter(|rank| !spared.iter().any(|(served, _)| served == rank))
            .collect();
        let classes = repair_classes(&self.topology, hold, &rest)?;
        let knobs = match &hold.request {
            Some(request) => Knobs {
                spread: request.spread,
                numa: request.numa,
            },
            None => Knobs {
                spread: hold
                    .roles
                    .as_ref()
                    .map_or(Spread::Pack, |roles| roles.spread),
                numa: Numa::None,
            },
        };
        for class in &classes {
            let (topology, states) = (&self.topology, &self.states);
            self.capacity.ensure_pool(topology, states, &class.selector);
        }
        self.keep_repair_shapes(&classes, knobs);
        Ok(Setup {
            lost,
            spared,
            classes,
            knobs,
        })
    }

    /// The committed allocation `id` as `caller` may see it, or why it cannot be repaired.
    pub(crate) fn repairable(&self, id: HoldId, caller: Owner<'_>) -> CoreResult<&Hold> {
        match self.visible(id, caller) {
            (Some(HoldState::Committed), _) => {}
            (Some(HoldState::Reserved), _) => {
                return Err(CoreError::ReservationError(format!(
                    "cannot repair {id}: it is a reservation; commit it first"
                )));
            }
            (None, ending) => return Err(Self::repair_ended(id, ending)),
        }
        let hold = self.ledger.live(id).ok_or_else(|| unknown(id))?;
        Ok(hold)
    }

    fn repair_ended(id: HoldId, ending: Option<crate::ledger::Ending>) -> CoreError {
        match ending {
            None => unknown(id),
            Some(ending) => CoreError::ReservationError(format!(
                "cannot repair {id}: it was {}",
                ending.as_str()
            )),
        }
    }

    /// The targets tried, in order. A slice gang: one attempt, each class in its slice's
    /// domain. Otherwise the placement's own domain (when it still exists), then with `widen`
    /// each enclosing domain up to the coarsest level (starting from the deepest part of the
    /// placement's path that still exists, when the rest is gone).
    fn repair_targets(
        &self,
        hold: &Hold,
        (depth, item, exact): (usize, Item, bool),
        widen: bool,
        classes: &[RepairClass],
    ) -> Vec<(usize, Item)> {
        if classes.iter().any(|class| class.slice.is_some()) {
            // Classes without a slice (a multi-role unit's other groups) need the placement's
            // own domain: no target when it is gone.
            let all_sliced = classes.iter().all(|class| class.slice.is_some());
            return match exact || all_sliced {
                true => vec![(depth, item)],
                false => Vec::new(),
            };
        }
        let mut targets = Vec::new();
        if exact {
            targets.push((depth, item));
        }
        if widen {
            let widest = self.coarsest_repair_depth(hold);
            if !exact && depth >= widest {
                targets.push((depth, item));
            }
            targets.extend(self.enclosing(depth, item, widest));
        }
        targets
    }

    /// The domains enclosing `item` (at `depth`), finest first, none coarser than `widest`.
    fn enclosing(&self, depth: usize, item: Item, widest: usize) -> Vec<(usize, Item)> {
        let mut found = Vec::new();
        let mut above = match item {
            Item::Node(node) => Some(self.topology.node(node).domain),
            Item::Domain(id) => self.topology.domain(id).parent,
        };
        let mut level = depth;
        while let Some(domain) = above {
            if level == 0 || level - 1 < widest {
                break;
            }
            level -= 1;
            found.push((level, Item::Domain(domain)));
            above = self.topology.domain(domain).parent;
        }
        found
    }

    /// The coarsest depth a repair may widen to: the request's `required_level` (or
    /// `max_level`), the cluster for holds without a request.
    fn coarsest_repair_depth(&self, hold: &Hold) -> usize {
        let required = match (&hold.request, &hold.roles) {
            (Some(request), _) => request.required_level.as_deref(),
            (None, Some(roles)) => roles.required_level.as_deref(),
            (None, None) => None,
        };
        let depth = required.and_then(|level| self.topology.depth_of(level));
        depth.unwrap_or(0).max(self.config.max_level_depth())
    }

    /// The deepest item a domain path (plus a node name at the node level) still names, its
    /// depth, and whether the whole path resolved.
    pub(super) fn resolve_path(&self, path: &[String]) -> (usize, Item, bool) {
        let mut domain: DomainId = ROOT;
        for (depth, name) in path.iter().enumerate() {
            let here = self.topology.domain(domain);
            let child = here
                .child_domains
                .iter()
                .copied()
                .find(|&child| *self.topology.domain(child).name == **name);
            if let Some(child) = child {
                domain = child;
                continue;
            }
            let node = here
                .child_nodes
                .iter()
                .copied()
                .find(|&node| *self.topology.node(node).name == **name);
            return match node {
                Some(node) if depth + 1 == path.len() => {
                    (self.topology.node_depth(), Item::Node(node), true)
                }
                _ => (depth, Item::Domain(domain), false),
            };
        }
        (path.len(), Item::Domain(domain), true)
    }
}

fn unknown(id: HoldId) -> CoreError {
    CoreError::UnknownReservation(id.to_string())
}

/// The classes of `lost`: per innermost slice for a slice gang; otherwise per (pod size,
/// group, slice), largest pods first, then group order, then slice order; each split by
/// what its ranks ask besides GPUs (in the order of each ask's lowest rank).
fn repair_classes(topology: &Topology, hold: &Hold, lost: &[u64]) -> CoreResult<Vec<RepairClass>> {
    let pods = &hold.placement.pods;
    let index = |rank: u64| usize::try_from(rank).unwrap_or(usize::MAX);
    let size_of = |rank: u64| pods.get(index(rank)).map_or(0, |pod| pod.gpus.count());
    if let Some(request) = hold.request.as_deref().filter(|r| !r.slices.is_empty()) {
        let layers = Layers::resolve(topology, &request.slices, 0)?;
        let inner = layers.innermost().map_or(1, |(_, size)| size);
        let mut classes: Vec<RepairClass> = Vec::new();
        for &rank in lost {
            let slice = hold.placement.slices.get(index(rank / inner)).cloned();
            let slice = slice.ok_or_else(|| invalid("a slice gang's placement lost its slices"))?;
            let need = asks_of(hold, index(rank));
            match classes.last_mut() {
                Some(class) if class.slice.as_ref() == Some(&slice) && class.need == *need => {
                    class.ranks.push(rank);
                }
                _ => classes.push(RepairClass {
                    gpus_per_pod: size_of(rank),
                    selector: request.filter.clone(),
                    ranks: vec![rank],
                    slice: Some(slice),
                    need: need.clone(),
                    milli: hold.placement.gpu_milli,
                }),
            }
        }
        return Ok(classes);
    }
    // Multi-role gangs: rank -> group index through the placement's group counts.
    let mut group_of = Vec::with_capacity(pods.len());
    for (group, (_, count)) in hold.placement.groups.iter().enumerate() {
        group_of.extend(std::iter::repeat_n(group, index(*count)));
    }
    let selector_of = |rank: u64| -> NodeFilter {
        match (&hold.request, &hold.roles) {
            (Some(request), _) => request.filter.clone(),
            (None, Some(roles)) => group_of
                .get(index(rank))
                .map(|&group| roles.groups[group].filter.clone())
                .unwrap_or_default(),
            (None, None) => NodeFilter::default(),
        }
    };
    // Largest pods first, then group order, then (sliced groups) slice order.
    type Key = (std::cmp::Reverse<u32>, usize, usize);
    let mut by_key: BTreeMap<Key, Vec<RepairClass>> = BTreeMap::new();
    for &rank in lost {
        let group = group_of.get(index(rank)).copied().unwrap_or(0);
        let slice = slice_index(hold, rank);
        let path = match slice {
            Some(at) => Some(
                hold.placement
                    .slices
                    .get(at)
                    .cloned()
                    .ok_or_else(|| invalid("a multi-role placement lost its slices"))?,
            ),
            None => None,
        };
        let key = (std::cmp::Reverse(size_of(rank)), group, slice.unwrap_or(0));
        let need = asks_of(hold, index(rank));
        let split = by_key.entry(key).or_default();
        match split.iter_mut().find(|class| class.need == *need) {
            Some(class) => class.ranks.push(rank),
            None => split.push(RepairClass {
                gpus_per_pod: size_of(rank),
                selector: selector_of(rank),
                ranks: vec![rank],
                slice: path,
                need: need.clone(),
                milli: hold.placement.gpu_milli,
            }),
        }
    }
    Ok(by_key.into_values().flatten().collect())
}
