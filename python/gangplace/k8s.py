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
  (:meth:`gangplace.Cluster.adopt`), owned by ``pod_owner``: the pods of one gang (the
  labels and annotations of :mod:`gangplace._k8s_gangs`: coscheduling, Volcano, Kueue,
  LeaderWorkerSet, JobSet, gangplace's own) as one allocation, any other pod alone, at the
  highest ``spec.priority`` of its pods and never preemptible when one of them is of a
  system priority class. Its
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
from dataclasses import dataclass
from typing import Any

from gangplace import _k8s_fields as fields
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
from gangplace._k8s_fields import BadField
from gangplace._k8s_gangs import gang_key, pod_priority
from gangplace.errors import GangplaceError, InvalidRequest

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
    """Why the node takes no new pods (empty when it does).

    Raises:
        BadField: ``spec.taints`` or ``status.conditions`` is not a list of objects.

    """
    spec = fields.obj(node.get("spec"), "spec")
    if spec.get("unschedulable"):
        return "spec.unschedulable"
    for taint in fields.objects(spec.get("taints"), "spec.taints"):
        blocking = taint.get("effect") in ("NoSchedule", "NoExecute")
        if blocking and not _tolerated(taint, tolerations):
            value = f"={taint['value']}" if taint.get("value") else ""
            return f"taint {taint.get('key')}{value}:{taint.get('effect')}"
    status = fields.obj(node.get("status"), "status")
    conditions = fields.objects(status.get("conditions"), "status.conditions")
    ready = [c for c in conditions if c.get("type") == "Ready"]
    if ready and ready[0].get("status") != "True":
        return f"Ready={ready[0].get('status')}"
    return ""


def _unhealthy(metadata: Mapping[str, Any], gpus: int, allocatable: int) -> list[int]:
    """Raises BadField: the annotation is not a list of GPU indices of this node."""
    annotations = fields.obj(metadata.get("annotations"), "metadata.annotations")
    named = annotations.get(UNHEALTHY_ANNOTATION)
    if named:
        field = f"metadata.annotations[{UNHEALTHY_ANNOTATION}]"
        parts = [part.strip() for part in str(named).split(",") if part.strip()]
        if not all(part.isdigit() and int(part) < gpus for part in parts):
            raise BadField(field, f"{named!r} is not a list of GPU indices below {gpus}")
        return sorted({int(part) for part in parts})
    return list(range(max(allocatable, 0), gpus))


def _items(objects: Any, what: str) -> list[Any]:
    """The items of a list argument: a list, a ``*List`` dict or model, or any iterable."""
    if isinstance(objects, Mapping):
        try:
            return fields.seq(objects.get("items"), f"{what}.items")
        except BadField as bad:
            raise InvalidRequest(str(bad)) from None
    items = getattr(objects, "items", None)
    if isinstance(items, list):  # V1NodeList, V1PodList
        return items
    if isinstance(objects, (str, bytes)) or not isinstance(objects, Iterable):
        raise InvalidRequest(
            f"{what} must be a list of objects or a List, not {fields.kind(objects)}"
        )
    return list(objects)


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
    node_list = _items(nodes, "nodes")
    pod_list = _items(pods, "pods")
    cluster = Cluster(tuple(levels), **cluster_kw)
    warnings: list[str] = []
    for index, raw in enumerate(node_list):
        try:
            _add_node(cluster, _plain(raw), levels, gpu_resource, tolerations, warnings)
        except (BadField, TypeError) as bad:
            warnings.append(f"node {_name_of(raw, index)} left out: {bad}")
    _adopt_pods(cluster, pod_list, gpu_resource, pod_owner, warnings)
    return cluster, warnings


def _name_of(raw: Any, index: int) -> str:
    """A name for messages: ``metadata.name`` when it is a string, else the position."""
    try:
        metadata = _plain(raw).get("metadata")
        name = metadata.get("name") if isinstance(metadata, Mapping) else None
    except TypeError:
        name = None
    return name if isinstance(name, str) and name else f"#{index}"


def _add_node(
    cluster: Cluster,
    node: Mapping[str, Any],
    levels: Mapping[str, str],
    gpu_resource: str,
    tolerations: Sequence[Mapping[str, Any]],
    warnings: list[str],
) -> None:
    metadata = fields.obj(node.get("metadata"), "metadata")
    if node.get("status") is None and "status" in node:
        raise BadField("status", "is null")
    status = fields.obj(node.get("status"), "status")
    name = fields.text(metadata.get("name"), "metadata.name")
    capacity = fields.obj(status.get("capacity"), "status.capacity").get(gpu_resource)
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
    labels = fields.obj(metadata.get("labels"), "metadata.labels")
    missing = [key for key in levels.values() if not isinstance(labels.get(key), str)]
    if missing:
        warnings.append(f"node {name} left out: no label {', '.join(missing)}")
        return
    allocatable = _count(
        fields.obj(status.get("allocatable"), "status.allocatable").get(gpu_resource, gpus)
    )
    unhealthy = _unhealthy(metadata, gpus, gpus if allocatable is None else allocatable)
    reason = _cordon_reason(node, tolerations)
    cluster.add_node(
        name,
        gpus=gpus,
        topology={level: labels[key] for level, key in levels.items()},
        labels={str(k): str(v) for k, v in labels.items()},
        unhealthy=unhealthy,
    )
    if reason:
        cluster.cordon(name)
        warnings.append(f"node {name} cordoned: {reason}")


def _pod_gpus(pod: Mapping[str, Any], gpu_resource: str) -> int:
    """The pod's GPUs as Kubernetes counts them: max(sum of containers, largest init).

    Raises:
        BadField: A container list or a GPU quantity that is not what the API defines.

    """
    spec = fields.obj(pod.get("spec"), "spec")

    def wanted(container: Mapping[str, Any], field: str) -> int:
        resources = fields.obj(container.get("resources"), f"{field}.resources")
        for kind in ("limits", "requests"):
            value = fields.obj(resources.get(kind), f"{field}.resources.{kind}").get(gpu_resource)
            if value is not None:
                count = _count(value)
                if count is None or count < 0:
                    raise BadField(
                        f"{field}.resources.{kind}[{gpu_resource}]", f"{value!r} is not a GPU count"
                    )
                return count
        return 0

    if spec.get("containers") is None and "containers" in spec:
        raise BadField("spec.containers", "is null")
    containers = fields.objects(spec.get("containers"), "spec.containers")
    inits = fields.objects(spec.get("initContainers"), "spec.initContainers")
    running = sum(wanted(c, f"spec.containers[{i}]") for i, c in enumerate(containers))
    init = max((wanted(c, f"spec.initContainers[{i}]") for i, c in enumerate(inits)), default=0)
    return max(running, init)


def _adopt_pods(
    cluster: Cluster,
    pods: list[Any],
    gpu_resource: str,
    owner: str | None,
    warnings: list[str],
) -> None:
    """Adopts running pods: one allocation per gang (pods of no gang: one each)."""
    known = set(cluster.nodes())
    gangs: dict[Any, list[_Running]] = {}
    for index, raw in enumerate(pods):
        try:
            running = _running_pod(_plain(raw, kind="V1Pod"), index, known, gpu_resource, warnings)
        except (BadField, TypeError) as bad:
            warnings.append(f"pod {_pod_name(raw, index)} not adopted: {bad}")
            continue
        if running is not None:
            gangs.setdefault(running.gang or ("pod", index), []).append(running)
    for members in gangs.values():
        what = f"pod {members[0].name}"
        if len(members) > 1:
            gang = members[0].gang or ()
            what = f"gang {'/'.join(gang[1:])} (pods {', '.join(m.name for m in members)})"
        try:
            cluster.adopt(
                [member.entry for member in members],
                owner=owner,
                priority=max(member.priority for member in members),
                preemptible=all(member.preemptible for member in members),
            )
        except GangplaceError as error:
            warnings.append(f"{what} not adopted: {error}")


def _pod_name(raw: Any, index: int) -> str:
    try:
        metadata = _plain(raw, kind="V1Pod").get("metadata")
    except TypeError:
        metadata = None
    if not isinstance(metadata, Mapping):
        return f"#{index}"
    space, name = metadata.get("namespace", "default"), metadata.get("name")
    return f"{space}/{name}" if isinstance(name, str) and isinstance(space, str) else f"#{index}"


@dataclass(frozen=True)
class _Running:
    """A running pod to adopt: its entry, name, gang key and priority."""

    entry: Any
    name: str
    gang: tuple[str, ...] | None
    priority: int
    preemptible: bool


def _running_pod(
    pod: Mapping[str, Any],
    index: int,
    known: set[str],
    gpu_resource: str,
    warnings: list[str],
) -> _Running | None:
    """The pod as something to adopt, or ``None`` (finished, unbound, no GPUs, unknown node)."""
    metadata = fields.obj(pod.get("metadata"), "metadata")
    spec = fields.obj(pod.get("spec"), "spec")
    name = _pod_name(pod, index)
    node = fields.text(spec.get("nodeName") or spec.get("node_name"), "spec.nodeName")
    phase = fields.obj(pod.get("status"), "status").get("phase")
    if not node or phase in ("Succeeded", "Failed"):
        return None
    gpus = _pod_gpus(pod, gpu_resource)
    if gpus <= 0:
        return None
    if node not in known:
        warnings.append(f"pod {name} not adopted: its node {node} is not in the cluster")
        return None
    annotations = fields.obj(metadata.get("annotations"), "metadata.annotations")
    named = str(annotations.get(GPUS_ANNOTATION) or "").strip()
    entry: Any = (node, gpus)
    if named:
        try:
            entry = PodPlacement(node, [int(part) for part in named.split(",")])
        except (ValueError, GangplaceError) as error:
            warnings.append(f"pod {name}: bad {GPUS_ANNOTATION} {named!r} ({error})")
    priority, preemptible = pod_priority(spec)
    return _Running(entry, name, gang_key(metadata), priority, preemptible)
