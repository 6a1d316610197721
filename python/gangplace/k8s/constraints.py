"""A pending pod's own constraints, as the engine's filter reads them (docs/kubernetes.md K11).

A pod (or a pod template: the same ``metadata`` and ``spec``) is read into a :class:`PodShape`:
its GPUs and what it asks besides (``quantity.pod_asks``: init containers and sidecars as
Kubernetes counts them), its ``nodeSelector``, the terms of its required node affinity, and
its tolerations (docs/placement.md "Node filters"). Pods of one shape are one group of a gang.

What the engine cannot express is named in a warning and left out: inter-pod affinity and
anti-affinity, topology spread constraints, preferred node affinity (gangplace's own rules
choose the domain), host ports. A required term the engine cannot read (``matchFields``, an
operator Kubernetes does not define) is a :class:`~gangplace.k8s.fields.BadField`: placing
the pod without it could bind it where the kubelet refuses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gangplace.k8s import fields
from gangplace.k8s import quantity as quantities
from gangplace.k8s.fields import BadField

__all__ = ["PodShape", "pod_shape"]

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


@dataclass(frozen=True, slots=True)
class PodShape:
    """What one pending pod asks of a node; pods of equal shapes form one group.

    ``affinity`` and ``tolerations`` are in ``GangRequest``'s forms, sorted.
    """

    gpus: int
    resources: tuple[tuple[str, int], ...]
    selector: tuple[tuple[str, str], ...]
    affinity: tuple[tuple[tuple[str, str, tuple[str, ...]], ...], ...]
    tolerations: tuple[tuple[str, str, str, str | None], ...]

    def request_fields(self) -> dict[str, Any]:
        """The shape as ``GangRequest``/``PodGroup`` keyword arguments (not the GPUs)."""
        return {
            "selector": dict(self.selector),
            "affinity": self.affinity,
            "tolerations": self.tolerations,
            "resources_per_pod": dict(self.resources) or None,
        }


def pod_shape(pod: Mapping[str, Any], gpu_resource: str, warnings: list[str]) -> PodShape:
    """The shape of a pending pod (a plain mapping: ``objects.plain`` it first).

    Warnings name what is left out, once per field.

    Raises:
        BadField: A field that is not what the API defines, or a required node affinity
            term the engine cannot read.

    """
    spec = fields.obj(pod.get("spec"), "spec")
    gpus, asks = quantities.pod_asks(pod, gpu_resource)
    selector = fields.obj(spec.get("nodeSelector"), "spec.nodeSelector")
    for key, value in selector.items():
        if not isinstance(value, str):
            raise BadField(f"spec.nodeSelector[{key}]", f"expected a string, got {value!r:.40}")
    affinity = fields.obj(spec.get("affinity"), "spec.affinity")
    _unread(spec, affinity, warnings)
    return PodShape(
        gpus,
        tuple(sorted(asks.items())),
        tuple(sorted((str(k), v) for k, v in selector.items())),
        _node_affinity(fields.obj(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")),
        _tolerations(spec.get("tolerations")),
    )


def _node_affinity(node_affinity: Mapping[str, Any]) -> Any:
    """The required terms (ORed), each a sorted tuple of requirements (ANDed)."""
    required = fields.obj(node_affinity.get(REQUIRED), f"spec.affinity.nodeAffinity.{REQUIRED}")
    where = f"spec.affinity.nodeAffinity.{REQUIRED}.nodeSelectorTerms"
    terms = []
    for index, term in enumerate(fields.objects(required.get("nodeSelectorTerms"), where)):
        at = f"{where}[{index}]"
        if term.get("matchFields"):
            raise BadField(f"{at}.matchFields", "is not read (node fields, not labels)")
        expressions = fields.objects(term.get("matchExpressions"), f"{at}.matchExpressions")
        if not expressions:
            raise BadField(at, "has no matchExpressions (Kubernetes matches no node with it)")
        requirements = (
            _requirement(expression, f"{at}.matchExpressions[{number}]")
            for number, expression in enumerate(expressions)
        )
        terms.append(tuple(sorted(requirements)))
    if required and not terms:
        raise BadField(where, "is empty (Kubernetes matches no node with it)")
    return tuple(sorted(set(terms)))


def _requirement(expression: Mapping[str, Any], where: str) -> tuple[str, str, tuple[str, ...]]:
    key = fields.text(expression.get("key"), f"{where}.key")
    operator = fields.text(expression.get("operator"), f"{where}.operator")
    if not key:
        raise BadField(f"{where}.key", "is missing")
    if operator not in OPERATORS:
        raise BadField(f"{where}.operator", f"{operator!r} is not one of {', '.join(OPERATORS)}")
    values = fields.seq(expression.get("values"), f"{where}.values")
    if not all(isinstance(value, str) for value in values):
        raise BadField(f"{where}.values", "expected strings")
    if operator in ("In", "NotIn") and not values:
        raise BadField(f"{where}.values", f"is empty ({operator} needs a value)")
    if operator in ("Exists", "DoesNotExist") and values:
        raise BadField(f"{where}.values", f"must be empty with {operator}")
    if operator in ("Gt", "Lt") and (len(values) != 1 or not _integer(values[0])):
        raise BadField(f"{where}.values", f"{operator} takes one integer, got {values!r:.60}")
    return key, operator, tuple(sorted(set(values)))


def _integer(text: str) -> bool:
    return text.removeprefix("-").isdigit()


def _tolerations(raw: Any) -> tuple[tuple[str, str, str, str | None], ...]:
    out = set()
    for index, toleration in enumerate(fields.objects(raw, "spec.tolerations")):
        where = f"spec.tolerations[{index}]"
        key = fields.text(toleration.get("key"), f"{where}.key") or ""
        operator = fields.text(toleration.get("operator"), f"{where}.operator") or "Equal"
        value = fields.text(toleration.get("value"), f"{where}.value") or ""
        effect = fields.text(toleration.get("effect"), f"{where}.effect") or None
        if operator not in ("Equal", "Exists"):
            raise BadField(f"{where}.operator", f"{operator!r} is not Equal or Exists")
        out.add((key, operator, value, effect))
    return tuple(sorted(out, key=lambda t: (t[0], t[1], t[2], t[3] or "")))


def _unread(spec: Mapping[str, Any], affinity: Mapping[str, Any], warnings: list[str]) -> None:
    """Warnings for the scheduling constraints gangplace does not read."""
    for kind in ("podAffinity", "podAntiAffinity"):
        if affinity.get(kind):
            warnings.append(
                f"spec.affinity.{kind} is not read: gangplace places the gang by its own "
                "topology rules"
            )
    node_affinity = affinity.get("nodeAffinity")
    if isinstance(node_affinity, Mapping) and node_affinity.get(PREFERRED):
        warnings.append(f"spec.affinity.nodeAffinity.{PREFERRED} is not read (a preference)")
    if spec.get("topologySpreadConstraints"):
        warnings.append(
            "spec.topologySpreadConstraints is not read: gangplace places the gang by its own "
            "topology rules"
        )
    for index, container in enumerate(fields.objects(spec.get("containers"), "spec.containers")):
        ports = fields.objects(container.get("ports"), f"spec.containers[{index}].ports")
        if any(port.get("hostPort") for port in ports):
            warnings.append(f"spec.containers[{index}].ports[].hostPort is not checked")
