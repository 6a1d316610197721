//! The texts of the errors that the engine and `gangplace.reference` both raise and the
//! state machine compares word for word (`Conflict`, `LimitExceeded`, and the spares'
//! `Unschedulable`). Each text is built here and only here; the reference builds it in
//! `gangplace/reference/texts.py` from a function of the same name, and docs/errors.md lists
//! every template. A node name or an owner is quoted as Rust's `Debug` quotes a string.

use super::CoreError;
use std::fmt::Display;

use crate::limits::MAX_NODES;

/// `LimitExceeded`: an owner's cap on held GPUs (`who` is `None` for holds without an owner).
pub(crate) fn owner_cap(who: Option<&str>, would_hold: u64, cap: u64, held: u64) -> CoreError {
    let who = who.map_or_else(|| "holds without an owner".to_owned(), |o| format!("{o:?}"));
    CoreError::LimitExceeded(format!(
        "{who} would hold {would_hold} GPUs; the cap per owner is {cap} (held now: {held})"
    ))
}

/// `LimitExceeded`: `add_node` on a full cluster.
pub(crate) fn node_limit() -> CoreError {
    CoreError::LimitExceeded(format!(
        "the cluster already has {MAX_NODES} nodes, the limit"
    ))
}

/// `Conflict`: two pods of a placement or plan (`subject`) name the same GPU.
pub(crate) fn one_gpu_two_pods(subject: &str) -> CoreError {
    CoreError::Conflict(format!("{subject} takes one GPU for two pods"))
}

/// `Conflict`: a placement's pod names a GPU twice or one the node does not have.
pub(crate) fn gpu_out_of_range(gpu: u32, node: &str) -> CoreError {
    CoreError::Conflict(format!(
        "the placement names GPU {gpu} of node {node:?} twice or out of range"
    ))
}

/// `Conflict`: a placement's node is gone.
pub(crate) fn node_gone(node: &str) -> CoreError {
    CoreError::Conflict(format!("the placement is stale: node {node:?} is gone"))
}

/// `Conflict`: `update_node` would change the structure of a node that holds GPUs.
pub(crate) fn node_holds(node: &str, holds: usize) -> CoreError {
    CoreError::Conflict(format!(
        "node {node:?} holds GPUs of {holds} reservation(s) or allocation(s): its topology, \
         GPU count and GPU groups change only while it holds none"
    ))
}

/// `Conflict`: a placement's node is cordoned.
pub(crate) fn node_cordoned(node: &str) -> CoreError {
    CoreError::Conflict(format!("the placement is stale: node {node:?} is cordoned"))
}

/// `Conflict`: a placement's node is no longer inside its domain (path joined by `/`).
pub(crate) fn node_outside(node: &str, domain: &[String]) -> CoreError {
    CoreError::Conflict(format!(
        "the placement is stale: node {node:?} is no longer in {}",
        domain.join("/")
    ))
}

/// Why a GPU that should be free is not.
pub(crate) fn busy_why(unhealthy: bool) -> &'static str {
    match unhealthy {
        true => "unhealthy",
        false => "held by another reservation or allocation",
    }
}

/// `Conflict`: a placement's GPU is unhealthy or held.
pub(crate) fn placement_gpu_busy(gpu: u32, node: &str, unhealthy: bool) -> CoreError {
    CoreError::Conflict(format!(
        "the placement is stale: GPU {gpu} of node {node:?} is {}",
        busy_why(unhealthy)
    ))
}

/// `Conflict`: a fractional placement's GPU no longer has room for its pods' shares (docs/resources.md
/// "Fractions of a GPU").
pub(crate) fn share_room(gpu: u32, node: &str, free: u64, asked: u64) -> CoreError {
    CoreError::Conflict(format!(
        "the placement is stale: GPU {gpu} of node {node:?} has {free} thousandths free, its \
         pods ask {asked}"
    ))
}

/// `Conflict`: a preemption plan's pods ask more of a node's resources than it would have
/// free once the victims end.
pub(crate) fn plan_resources_short(
    node: &str,
    free: &[(String, u64)],
    asked: &[(String, u64)],
) -> CoreError {
    CoreError::Conflict(format!(
        "the plan is stale: node {node:?} would have {} free besides GPUs; its pods ask {}",
        named_amounts(free),
        named_amounts(asked)
    ))
}

/// `Conflict`: a preemption plan's victim ended or its priority changed.
pub(crate) fn victim_changed(victim: impl Display) -> CoreError {
    CoreError::Conflict(format!(
        "the plan is stale: allocation {victim} ended or its priority changed"
    ))
}

/// `Conflict`: a plan's GPU (not freed by its victims) is no longer free.
pub(crate) fn plan_gpu_taken(gpu: u32, node: &str) -> CoreError {
    CoreError::Conflict(format!(
        "the plan is stale: GPU {gpu} of node {node:?} is no longer free"
    ))
}

/// `Conflict`: a defragmentation plan's moved allocation ended or changed.
pub(crate) fn mover_changed(allocation: impl Display) -> CoreError {
    CoreError::Conflict(format!(
        "the plan is stale: allocation {allocation} ended or changed"
    ))
}

/// `Conflict`: two targets of a defragmentation plan take one GPU.
pub(crate) fn targets_overlap() -> CoreError {
    CoreError::Conflict("the plan's targets take one GPU twice".into())
}

/// `Conflict`: `adopt` names one GPU for two pods (`gpu` when the pods name GPUs).
pub(crate) fn adopt_gpu_twice(gpu: u32, node: &str) -> CoreError {
    CoreError::Conflict(format!(
        "adopt names GPU {gpu} of node {node:?} for two pods"
    ))
}

/// `Conflict`: `adopt` of counts on nodes whose free GPUs two pods would share.
pub(crate) fn adopt_overlap() -> CoreError {
    CoreError::Conflict("adopt names one GPU for two pods".into())
}

/// `Conflict`: `adopt` of a pod of `count` GPUs on a node with fewer free healthy ones.
pub(crate) fn adopt_short(node: &str, free: u32, count: u32) -> CoreError {
    CoreError::Conflict(format!(
        "node {node:?} has {free} free healthy GPUs for a pod of {count}"
    ))
}

/// `Conflict`: an adopted fractional pod's GPU has too little room for its share.
pub(crate) fn adopt_share_room(gpu: u32, node: &str, free: u64, milli: u16) -> CoreError {
    CoreError::Conflict(format!(
        "GPU {gpu} of node {node:?} has {free} thousandths free for a pod of {milli}"
    ))
}

/// `Conflict`: no GPU of a node has room for an adopted fractional pod's share.
pub(crate) fn adopt_no_share(node: &str, milli: u16) -> CoreError {
    CoreError::Conflict(format!(
        "node {node:?} has no healthy GPU with {milli} thousandths free"
    ))
}

/// `Conflict`: adopted pods ask more of a node's resources than it has free.
pub(crate) fn adopt_resources_short(
    node: &str,
    free: &[(String, u64)],
    asked: &[(String, u64)],
) -> CoreError {
    CoreError::Conflict(format!(
        "node {node:?} has {} free besides GPUs; the pods adopted there ask {}",
        named_amounts(free),
        named_amounts(asked)
    ))
}

/// `{cpu=..., memory=...}`: quantities by name, as the texts show them.
fn named_amounts(named: &[(String, u64)]) -> String {
    let parts: Vec<String> = named.iter().map(|(n, q)| format!("{n}={q}")).collect();
    format!("{{{}}}", parts.join(", "))
}

/// `Conflict`: `adopt` names a GPU that is unhealthy or held.
pub(crate) fn adopt_gpu_busy(gpu: u32, node: &str, unhealthy: bool) -> CoreError {
    CoreError::Conflict(format!(
        "GPU {gpu} of node {node:?} is {}",
        busy_why(unhealthy)
    ))
}

/// `Conflict`: `repair` of a plan whose allocation's lost ranks changed since it was made.
pub(crate) fn repair_plan_stale(
    allocation: impl Display,
    lost: &[u64],
    repairs: &[u64],
) -> CoreError {
    CoreError::Conflict(format!(
        "the plan is stale: allocation {allocation} has lost ranks {lost:?} now, the plan \
         repairs {repairs:?}"
    ))
}

/// `Conflict`: a repair plan's victim is no longer a live preemptible lower-priority allocation.
pub(crate) fn repair_victim_changed(victim: impl Display) -> CoreError {
    CoreError::Conflict(format!(
        "the plan is stale: victim {victim} is no longer a live preemptible allocation of a \
         lower priority"
    ))
}

/// `Conflict`: a repair plan's GPU is not free (nor freed by its victims).
pub(crate) fn repair_gpu_taken(gpu: u32, node: &str) -> CoreError {
    CoreError::Conflict(format!(
        "the plan is stale: GPU {gpu} of node {node:?} is not free"
    ))
}

/// `Conflict`: a repair plan's (or repair reservation's) spare is no longer a spare.
pub(crate) fn spare_gone(node: &str) -> CoreError {
    CoreError::Conflict(format!(
        "the plan is stale: the spare on node {node:?} is no longer a spare of the allocation"
    ))
}

/// The reason of [`repair_rolled_back`] when the allocation lost other ranks since `repair`.
pub(crate) fn lost_ranks_changed(
    allocation: impl Display,
    lost: &[u64],
    replaces: &[u64],
) -> String {
    format!("allocation {allocation} has lost ranks {lost:?} now, the repair replaces {replaces:?}")
}

/// `Conflict`: `commit_repair` found the repair outdated (`why`) and rolled it back.
pub(crate) fn repair_rolled_back(why: &str, reservation: impl Display) -> CoreError {
    CoreError::Conflict(format!(
        "{why}; the repair reservation {reservation} was rolled back"
    ))
}

/// `Unschedulable`: `reserve_spares` found no room (`sliced`: the gang has slices).
pub(crate) fn no_room_for_spares(count: u64, gpus_per_pod: u32, sliced: bool) -> CoreError {
    let domain = match sliced {
        true => "every slice domain of the allocation",
        false => "the allocation's domain",
    };
    CoreError::Unschedulable(format!(
        "no room for {count} more spare(s) of {gpus_per_pod} GPUs in {domain}"
    ))
}
