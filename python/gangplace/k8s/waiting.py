"""The pods waiting for the :class:`~gangplace.k8s.Controller`, grouped into gangs (K12).

A pod waits when its ``spec.schedulerName`` is the controller's, it is not bound, not
finished and not being deleted. Pods are keyed by ``metadata.uid`` and each keeps the
``resourceVersion`` last applied, so a stale event never makes a bound pod wait again. A
gang is the pods of one gang key (``k8s.gangs.gang_key``); a pod without one is a gang of
one. Gangs are tried by priority (highest first), then age (oldest
``metadata.creationTimestamp`` first), then key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gangplace.k8s.fields import BadField
from gangplace.k8s.gangs import gang_key

__all__ = ["WaitingPods"]


class WaitingPods:
    """The pending pods of one scheduler name, by uid."""

    def __init__(self, scheduler_name: str) -> None:
        self.scheduler_name = scheduler_name
        self.pods: dict[str, dict[str, Any]] = {}  # uid -> the pod as last read
        self.versions: dict[str, int] = {}  # uid -> resourceVersion applied (waiting or not)

    def __len__(self) -> int:
        return len(self.pods)

    def apply(self, event_type: str, pod: Any) -> None:
        """A pod event: the pod waits, or no longer does."""
        metadata = pod.get("metadata") if isinstance(pod, Mapping) else None
        if not isinstance(metadata, Mapping):
            return
        uid = metadata.get("uid")
        if not isinstance(uid, str) or not uid:
            return
        version = _version(metadata)
        if version is not None:
            if version < self.versions.get(uid, -1):
                return  # stale: what is applied is newer
            self.versions[uid] = version
        if event_type != "DELETED" and self._waits(pod, metadata):
            self.pods[uid] = pod
        else:
            self.pods.pop(uid, None)
            if event_type == "DELETED":
                self.versions.pop(uid, None)

    def relist(self, pods: list[Any]) -> None:
        """Exactly the waiting pods of a list."""
        self.pods.clear()
        self.versions.clear()
        for pod in pods:
            self.apply("ADDED", pod)

    def bound(self, uids: list[str]) -> None:
        """Pods just bound: they wait no more (their events follow)."""
        for uid in uids:
            self.pods.pop(uid, None)

    def gangs(self) -> list[tuple[tuple[str, ...], list[dict[str, Any]]]]:
        """``(gang key, pods)`` in the order they are tried."""
        groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for uid, pod in self.pods.items():
            try:
                key = gang_key(pod["metadata"]) or ("", "pod", uid)
            except BadField:  # unreadable labels: a gang of one, named by its uid
                key = ("", "pod", uid)
            groups.setdefault(key, []).append(pod)

        def order(item: tuple[tuple[str, ...], list[dict[str, Any]]]) -> Any:
            key, pods = item
            priority = max(_priority(pod) for pod in pods)
            created = min(_created(pod) for pod in pods)
            return (-priority, created, key)

        return sorted(groups.items(), key=order)

    def _waits(self, pod: Mapping[str, Any], metadata: Mapping[str, Any]) -> bool:
        spec = pod.get("spec")
        status = pod.get("status")
        if not isinstance(spec, Mapping) or spec.get("schedulerName") != self.scheduler_name:
            return False
        phase = status.get("phase") if isinstance(status, Mapping) else None
        return (
            not spec.get("nodeName")
            and phase not in ("Succeeded", "Failed")
            and not metadata.get("deletionTimestamp")
        )


def _version(metadata: Mapping[str, Any]) -> int | None:
    raw = metadata.get("resourceVersion")
    return int(raw) if isinstance(raw, str) and raw.isdigit() else None


def _priority(pod: Mapping[str, Any]) -> int:
    value = pod.get("spec", {}).get("priority")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _created(pod: Mapping[str, Any]) -> str:
    value = pod.get("metadata", {}).get("creationTimestamp")
    return value if isinstance(value, str) else ""
