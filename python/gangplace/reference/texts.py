"""The texts of the errors that the engine and the reference both raise, built in one place.

The state machine (``tests/test_stateful.py``) compares the text of every ``Conflict``,
``LimitExceeded`` and ``Unschedulable`` word for word. Each such text of the reference is
built here, by a function named like its twin in the core's ``error/texts.rs``;
docs/errors.md lists every template. A node name or an owner is quoted as Rust's ``Debug``
quotes a string (:func:`quoted`); ranks print as a list, ``[0, 1]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gangplace.errors import Conflict, LimitExceeded, Unschedulable
from gangplace.reference.values import MAX_NODES

_ESCAPES = {"\t": "\\t", "\r": "\\r", "\n": "\\n", "\\": "\\\\", '"': '\\"', "\0": "\\0"}


def quoted(text: str) -> str:
    """``text`` in double quotes, escaped as Rust's ``{:?}`` escapes a string."""
    out = []
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        else:
            out.append(f"\\u{{{ord(char):x}}}")
    return '"' + "".join(out) + '"'


def _ranks(ranks: Sequence[int]) -> str:
    return "[" + ", ".join(str(rank) for rank in ranks) + "]"


def owner_cap(who: str | None, would_hold: int, cap: int, held: int) -> LimitExceeded:
    """An owner's cap on held GPUs (``who`` is None for holds without an owner)."""
    name = "holds without an owner" if who is None else quoted(who)
    return LimitExceeded(
        f"{name} would hold {would_hold} GPUs; the cap per owner is {cap} (held now: {held})"
    )


def node_limit() -> LimitExceeded:
    """``add_node`` on a full cluster."""
    return LimitExceeded(f"the cluster already has {MAX_NODES} nodes, the limit")


def one_gpu_two_pods(subject: str) -> Conflict:
    """Two pods of a placement or plan (``subject``) name the same GPU."""
    return Conflict(f"{subject} takes one GPU for two pods")


def gpu_out_of_range(gpu: int, node: str) -> Conflict:
    """A placement's pod names a GPU twice or one the node does not have."""
    return Conflict(f"the placement names GPU {gpu} of node {quoted(node)} twice or out of range")


def node_gone(node: str) -> Conflict:
    """A placement's node is gone."""
    return Conflict(f"the placement is stale: node {quoted(node)} is gone")


def node_holds(node: str, holds: int) -> Conflict:
    """``update_node`` would change the structure of a node that holds GPUs."""
    return Conflict(
        f"node {quoted(node)} holds GPUs of {holds} reservation(s) or allocation(s): its "
        "topology, GPU count and GPU groups change only while it holds none"
    )


def node_cordoned(node: str) -> Conflict:
    """A placement's node is cordoned."""
    return Conflict(f"the placement is stale: node {quoted(node)} is cordoned")


def node_outside(node: str, domain: Sequence[str]) -> Conflict:
    """A placement's node is no longer inside its domain (path joined by ``/``)."""
    return Conflict(
        f"the placement is stale: node {quoted(node)} is no longer in {'/'.join(domain)}"
    )


def busy_why(unhealthy: bool) -> str:
    """Why a GPU that should be free is not."""
    return "unhealthy" if unhealthy else "held by another reservation or allocation"


def placement_gpu_busy(gpu: int, node: str, unhealthy: bool) -> Conflict:
    """A placement's GPU is unhealthy or held."""
    return Conflict(
        f"the placement is stale: GPU {gpu} of node {quoted(node)} is {busy_why(unhealthy)}"
    )


def share_room(gpu: int, node: str, free: int, asked: int) -> Conflict:
    """A fractional placement's GPU no longer has room for its pods' shares."""
    return Conflict(
        f"the placement is stale: GPU {gpu} of node {quoted(node)} has {free} thousandths free, "
        f"its pods ask {asked}"
    )


def victim_changed(victim: str) -> Conflict:
    """A preemption plan's victim ended or its priority changed."""
    return Conflict(f"the plan is stale: allocation {victim} ended or its priority changed")


def plan_gpu_taken(gpu: int, node: str) -> Conflict:
    """A plan's GPU (not freed by its victims) is no longer free."""
    return Conflict(f"the plan is stale: GPU {gpu} of node {quoted(node)} is no longer free")


def mover_changed(allocation: str) -> Conflict:
    """A defragmentation plan's moved allocation ended or changed."""
    return Conflict(f"the plan is stale: allocation {allocation} ended or changed")


def targets_overlap() -> Conflict:
    """Two targets of a defragmentation plan take one GPU."""
    return Conflict("the plan's targets take one GPU twice")


def adopt_gpu_twice(gpu: int, node: str) -> Conflict:
    """``adopt`` names one GPU for two pods."""
    return Conflict(f"adopt names GPU {gpu} of node {quoted(node)} for two pods")


def adopt_overlap() -> Conflict:
    """``adopt`` of counts whose GPUs two pods would share."""
    return Conflict("adopt names one GPU for two pods")


def adopt_short(node: str, free: int, count: int) -> Conflict:
    """``adopt`` of a pod of ``count`` GPUs on a node with fewer free healthy ones."""
    return Conflict(f"node {quoted(node)} has {free} free healthy GPUs for a pod of {count}")


def _listed(named: Mapping[str, int]) -> str:
    """``{cpu=..., memory=...}``: quantities by name, zeros left out."""
    parts = [f"{name}={quantity}" for name, quantity in sorted(named.items()) if quantity]
    return "{" + ", ".join(parts) + "}"


def plan_resources_short(node: str, free: Mapping[str, int], asked: Mapping[str, int]) -> Conflict:
    """``preempt`` of a plan whose pods ask more of a node's resources than the victims free."""
    return Conflict(
        f"the plan is stale: node {quoted(node)} would have {_listed(free)} free besides GPUs; "
        f"its pods ask {_listed(asked)}"
    )


def adopt_resources_short(node: str, free: Mapping[str, int], asked: Mapping[str, int]) -> Conflict:
    """``adopt`` of pods asking more of a node's resources than it has free."""
    listed = _listed
    return Conflict(
        f"node {quoted(node)} has {listed(free)} free besides GPUs; the pods adopted there ask "
        f"{listed(asked)}"
    )


def adopt_share_room(gpu: int, node: str, free: int, milli: int) -> Conflict:
    """``adopt`` names a GPU without room for a fractional pod's share."""
    return Conflict(
        f"GPU {gpu} of node {quoted(node)} has {free} thousandths free for a pod of {milli}"
    )


def adopt_no_share(node: str, milli: int) -> Conflict:
    """``adopt`` of a fractional pod on a node with no GPU that has room for its share."""
    return Conflict(f"node {quoted(node)} has no healthy GPU with {milli} thousandths free")


def adopt_gpu_busy(gpu: int, node: str, unhealthy: bool) -> Conflict:
    """``adopt`` names a GPU that is unhealthy or held."""
    return Conflict(f"GPU {gpu} of node {quoted(node)} is {busy_why(unhealthy)}")


def repair_plan_stale(allocation: str, lost: Sequence[int], repairs: Sequence[int]) -> Conflict:
    """``repair`` of a plan whose allocation's lost ranks changed since it was made."""
    return Conflict(
        f"the plan is stale: allocation {allocation} has lost ranks {_ranks(lost)} now, "
        f"the plan repairs {_ranks(repairs)}"
    )


def repair_victim_changed(victim: str) -> Conflict:
    """A repair plan's victim is no longer a live preemptible lower-priority allocation."""
    return Conflict(
        f"the plan is stale: victim {victim} is no longer a live preemptible allocation "
        "of a lower priority"
    )


def repair_gpu_taken(gpu: int, node: str) -> Conflict:
    """A repair plan's GPU is not free (nor freed by its victims)."""
    return Conflict(f"the plan is stale: GPU {gpu} of node {quoted(node)} is not free")


def spare_gone(node: str) -> Conflict:
    """A repair plan's (or repair reservation's) spare is no longer a spare."""
    return Conflict(
        f"the plan is stale: the spare on node {quoted(node)} is no longer a spare "
        "of the allocation"
    )


def lost_ranks_changed(allocation: str, lost: Sequence[int], replaces: Sequence[int]) -> str:
    """The reason of :func:`repair_rolled_back` when the allocation lost other ranks."""
    return (
        f"allocation {allocation} has lost ranks {_ranks(lost)} now, "
        f"the repair replaces {_ranks(replaces)}"
    )


def repair_rolled_back(why: str, reservation: str) -> Conflict:
    """``commit_repair`` found the repair outdated (``why``) and rolled it back."""
    return Conflict(f"{why}; the repair reservation {reservation} was rolled back")


def no_room_for_spares(count: int, gpus_per_pod: int, sliced: bool) -> Unschedulable:
    """``reserve_spares`` found no room (``sliced``: the gang has slices)."""
    domain = "every slice domain of the allocation" if sliced else "the allocation's domain"
    return Unschedulable(f"no room for {count} more spare(s) of {gpus_per_pod} GPUs in {domain}")
