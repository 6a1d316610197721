"""Rule 1's node filter, restated plainly (docs/placement.md, rule 1).

A node may be used by a request when it carries every label the request selects, meets
every requirement of at least one of its affinity terms (when it has terms), and every
``NoSchedule`` or ``NoExecute`` taint of the node is tolerated by one of the request's
tolerations. Requirements and tolerations read as Kubernetes reads them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Filter", "checked_taints", "filter_of", "order_filter"]

EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
MAX_TAINTS = 32

Requirement = tuple[str, str, tuple[str, ...]]  # (key, operator, values)
Toleration = tuple[str, str, str, str | None]  # (key, operator, value, effect)
Taint = tuple[str, str, str]  # (key, value, effect)


def _number(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def holds(requirement: Requirement, label: str | None) -> bool:
    """Whether a node whose label reads ``label`` (``None``: absent) meets the requirement."""
    _, operator, values = requirement
    if operator == "In":
        return label is not None and label in values
    if operator == "NotIn":
        return label is None or label not in values
    if operator == "Exists":
        return label is not None
    if operator == "DoesNotExist":
        return label is None
    value, bound = _number(label), _number(values[0] if values else None)
    if value is None or bound is None:
        return False
    return value > bound if operator == "Gt" else value < bound


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Whether one toleration tolerates one taint."""
    key, operator, value, effect = toleration
    taint_key, taint_value, taint_effect = taint
    if effect is not None and effect != taint_effect:
        return False
    if not key:
        return operator == "Exists"
    return key == taint_key and (operator == "Exists" or value == taint_value)


@dataclass(frozen=True)
class Filter:
    """The labels a request selects, its affinity terms and its tolerations."""

    labels: Mapping[str, str] = field(default_factory=dict)
    affinity: tuple[tuple[Requirement, ...], ...] = ()
    tolerations: tuple[Toleration, ...] = ()

    def admits(self, labels: Mapping[str, str], taints: Sequence[Taint]) -> bool:
        """Rule 1 for a node of these labels and taints."""
        if any(labels.get(key) != value for key, value in self.labels.items()):
            return False
        if self.affinity and not any(
            all(holds(r, labels.get(r[0])) for r in term) for term in self.affinity
        ):
            return False
        return all(
            taint[2] == "PreferNoSchedule" or any(tolerates(t, taint) for t in self.tolerations)
            for taint in taints
        )


def filter_of(request: Any) -> Filter:
    """The filter of a request or group (``gangplace.GangRequest`` or ``PodGroup``)."""
    return Filter(
        dict(request.selector),
        tuple(getattr(request, "affinity", ())),
        tuple(getattr(request, "tolerations", ())),
    )


def order_filter(filters: Sequence[Filter]) -> Filter:
    """The nodes a multi-role unit's candidates are ordered over (docs/roles.md, rule 2).

    Every node some group's tolerations admit, whatever the groups' labels.
    """
    tolerations = {t for flt in filters for t in flt.tolerations}
    return Filter({}, (), tuple(sorted(tolerations, key=repr)))


def checked_taints(taints: Any, name_bytes: int) -> tuple[Taint, ...]:
    """A node's taints as ``add_node`` takes them: ``(key, value, effect)``, sorted, distinct.

    Raises:
        TypeError: Not a sequence of 3-tuples of str.
        InvalidRequest: An empty or long key, a long value, an unknown effect, too many.

    """
    from gangplace.errors import InvalidRequest

    if isinstance(taints, str):
        raise TypeError("taints must be a sequence, not str")
    out = set()
    for taint in taints:
        if isinstance(taint, str) or len(taint) != 3:
            raise TypeError("a taint is (key, value, effect)")
        key, value, effect = taint
        if not all(isinstance(part, str) for part in taint):
            raise TypeError("a taint's key, value and effect are str")
        if not key or len(key.encode()) > name_bytes or len(value.encode()) > name_bytes:
            raise InvalidRequest(f"taint key {key!r} or its value is empty or too long")
        if effect not in EFFECTS:
            raise InvalidRequest(
                f"taint effect must be one of {', '.join(EFFECTS)}, got {effect!r}"
            )
        out.add((key, value, effect))
    if len(out) > MAX_TAINTS:
        raise InvalidRequest(f"a node has at most {MAX_TAINTS} taints, got {len(out)}")
    return tuple(sorted(out))
