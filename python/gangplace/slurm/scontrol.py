"""Node state from ``scontrol show node``: GPUs in use, resources, states (docs/slurm.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from gangplace._gangplace import Allocation, Cluster, PodPlacement
from gangplace.errors import Conflict, GangplaceError
from gangplace.slurm.records import NodeRecord, node_records
from gangplace.slurm.text import SlurmError

# Base states and flags that take a node out of scheduling.
UNUSABLE_STATES = frozenset(
    {
        "DOWN",
        "DRAIN",
        "DRAINED",
        "DRAINING",
        "FAIL",
        "FAILING",
        "MAINT",
        "FUTURE",
        "INVAL",
        "UNKNOWN",
        "REBOOT_ISSUED",
        "REBOOT_REQUESTED",
    }
)
# Power saving: a powered-down cloud node (``idle~``) is one Slurm schedules on (it boots it),
# and one booting is not responding yet. Placeable by default; ``powered_down="cordon"``.
POWER_STATES = frozenset({"POWER_DOWN", "POWERED_DOWN", "POWERING_DOWN", "POWERING_UP", "POWER_UP"})
NOT_RESPONDING = "NOT_RESPONDING"
# Base states and flags that leave a node schedulable (anything else is reported, not guessed).
USABLE_STATES = frozenset(
    {
        "IDLE",
        "MIXED",
        "ALLOCATED",
        "COMPLETING",
        "RESERVED",
        "PLANNED",
        "CLOUD",
        "DYNAMIC_NORM",
        "DYNAMIC_FUTURE",
        "POWERED_UP",
        "RESUME",
        "UNDRAIN",
        "BLOCKED",
    }
)
# The one-character suffixes of a base state, as the flags they stand for.
_SUFFIXES = {
    "*": NOT_RESPONDING,
    "~": "POWERED_DOWN",
    "#": "POWERING_UP",
    "%": "POWERING_DOWN",
    "!": "POWER_DOWN",
    "@": "REBOOT_REQUESTED",
    "^": "REBOOT_ISSUED",
    "$": "MAINT",
    "-": "PLANNED",
}


@dataclass(frozen=True)
class SlurmNodeState:
    """What :func:`apply_scontrol_nodes` did.

    Attributes:
        adopted: Node -> the allocation recording what Slurm's jobs use there.
        cordoned: Nodes cordoned because of their state (``DRAIN``, ``DOWN``, ``*``...), or
            because the GPUs their jobs use are not in the output (``missing_used="cordon"``).
        uncordoned: Nodes uncordoned because their state is usable again.
        unknown: Nodes of the output that the cluster does not have (skipped).
        warnings: Anything else worth knowing (GPU counts that disagree, missing fields).

    """

    adopted: dict[str, Allocation] = field(default_factory=dict)
    cordoned: list[str] = field(default_factory=list)
    uncordoned: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def apply_scontrol_nodes(
    cluster: Cluster,
    text: str,
    *,
    owner: str = "slurm",
    missing_used: Literal["error", "cordon"] = "error",
    powered_down: Literal["use", "cordon"] = "use",
) -> SlurmNodeState:
    """Brings ``cluster`` to what ``scontrol show node`` says, all at once or not at all.

    Reads every format (default or ``-o``, with or without ``-d``; docs/slurm.md). For every
    node the cluster has: what Slurm's jobs use there is adopted as one allocation of
    ``owner``: the GPUs of ``GresUsed`` (with their indices when Slurm prints them, else the
    lowest free ones), MIG profiles and shards as named resources, ``CPUAlloc`` and
    ``AllocMem``; the node's resources become ``CPUEfctv`` (else ``CPUTot``), ``RealMemory``
    less ``MemSpecLimit``, its MIG profiles and shards. Its state cordons or uncordons it:
    :data:`UNUSABLE_STATES`, or not responding outside power saving, cordon; power saving
    (``idle~``, booting) is placeable unless ``powered_down="cordon"``. Allocations
    ``owner`` held before are released first, so calling it again with fresh output brings the
    cluster up to date. Nodes unknown to the cluster are listed and skipped.

    A busy node whose GPUs in use the output does not say (``scontrol show node`` without
    ``-d`` prints no ``GresUsed``) is never read as free: ``SlurmError`` (run ``scontrol -d
    show node``), or with ``missing_used="cordon"`` the node is cordoned.

    Raises:
        SlurmError: Malformed output (naming the line and field), or busy nodes whose GPUs
            in use are unknown; nothing changed.
        Conflict: What Slurm uses is held by something else or unhealthy in the cluster
            (naming every such node); nothing changed.

    """
    records = node_records(text)
    unknown_use = [r.name for r in records if r.used_gpus is None and r.busy and _has_gres(r)]
    if unknown_use and missing_used == "error":
        shown = ", ".join(unknown_use[:5]) + (" ..." if len(unknown_use) > 5 else "")
        raise SlurmError(
            f"scontrol: {len(unknown_use)} busy nodes ({shown}) without GresUsed: the GPUs "
            "their jobs use are unknown; run `scontrol -d show node` (or pass "
            "missing_used='cordon')"
        )
    options = (owner, set(unknown_use), powered_down)
    trial = Cluster.restore(cluster.snapshot())
    conflicts = _apply(trial, records, options, SlurmNodeState())
    if conflicts:
        raise Conflict("scontrol: " + "; ".join(conflicts) + " (nothing was applied)")
    result = SlurmNodeState()
    _apply(cluster, records, options, result)
    return result


def _has_gres(record: NodeRecord) -> bool:
    """Whether the node has GPUs or GPU slices whose use must be known."""
    return bool(record.gpus) or any(
        key.startswith("nvidia.com/mig-") or key == "shard" for key in record.resources
    )


def _apply(
    cluster: Cluster, records: list[NodeRecord], options: Any, result: SlurmNodeState
) -> list[str]:
    """Applies the records; the conflicts met (each node's is skipped and named)."""
    owner, unknown_use, powered_down = options
    for allocation in cluster.allocations(owner=owner):
        cluster.release(allocation, owner=owner)
    known = set(cluster.nodes())
    conflicts = []
    for record in records:
        if record.name not in known:
            result.unknown.append(record.name)
            continue
        result.warnings.extend(record.warnings)
        info = cluster.node(record.name)
        if record.gpus is not None and record.gpus != info.gpus:
            result.warnings.append(
                f"{record.name}: Slurm has {record.gpus} GPUs, the cluster {info.gpus}"
            )
        unusable = _state(record, result, powered_down)
        if record.name in unknown_use:
            unusable = True
            result.warnings.append(
                f"{record.name}: busy, and the GPUs its jobs use are not in the output: cordoned"
            )
        _cordon(cluster, record.name, unusable, info.cordoned, result)
        try:
            _adopt(cluster, record, owner, result, record.name in unknown_use)
        except GangplaceError as error:
            conflicts.append(f"{record.name}: {error}")
    return conflicts


def _adopt(
    cluster: Cluster, record: NodeRecord, owner: str, result: SlurmNodeState, unknown: bool
) -> None:
    """The node's resources, then one allocation of what Slurm's jobs use there."""
    name = record.name
    resources = record.resources
    if resources and resources != cluster.node(name).resources:
        cluster.update_node(name, resources=resources)
    count, indices = (0, None) if unknown or record.used_gpus is None else record.used_gpus
    held = {}
    for key, amount in record.used.items():
        total = resources.get(key)
        if amount and total is not None:
            if amount > total:
                result.warnings.append(f"{name}: Slurm uses {amount} {key}, the node has {total}")
            held[key] = min(amount, total)
    if count or held:  # a node whose jobs use CPUs but no GPU: a pod without GPUs
        pods: list[Any] = [PodPlacement(name, list(indices))] if indices else [(name, count)]
        result.adopted[name] = cluster.adopt(pods, owner=owner, resources=held or None)


def _state(record: NodeRecord, result: SlurmNodeState, powered_down: str) -> bool | None:
    """Whether the node's state takes it out of scheduling (``None``: unknown, left as is)."""
    state = record.fields.get("State", "")
    if not state:
        result.warnings.append(f"{record.name}: no State field; left as it was")
        return None
    flags = set()
    for part in state.split("+"):
        base = part.rstrip("".join(_SUFFIXES))
        flags.add(base)
        flags.update(_SUFFIXES[char] for char in part[len(base) :])
    known = UNUSABLE_STATES | POWER_STATES | USABLE_STATES | {NOT_RESPONDING}
    unknown = sorted(flags - known)
    if unknown:
        result.warnings.append(
            f"{record.name}: State={state} has unknown {', '.join(unknown)}; left as it was"
        )
        return None
    powered = bool(flags & POWER_STATES)
    if powered and powered_down == "cordon":
        return True
    return bool(flags & UNUSABLE_STATES) or (NOT_RESPONDING in flags and not powered)


def _cordon(
    cluster: Cluster, name: str, unusable: bool | None, cordoned: bool, result: SlurmNodeState
) -> None:
    if unusable is None:
        return
    if unusable and not cordoned:
        cluster.cordon(name)
        result.cordoned.append(name)
    elif not unusable and cordoned:
        cluster.uncordon(name)
        result.uncordoned.append(name)
