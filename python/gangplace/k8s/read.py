"""Reading Kubernetes objects from outside (docs/kubernetes.md).

Nodes become node descriptions, pods running work. Every field may be missing, null,
mistyped or absurd: each reader returns what it read or raises :class:`BadField` naming the
field, which the callers turn into a warning naming the object.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gangplace._gangplace import PodPlacement
from gangplace.errors import GangplaceError, InvalidRequest
from gangplace.k8s import fields
from gangplace.k8s import quantity as quantities
from gangplace.k8s.binding import (
    ALLOCATION_ANNOTATION,
    GPU_MILLI_ANNOTATION,
    GPUS_ANNOTATION,
    RANK_ANNOTATION,
)
from gangplace.k8s.fields import BadField
from gangplace.k8s.gangs import gang_key, pod_priority
from gangplace.k8s.objects import plain

__all__ = [
    "DEFAULT_TOLERATIONS",
    "MAX_GPUS",
    "UNHEALTHY_ANNOTATION",
    "NodeView",
    "PodView",
    "items",
    "name_of",
    "node_view",
    "plain",
    "pod_gpus",
    "pod_key",
    "pod_name",
    "pod_view",
]

UNHEALTHY_ANNOTATION = "gangplace.io/unhealthy-gpus"
MAX_GPUS = 64
MIG_PREFIX = "nvidia.com/mig-"  # the mixed strategy's resource names, one per MIG profile
# NVIDIA's device plugin with time-slicing or MPS advertises each GPU this many times.
REPLICAS_LABEL = "nvidia.com/gpu.replicas"
MAX_REPLICAS = 1024
DEFAULT_TOLERATIONS: tuple[Mapping[str, Any], ...] = (
    {"key": "nvidia.com/gpu", "operator": "Exists"},
)


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


EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _cordon_reason(node: Mapping[str, Any]) -> str:
    """Why the node takes no new pods at all (empty when it does): K2's cordons.

    Raises:
        BadField: ``status.conditions`` is not a list of objects.

    """
    spec = fields.obj(node.get("spec"), "spec")
    if spec.get("unschedulable"):
        return "spec.unschedulable"
    status = fields.obj(node.get("status"), "status")
    conditions = fields.objects(status.get("conditions"), "status.conditions")
    ready = [c for c in conditions if c.get("type") == "Ready"]
    if ready and ready[0].get("status") != "True":
        return f"Ready={ready[0].get('status')}"
    return ""


def node_taints(
    node: Mapping[str, Any], tolerations: Sequence[Mapping[str, Any]]
) -> tuple[tuple[str, str, str], ...]:
    """K10: the node's taints as the engine keeps them, less those every gang tolerates.

    Raises:
        BadField: ``spec.taints`` is not a list of objects, or a taint's ``key`` is missing
            or its ``effect`` is not one of Kubernetes' three (who tolerates it is unknown).

    """
    spec = fields.obj(node.get("spec"), "spec")
    taints = []
    for index, taint in enumerate(fields.objects(spec.get("taints"), "spec.taints")):
        where = f"spec.taints[{index}]"
        key = fields.text(taint.get("key"), f"{where}.key")
        value = fields.text(taint.get("value"), f"{where}.value") or ""
        effect = fields.text(taint.get("effect"), f"{where}.effect")
        if not key:
            raise BadField(f"{where}.key", "is missing")
        if effect not in EFFECTS:
            raise BadField(f"{where}.effect", f"{effect!r} is not one of {', '.join(EFFECTS)}")
        if not _tolerated(taint, tolerations):
            taints.append((key, value, effect))
    return tuple(sorted(set(taints)))


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


def _named_unhealthy(metadata: Mapping[str, Any]) -> bool:
    annotations = metadata.get("annotations")
    return isinstance(annotations, Mapping) and bool(annotations.get(UNHEALTHY_ANNOTATION))


def items(objects: Any, what: str) -> list[Any]:
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


def name_of(raw: Any, index: int) -> str:
    """A name for messages: ``metadata.name`` when it is a string, else the position."""
    try:
        metadata = plain(raw).get("metadata")
        name = metadata.get("name") if isinstance(metadata, Mapping) else None
    except TypeError:
        name = None
    return name if isinstance(name, str) and name else f"#{index}"


@dataclass(frozen=True)
class NodeView:
    """A GPU node as read: what ``add_node`` takes, and why it is cordoned (empty: it is not).

    ``gpus`` counts physical GPUs: a node whose device plugin shares each GPU as
    ``replicas`` (label ``nvidia.com/gpu.replicas``) advertises ``gpus * replicas``.
    """

    name: str
    gpus: int
    topology: dict[str, str]
    labels: dict[str, str]
    unhealthy: tuple[int, ...]
    cordon_reason: str
    replicas: int = 1  # time-slicing or MPS: each physical GPU is advertised this many times
    # docs/resources.md "Node resources": allocatable CPU (millicores), memory, storage and extended
    # resources (MIG profiles of the mixed strategy among them), in base units.
    resources: Mapping[str, int] = field(default_factory=dict)
    uid: str = ""  # metadata.uid: a node deleted and registered again under its name has another
    # True when ``unhealthy`` only counts the GPUs allocatable leaves out (their indices are
    # unknown); False when the annotation names them.
    counted: bool = True
    # K10: (key, value, effect) of the taints not every gang tolerates, for the engine.
    taints: tuple[tuple[str, str, str], ...] = ()


def node_view(
    node: Mapping[str, Any],
    levels: Mapping[str, str],
    gpu_resource: str,
    tolerations: Sequence[Mapping[str, Any]],
    warnings: list[str],
) -> NodeView | None:
    """The node as gangplace sees it, or ``None`` (no GPUs, or left out with a warning).

    Raises:
        BadField: A field that is not what the API defines.

    """
    metadata = fields.obj(node.get("metadata"), "metadata")
    if node.get("status") is None and "status" in node:
        raise BadField("status", "is null")
    status = fields.obj(node.get("status"), "status")
    name = fields.text(metadata.get("name"), "metadata.name")
    capacities = fields.obj(status.get("capacity"), "status.capacity")
    capacity = capacities.get(gpu_resource)
    # MIG's mixed strategy: a node whose every GPU is partitioned advertises its profiles
    # and no whole GPU; it is a node of 0 GPUs with the profiles as resources.
    mig = any(isinstance(key, str) and key.startswith(MIG_PREFIX) for key in capacities)
    if capacity is None and not mig:
        return None
    if not name:
        warnings.append(f"a node without metadata.name left out ({gpu_resource}: {capacity})")
        return None
    advertised = 0 if capacity is None else _count(capacity)
    replicas = _replicas(metadata, name, gpu_resource, advertised, warnings)
    if replicas is None:
        return None
    gpus = None if advertised is None else advertised // replicas
    if gpus is None or not 0 <= gpus <= MAX_GPUS:
        warnings.append(
            f"node {name} left out: {gpu_resource} capacity {capacity!r} is not a GPU count "
            f"in 0..{MAX_GPUS} (time-slicing or MPS replicas without the label "
            f"{REPLICAS_LABEL}?)"
        )
        return None
    if gpus == 0 and not mig:
        return None
    labels = fields.obj(metadata.get("labels"), "metadata.labels")
    missing = [key for key in levels.values() if not isinstance(labels.get(key), str)]
    if missing:
        warnings.append(f"node {name} left out: no label {', '.join(missing)}")
        return None
    allocatable = _count(
        fields.obj(status.get("allocatable"), "status.allocatable").get(gpu_resource, advertised)
    )
    allocatable = None if allocatable is None else allocatable // replicas
    unhealthy = _unhealthy(metadata, gpus, gpus if allocatable is None else allocatable)
    return NodeView(
        name,
        gpus,
        {level: labels[key] for level, key in levels.items()},
        {str(k): str(v) for k, v in labels.items()},
        tuple(unhealthy),
        _cordon_reason(node),
        replicas,
        quantities.node_resources(status, gpu_resource, name, warnings),
        fields.text(metadata.get("uid"), "metadata.uid") or "",
        counted=not _named_unhealthy(metadata),
        taints=node_taints(node, tolerations),
    )


def _replicas(
    metadata: Mapping[str, Any],
    name: str,
    gpu_resource: str,
    advertised: int | None,
    warnings: list[str],
) -> int | None:
    """How many times the node advertises each physical GPU (1 without sharing).

    ``None``: the node is left out (a warning says why). NVIDIA's device plugin with
    time-slicing or MPS labels the node ``nvidia.com/gpu.replicas`` and advertises every GPU
    that many times; gangplace counts physical GPUs, never replicas.
    """
    labels = metadata.get("labels")
    raw = labels.get(REPLICAS_LABEL) if isinstance(labels, Mapping) else None
    if raw is None:
        return 1
    replicas = _count(raw)
    if replicas is None or not 1 <= replicas <= MAX_REPLICAS:
        warnings.append(
            f"node {name} left out: label {REPLICAS_LABEL} {raw!r} is not a replica count "
            f"in 1..{MAX_REPLICAS}"
        )
        return None
    if replicas == 1 or advertised is None:
        return replicas
    if advertised % replicas:
        warnings.append(
            f"node {name} left out: {gpu_resource} capacity {advertised} is not a multiple of "
            f"its label {REPLICAS_LABEL} {replicas}"
        )
        return None
    warnings.append(
        f"node {name}: {gpu_resource} capacity {advertised} is {replicas} shared replicas of "
        f"each of {advertised // replicas} physical GPUs (label {REPLICAS_LABEL}): read as "
        f"{advertised // replicas} GPUs; a pod asking k < {replicas} replicas there uses "
        f"k/{replicas} of one GPU (gpu_milli 1000 k // {replicas}), one asking more "
        f"ceil(k / {replicas}) whole GPUs"
    )
    return replicas


def pod_gpus(pod: Mapping[str, Any], gpu_resource: str) -> int:
    """The pod's GPUs as Kubernetes counts them: max(sum of containers, largest init).

    Raises:
        BadField: A container list or a GPU quantity that is not what the API defines.

    """
    return quantities.pod_asks(pod, gpu_resource)[0]


def pod_name(raw: Any, index: int) -> str:
    """A pod's ``namespace/name`` for warnings, or ``#index`` when its metadata is unreadable."""
    try:
        metadata = plain(raw, kind="V1Pod").get("metadata")
    except TypeError:
        metadata = None
    if not isinstance(metadata, Mapping):
        return f"#{index}"
    space, name = metadata.get("namespace", "default"), metadata.get("name")
    return f"{space}/{name}" if isinstance(name, str) and isinstance(space, str) else f"#{index}"


@dataclass(frozen=True, slots=True)
class PodView:
    """A pod as read: who it is, where it runs, what it holds and which gang it is of.

    ``key`` is the pod's identity: its ``metadata.uid`` (a pod deleted and made again under
    the same name is another pod), or ``namespace/name`` when it has no uid (with a
    warning). ``node`` is ``None`` for a pod not bound yet; ``finished`` for phase
    ``Succeeded`` or ``Failed``; ``gpus`` 0 for a pod without GPUs. ``allocation`` and
    ``rank`` are gangplace's own annotations (the pod was bound by gangplace), else ``None``.
    """

    key: str
    name: str
    node: str | None
    finished: bool
    gpus: int
    entry: Any
    gang: tuple[str, ...] | None
    priority: int
    preemptible: bool
    allocation: str | None
    rank: int | None
    # docs/resources.md: what it asks besides GPUs, as the scheduler counts it.
    requests: Mapping[str, int] = field(default_factory=dict)
    # docs/resources.md, "Fractions of a GPU": the thousandths of one GPU it uses, if shared.
    milli: int | None = None
    ns_name: tuple[str, str] = ("", "")  # (namespace, name)
    version: int | None = None  # metadata.resourceVersion

    @property
    def runs(self) -> bool:
        """Bound, unfinished and holding GPUs or other resources: running work to adopt."""
        return (
            self.node is not None and not self.finished and (self.gpus > 0 or bool(self.requests))
        )

    @property
    def holding(self) -> tuple[Any, ...]:
        """What it holds, as adopted: a tracked pod whose holding changes is adopted again."""
        return (self.node, self.entry, self.gpus, tuple(self.requests.items()), self.milli)


def _idle(
    key: str,
    name: str,
    node: str | None,
    finished: bool,
    ns_name: tuple[str, str],
    version: int | None,
) -> PodView:
    """A pod that holds nothing: pending, finished, or asking nothing gangplace counts."""
    return PodView(
        key, name, node, finished, 0, None, None, 0, True, None, None, {}, None, ns_name, version
    )


def pod_key(uid: str, namespace: str, name: str) -> str:
    """A pod's identity: its uid, or ``namespace/name`` without one (uids have no ``/``)."""
    return uid or f"{namespace}/{name}"


def pod_view(
    pod: Mapping[str, Any],
    index: int,
    gpu_resource: str,
    warnings: list[str],
    version: int | None = None,
) -> PodView:
    """The pod as gangplace sees it.

    Raises:
        BadField: A field that is not what the API defines (a bad GPU annotation is a
            warning instead: the pod then takes the node's lowest free GPUs; a missing uid
            too: the pod is then known by namespace and name).

    """
    metadata = fields.obj(pod.get("metadata"), "metadata")
    spec = fields.obj(pod.get("spec"), "spec")
    namespace = fields.text(metadata.get("namespace"), "metadata.namespace") or "default"
    short = fields.text(metadata.get("name"), "metadata.name") or ""
    name = f"{namespace}/{short}" if short else f"#{index}"
    uid = fields.text(metadata.get("uid"), "metadata.uid") or ""
    node = fields.text(spec.get("nodeName") or spec.get("node_name"), "spec.nodeName") or None
    phase = fields.obj(pod.get("status"), "status").get("phase")
    finished = phase in ("Succeeded", "Failed")
    key = pod_key(uid, namespace, short)
    ns_name = (namespace, short)
    if node is None or finished:  # nothing more is read of a pod that holds nothing
        return _idle(key, name, node, finished, ns_name, version)
    gpus, requests = quantities.pod_asks(pod, gpu_resource)
    if gpus <= 0 and not requests:  # it holds nothing gangplace counts
        return _idle(key, name, node, finished, ns_name, version)
    if not short:
        raise BadField("metadata.name", "is missing")
    if not uid:
        warnings.append(f"pod {name}: metadata.uid is missing: known by namespace and name")
    annotations = fields.obj(metadata.get("annotations"), "metadata.annotations")
    named = str(annotations.get(GPUS_ANNOTATION) or "").strip()
    entry: Any = (node, gpus)
    if named and gpus > 0:
        try:
            entry = PodPlacement(node, [int(part) for part in named.split(",")])
        except (ValueError, GangplaceError) as error:
            warnings.append(f"pod {name}: bad {GPUS_ANNOTATION} {named!r} ({error})")
    milli = _pod_milli(annotations, entry, name, warnings)
    priority, preemptible = pod_priority(spec)
    allocation = annotations.get(ALLOCATION_ANNOTATION)
    rank_text = annotations.get(RANK_ANNOTATION)
    rank = int(rank_text) if isinstance(rank_text, str) and rank_text.isdigit() else None
    return PodView(
        key=key,
        name=name,
        node=node,
        finished=finished,
        gpus=gpus,
        entry=entry,
        gang=gang_key(metadata),
        priority=priority,
        preemptible=preemptible,
        allocation=allocation if isinstance(allocation, str) and allocation else None,
        rank=rank,
        requests=requests,
        milli=milli,
        ns_name=ns_name,
        version=version,
    )


def _pod_milli(
    annotations: Mapping[str, Any], entry: Any, name: str, warnings: list[str]
) -> int | None:
    """The share gangplace bound a pod with (its ``gangplace.io/gpu-milli``), if valid.

    Only with the one GPU its ``gangplace.io/gpus`` names; otherwise a warning, and the pod
    counts as whole GPUs.
    """
    text = annotations.get(GPU_MILLI_ANNOTATION)
    if text is None:
        return None
    one_gpu = isinstance(entry, PodPlacement) and len(entry.gpus) == 1
    if isinstance(text, str) and text.isdigit() and 1 <= int(text) <= 999 and one_gpu:
        return int(text)
    warnings.append(
        f"pod {name}: bad {GPU_MILLI_ANNOTATION} {text!r} (1 to 999 thousandths of the one GPU "
        f"{GPUS_ANNOTATION} names): counted as whole GPUs"
    )
    return None


def physical(view: PodView, node: NodeView | None) -> PodView:
    """The pod counted in physical GPUs (docs/kubernetes.md).

    On a node that shares each GPU as ``replicas`` (time-slicing or MPS), a pod asking k
    replicas with ``k < replicas`` uses ``floor(1000 * k / replicas)`` thousandths of one GPU
    (rounded down, so that ``replicas`` such pods fit one GPU), and one asking more holds
    ``ceil(k / replicas)`` whole GPUs. GPUs gangplace named itself (its annotations) are
    physical already.
    """
    if node is None or node.replicas == 1 or isinstance(view.entry, PodPlacement):
        return view
    if 0 < view.gpus < node.replicas:
        milli = max(1, 1000 * view.gpus // node.replicas)
        return replace(view, gpus=1, entry=(view.node, 1), milli=milli)
    gpus = -(-view.gpus // node.replicas)
    return replace(view, gpus=gpus, entry=(view.node, gpus))


def counted(view: PodView, node: NodeView | None, warnings: list[str]) -> dict[str, int]:
    """What a pod asks besides GPUs that its node advertises (docs/resources.md "Node resources").

    A request for a resource the node does not list is not counted, with a warning.
    """
    offered = node.resources if node is not None else {}
    missing = sorted(set(view.requests) - set(offered))
    if missing:
        warnings.append(
            f"pod {view.name}: its node {view.node} does not advertise {', '.join(missing)}; "
            "that part of its request is not counted"
        )
    return {name: amount for name, amount in view.requests.items() if name in offered}


def node_name(data: Mapping[str, Any]) -> str:
    """``metadata.name`` of a node dict (empty when it has none).

    Raises:
        BadField: ``metadata`` is not an object or ``metadata.name`` not a string.

    """
    metadata = fields.obj(data.get("metadata"), "metadata")
    return fields.text(metadata.get("name"), "metadata.name") or ""


def kind_of(obj: Any) -> str:
    """``"Node"``, ``"Pod"``, or what else the object is."""
    name = type(obj).__name__
    if name in ("V1Node", "V1Pod"):
        return name[2:]
    if not isinstance(obj, Mapping):
        return name
    kind = obj.get("kind")
    if isinstance(kind, str) and kind:
        return kind
    spec = obj.get("spec")
    if isinstance(spec, Mapping) and ("containers" in spec or "nodeName" in spec):
        return "Pod"
    return "Node"
