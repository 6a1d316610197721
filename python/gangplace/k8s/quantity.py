"""Kubernetes resource quantities (``"500m"``, ``"2Gi"``, ``"1e3"``) in gangplace's base units.

docs/resources.md "Node resources": ``cpu`` in millicores, every other resource in its own base unit
(bytes for ``memory``, ``ephemeral-storage`` and ``hugepages-*``; units for extended
resources). Fractions round up, as the API server rounds quantities it stores. Node
allocatable and pod requests are read here (requests as the scheduler computes them: the
larger of the largest init container and the sum of the app containers, plus the pod's
overhead; a container's request defaults to its limit).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any

from gangplace.k8s import fields
from gangplace.k8s.fields import BadField

__all__ = ["node_resources", "pod_asks", "pod_requests", "quantity"]

_SUFFIXES = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
_QUANTITY = re.compile(
    r"^([+-]?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)$"
)
_LARGEST = 2**50  # the engine's limit per resource (docs/errors.md "Limits")
# Node allocatable entries that are not resources a pod asks: "pods" counts pods per node.
_NOT_RESOURCES = {"pods"}


def quantity(value: Any, resource: str, field: str) -> int:
    """``value`` in ``resource``'s base units (CPU: millicores), rounded up.

    Raises:
        BadField: Not a quantity, negative, or beyond 2**50 base units.

    """
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise BadField(field, f"{value!r:.40} is not a Kubernetes quantity")
    amount = _parsed(value if isinstance(value, str) else str(value), resource == "cpu")
    if isinstance(amount, str):
        raise BadField(field, f"{value!r:.40} {amount}")
    return amount


@functools.lru_cache(maxsize=4096)
def _parsed(text: str, cpu: bool) -> int | str:
    """A quantity's text in base units, or what is wrong with it.

    The same few texts recur across a cluster's pods: each is parsed once.
    """
    match = _QUANTITY.match(text.strip())
    if match is None:
        return "is not a Kubernetes quantity"
    try:
        amount = Decimal(match.group(1)) * _SUFFIXES[match.group(2)]
    except InvalidOperation:
        return "is not a Kubernetes quantity"
    if cpu:
        amount *= 1000
    if amount < 0:
        return "is negative"
    if amount > _LARGEST:
        return "is beyond 2**50 base units"
    return int(amount.to_integral_value(rounding=ROUND_CEILING))


def node_resources(
    status: Mapping[str, Any], gpu_resource: str, node: str, warnings: list[str]
) -> dict[str, int]:
    """A node's allocatable resources besides GPUs (a bad entry is left out with a warning)."""
    allocatable = fields.obj(status.get("allocatable"), "status.allocatable")
    resources: dict[str, int] = {}
    for name, value in sorted(allocatable.items()):
        if not isinstance(name, str) or name == gpu_resource or name in _NOT_RESOURCES:
            continue
        try:
            resources[name] = quantity(value, name, f"status.allocatable[{name}]")
        except BadField as bad:
            warnings.append(f"node {node}: {bad}; {name} left out of its resources")
    return resources


def pod_requests(pod: Mapping[str, Any], gpu_resource: str) -> dict[str, int]:
    """What a pod asks besides GPUs, as the scheduler counts it (see :func:`pod_asks`)."""
    return pod_asks(pod, gpu_resource)[1]


def pod_asks(pod: Mapping[str, Any], gpu_resource: str) -> tuple[int, dict[str, int]]:
    """A pod's GPUs and what it asks besides, as Kubernetes counts them, in one pass.

    GPUs: a container's ``limits`` (else ``requests``) of ``gpu_resource``. The rest: a
    container's ``requests`` (a resource it only limits asks its limit). Per resource, as the
    scheduler counts a pod's effective request: the sum over containers plus every sidecar
    (an init container with ``restartPolicy: Always``, which keeps running), or, if larger,
    any ordinary init container plus the sidecars started before it; then the pod's
    ``overhead``.

    Raises:
        BadField: A container list, a GPU count or a quantity that is not what the API
            defines.

    """
    spec = fields.obj(pod.get("spec"), "spec")
    if spec.get("containers") is None and "containers" in spec:
        raise BadField("spec.containers", "is null")
    running: dict[str, int] = {}
    for index, container in enumerate(fields.objects(spec.get("containers"), "spec.containers")):
        _add(running, _container(container, f"spec.containers[{index}]", gpu_resource))
    sidecars: dict[str, int] = {}
    peak: dict[str, int] = {}  # the largest ordinary init container with its sidecars
    inits = fields.objects(spec.get("initContainers"), "spec.initContainers")
    for index, container in enumerate(inits):
        where = f"spec.initContainers[{index}]"
        asked = _container(container, where, gpu_resource)
        if fields.text(container.get("restartPolicy"), f"{where}.restartPolicy") == "Always":
            _add(sidecars, asked)
        else:
            during = dict(sidecars)
            _add(during, asked)
            for name, amount in during.items():
                peak[name] = max(peak.get(name, 0), amount)
    total = dict(running)
    for name, amount in sidecars.items():
        total[name] = total.get(name, 0) + amount
    for name, amount in peak.items():
        total[name] = max(total.get(name, 0), amount)
    overhead = fields.obj(spec.get("overhead"), "spec.overhead")
    for name, value in overhead.items():
        if isinstance(name, str) and name != gpu_resource:
            total[name] = total.get(name, 0) + quantity(value, name, f"spec.overhead[{name}]")
    gpus = total.pop(_GPUS, 0)
    return gpus, {name: amount for name, amount in sorted(total.items()) if amount > 0}


_GPUS = ""  # the GPUs' entry while counting (no resource is named "")


def _add(into: dict[str, int], asked: tuple[int, dict[str, int]]) -> None:
    gpus, others = asked
    if gpus:
        into[_GPUS] = into.get(_GPUS, 0) + gpus
    for name, amount in others.items():
        into[name] = into.get(name, 0) + amount


def _container(
    container: Mapping[str, Any], field: str, gpu_resource: str
) -> tuple[int, dict[str, int]]:
    """One container's GPUs (limits, else requests) and other asks (requests win).

    The common shapes (dicts of strings) are read without building a field's name; any
    other shape goes through the checked accessors, which name the field.
    """
    resources = container.get("resources")
    if type(resources) is not dict:
        resources = fields.obj(resources, f"{field}.resources")
    limits, requests = resources.get("limits"), resources.get("requests")
    if type(limits) is not dict:
        limits = fields.obj(limits, f"{field}.resources.limits")
    if type(requests) is not dict:
        requests = fields.obj(requests, f"{field}.resources.requests")
    gpus = 0
    for kind, given in (("requests", requests), ("limits", limits)):  # limits win for GPUs
        value = given.get(gpu_resource)
        if value is not None:
            gpus = _gpu_count(value, f"{field}.resources.{kind}[{gpu_resource}]")
    out: dict[str, int] = {}
    for kind, given in (("limits", limits), ("requests", requests)):  # requests win
        for name, value in given.items():
            if name == gpu_resource or not isinstance(name, str):
                continue
            amount = _parsed(value, name == "cpu") if type(value) is str else None
            if type(amount) is not int:  # not a cached valid quantity: checked, and named
                amount = quantity(value, name, f"{field}.resources.{kind}[{name}]")
            out[name] = amount
    return gpus, out


def _gpu_count(value: Any, field: str) -> int:
    try:
        count = int(str(value))
    except ValueError:
        count = -1
    if count < 0:
        raise BadField(field, f"{value!r} is not a GPU count")
    return count
