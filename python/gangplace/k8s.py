"""Kubernetes: clusters from ``Node`` objects, and binding plans for placements.

``nodes`` are ``kubernetes.client.V1Node`` objects or plain dicts as ``kubectl get nodes -o
json`` prints them (a ``NodeList`` with ``items`` is accepted too). The ``kubernetes`` package
is only needed for the model objects (``pip install gangplace[k8s]``).

Rules of :func:`cluster_from_nodes`:

- GPUs per node: ``status.capacity[gpu_resource]``. Nodes without it are left out silently.
- Unhealthy GPUs: the annotation ``gangplace.io/unhealthy-gpus: "3,5"`` names them exactly;
  otherwise, when ``status.allocatable`` is lower than capacity, the missing GPUs count as
  unhealthy (the device plugin withdraws dead GPUs that way), taken from the highest indices.
- Cordoned: ``spec.unschedulable``, a ``NoSchedule`` or ``NoExecute`` taint that the given
  ``tolerations`` do not tolerate, or a ``Ready`` condition that is not ``True``.
- ``levels`` maps each level name to a node label key, outermost first. A node missing one of
  those labels is left out and named in the returned warnings, never merged silently.

Example:
    >>> from gangplace.k8s import cluster_from_nodes
    >>> node = {"metadata": {"name": "n1", "labels": {"rack": "r1"}},
    ...         "status": {"capacity": {"nvidia.com/gpu": "8"},
    ...                    "allocatable": {"nvidia.com/gpu": "7"}}}
    >>> cluster, warnings = cluster_from_nodes([node], levels={"rack": "rack"})
    >>> cluster.node("n1").unhealthy, warnings
    ((7,), [])

"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gangplace._gangplace import Cluster, Placement

__all__ = ["UNHEALTHY_ANNOTATION", "binding_patches", "binding_plan", "cluster_from_nodes"]

UNHEALTHY_ANNOTATION = "gangplace.io/unhealthy-gpus"


def _plain(node: Any) -> dict[str, Any]:
    """A dict view of a node: dicts as they are, client model objects through ``to_dict``."""
    if isinstance(node, Mapping):
        return dict(node)
    to_dict = getattr(node, "to_dict", None)
    if callable(to_dict):
        result = to_dict()
        if isinstance(result, dict):
            return result
    raise TypeError(f"expected a V1Node or a dict, not {type(node).__name__}")


def _count(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def _tolerated(taint: Mapping[str, Any], tolerations: Sequence[Mapping[str, Any]]) -> bool:
    for toleration in tolerations:
        effect = toleration.get("effect")
        if effect and effect != taint.get("effect"):
            continue
        if toleration.get("operator") == "Exists" and not toleration.get("key"):
            return True
        if toleration.get("key") != taint.get("key"):
            continue
        if toleration.get("operator") == "Exists" or toleration.get("value") == taint.get("value"):
            return True
    return False


def _cordoned(node: Mapping[str, Any], tolerations: Sequence[Mapping[str, Any]]) -> bool:
    spec = node.get("spec") or {}
    if spec.get("unschedulable"):
        return True
    for taint in spec.get("taints") or []:
        blocking = taint.get("effect") in ("NoSchedule", "NoExecute")
        if blocking and not _tolerated(taint, tolerations):
            return True
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = [c for c in conditions if c.get("type") == "Ready"]
    return bool(ready) and ready[0].get("status") != "True"


def _unhealthy(node: Mapping[str, Any], gpus: int, allocatable: int) -> list[int]:
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    named = annotations.get(UNHEALTHY_ANNOTATION)
    if named:
        return sorted({int(part) for part in str(named).split(",") if part.strip()})
    return list(range(max(allocatable, 0), gpus))


def cluster_from_nodes(
    nodes: Iterable[Any] | Mapping[str, Any],
    *,
    levels: Mapping[str, str],
    gpu_resource: str = "nvidia.com/gpu",
    tolerations: Sequence[Mapping[str, Any]] = (),
    **cluster_kw: Any,
) -> tuple[Cluster, list[str]]:
    """A cluster from Kubernetes nodes; returns it with warnings about nodes left out.

    Args:
        nodes: ``V1Node`` objects, node dicts, or a ``NodeList`` dict with ``items``.
        levels: Level name -> node label key, outermost first.
        gpu_resource: The extended resource that counts GPUs.
        tolerations: Tolerations (dicts with ``key``, ``operator``, ``value``, ``effect``)
            of the gangs to place: a taint they tolerate does not cordon the node.
        **cluster_kw: Passed to :class:`gangplace.Cluster` (``policy``, ``clock``...).

    """
    if isinstance(nodes, Mapping):
        nodes = nodes.get("items") or []
    cluster = Cluster(tuple(levels), **cluster_kw)
    warnings: list[str] = []
    for raw in nodes:
        node = _plain(raw)
        metadata = node.get("metadata") or {}
        status = node.get("status") or {}
        name = metadata.get("name", "?")
        gpus = _count((status.get("capacity") or {}).get(gpu_resource, 0))
        if gpus <= 0:
            continue
        labels = metadata.get("labels") or {}
        missing = [key for key in levels.values() if key not in labels]
        if missing:
            warnings.append(f"node {name} left out: no label {', '.join(missing)}")
            continue
        allocatable = _count((status.get("allocatable") or {}).get(gpu_resource, gpus))
        cluster.add_node(
            name,
            gpus=gpus,
            topology={level: labels[key] for level, key in levels.items()},
            labels={str(k): str(v) for k, v in labels.items()},
            unhealthy=_unhealthy(node, gpus, allocatable),
        )
        if _cordoned(node, tolerations):
            cluster.cordon(name)
    return cluster, warnings


def binding_plan(placement: Placement, pod_names: Sequence[str]) -> list[dict[str, Any]]:
    """Per rank: the pod name, its ``nodeName`` and GPU indices.

    Raises:
        ValueError: ``pod_names`` does not name one pod per placed pod.

    """
    if len(pod_names) != len(placement.pods):
        raise ValueError(f"{len(pod_names)} pod names for {len(placement.pods)} placed pods")
    return [
        {"rank": rank, "pod": pod_name, "nodeName": pod.node, "gpus": list(pod.gpus)}
        for rank, (pod_name, pod) in enumerate(zip(pod_names, placement.pods, strict=True))
    ]


def binding_patches(plan: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Per pod, the JSON patch (RFC 6902) a controller applies.

    It sets ``spec.nodeName`` and records the rank and GPU indices as the annotations
    ``gangplace.io/rank`` and ``gangplace.io/gpus``.
    """
    patches = {}
    for entry in plan:
        operations = [
            {"op": "add", "path": "/spec/nodeName", "value": entry["nodeName"]},
            {
                "op": "add",
                "path": "/metadata/annotations/gangplace.io~1rank",
                "value": str(entry["rank"]),
            },
            {
                "op": "add",
                "path": "/metadata/annotations/gangplace.io~1gpus",
                "value": ",".join(str(gpu) for gpu in entry["gpus"]),
            },
        ]
        patches[str(entry["pod"])] = json.dumps(operations)
    return patches
