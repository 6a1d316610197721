//! Inside a node: GPU groups (NUMA sockets, PCIe switches) and the GPUs a pod takes
//! (docs/placement.md rule 5, docs/shapes.md "Inside a node").
//!
//! A [`GpuTopology`] names intra-node levels, outermost first, and gives every GPU its group
//! id at each level; a group is identified by its whole path (ids of it and its outer groups),
//! as domains are. A pod of `g` GPUs on a node with a topology takes, at the finest level
//! where some group's free healthy GPUs hold it, the group with the fewest free GPUs (then the
//! lowest GPU index); inside it, children are filled as rule 4 fills domains (a child holding
//! all that remains takes it, the tightest such; otherwise the largest is filled), and the
//! lowest free indices are taken inside the finest groups.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use crate::error::{CoreResult, invalid};
use crate::ids::GpuSet;
use crate::level_name::LevelName;
use crate::limits::MAX_NAME_BYTES;

/// Intra-node levels one topology may name.
pub const MAX_GPU_LEVELS: usize = 4;

/// The GPU groups of one node, checked and indexed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuTopology {
    levels: Vec<String>,
    /// The level names again, interned, as the pods whose affinity they are carry them.
    level_names: Vec<LevelName>,
    paths: Vec<Vec<u32>>,
    /// Per level, outermost first: each group's GPUs, in order of their lowest index.
    groups: Vec<Vec<GpuSet>>,
    /// The level `numa="single"` counts: the one named `numa`, else the outermost.
    numa_level: usize,
    /// Nodes of at most [`MEMO_GPUS`] GPUs: the answers of `choose` already computed.
    memo: ChoiceMemo,
}

/// Nodes up to this many GPUs remember every `choose` answer (2^8 free sets x 9 counts).
const MEMO_GPUS: u32 = 8;
const UNKNOWN: u64 = u64::MAX;

/// `choose(free, count)` answers by `free * (MEMO_GPUS + 1) + count`, filled on first use
/// (`UNKNOWN` until then). Equal topologies share one (`Topology` interns them), so a
/// cluster of like nodes computes each answer once. The answer is a pure function of its
/// key, so concurrent fills agree and relaxed ordering suffices.
/// The affinities are kept the same way, by GPU set: the level index plus one (0: the node),
/// `UNKNOWN_LEVEL` until computed; and the `numa="single"` pod counts by `(free, count)`, plus
/// one (0 until computed).
struct ChoiceMemo(Option<Tables>);

/// The memo's tables.
struct Tables {
    choices: Box<[AtomicU64]>,
    levels: Box<[AtomicU8]>,
    numa_pods: Box<[AtomicU8]>,
}

const UNKNOWN_LEVEL: u8 = u8::MAX;

impl ChoiceMemo {
    fn for_gpus(gpus: u32) -> Self {
        if gpus > MEMO_GPUS {
            return Self(None);
        }
        let entries = (1usize << MEMO_GPUS) * (MEMO_GPUS as usize + 1);
        let levels = (0..1usize << MEMO_GPUS)
            .map(|_| AtomicU8::new(UNKNOWN_LEVEL))
            .collect();
        Self(Some(Tables {
            choices: (0..entries).map(|_| AtomicU64::new(UNKNOWN)).collect(),
            levels,
            numa_pods: (0..entries).map(|_| AtomicU8::new(0)).collect(),
        }))
    }

    fn level_slot(&self, gpus: GpuSet) -> Option<&AtomicU8> {
        let tables = self.0.as_ref()?;
        tables.levels.get(usize::try_from(gpus.mask()).ok()?)
    }

    /// The entry of `(free, count)` in a table of the choices' size.
    fn entry(free: GpuSet, count: u32) -> Option<usize> {
        let free = usize::try_from(free.mask()).ok()?;
        (count <= MEMO_GPUS).then(|| free * (MEMO_GPUS as usize + 1) + count as usize)
    }

    fn slot(&self, free: GpuSet, count: u32) -> Option<&AtomicU64> {
        let tables = self.0.as_ref()?;
        tables.choices.get(Self::entry(free, count)?)
    }

    fn numa_slot(&self, free: GpuSet, count: u32) -> Option<&AtomicU8> {
        let tables = self.0.as_ref()?;
        tables.numa_pods.get(Self::entry(free, count)?)
    }
}

impl Clone for ChoiceMemo {
    /// A fresh memo of the same kind (answers are recomputed on first use).
    fn clone(&self) -> Self {
        match self.0 {
            Some(_) => Self::for_gpus(MEMO_GPUS),
            None => Self(None),
        }
    }
}

impl PartialEq for ChoiceMemo {
    fn eq(&self, _: &Self) -> bool {
        true // a cache: topologies are equal by their levels and paths
    }
}

impl Eq for ChoiceMemo {}

impl std::fmt::Debug for ChoiceMemo {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("ChoiceMemo")
    }
}

impl GpuTopology {
    /// A topology for a node of `gpus` GPUs: 1 to 4 unique level names (not `node` or
    /// `cluster`), one path per GPU with one group id (0..=63) per level.
    pub fn new(levels: Vec<String>, paths: Vec<Vec<u32>>, gpus: u32) -> CoreResult<Self> {
        if levels.is_empty() || levels.len() > MAX_GPU_LEVELS {
            return Err(invalid(format!(
                "a GPU topology names 1 to {MAX_GPU_LEVELS} levels, got {}",
                levels.len()
            )));
        }
        for (index, level) in levels.iter().enumerate() {
            let reserved = level == "node" || level == "cluster";
            if level.is_empty() || level.len() > MAX_NAME_BYTES || reserved {
                return Err(invalid(format!(
                    "GPU topology level {level:?} is not a usable name"
                )));
            }
            if levels[..index].contains(level) {
                return Err(invalid("a GPU topology names a level twice"));
            }
        }
        if paths.len() != gpus as usize {
            return Err(invalid(format!(
                "the GPU topology describes {} GPUs but the node has {gpus}",
                paths.len()
            )));
        }
        for (gpu, path) in paths.iter().enumerate() {
            if path.len() != levels.len() || path.iter().any(|&group| group > 63) {
                return Err(invalid(format!(
                    "GPU {gpu} needs one group id in 0..63 for each of {} levels",
                    levels.len()
                )));
            }
        }
        let groups = (0..levels.len())
            .map(|level| {
                let mut by_path: BTreeMap<&[u32], GpuSet> = BTreeMap::new();
                for (gpu, path) in (0u32..).zip(&paths) {
                    *by_path.entry(&path[..=level]).or_default() |= GpuSet::single(gpu);
                }
                let mut sets: Vec<GpuSet> = by_path.into_values().collect();
                sets.sort_unstable_by_key(|set| set.lowest());
                sets
            })
            .collect();
        let level_names = levels.iter().map(|level| LevelName::new(level)).collect();
        let numa_level = levels.iter().position(|level| level == "numa").unwrap_or(0);
        Ok(Self {
            numa_level,
            levels,
            level_names,
            paths,
            groups,
            memo: ChoiceMemo::for_gpus(gpus),
        })
    }

    /// The level names, outermost first.
    pub fn levels(&self) -> &[String] {
        &self.levels
    }

    /// Each GPU's group ids, one per level.
    pub fn paths(&self) -> &[Vec<u32>] {
        &self.paths
    }

    /// The finest level whose one group holds all of `gpus` (`None`: no level does, the
    /// node is the finest).
    pub fn affinity(&self, gpus: GpuSet) -> Option<LevelName> {
        let level = match self.memo.level_slot(gpus) {
            None => self.affinity_level(gpus),
            Some(slot) => match slot.load(Ordering::Relaxed) {
                UNKNOWN_LEVEL => {
                    let level = self.affinity_level(gpus);
                    // At most MAX_GPU_LEVELS levels: the code fits a byte.
                    let code = level.map_or(0, |level| u8::try_from(level + 1).unwrap_or(0));
                    slot.store(code, Ordering::Relaxed);
                    level
                }
                code => usize::from(code).checked_sub(1),
            },
        }?;
        self.level_names.get(level).copied()
    }

    /// The index of the finest level whose one group holds all of `gpus`.
    fn affinity_level(&self, gpus: GpuSet) -> Option<usize> {
        (0..self.groups.len())
            .rev()
            .find(|&level| self.groups[level].iter().any(|&group| gpus & group == gpus))
    }

    /// The groups `numa="single"` counts: those of the level named `numa`, else of the
    /// outermost level.
    pub fn numa_groups(&self) -> &[GpuSet] {
        &self.groups[self.numa_level]
    }

    /// Pods of `count` GPUs that fit among `free` with each pod inside one NUMA group.
    pub fn numa_capacity(&self, free: GpuSet, count: u32) -> u32 {
        let counted = || -> u32 {
            self.numa_groups()
                .iter()
                .map(|&group| (group & free).count() / count.max(1))
                .sum()
        };
        let Some(slot) = self.memo.numa_slot(free, count) else {
            return counted();
        };
        match slot.load(Ordering::Relaxed) {
            0 => {
                let pods = counted();
                // At most 8 GPUs: at most 8 pods, plus one fits a byte.
                slot.store(u8::try_from(pods + 1).unwrap_or(0), Ordering::Relaxed);
                pods
            }
            known => u32::from(known - 1),
        }
    }

    /// The GPUs a pod of `count` GPUs takes among `free` (which holds at least `count`).
    pub fn choose(&self, free: GpuSet, count: u32) -> GpuSet {
        let Some(slot) = self.memo.slot(free, count) else {
            return self.choose_now(free, count);
        };
        match slot.load(Ordering::Relaxed) {
            UNKNOWN => {
                let chosen = self.choose_now(free, count);
                slot.store(chosen.mask(), Ordering::Relaxed);
                chosen
            }
            known => GpuSet::from_mask(known),
        }
    }

    /// `choose`, computed.
    fn choose_now(&self, free: GpuSet, count: u32) -> GpuSet {
        for level in (0..self.groups.len()).rev() {
            let holding = self.groups[level]
                .iter()
                .filter(|&&group| (group & free).count() >= count)
                .min_by_key(|&&group| ((group & free).count(), group.lowest()));
            if let Some(&group) = holding {
                return self.fill(group, level, count, free);
            }
        }
        self.fill_children(self.groups[0].clone(), 0, count, free)
    }

    /// `count` GPUs of `group` (a group of `level`).
    fn fill(&self, group: GpuSet, level: usize, count: u32, free: GpuSet) -> GpuSet {
        let Some(finer) = self.groups.get(level + 1) else {
            return (group & free).lowest_n(count);
        };
        let children = finer
            .iter()
            .copied()
            .filter(|&child| child & group == child)
            .collect();
        self.fill_children(children, level + 1, count, free)
    }

    /// Rule 4 over the groups `children` of `level`: the tightest child holding what remains,
    /// else the largest (then lowest index) filled and the rest continues.
    fn fill_children(
        &self,
        mut children: Vec<GpuSet>,
        level: usize,
        count: u32,
        free: GpuSet,
    ) -> GpuSet {
        let available = |child: GpuSet| (child & free).count();
        let mut taken = GpuSet::EMPTY;
        let mut remaining = count;
        while remaining > 0 {
            let holding = children
                .iter()
                .copied()
                .filter(|&child| available(child) >= remaining)
                .min_by_key(|&child| (available(child), child.lowest()));
            if let Some(child) = holding {
                return taken | self.fill(child, level, remaining, free);
            }
            let largest = children
                .iter()
                .enumerate()
                .filter(|&(_, &child)| available(child) > 0)
                .max_by_key(|&(_, &child)| (available(child), std::cmp::Reverse(child.lowest())));
            let Some((position, _)) = largest else {
                break;
            };
            let child = children.remove(position);
            let all = available(child);
            taken |= self.fill(child, level, all, free);
            remaining -= all;
        }
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_sockets() -> GpuTopology {
        // 8 GPUs: NUMA 0 holds 0-3 (PCIe pairs 0-1, 2-3), NUMA 1 holds 4-7 (4-5, 6-7).
        let paths = (0..8).map(|gpu| vec![gpu / 4, gpu / 2]).collect();
        GpuTopology::new(vec!["numa".into(), "pcie".into()], paths, 8).unwrap_or_else(|_| {
            unreachable!("a valid topology");
        })
    }

    #[test]
    fn a_pod_takes_the_tightest_finest_group_that_holds_it() {
        let topology = two_sockets();
        // GPUs 0, 2, 3, 5, 6, 7 free: a 2-GPU pod takes PCIe pair 2-3 (pairs 2-3 and 6-7
        // hold 2; the lower index wins the tie).
        let free = GpuSet::from_mask(0b1110_1101);
        assert_eq!(topology.choose(free, 2).indices(), vec![2, 3]);
        // Three GPUs: no pair holds them; both sockets have 3 free, NUMA 0 wins the tie and
        // is filled largest pair first (2-3, then 0).
        assert_eq!(topology.choose(free, 3).indices(), vec![0, 2, 3]);
        // Four: no socket holds them; NUMA 0 is filled, then the tightest group of NUMA 1
        // holding the last one (GPU 5's pair).
        assert_eq!(topology.choose(free, 4).indices(), vec![0, 2, 3, 5]);
        // GPUs 0-3 and 5-7 free: a 3-GPU pod goes to NUMA 1, the socket with fewer free.
        let free = GpuSet::from_mask(0b1110_1111);
        assert_eq!(topology.choose(free, 3).indices(), vec![5, 6, 7]);
    }

    #[test]
    fn bad_topologies_are_refused() {
        let levels = vec!["numa".to_owned()];
        assert!(GpuTopology::new(levels.clone(), vec![vec![0]; 4], 8).is_err());
        assert!(GpuTopology::new(levels.clone(), vec![vec![64]; 2], 2).is_err());
        assert!(GpuTopology::new(vec!["node".into()], vec![vec![0]; 2], 2).is_err());
        assert!(GpuTopology::new(levels, vec![vec![0, 1]; 2], 2).is_err());
    }
}
