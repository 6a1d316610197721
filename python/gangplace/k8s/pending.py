"""Pending pods as one gang's request, with their own constraints (docs/kubernetes.md K11).

:func:`request_from_pods` reads the pending pods of one gang (dicts or ``kubernetes`` client
objects) into a :class:`PendingGang`: the request to place, and the pods in rank order for
:func:`gangplace.k8s.bind`. Each pod's ``nodeSelector``, required node affinity,
tolerations and requests (``k8s.constraints.pod_shape``) go into the request, so that the
nodes it is placed on are nodes the kubelet admits it to. Pods of one shape form one gang;
pods of several shapes (a launcher and its workers) one ``MultiGangRequest`` with a group per
shape.

The gang's size: a PodGroup's ``spec.minMember`` (also ``minAvailable``) when one is given,
else the pods' annotation ``gangplace.io/gang-size``, else the pods given. Fewer pods than
that raise :class:`GangIncomplete` (the rest are still being made: wait); more pods than
``minMember`` make an elastic gang (``min_pods=minMember``). Priority: the highest
``spec.priority`` of the pods (the admission controller sets it from the class), a gang
preemptible only if every pod is. Required level and slices: Kueue's annotations, as
:func:`gangplace.k8s.request_from_pod_template` reads them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gangplace._gangplace import GangRequest, MultiGangRequest, PodGroup
from gangplace.errors import InvalidRequest
from gangplace.k8s import fields
from gangplace.k8s.constraints import PodShape, pod_shape
from gangplace.k8s.fields import BadField
from gangplace.k8s.gangs import pod_priority
from gangplace.k8s.objects import plain
from gangplace.k8s.podgroups import (
    HOSTNAME_LABEL,
    REQUIRED_TOPOLOGY,
    PodGroupError,
    level_of,
    slices_of,
)

__all__ = ["GANG_SIZE_ANNOTATION", "GangIncomplete", "PendingGang", "request_from_pods"]

GANG_SIZE_ANNOTATION = "gangplace.io/gang-size"
# The index labels of the controllers that number their pods (StatefulSet, indexed Job).
INDEX_LABELS = ("apps.kubernetes.io/pod-index", "batch.kubernetes.io/job-completion-index")


class GangIncomplete(PodGroupError):
    """Fewer pending pods than the gang's size: the others are still being made."""


@dataclass(frozen=True)
class PendingGang:
    """One gang of pending pods, read.

    Attributes:
        request: A ``GangRequest``, or a ``MultiGangRequest`` when the pods have several
            shapes (groups in order of their first pod).
        pods: The pods (as given) in rank order: ``Placement.pods``' order, for ``bind``.
        warnings: What was left out, each naming the pod and field.

    """

    request: GangRequest | MultiGangRequest
    pods: tuple[Any, ...]
    warnings: tuple[str, ...]


def request_from_pods(
    pods: Sequence[Any],
    *,
    levels: Mapping[str, str],
    gpu_resource: str = "nvidia.com/gpu",
    podgroup: Any = None,
    name: str = "",
) -> PendingGang:
    """The request of one gang's pending pods (see the module's text).

    Args:
        pods: The gang's pending pods (not bound, not finished).
        levels: The cluster's levels (level name -> node label key).
        gpu_resource: The resource that counts GPUs.
        podgroup: The gang's PodGroup, if it has one (its ``minMember``).
        name: The request's name (default: the first pod's ``namespace/name``).

    Raises:
        GangIncomplete: Fewer pods than the gang's size.
        PodGroupError: No pods, a pod bound or finished, a field that is not what the API
            defines or a required term that cannot be read (naming the pod and field), pods
            that disagree on the gang's level, or a request the engine refuses.

    """
    if isinstance(pods, (str, bytes, Mapping)) or not isinstance(pods, Sequence) or not pods:
        raise PodGroupError("pods must be a non-empty sequence of pods")
    warnings: list[str] = []
    read = sorted(
        (_read(pod, index, gpu_resource, warnings) for index, pod in enumerate(pods)),
        key=lambda entry: entry.order,
    )
    size, minimum = _size(read, podgroup)
    first = read[0]
    title = name or first.label
    level = _agreed(read, lambda pod: pod.level(levels), "the required topology")
    slices = _agreed(read, lambda pod: pod.slices(levels, len(read)), "the slice annotations")
    priority = max(pod.priority for pod in read)
    preemptible = all(pod.preemptible for pod in read)
    shapes: dict[PodShape, list[_Pod]] = {}
    for pod in read:
        shapes.setdefault(pod.shape, []).append(pod)
    try:
        if len(shapes) == 1:
            request: GangRequest | MultiGangRequest = GangRequest(
                size,
                first.shape.gpus,
                min_pods=minimum,
                required_level=level,
                name=title,
                priority=priority,
                preemptible=preemptible,
                slices=slices,
                **first.shape.request_fields(),
            )
            ordered = [pod.raw for pod in read]
        else:
            if minimum is not None:
                warnings.append(f"gang {title}: pods of several shapes: placed whole, not elastic")
            request = MultiGangRequest(
                [
                    PodGroup(group[0].short, len(group), shape.gpus, **shape.request_fields())
                    for shape, group in shapes.items()
                ],
                required_level=level,
                name=title,
                priority=priority,
                preemptible=preemptible,
            )
            ordered = [pod.raw for group in shapes.values() for pod in group]
    except (InvalidRequest, TypeError) as error:
        raise PodGroupError(f"gang {title}: {error}") from None
    return PendingGang(request, tuple(ordered), tuple(warnings))


@dataclass(frozen=True)
class _Pod:
    raw: Any
    label: str  # namespace/name
    short: str
    order: tuple[int, tuple[Any, ...]]
    annotations: Mapping[str, Any]
    shape: PodShape
    priority: int
    preemptible: bool

    def level(self, levels: Mapping[str, str]) -> str | None:
        return level_of(self.annotations, REQUIRED_TOPOLOGY, _by_label(levels), f"pod {self.label}")

    def slices(self, levels: Mapping[str, str], pods: int) -> tuple[tuple[str, int], ...]:
        return slices_of(self.annotations, _by_label(levels), f"pod {self.label}", pods)


def _by_label(levels: Mapping[str, str]) -> dict[str, str]:
    return {key: level for level, key in levels.items()} | {HOSTNAME_LABEL: "node"}


def _read(pod: Any, index: int, gpu_resource: str, warnings: list[str]) -> _Pod:
    try:
        obj = plain(pod, kind="V1Pod")
    except TypeError as error:
        raise PodGroupError(f"pod #{index}: {error}") from None
    where = f"pod #{index}"
    try:
        metadata = fields.obj(obj.get("metadata"), "metadata")
        namespace = fields.text(metadata.get("namespace"), "metadata.namespace") or "default"
        short = fields.text(metadata.get("name"), "metadata.name") or ""
        if not short:
            raise BadField("metadata.name", "is missing")
        label = f"{namespace}/{short}"
        where = f"pod {label}"
        spec = fields.obj(obj.get("spec"), "spec")
        if fields.text(spec.get("nodeName"), "spec.nodeName"):
            raise BadField("spec.nodeName", "is set: the pod is bound, not pending")
        phase = fields.obj(obj.get("status"), "status").get("phase")
        if phase in ("Succeeded", "Failed"):
            raise BadField("status.phase", f"is {phase}: the pod is not pending")
        own: list[str] = []
        shape = pod_shape(obj, gpu_resource, own)
        warnings.extend(f"{where}: {warning}" for warning in own)
        priority, preemptible = pod_priority(spec)
        labels = fields.obj(metadata.get("labels"), "metadata.labels")
        annotations = fields.obj(metadata.get("annotations"), "metadata.annotations")
    except BadField as bad:
        raise PodGroupError(f"{where}: {bad}") from None
    index_label = next((labels[key] for key in INDEX_LABELS if key in labels), None)
    number = int(index_label) if isinstance(index_label, str) and index_label.isdigit() else None
    order = (number if number is not None else 2**63, _natural(short))
    return _Pod(pod, label, short, order, annotations, shape, priority, preemptible)


def _natural(name: str) -> tuple[Any, ...]:
    """``worker-10`` after ``worker-9``: digit runs compare as numbers."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def _size(read: list[_Pod], podgroup: Any) -> tuple[int, int | None]:
    """The gang's pods and its ``min_pods`` (``None``: rigid)."""
    count = len(read)
    first = read[0].label
    if podgroup is not None:
        minimum = _min_member(podgroup)
        if count < minimum:
            raise GangIncomplete(f"{first}: {count} of the PodGroup's {minimum} pods are pending")
        return count, (minimum if minimum < count else None)
    sizes = {pod.annotations.get(GANG_SIZE_ANNOTATION) for pod in read} - {None}
    if not sizes:
        return count, None
    if len(sizes) > 1:
        raise PodGroupError(f"{first}: the pods disagree on {GANG_SIZE_ANNOTATION}: {sizes}")
    raw = sizes.pop()
    size = int(raw) if isinstance(raw, str) and raw.isdigit() else 0
    if size < 1:
        raise PodGroupError(f"{first}: {GANG_SIZE_ANNOTATION} {raw!r} is not a positive count")
    if count < size:
        raise GangIncomplete(f"{first}: {count} of the gang's {size} pods are pending")
    if count > size:
        raise PodGroupError(f"{first}: {count} pods for a gang of {size} ({GANG_SIZE_ANNOTATION})")
    return count, None


def _min_member(podgroup: Any) -> int:
    try:
        obj = plain(podgroup, kind="PodGroup")
    except TypeError as error:
        raise PodGroupError(f"podgroup: {error}") from None
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise PodGroupError("PodGroup: no spec")
    key = "minMember" if "minMember" in spec else "minAvailable"
    raw = spec.get(key)
    if not isinstance(raw, int) or isinstance(raw, bool) or raw < 1:
        raise PodGroupError(f"PodGroup: spec.{key} {raw!r} is not a positive count")
    return raw


def _agreed(read: list[_Pod], value: Any, what: str) -> Any:
    """One value all pods agree on (each pod carries its template's annotations)."""
    found = {value(pod) for pod in read}
    if len(found) > 1:
        raise PodGroupError(f"{read[0].label}: the pods disagree on {what}")
    return found.pop()
