"""Kubernetes resource quantities (``"500m"``, ``"2Gi"``, ``"1e3"``) in gangplace's base units.

docs/resources.md "Node resources": ``cpu`` in millicores, every other resource in its own base unit
(bytes for ``memory``, ``ephemeral-storage`` and ``hugepages-*``; units for extended
resources). Fractions round up, as the API server rounds quantities it stores. Node
allocatable and pod requests are read here (requests as the scheduler computes them: the
larger of the largest init container and the sum of the app containers, plus the pod's
overhead; a container's request defaults to its limit).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any

from gangplace.k8s import fields
from gangplace.k8s.fields import BadField

__all__ = ["node_resources", "pod_requests", "quantity"]

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
    text = (
        str(value).strip()
        if isinstance(value, (str, int)) and not isinstance(value, bool)
        else None
    )
    match = _QUANTITY.match(text) if text is not None else None
    if match is None:
        raise BadField(field, f"{value!r:.40} is not a Kubernetes quantity")
    try:
        amount = Decimal(match.group(1)) * _SUFFIXES[match.group(2)]
    except InvalidOperation:
        raise BadField(field, f"{value!r:.40} is not a Kubernetes quantity") from None
    if resource == "cpu":
        amount *= 1000
    if amount < 0:
        raise BadField(field, f"{value!r:.40} is negative")
    if amount > _LARGEST:
        raise BadField(field, f"{value!r:.40} is beyond 2**50 base units")
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
    """What a pod asks besides GPUs, as the scheduler counts it.

    Raises:
        BadField: A container list or a quantity that is not what the API defines.

    """
    spec = fields.obj(pod.get("spec"), "spec")

    def asked(container: Mapping[str, Any], field: str) -> dict[str, int]:
        resources = fields.obj(container.get("resources"), f"{field}.resources")
        limits = fields.obj(resources.get("limits"), f"{field}.resources.limits")
        requests = fields.obj(resources.get("requests"), f"{field}.resources.requests")
        out: dict[str, int] = {}
        for kind, given in (("limits", limits), ("requests", requests)):  # requests win
            for name, value in given.items():
                if isinstance(name, str) and name != gpu_resource:
                    out[name] = quantity(value, name, f"{field}.resources.{kind}[{name}]")
        return out

    containers = fields.objects(spec.get("containers"), "spec.containers")
    inits = fields.objects(spec.get("initContainers"), "spec.initContainers")
    running: dict[str, int] = {}
    for index, container in enumerate(containers):
        for name, amount in asked(container, f"spec.containers[{index}]").items():
            running[name] = running.get(name, 0) + amount
    total = dict(running)
    for index, container in enumerate(inits):
        for name, amount in asked(container, f"spec.initContainers[{index}]").items():
            total[name] = max(total.get(name, 0), amount)
    overhead = fields.obj(spec.get("overhead"), "spec.overhead")
    for name, value in overhead.items():
        if isinstance(name, str) and name != gpu_resource:
            total[name] = total.get(name, 0) + quantity(value, name, f"spec.overhead[{name}]")
    return {name: amount for name, amount in sorted(total.items()) if amount > 0}
