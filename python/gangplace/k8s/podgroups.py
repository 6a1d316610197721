"""Gangs as Kubernetes describes them: PodGroups and Kueue's topology annotations.

Readers of the objects cluster operators already write, as dicts (``kubectl get -o json``) or
``kubernetes`` client objects:

- :func:`gang_from_podgroup`: a scheduler-plugins ``PodGroup``
  (``scheduling.x-k8s.io/v1alpha1``: ``spec.minMember``, ``spec.minResources``,
  ``spec.scheduleTimeoutSeconds``) or a Volcano ``PodGroup``
  (``scheduling.volcano.sh/v1beta1``: ``spec.minMember``, also spelled ``minAvailable`` as in
  Volcano Jobs and guides, ``spec.minResources``, ``spec.priorityClassName``, ``spec.queue``).
  The gang has ``minMember`` pods; GPUs per pod are ``minResources[gpu_resource]`` divided
  by it.
- :func:`levels_from_kueue_topology`: a Kueue ``Topology`` (``spec.levels[].nodeLabel``,
  outermost first) as the ``levels`` mapping of :func:`gangplace.k8s.cluster_from_nodes`;
  the ``kubernetes.io/hostname`` level is gangplace's implicit ``node`` level.
- :func:`request_from_pod_template`: a PodSet's pod template with Kueue's annotations
  ``kueue.x-k8s.io/podset-required-topology`` (the gang's ``required_level``) and
  ``podset-preferred-topology`` (nothing to translate: gangplace always prefers the finest
  domain that holds the gang, rule 2), and the slice annotations
  ``kueue.x-k8s.io/podset-slice-required-topology`` with ``podset-slice-size`` (one slice
  layer: ``slices=((level, size),)``, docs/shapes.md "Slices"). Kueue's multi-layer proposal
  (kubernetes-sigs/kueue#9046) has no settled annotations yet and is not read.

Every malformed object raises :class:`PodGroupError` naming the object and the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gangplace._gangplace import LIMITS, GangRequest
from gangplace.errors import GangplaceError, InvalidRequest
from gangplace.k8s import fields
from gangplace.k8s.fields import BadField
from gangplace.k8s.objects import plain

__all__ = [
    "HOSTNAME_LABEL",
    "PREFERRED_TOPOLOGY",
    "REQUIRED_TOPOLOGY",
    "SLICE_REQUIRED_TOPOLOGY",
    "SLICE_SIZE",
    "GangSpec",
    "PodGroupError",
    "gang_from_podgroup",
    "level_of",
    "levels_from_kueue_topology",
    "request_from_pod_template",
    "slices_of",
]

REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
SLICE_REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
HOSTNAME_LABEL = "kubernetes.io/hostname"
PODGROUP_GROUPS = ("scheduling.x-k8s.io", "scheduling.volcano.sh")


class PodGroupError(GangplaceError, ValueError):
    """A PodGroup, Topology or pod template that cannot be read (names object and field)."""


@dataclass(frozen=True)
class GangSpec:
    """What a PodGroup says about its gang.

    Attributes:
        request: The gang: ``minMember`` pods of the per-pod GPUs.
        namespace: The PodGroup's namespace (an owner for quotas).
        timeout_s: ``scheduleTimeoutSeconds`` (scheduler-plugins), for
            ``Scheduler.submit(timeout=...)``; ``None`` when absent.
        queue: Volcano's ``spec.queue``; ``None`` when absent.
        priority_class: ``spec.priorityClassName``; ``None`` when absent.

    """

    request: GangRequest
    namespace: str | None
    timeout_s: float | None
    queue: str | None
    priority_class: str | None


def _plain(obj: Any, what: str) -> Mapping[str, Any]:
    return plain(obj, kind=what)


def _object(value: Any, where: str) -> Mapping[str, Any]:
    """An object field (absent or null: empty), else a PodGroupError naming it."""
    try:
        return fields.obj(value, where)
    except BadField as bad:
        raise PodGroupError(str(bad)) from None


def _integer(value: Any, where: str, *, low: int = 1) -> int:
    if isinstance(value, bool):
        raise PodGroupError(f"{where} must be an integer, got {value!r}")
    try:
        number = int(str(value))
    except ValueError:
        raise PodGroupError(f"{where} must be an integer, got {value!r}") from None
    if number < low:
        raise PodGroupError(f"{where} must be >= {low}, got {number}")
    return number


def gang_from_podgroup(
    podgroup: Any,
    *,
    gpu_resource: str = "nvidia.com/gpu",
    required_level: str | None = None,
    priorities: Mapping[str, int] | None = None,
) -> GangSpec:
    """The gang of a PodGroup (scheduler-plugins or Volcano).

    Args:
        podgroup: The ``PodGroup`` object.
        gpu_resource: The resource that counts GPUs in ``minResources``.
        required_level: The level the gang may span (PodGroups do not say).
        priorities: ``PriorityClass`` name -> value, to give the request its priority
            (``spec.priorityClassName``); unknown or absent names give priority 0.

    Raises:
        PodGroupError: Not a PodGroup, no ``minMember``/``minAvailable``, a GPU total that
            is not a multiple of it, absurd numbers; the message names the field.
        TypeError: Neither a dict nor a client object.

    """
    obj = _plain(podgroup, "PodGroup")
    metadata = _object(obj.get("metadata"), "PodGroup (unnamed): metadata")
    name = metadata.get("name")
    if name is not None and not isinstance(name, str):
        raise PodGroupError(f"PodGroup (unnamed): metadata.name must be a string, got {name!r}")
    label = f"PodGroup {name or '(unnamed)'}"
    group = str(obj.get("apiVersion", "")).split("/")[0]
    if obj.get("kind") != "PodGroup" or group not in PODGROUP_GROUPS:
        raise PodGroupError(
            f"{label}: expected kind PodGroup of {' or '.join(PODGROUP_GROUPS)}, got "
            f"{obj.get('kind')!r} of {obj.get('apiVersion')!r}"
        )
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise PodGroupError(f"{label}: no spec")
    minimum_key = "minMember" if "minMember" in spec else "minAvailable"
    if minimum_key not in spec:
        raise PodGroupError(f"{label}: spec.minMember (or minAvailable) is missing")
    pods = _integer(spec[minimum_key], f"{label}: spec.{minimum_key}")
    resources = spec.get("minResources") or {}
    if not isinstance(resources, Mapping):
        raise PodGroupError(f"{label}: spec.minResources must be a mapping")
    total = _integer(
        resources.get(gpu_resource, 0), f"{label}: spec.minResources[{gpu_resource}]", low=0
    )
    if total == 0 or total % pods:
        raise PodGroupError(
            f"{label}: spec.minResources[{gpu_resource}] = {total} is not a positive multiple "
            f"of {minimum_key} = {pods} (GPUs per pod = total / minimum)"
        )
    timeout = spec.get("scheduleTimeoutSeconds")
    timeout_s = (
        None
        if timeout is None
        else float(_integer(timeout, f"{label}: spec.scheduleTimeoutSeconds", low=0))
    )
    priority_class = spec.get("priorityClassName")
    priority = (priorities or {}).get(str(priority_class), 0) if priority_class else 0
    try:
        request = GangRequest(
            pods, total // pods, required_level=required_level, name=name or "", priority=priority
        )
    except InvalidRequest as error:
        raise PodGroupError(f"{label}: {error}") from None
    queue = spec.get("queue")
    namespace = metadata.get("namespace")
    if namespace is not None and not isinstance(namespace, str):
        raise PodGroupError(f"{label}: metadata.namespace must be a string, got {namespace!r}")
    return GangSpec(
        request,
        namespace,
        timeout_s,
        None if queue is None else str(queue),
        None if priority_class is None else str(priority_class),
    )


def levels_from_kueue_topology(topology: Any) -> dict[str, str]:
    """A Kueue ``Topology`` as ``cluster_from_nodes``' levels: name -> node label key.

    Names are the label keys' last segment (``cloud.google.com/gce-topology-block`` ->
    ``gce-topology-block``), outermost first; the hostname level is dropped (it is
    gangplace's ``node`` level).

    Raises:
        PodGroupError: Not a Topology, no levels, a level without ``nodeLabel``, two levels
            with one name, or the hostname level anywhere but last.

    """
    obj = _plain(topology, "Topology")
    name = _object(obj.get("metadata"), "Topology (unnamed): metadata").get("name")
    label = f"Topology {name if isinstance(name, str) and name else '(unnamed)'}"
    if obj.get("kind") != "Topology" or not str(obj.get("apiVersion", "")).startswith(
        "kueue.x-k8s.io/"
    ):
        raise PodGroupError(
            f"{label}: expected kind Topology of kueue.x-k8s.io, got {obj.get('kind')!r}"
        )
    levels = _object(obj.get("spec"), f"{label}: spec").get("levels")
    if not isinstance(levels, list) or not levels:
        raise PodGroupError(f"{label}: spec.levels is missing or empty")
    if len(levels) > LIMITS["max_levels"] + 1:  # the hostname level is gangplace's node level
        raise PodGroupError(
            f"{label}: spec.levels has {len(levels)} levels; at most {LIMITS['max_levels']} "
            "and the hostname level"
        )
    keys = []
    for index, level in enumerate(levels):
        key = level.get("nodeLabel") if isinstance(level, Mapping) else None
        if not isinstance(key, str) or not key:
            raise PodGroupError(f"{label}: spec.levels[{index}].nodeLabel is missing")
        keys.append(key)
    if HOSTNAME_LABEL in keys[:-1]:
        raise PodGroupError(f"{label}: the {HOSTNAME_LABEL} level must be the last")
    mapping: dict[str, str] = {}
    for key in keys:
        if key == HOSTNAME_LABEL:
            continue
        short = key.rsplit("/", 1)[-1]
        if short in mapping or short in ("node", "cluster"):
            raise PodGroupError(f"{label}: two levels would both be named {short!r}")
        mapping[short] = key
    return mapping


def request_from_pod_template(
    template: Any,
    pods: int,
    *,
    levels: Mapping[str, str],
    gpu_resource: str = "nvidia.com/gpu",
    name: str = "",
    warnings: list[str] | None = None,
) -> GangRequest:
    """The gang of a PodSet: ``pods`` pods of its template, at its Kueue required topology.

    The template's ``nodeSelector``, required node affinity, tolerations and requests go
    into the request (docs/kubernetes.md K11), as for :func:`gangplace.k8s.request_from_pods`.

    Args:
        template: A ``PodTemplateSpec`` (``metadata`` and ``spec``).
        pods: The PodSet's count.
        levels: The cluster's levels (level name -> node label key), as from
            :func:`levels_from_kueue_topology`.
        gpu_resource: The resource that counts GPUs (container ``limits``, else ``requests``;
            the larger of the containers' sum and the largest init container).
        name: The request's name.
        warnings: Appended to: what the request leaves out (pod affinity, topology spread
            constraints...), naming the field.

    Raises:
        PodGroupError: Nothing requested, a field that is not what the API defines, a
            required node affinity term that cannot be read, or a required topology label
            that is not a level.

    """
    from gangplace.k8s.constraints import pod_shape

    obj = _plain(template, "PodTemplateSpec")
    metadata = _object(obj.get("metadata"), f"pod template {name or '(unnamed)'}: metadata")
    own = metadata.get("name")
    label = f"pod template {name or (own if isinstance(own, str) and own else '(unnamed)')}"
    left_out: list[str] = []
    try:
        shape = pod_shape(obj, gpu_resource, left_out)
    except BadField as bad:
        raise PodGroupError(f"{label}: {bad}") from None
    if warnings is not None:
        warnings.extend(f"{label}: {warning}" for warning in left_out)
    if shape.gpus <= 0 and not shape.resources:
        raise PodGroupError(f"{label}: its containers request no {gpu_resource} and nothing else")
    annotations = _object(metadata.get("annotations"), f"{label}: metadata.annotations")
    by_label = {key: level_name for level_name, key in levels.items()} | {HOSTNAME_LABEL: "node"}
    level = level_of(annotations, REQUIRED_TOPOLOGY, by_label, label)
    count = _integer(pods, f"{label}: pods")
    slices = slices_of(annotations, by_label, label, count)
    try:
        return GangRequest(
            count,
            shape.gpus,
            required_level=level,
            name=name,
            slices=slices,
            **shape.request_fields(),
        )
    except InvalidRequest as error:
        raise PodGroupError(f"{label}: {error}") from None


def level_of(
    annotations: Mapping[str, Any], key: str, by_label: Mapping[str, str], label: str
) -> str | None:
    """The level an annotation names by its node label (``None`` when absent)."""
    named = annotations.get(key)
    if not named:
        return None
    if named not in by_label:
        known = ", ".join(sorted(set(by_label) - {HOSTNAME_LABEL})) or "none"
        raise PodGroupError(f"{label}: {key} names {named!r}, not a level label ({known})")
    return by_label[named]


def slices_of(
    annotations: Mapping[str, Any], by_label: Mapping[str, str], label: str, pods: int
) -> tuple[tuple[str, int], ...]:
    """Kueue's slice annotations as one slice layer (both or neither)."""
    level = level_of(annotations, SLICE_REQUIRED_TOPOLOGY, by_label, label)
    size = annotations.get(SLICE_SIZE)
    if level is None and size is None:
        return ()
    if level is None:
        raise PodGroupError(f"{label}: {SLICE_SIZE} without {SLICE_REQUIRED_TOPOLOGY}")
    if size is None:
        raise PodGroupError(f"{label}: {SLICE_REQUIRED_TOPOLOGY} without {SLICE_SIZE}")
    pods_per_slice = _integer(size, f"{label}: {SLICE_SIZE}")
    if pods % pods_per_slice:
        raise PodGroupError(
            f"{label}: {SLICE_SIZE} ({pods_per_slice}) must divide the PodSet's count ({pods})"
        )
    return ((level, pods_per_slice),)
