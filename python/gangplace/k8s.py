"""Kubernetes: clusters from ``Node`` objects and running pods, and bindings for placements.

``nodes`` are ``kubernetes.client.V1Node`` objects or plain dicts as ``kubectl get nodes -o
json`` prints them (a ``NodeList`` with ``items`` is accepted too). The ``kubernetes`` package
is only needed for the model objects (``pip install gangplace[k8s]``).

Rules of :func:`cluster_from_nodes` (it never fails on one bad node: every node it leaves
out or cordons is named in the returned warnings):

- GPUs per node: ``status.capacity[gpu_resource]``. Nodes without it (CPU nodes) are left
  out silently; a count that is not an integer, or above 64 (time-slicing or MPS replicas
  advertise ``"128"``), leaves the node out with a warning.
- Unhealthy GPUs: the annotation ``gangplace.io/unhealthy-gpus: "3,5"`` names them exactly;
  otherwise, when ``status.allocatable`` is lower than capacity, the missing GPUs count as
  unhealthy (the device plugin withdraws dead GPUs that way), taken from the highest indices.
- Cordoned (with a warning naming the reason): ``spec.unschedulable``, a ``NoSchedule`` or
  ``NoExecute`` taint that the given ``tolerations`` do not tolerate, or a ``Ready``
  condition that is not ``True``. The default tolerations, :data:`DEFAULT_TOLERATIONS`,
  tolerate the usual GPU taint ``nvidia.com/gpu`` (GKE puts ``nvidia.com/gpu=present:
  NoSchedule`` on every GPU node and adds the toleration to GPU pods).
- Running work (``pods``): every pod bound to a node (``spec.nodeName``) and not finished
  (phase neither ``Succeeded`` nor ``Failed``) that requests GPUs is adopted
  (:meth:`gangplace.Cluster.adopt`), one allocation per pod, owned by ``pod_owner``. Its
  GPUs: ``limits`` (else ``requests``) of ``gpu_resource``, the larger of the sum over
  containers and the largest init container (as Kubernetes counts them); their indices
  come from the ``gangplace.io/gpus`` annotation when gangplace bound the pod, otherwise
  the lowest-indexed free GPUs are taken. A pod on a node left out, or that does not fit,
  is named in the warnings.
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

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gangplace._gangplace import Cluster, PodPlacement
from gangplace._k8s_binding import (
    ALLOCATION_ANNOTATION,
    GPUS_ANNOTATION,
    RANK_ANNOTATION,
    BindResult,
    bind,
    binding_patches,
    binding_plan,
    bindings,
)
from gangplace.errors import GangplaceError

__all__ = [
    "ALLOCATION_ANNOTATION",
    "DEFAULT_TOLERATIONS",
    "GPUS_ANNOTATION",
    "RANK_ANNOTATION",
    "UNHEALTHY_ANNOTATION",
    "BindResult",
    "bind",
    "binding_patches",
    "binding_plan",
    "bindings",
    "cluster_from_nodes",
]

UNHEALTHY_ANNOTATION = "gangplace.io/unhealthy-gpus"
DEFAULT_TOLERATIONS: tuple[Mapping[str, Any], ...] = (
    {"key": "nvidia.com/gpu", "operator": "Exists"},
)
MAX_GPUS = 64


def _plain(obj: Any, kind: str = "V1Node") -> dict[str, Any]:
    """A dict view: dicts as they are, client model objects through the API's own names.

    Model objects are serialized by the client (``sanitize_for_serialization``), which uses
    the API's camelCase keys (``nodeName``, ``initContainers``), as ``kubectl -o json``.
    """
    if isinstance(obj, Mapping):
        return dict(obj)
    if hasattr(obj, "to_dict") and hasattr(obj, "openapi_types"):
        result = _api_client().sanitize_for_serialization(obj)
        if isinstance(result, dict):
            return result
    raise TypeError(f"expected a {kind} or a dict, not {type(obj).__name__}")


@functools.cache
def _api_client() -> Any:
    """One client for serializing model objects (building one per object costs a pool)."""
    from kubernetes.client import ApiClient

    return ApiClient()


def _count(value: Any) -> int | None:
    """An integer quantity, or ``None`` when it is not one."""
    try:
        return int(str(value))
    except ValueError:
        return None


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


def _cordon_reason(node: Mapping[str, Any], tolerations: Sequence[Mapping[str, Any]]) -> str:
    """Why the node takes no new pods (empty when it does)."""
    spec = node.get("spec") or {}
    if spec.get("unschedulable"):
        return "spec.unschedulable"
    for taint in spec.get("taints") or []:
        blocking = taint.get("effect") in ("NoSchedule", "NoExecute")
        if blocking and not _tolerated(taint, tolerations):
            value = f"={taint['value']}" if taint.get("value") else ""
            return f"taint {taint.get('key')}{value}:{taint.get('effect')}"
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = [c for c in conditions if c.get("type") == "Ready"]
    if ready and ready[0].get("status") != "True":
        return f"Ready={ready[0].get('status')}"
    return ""


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
    tolerations: Sequence[Mapping[str, Any]] = DEFAULT_TOLERATIONS,
    pods: Iterable[Any] | Mapping[str, Any] = (),
    pod_owner: str | None = None,
    **cluster_kw: Any,
) -> tuple[Cluster, list[str]]:
    """A cluster from Kubernetes nodes (and the pods running on them), with warnings.

    Args:
        nodes: ``V1Node`` objects, node dicts, or a ``NodeList`` dict with ``items``.
        levels: Level name -> node label key, outermost first.
        gpu_resource: The extended resource that counts GPUs.
        tolerations: Tolerations (dicts with ``key``, ``operator``, ``value``, ``effect``)
            of the gangs to place: a taint they tolerate does not cordon the node.
            Default: :data:`DEFAULT_TOLERATIONS`.
        pods: ``V1Pod`` objects, pod dicts or a ``PodList``: running work to adopt.
        pod_owner: Owner of the adopted pods' allocations.
        **cluster_kw: Passed to :class:`gangplace.Cluster` (``policy``, ``clock``...).

    Returns:
        The cluster, and one warning per node left out or cordoned and per pod not adopted.

    """
    if isinstance(nodes, Mapping):
        nodes = nodes.get("items") or []
    cluster = Cluster(tuple(levels), **cluster_kw)
    warnings: list[str] = []
    for raw in nodes:
        _add_node(cluster, _plain(raw), levels, gpu_resource, tolerations, warnings)
    _adopt_pods(cluster, pods, gpu_resource, pod_owner, warnings)
    return cluster, warnings


def _add_node(
    cluster: Cluster,
    node: Mapping[str, Any],
    levels: Mapping[str, str],
    gpu_resource: str,
    tolerations: Sequence[Mapping[str, Any]],
    warnings: list[str],
) -> None:
    metadata = node.get("metadata") or {}
    status = node.get("status") or {}
    name = metadata.get("name")
    capacity = (status.get("capacity") or {}).get(gpu_resource)
    if capacity is None:
        return
    if not name:
        warnings.append(f"a node without metadata.name left out ({gpu_resource}: {capacity})")
        return
    gpus = _count(capacity)
    if gpus is None or not 0 <= gpus <= MAX_GPUS:
        warnings.append(
            f"node {name} left out: {gpu_resource} capacity {capacity!r} is not a GPU count "
            f"in 0..{MAX_GPUS} (time-slicing or MPS replicas?)"
        )
        return
    if gpus == 0:
        return
    labels = metadata.get("labels") or {}
    missing = [key for key in levels.values() if key not in labels]
    if missing:
        warnings.append(f"node {name} left out: no label {', '.join(missing)}")
        return
    allocatable = _count((status.get("allocatable") or {}).get(gpu_resource, gpus))
    cluster.add_node(
        name,
        gpus=gpus,
        topology={level: labels[key] for level, key in levels.items()},
        labels={str(k): str(v) for k, v in labels.items()},
        unhealthy=_unhealthy(node, gpus, gpus if allocatable is None else allocatable),
    )
    reason = _cordon_reason(node, tolerations)
    if reason:
        cluster.cordon(name)
        warnings.append(f"node {name} cordoned: {reason}")


def _pod_gpus(pod: Mapping[str, Any], gpu_resource: str) -> int:
    """The pod's GPUs as Kubernetes counts them: max(sum of containers, largest init)."""
    spec = pod.get("spec") or {}

    def wanted(container: Mapping[str, Any]) -> int:
        resources = container.get("resources") or {}
        for kind in ("limits", "requests"):
            value = (resources.get(kind) or {}).get(gpu_resource)
            if value is not None:
                return _count(value) or 0
        return 0

    running = sum(wanted(c) for c in spec.get("containers") or spec.get("Containers") or [])
    init = max((wanted(c) for c in spec.get("initContainers") or []), default=0)
    return max(running, init)


def _adopt_pods(
    cluster: Cluster,
    pods: Iterable[Any] | Mapping[str, Any],
    gpu_resource: str,
    owner: str | None,
    warnings: list[str],
) -> None:
    if isinstance(pods, Mapping):
        pods = pods.get("items") or []
    known = set(cluster.nodes())
    for raw in pods:
        pod = _plain(raw, kind="V1Pod")
        metadata = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        name = f"{metadata.get('namespace', 'default')}/{metadata.get('name', '?')}"
        node = spec.get("nodeName") or spec.get("node_name")
        phase = (pod.get("status") or {}).get("phase")
        gpus = _pod_gpus(pod, gpu_resource)
        if not node or phase in ("Succeeded", "Failed") or gpus <= 0:
            continue
        if node not in known:
            warnings.append(f"pod {name} not adopted: its node {node} is not in the cluster")
            continue
        named = ((metadata.get("annotations") or {}).get(GPUS_ANNOTATION) or "").strip()
        entry: Any = (node, gpus)
        if named:
            try:
                entry = PodPlacement(node, [int(part) for part in named.split(",")])
            except (ValueError, GangplaceError) as error:
                warnings.append(f"pod {name}: bad {GPUS_ANNOTATION} {named!r} ({error})")
        try:
            cluster.adopt([entry], owner=owner)
        except GangplaceError as error:
            warnings.append(f"pod {name} not adopted: {error}")
