"""Which running pods are one gang, and at what priority (docs/kubernetes.md).

A pod's gang key is read, in this order, from the labels and annotations the gang schedulers
set; the first one present wins, and pods of one namespace with the same key are one gang:

- ``gangplace.io/allocation`` (annotation): gangplace bound the pod itself;
- ``scheduling.x-k8s.io/pod-group`` (label): scheduler-plugins coscheduling;
- ``scheduling.k8s.io/group-name`` (annotation): Volcano;
- ``kueue.x-k8s.io/pod-group-name`` (label): Kueue's plain pod groups;
- ``kueue.x-k8s.io/workload`` (annotation): the admitted Workload of a Kueue-managed job (set
  on the job's pod template when Kueue starts it);
- ``leaderworkerset.sigs.k8s.io/name`` with ``leaderworkerset.sigs.k8s.io/group-index``
  (labels): one LeaderWorkerSet group;
- ``jobset.sigs.k8s.io/jobset-name`` (label): one JobSet.

A pod's priority is ``spec.priority`` (0 when absent). A pod of a system priority class
(``system-node-critical``, ``system-cluster-critical``) or at or above Kubernetes' system
threshold (2,000,000,000) is never preemptible. A gang takes its highest pod's priority and
is preemptible only if every pod is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gangplace.k8s import fields
from gangplace.k8s.binding import ALLOCATION_ANNOTATION
from gangplace.k8s.fields import BadField

__all__ = ["SYSTEM_PRIORITY", "gang_key", "pod_priority"]

SYSTEM_PRIORITY = 2_000_000_000  # Kubernetes' SystemCriticalPriority: the system classes
SYSTEM_CLASSES = frozenset({"system-node-critical", "system-cluster-critical"})
PRIORITY_RANGE = (-(2**31), 2**31 - 1)
_GANG_KEYS = (
    ("annotations", ALLOCATION_ANNOTATION),
    ("labels", "scheduling.x-k8s.io/pod-group"),
    ("annotations", "scheduling.k8s.io/group-name"),
    ("labels", "kueue.x-k8s.io/pod-group-name"),
    ("annotations", "kueue.x-k8s.io/workload"),
    ("labels", "leaderworkerset.sigs.k8s.io/name"),
    ("labels", "jobset.sigs.k8s.io/jobset-name"),
)
_LWS_GROUP = "leaderworkerset.sigs.k8s.io/group-index"


def gang_key(metadata: Mapping[str, Any]) -> tuple[str, ...] | None:
    """``(namespace, source key, value[, group index])`` of the pod's gang, or ``None``.

    Raises:
        BadField: ``metadata.labels`` or ``metadata.annotations`` is not a mapping.

    """
    where = {
        "labels": fields.obj(metadata.get("labels"), "metadata.labels"),
        "annotations": fields.obj(metadata.get("annotations"), "metadata.annotations"),
    }
    namespace = metadata.get("namespace")
    space = namespace if isinstance(namespace, str) else "default"
    for kind, key in _GANG_KEYS:
        value = where[kind].get(key)
        if isinstance(value, str) and value:
            if key.startswith("leaderworkerset"):
                return space, key, value, str(where["labels"].get(_LWS_GROUP, ""))
            return space, key, value
    return None


def pod_priority(spec: Mapping[str, Any]) -> tuple[int, bool]:
    """``(priority, preemptible)`` of a pod from its ``spec``.

    Raises:
        BadField: ``spec.priority`` is not an integer in the 32-bit range, or
            ``spec.priorityClassName`` is not a string.

    """
    raw = spec.get("priority")
    if raw is None:
        priority = 0
    elif isinstance(raw, int) and not isinstance(raw, bool):
        priority = raw
    else:
        raise BadField("spec.priority", f"is {fields.kind(raw)}, not an integer")
    low, high = PRIORITY_RANGE
    if not low <= priority <= high:
        raise BadField("spec.priority", f"{priority} is outside {low}..{high}")
    name = spec.get("priorityClassName") or spec.get("priority_class_name")
    if name is not None and not isinstance(name, str):
        raise BadField("spec.priorityClassName", f"is {fields.kind(name)}, not a string")
    critical = priority >= SYSTEM_PRIORITY or name in SYSTEM_CLASSES
    return priority, not critical
