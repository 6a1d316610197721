//! Requests and results: plain owned values, so the binding can hand them to Python after
//! the engine's lock is released.

use serde::{Deserialize, Serialize};
use std::sync::Arc;

use crate::error::{CoreResult, invalid};
use crate::ids::{GpuIndexError, GpuSet, HoldId};
use crate::level_name::LevelName;
use crate::limits::{MAX_GANG_GPUS, MAX_GPUS_PER_NODE, MAX_NAME_BYTES, MAX_PODS};
mod nodes;
mod removal;
mod roles;

pub use crate::filter::{
    Effect, NodeFilter, Operator, Requirement, Taint, Toleration, checked_taints,
};
use crate::shapes::{Numa, SliceLayer, Spread, check_sizes};
pub use nodes::{ClusterStats, GpuState, NodeInfo};
pub use removal::RemovalLimits;
pub use roles::{AnyRequest, Colocation, MAX_GROUPS, MultiGangRequest};

/// What a hold's owner agreed to: how it may be disturbed for others (docs/preemption.md "Priorities,
/// preemption and defragmentation").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Terms {
    /// Higher preempts lower; equal priorities never preempt each other.
    pub priority: i32,
    /// `false`: never a victim of preemption.
    pub preemptible: bool,
    /// `true`: can be checkpointed and restarted elsewhere (a defragmentation candidate).
    pub movable: bool,
}

impl Default for Terms {
    fn default() -> Self {
        Self {
            priority: 0,
            preemptible: true,
            movable: false,
        }
    }
}

impl Terms {
    /// Terms with a priority given as a user's integer (`-2^31..2^31-1`).
    pub fn new(priority: i64, preemptible: bool, movable: bool) -> CoreResult<Self> {
        Ok(Self {
            priority: check_priority(priority)?,
            preemptible,
            movable,
        })
    }
}

/// A priority in `-2^31..2^31-1` (a Kubernetes PriorityClass value fits).
pub fn check_priority(priority: i64) -> CoreResult<i32> {
    i32::try_from(priority).map_err(|_| {
        invalid(format!(
            "priority must be between {} and {}, got {priority}",
            i32::MIN,
            i32::MAX
        ))
    })
}

/// A gang: `pods` pods of `gpus_per_pod` GPUs, placed whole or not at all.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GangRequest {
    /// Pods wanted, `1..=2^28`, with `pods * gpus_per_pod <= 2^28`.
    pub pods: u64,
    /// GPUs per pod, `1..=64`; a pod never spans nodes.
    pub gpus_per_pod: u32,
    /// Fewest pods accepted (elastic gang), `1..=pods`; `None` means `pods`.
    pub min_pods: Option<u64>,
    /// Coarsest level the gang may span (`"node"`, a level name or `"cluster"`).
    pub required_level: Option<String>,
    /// Which nodes it may use: the labels it selects, its required node affinity and the
    /// taints it tolerates (docs/placement.md, rule 1).
    pub filter: NodeFilter,
    /// Free text shown in reasons and reprs.
    pub name: String,
    /// Priority and flags its holds carry.
    pub terms: Terms,
    /// Slice layers, outermost first (empty: no slices). Sizes checked by
    /// [`GangRequest::with_slices`]; level names when placed.
    pub slices: Vec<SliceLayer>,
    /// How pods are split among the children used (docs/shapes.md "Balanced spread").
    pub spread: Spread,
    /// Whether each pod's GPUs share a NUMA group (docs/shapes.md "Inside a node").
    pub numa: Numa,
    /// Spare pods held next to the gang (docs/repair.md "Spares"); set by
    /// [`GangRequest::with_spares`].
    pub spares: u64,
    /// Resources besides GPUs each pod asks, by name, sorted, no zeros (docs/resources.md "Node
    /// resources"); set by [`GangRequest::with_resources`].
    pub resources: Vec<(String, u64)>,
    /// Thousandths of one GPU each pod asks (docs/resources.md "Fractions of a GPU"), `1..=999` with
    /// one GPU per pod; `None`: whole GPUs. Set by [`GangRequest::with_gpu_milli`].
    pub gpu_milli: Option<u16>,
}

impl GangRequest {
    /// Validates every field against the limits (not against a cluster: an unknown
    /// `required_level` is reported when the request is placed).
    pub fn new(
        pods: i64,
        gpus_per_pod: i64,
        min_pods: Option<i64>,
        required_level: Option<String>,
        selector: Vec<(String, String)>,
        name: String,
    ) -> CoreResult<Self> {
        let pods = u64::try_from(pods)
            .ok()
            .filter(|pods| (1..=MAX_PODS).contains(pods))
            .ok_or_else(|| invalid(format!("pods must be between 1 and {MAX_PODS}, got {pods}")))?;
        // 0: pods without GPUs (docs/resources.md "Node resources"), valid only with resources per pod
        // (checked when placed, after `with_resources`).
        let gpus_per_pod = u32::try_from(gpus_per_pod)
            .ok()
            .filter(|gpus| (0..=MAX_GPUS_PER_NODE).contains(gpus))
            .ok_or_else(|| {
                invalid(format!(
                    "gpus_per_pod must be between 1 and {MAX_GPUS_PER_NODE} (0 with \
                     resources_per_pod), got {gpus_per_pod}"
                ))
            })?;
        let total = pods.checked_mul(u64::from(gpus_per_pod));
        if total.is_none_or(|total| total > MAX_GANG_GPUS) {
            return Err(invalid(format!(
                "a gang of {pods} pods x {gpus_per_pod} GPUs ({} GPUs) exceeds the limit of \
                 {MAX_GANG_GPUS} GPUs (the most a cluster can hold)",
                u128::from(pods) * u128::from(gpus_per_pod)
            )));
        }
        let min_pods = min_pods
            .map(|min| {
                u64::try_from(min)
                    .ok()
                    .filter(|min| (1..=pods).contains(min))
                    .ok_or_else(|| {
                        invalid(format!(
                            "min_pods must be between 1 and pods ({pods}), got {min}"
                        ))
                    })
            })
            .transpose()?;
        if let Some(level) = &required_level
            && (level.is_empty() || level.len() > MAX_NAME_BYTES)
        {
            return Err(invalid(format!(
                "required_level {level:?} is not a level name"
            )));
        }
        let filter = NodeFilter::of_labels(selector)?;
        if name.len() > MAX_NAME_BYTES {
            return Err(invalid(format!(
                "name is longer than {MAX_NAME_BYTES} bytes"
            )));
        }
        Ok(Self {
            pods,
            gpus_per_pod,
            min_pods,
            required_level,
            filter,
            name,
            terms: Terms::default(),
            slices: Vec::new(),
            spread: Spread::Pack,
            numa: Numa::None,
            spares: 0,
            resources: Vec::new(),
            gpu_milli: None,
        })
    }

    /// The same request with these resources per pod (names valid and unique, quantities
    /// `0..=MAX_RESOURCE_AMOUNT`; whether the cluster knows the names is checked when placed).
    pub fn with_resources(self, named: Vec<(String, i64)>) -> CoreResult<Self> {
        let mut resources = crate::resources::checked_named("resources_per_pod", named)?;
        resources.retain(|&(_, quantity)| quantity > 0);
        let request = Self { resources, ..self };
        request.check_gpu_less()?;
        Ok(request)
    }

    /// A request for pods without GPUs must ask resources and cannot ask one NUMA group or
    /// spares (docs/resources.md "Node resources").
    pub fn check_gpu_less(&self) -> CoreResult<()> {
        if self.gpus_per_pod > 0 {
            return Ok(());
        }
        if self.resources.is_empty() {
            return Err(invalid(format!(
                "gpus_per_pod must be between 1 and {MAX_GPUS_PER_NODE}, got 0 (pods without \
                 GPUs must ask resources_per_pod)"
            )));
        }
        if self.numa == Numa::Single || self.spares > 0 {
            return Err(invalid(
                "pods without GPUs (gpus_per_pod=0) take neither numa='single' nor spares",
            ));
        }
        Ok(())
    }

    /// The same request with this required node affinity and these tolerations (its
    /// selected labels kept).
    pub fn with_affinity(
        self,
        affinity: Vec<Vec<Requirement>>,
        tolerations: Vec<Toleration>,
    ) -> CoreResult<Self> {
        let filter = self
            .filter
            .clone()
            .with_affinity(affinity)?
            .with_tolerations(tolerations)?;
        Ok(Self { filter, ..self })
    }

    /// The same request with this NUMA policy.
    pub fn with_numa(self, numa: Numa) -> Self {
        Self { numa, ..self }
    }

    /// The same request with this spread.
    pub fn with_spread(self, spread: Spread) -> Self {
        Self { spread, ..self }
    }

    /// The same request with these slice layers (outermost first), their sizes checked
    /// against `pods` and `min_pods` (docs/shapes.md "Slices").
    pub fn with_slices(self, slices: &[(String, i64)]) -> CoreResult<Self> {
        let slices = check_sizes(slices, self.pods, self.min_pods)?;
        Ok(Self { slices, ..self })
    }

    /// The same request with these terms.
    pub fn with_terms(self, terms: Terms) -> Self {
        Self { terms, ..self }
    }

    /// GPUs of the smallest gang accepted (`min_pods`, or `pods`), its spares included.
    pub fn min_gpus(&self) -> u64 {
        self.placed_pods(self.min_pods.unwrap_or(self.pods)) * u64::from(self.whole_gpus())
    }

    /// Total GPUs of the full gang and its spares, at most `MAX_GANG_GPUS`.
    pub fn total_gpus(&self) -> u64 {
        self.placed_pods(self.pods) * u64::from(self.whole_gpus())
    }
}

/// One pod of a placement: a node and the GPUs it takes there.
///
/// Equality and hashing are by node and GPUs: the affinity is derived from the node's GPU
/// groups, not part of what the pod is.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PodPlacement {
    /// Node name (shared with the node: building a placement copies no names).
    pub node: Arc<str>,
    /// The GPUs.
    pub gpus: GpuSet,
    /// The finest intra-node level holding all its GPUs, when the engine placed it on a node
    /// with GPU groups (`None`: the node, or unknown).
    pub affinity: Option<LevelName>,
}

impl PartialEq for PodPlacement {
    fn eq(&self, other: &Self) -> bool {
        self.node == other.node && self.gpus == other.gpus
    }
}

impl Eq for PodPlacement {}

impl std::hash::Hash for PodPlacement {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.node.hash(state);
        self.gpus.hash(state);
    }
}

impl PodPlacement {
    /// A pod from user-given GPU indices: distinct, in `0..64` (a node's own count is
    /// checked when the placement is reserved).
    pub fn new(node: String, gpus: impl IntoIterator<Item = i64>) -> CoreResult<Self> {
        let gpus = GpuSet::from_indices(gpus, MAX_GPUS_PER_NODE).map_err(|error| {
            let (GpuIndexError::OutOfRange(gpu) | GpuIndexError::Repeated(gpu)) = error;
            invalid(format!(
                "GPU indices must be distinct and in range({MAX_GPUS_PER_NODE}), got {gpu}"
            ))
        })?;
        Ok(Self {
            node: Arc::from(node),
            gpus,
            affinity: None,
        })
    }

    /// GPU indices, ascending.
    pub fn gpu_indices(&self) -> Vec<u32> {
        self.gpus.indices()
    }

    /// Number of GPUs.
    pub fn gpu_count(&self) -> u32 {
        self.gpus.count()
    }
}

/// Where a gang goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Placement {
    /// Pods in rank order.
    pub pods: Vec<PodPlacement>,
    /// `"node"`, a level name, or `"cluster"`.
    pub level: String,
    /// Path of the chosen domain (plus the node name at level `node`; empty for `cluster`).
    pub domain: Vec<String>,
    /// Thousandths of its GPU each pod uses (docs/resources.md "Fractions of a GPU"); `None`: pods hold
    /// their GPUs whole.
    pub gpu_milli: Option<u16>,
    /// Slice requests: the domain path of every innermost slice, in rank order (empty
    /// otherwise). Multi-role gangs: those of each group with slices, groups in request
    /// order.
    pub slices: Vec<Vec<String>>,
    /// Multi-role gangs: each group's name and pod count, in request order (its pods are
    /// consecutive in `pods`, groups in this order); empty for a single gang.
    pub groups: Vec<(String, u64)>,
    /// Spare pods held next to the gang (docs/repair.md "Spares"), in the order they were placed;
    /// not ranks of the gang.
    pub spares: Vec<PodPlacement>,
}

impl Placement {
    /// Distinct node names in order of their first rank. Ranking sorts pods by node path, so
    /// the pods of a node are consecutive, except after a repair (replacements keep their
    /// ranks): a set of the names seen catches those.
    pub fn nodes(&self) -> Vec<&str> {
        let mut nodes: Vec<&str> = Vec::new();
        let mut seen: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
        for pod in &self.pods {
            if nodes.last() != Some(&&*pod.node) && seen.insert(&pod.node) {
                nodes.push(&pod.node);
            }
        }
        nodes
    }
}

/// A hold on a placement's GPUs, until `expires_at` (clock seconds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reservation {
    /// Unguessable id.
    pub id: HoldId,
    /// What is held (shared with the ledger's hold, never copied).
    pub placement: Arc<Placement>,
    /// When the hold lapses.
    pub expires_at: f64,
    /// Who holds it (`None`: made without an owner).
    pub owner: Option<String>,
    /// Priority and flags.
    pub terms: Terms,
    /// Clock time it was reserved.
    pub since: f64,
    /// The request it was placed for (`None` for `reserve(placement)` and adopted work).
    pub request: Option<Arc<GangRequest>>,
    /// The multi-role request it was placed for (then `request` is `None`).
    pub roles: Option<Arc<MultiGangRequest>>,
    /// A repair reservation (`Cluster.repair`): the allocation it repairs.
    pub repairs: Option<HoldId>,
    /// A repair reservation: the ranks its pods replace, one per pod in pod order.
    pub repaired_ranks: Vec<u64>,
}

/// A committed reservation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Allocation {
    /// The id of the reservation it came from.
    pub id: HoldId,
    /// Ranks (sorted) whose pod has a GPU on a removed node or an unhealthy GPU, as of when
    /// this value was made (docs/repair.md "Repair after failures").
    pub lost: Vec<u64>,
    /// Ranks (sorted) whose pods `release_pods` ended (docs/transactions.md "Ending some pods").
    pub ended: Vec<u64>,
    /// What is allocated (shared with the ledger's hold).
    pub placement: Arc<Placement>,
    /// Who holds it (`None`: made without an owner).
    pub owner: Option<String>,
    /// Priority and flags.
    pub terms: Terms,
    /// Clock time it was committed.
    pub since: f64,
    /// The request it was placed for (`None` for `reserve(placement)` and adopted work).
    pub request: Option<Arc<GangRequest>>,
    /// The multi-role request it was placed for (then `request` is `None`).
    pub roles: Option<Arc<MultiGangRequest>>,
}

/// A live hold, as `set_priority` hands it back.
#[derive(Debug, Clone, PartialEq)]
pub enum Held {
    /// Not committed yet.
    Reservation(Reservation),
    /// Committed.
    Allocation(Allocation),
}

/// What `plan_preemption` proposes: a placement and the allocations to end for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreemptionPlan {
    /// The request planned for: a gang, or a multi-role unit.
    pub request: AnyRequest,
    /// Exactly what `preempt` will hold.
    pub placement: Arc<Placement>,
    /// The allocations to end, sorted by id.
    pub victims: Vec<HoldId>,
    /// GPUs the victims hold in total, healthy or not.
    pub victim_gpus: u64,
    /// The highest victim priority; `None` without victims.
    pub max_victim_priority: Option<i32>,
    /// Whether the victims came from a caller's list of candidates (docs/preemption.md P7): `preempt`
    /// then does not require them to rank below the request.
    #[serde(default)]
    pub chosen_victims: bool,
}

/// What `plan_repair` proposes (docs/repair.md "Repair after failures"): where each lost rank of an
/// allocation goes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepairPlan {
    /// The allocation repaired.
    pub allocation: HoldId,
    /// Its lost ranks when planned, sorted (all of them are repaired).
    pub lost: Vec<u64>,
    /// `(rank, new pod)` for every lost rank, in rank order.
    pub replacements: Vec<(u64, PodPlacement)>,
    /// Ranks the allocation's own spares take (their replacements are those spares).
    pub from_spares: Vec<u64>,
    /// The level of the domain searched: the placement's, or the enclosing one when widened.
    pub level: String,
    /// That domain's path (plus the node name at level `node`).
    pub domain: Vec<String>,
    /// Allocations `repair` ends to make room (rule R6), sorted by id.
    pub victims: Vec<HoldId>,
}

/// One move of a defragmentation: an allocation and where it goes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Move {
    /// The allocation moved.
    pub allocation: HoldId,
    /// Where it is now.
    pub source: Arc<Placement>,
    /// Where it goes.
    pub target: Arc<Placement>,
}

/// What `plan_defrag` proposes: a placement, the moves that make room for it, and the
/// allocations preempted because they could not move.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DefragPlan {
    /// The request planned for: a gang, or a multi-role unit.
    pub request: AnyRequest,
    /// Exactly what `apply_defrag` will hold for the gang.
    pub placement: Arc<Placement>,
    /// The moves, sorted by allocation id.
    pub moves: Vec<Move>,
    /// Allocations preempted instead of moved (with `evict_unplaceable`), sorted.
    pub evictions: Vec<HoldId>,
    /// GPUs the moved allocations hold in total.
    pub moved_gpus: u64,
}

/// The options of `plan_defrag` besides its removal limits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DefragOptions {
    /// A moved job may land at a coarser level than it has now (up to its request's).
    pub allow_downgrade: bool,
    /// A member that cannot move is preempted instead, if it is a preemption candidate.
    pub evict_unplaceable: bool,
}

/// One pod of work already running, for [`crate::Engine::adopt`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdoptedPod {
    /// Exactly these GPUs of the node.
    Gpus {
        /// The node's name.
        node: String,
        /// The GPUs the pod uses.
        gpus: GpuSet,
    },
    /// This many of the node's lowest-indexed free healthy GPUs (when the indices are not
    /// known, as Slurm prints `GresUsed` without `-d`).
    Count {
        /// The node's name.
        node: String,
        /// How many GPUs.
        count: u32,
    },
}

impl AdoptedPod {
    /// The node's name.
    pub fn node(&self) -> &str {
        match self {
            AdoptedPod::Gpus { node, .. } | AdoptedPod::Count { node, .. } => node,
        }
    }
}
