"""Node state from ``scontrol show node``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gangplace._gangplace import Allocation, Cluster, PodPlacement
from gangplace.slurm.text import SlurmError, _split_top_level

# Base states and flags of `scontrol show node` that take a node out of scheduling.
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
        "NOT_RESPONDING",
        "POWER_DOWN",
        "POWERED_DOWN",
        "POWERING_DOWN",
        "POWERING_UP",
        "REBOOT_ISSUED",
        "REBOOT_REQUESTED",
    }
)


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


@dataclass(frozen=True)
class SlurmNodeState:
    """What :func:`apply_scontrol_nodes` did.

    Attributes:
        adopted: Node -> the allocation recording its used GPUs (``GresUsed``).
        cordoned: Nodes cordoned because of their state (``DRAIN``, ``DOWN``, ``*``...).
        uncordoned: Nodes uncordoned because their state is usable again.
        unknown: Nodes of the output that the cluster does not have (skipped).
        warnings: Anything else worth knowing (GPU counts that disagree, missing fields).

    """

    adopted: dict[str, Allocation] = field(default_factory=dict)
    cordoned: list[str] = field(default_factory=list)
    uncordoned: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _node_records(text: str) -> list[tuple[int, str]]:
    """Each node's text (one ``-o`` line, or the indented block of the default format)."""
    records: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("NodeName="):
            records.append((number, stripped))
        elif records:
            records[-1] = (records[-1][0], records[-1][1] + " " + stripped)
        else:
            raise SlurmError(f"scontrol:{number}: expected NodeName=..., got {stripped[:40]!r}")
    return records


def _gpu_count(gres: str) -> int | None:
    """GPUs of a ``Gres=`` value (``gpu:8``, ``gpu:h100:8(S:0-1)``, several).

    ``None`` when a GPU item's count is not a number.
    """
    total = 0
    for part in _split_top_level(gres):
        item = part.strip()
        if not re.match(r"gpu(:|$|\()", item):
            continue
        match = re.fullmatch(r"gpu(?::[^:(]+)?:(\d+)(\(.*\))?", item)
        if match is None:
            return None
        total += int(match.group(1))
    return total


def _used_indices(used: str, where: str) -> tuple[int, list[int] | None]:
    """``(count, indices)`` of ``GresUsed``; indices ``None`` when Slurm printed none."""
    count, named = 0, True
    indices: list[int] = []
    for part in _split_top_level(used):
        item = part.strip()
        if not re.match(r"gpu(:|$|\()", item):
            continue
        match = re.fullmatch(r"gpu(?::[^:(]+)?:(\d+)(?:\(IDX:([^)]*)\))?", item)
        if match is None:
            raise SlurmError(f"{where}: bad GPU item {item!r} in GresUsed")
        count += int(match.group(1))
        spec = match.group(2)
        if spec is None:
            named = False
        elif spec != "N/A":
            for item in spec.split(","):
                low, _, high = item.partition("-")
                if not low.isdigit() or (high and not high.isdigit()):
                    raise SlurmError(f"{where}: bad GPU index list {spec!r} in GresUsed")
                indices.extend(range(int(low), int(high or low) + 1))
    if named and len(indices) != count:
        raise SlurmError(f"{where}: GresUsed names {len(indices)} GPUs but counts {count}")
    return count, (indices if named else None)


def apply_scontrol_nodes(cluster: Cluster, text: str, *, owner: str = "slurm") -> SlurmNodeState:
    """Reads ``scontrol -d show node`` output (``-o`` one-line or the default form).

    For every node the cluster has: the GPUs of ``GresUsed`` are adopted as one allocation of
    ``owner`` (with ``-d`` Slurm prints their indices, ``gpu:h100:4(IDX:0-3)``; without it
    only counts, and the lowest-indexed free GPUs are taken); a node whose ``State`` has a
    base state or flag of :data:`UNUSABLE_STATES` (``DRAIN``, ``DOWN``, ``DOWN*``,
    ``MIXED+DRAIN``...) or ends in ``*`` (not responding) is cordoned, any other node is
    uncordoned. Allocations ``owner`` held before are released first, so calling it again
    with fresh output brings the cluster up to date. Nodes unknown to the cluster are
    listed and skipped.

    Raises:
        SlurmError: Malformed output (the message names the line); nothing changed.
        Conflict: A used GPU is held by something else or unhealthy in the cluster; the
            nodes before it were applied (the error names the node).

    """
    if not isinstance(text, str):
        raise SlurmError(f"scontrol output must be text (str), got {type(text).__name__}")
    parsed = []
    for number, record in _node_records(text):
        where = f"scontrol:{number}"
        fields = dict(re.findall(r"(\w+)=(\S*)", record))
        name = fields.get("NodeName", "")
        if not name:
            raise SlurmError(f"{where}: a node record without a name")
        used = _used_indices(fields.get("GresUsed", ""), where)
        parsed.append((name, fields, used))
    result = SlurmNodeState()
    for allocation in cluster.allocations(owner=owner):
        cluster.release(allocation, owner=owner)
    known = set(cluster.nodes())
    for name, fields, (count, indices) in parsed:
        if name not in known:
            result.unknown.append(name)
            continue
        info = cluster.node(name)
        configured = _gpu_count(fields.get("Gres", ""))
        if configured is None:
            result.warnings.append(
                f"{name}: Gres={fields['Gres']} has a GPU count that is not a number"
            )
        elif "Gres" in fields and configured != info.gpus:
            result.warnings.append(f"{name}: Slurm has {configured} GPUs, the cluster {info.gpus}")
        _apply_state(cluster, name, fields.get("State", ""), info.cordoned, result)
        held = _resources(cluster, name, fields, result)
        if count or held:  # a node whose jobs use CPUs but no GPU: a pod without GPUs
            pods: list[Any] = [PodPlacement(name, indices)] if indices else [(name, count)]
            result.adopted[name] = cluster.adopt(pods, owner=owner, resources=held or None)
    return result


def _number(fields: dict[str, str], key: str, name: str, result: SlurmNodeState) -> int | None:
    """A whole-number field of a node record (absent: ``None``; bad: a warning)."""
    value = fields.get(key)
    if value is None:
        return None
    if not value.isdigit() or len(value) > 15:
        result.warnings.append(f"{name}: {key}={value} is not a count; its resources are unknown")
        return None
    return int(value)


def _resources(
    cluster: Cluster, name: str, fields: dict[str, str], result: SlurmNodeState
) -> dict[str, int]:
    """docs/resources.md "Node resources": the node's CPUs and memory as its resources.

    ``CPUTot`` and ``RealMemory`` (MiB) become its resources; what Slurm's jobs use there
    (``CPUAlloc``, ``AllocMem``) is returned for the node's adoption to hold (with its used
    GPUs, or as a pod without GPUs).
    """
    totals = {
        "cpu": _number(fields, "CPUTot", name, result),
        "memory": _number(fields, "RealMemory", name, result),
    }
    used = {
        "cpu": _number(fields, "CPUAlloc", name, result) or 0,
        "memory": _number(fields, "AllocMem", name, result) or 0,
    }
    scale = {"cpu": 1000, "memory": 2**20}
    resources = {key: value * scale[key] for key, value in totals.items() if value is not None}
    held = {key: min(used[key] * scale[key], total) for key, total in resources.items()}
    if not resources:
        return {}
    cluster.update_node(name, resources=resources)
    return {key: amount for key, amount in held.items() if amount}


def _apply_state(
    cluster: Cluster, name: str, state: str, cordoned: bool, result: SlurmNodeState
) -> None:
    if not state:
        result.warnings.append(f"{name}: no State field; left as it was")
        return
    parts = {part.rstrip("*~#!%$@^-") for part in state.split("+")}
    unknown = sorted(parts - UNUSABLE_STATES - USABLE_STATES)
    if unknown:
        result.warnings.append(
            f"{name}: State={state} has unknown {', '.join(unknown)}; left as it was"
        )
        return
    unusable = state.endswith("*") or bool(parts & UNUSABLE_STATES)
    if unusable and not cordoned:
        cluster.cordon(name)
        result.cordoned.append(name)
    elif not unusable and cordoned:
        cluster.uncordon(name)
        result.uncordoned.append(name)
