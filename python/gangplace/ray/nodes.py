"""Ray's node table, read as untrusted input (docs/ray.md, rules RY1-RY2).

A Ray node record is a dict as ``ray.nodes()`` returns it (``NodeID``, ``Alive``,
``Resources`` with ``GPU``, ``CPU`` and ``memory``, ``Labels``). :func:`read_node` turns one
into a :class:`RayNode` or says, in one warning naming the node and the field, why it is left
out; a node without GPUs (a head node, a CPU worker) is left out without a warning.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gangplace._gangplace import LIMITS

__all__ = ["NODE_ID_LABEL", "RayNode", "read_node"]

NODE_ID_LABEL = "ray.io/node-id"  # Ray's built-in label: every node carries its own id
MAX_GPUS = int(LIMITS["max_gpus_per_node"])
MAX_NAME_BYTES = int(LIMITS["max_name_bytes"])


@dataclass(frozen=True)
class RayNode:
    """What gangplace reads of one alive Ray node with GPUs."""

    node_id: str
    gpus: int
    topology: dict[str, str]
    labels: dict[str, str]
    resources: dict[str, int]  # "cpu" in millicores, "memory" in bytes (docs/resources.md)


def read_node(record: object, levels: Mapping[str, str]) -> tuple[RayNode | None, str | None]:
    """One node record: the node, or ``None`` and a warning (``None`` too: not a GPU node)."""
    if not isinstance(record, Mapping):
        return None, f"node record left out: expected a dict, got {type(record).__name__}"
    node_id = record.get("NodeID")
    if not isinstance(node_id, str) or not 1 <= len(node_id.encode()) <= MAX_NAME_BYTES:
        return None, f"node record left out: NodeID: expected a node id string, got {node_id!r}"
    where = f"node {node_id} left out"
    alive = record.get("Alive")
    if alive is not True:
        state = "dead (Alive is false)" if alive is False else f"Alive: got {alive!r}"
        return None, f"{where}: {state}"
    resources = record.get("Resources")
    if not isinstance(resources, Mapping):
        return None, f"{where}: Resources: expected a dict, got {type(resources).__name__}"
    gpus, why = _whole("GPU", resources.get("GPU", 0))
    if why is not None:
        return None, f"{where}: {why}"
    if gpus == 0:
        return None, None  # not a GPU node: a head node or a CPU worker
    if gpus > MAX_GPUS:
        return None, f"{where}: Resources.GPU: {gpus} GPUs, above {MAX_GPUS} per node"
    labels = record.get("Labels", {})
    if labels is None:
        labels = {}
    if not isinstance(labels, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        return None, f"{where}: Labels: expected a dict of strings, got {labels!r}"
    topology = {}
    for level, key in levels.items():
        value = labels.get(key)
        if not value:
            return None, f"{where}: Labels: no {key!r} label for level {level!r}"
        topology[level] = value
    held: dict[str, int] = {}
    for name, key, scale in (("cpu", "CPU", 1000), ("memory", "memory", 1)):
        if key not in resources:
            continue
        amount = resources[key]
        if isinstance(amount, bool) or not isinstance(amount, (int, float)):
            return None, f"{where}: Resources.{key}: expected a number, got {amount!r}"
        if not math.isfinite(amount) or amount < 0:
            return None, f"{where}: Resources.{key}: expected a number >= 0, got {amount!r}"
        held[name] = round(amount * scale)
    return RayNode(node_id, gpus, topology, dict(labels), held), None


def _whole(key: str, value: Any) -> tuple[int, str | None]:
    """A whole GPU count, or why not."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0, f"Resources.{key}: expected a number, got {value!r}"
    if not math.isfinite(value) or value < 0 or value != int(value):
        return 0, f"Resources.{key}: {value!r} GPUs: not a whole number (fractional GPUs)"
    return int(value), None
