"""A small gang-scheduling controller over the real ``kubernetes`` client (docs/kubernetes.md K12).

One consumer thread owns the cluster: two :class:`~gangplace.k8s.watching.Watcher` threads
(nodes, pods) only put events on a queue, and :meth:`Controller.step` applies them in order,
then places the waiting gangs. A relist (at start, and whenever a watch answers 410 Gone)
lists both kinds, applies them in one :meth:`ClusterSync.resync`, and restarts both watches
from the lists' versions; events of the older watches still queued are dropped (the lists
already hold what they said). Pods whose ``spec.schedulerName`` is the controller's are
grouped into gangs (:class:`~gangplace.k8s.waiting.WaitingPods`), read with their own
constraints (:func:`~gangplace.k8s.request_from_pods`), reserved, bound through
:func:`~gangplace.k8s.bind` and committed; a binding that fails rolls the reservation back,
deletes the gang's pods bound before the failure (their controllers make them again) and
retries the gang after ``retry_seconds``. Gangs are tried in priority order, each placed if
it fits now: no gang holds GPUs for a blocked one (for queues, quotas, fair sharing and
backfill with reservations, drive a :class:`gangplace.Scheduler` from the sync instead).
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gangplace.errors import GangplaceError, Unschedulable
from gangplace.k8s.binding import bind
from gangplace.k8s.controller_metrics import ControllerMetrics
from gangplace.k8s.pending import GangIncomplete, request_from_pods
from gangplace.k8s.podgroups import PodGroupError
from gangplace.k8s.read import DEFAULT_TOLERATIONS
from gangplace.k8s.sync import ClusterSync
from gangplace.k8s.waiting import WaitingPods
from gangplace.k8s.watching import Event, Watcher, monotonic, wait_for_queue

__all__ = ["Controller", "GangOutcome"]

LOG = logging.getLogger("gangplace.k8s")
RESERVE_TTL = 300.0  # seconds a gang's reservation lasts while its pods are bound
MAX_EVENTS_PER_STEP = 10_000  # then the gangs are tried, and the rest waits for the next step


@dataclass(frozen=True)
class GangOutcome:
    """What one step did with one gang.

    ``result`` is ``bound``, ``waiting`` (``reason`` says why) or ``failed`` (a binding
    failed: ``reason``; the gang is tried again after ``retry_seconds``).
    """

    gang: str
    result: str
    reason: str = ""


class Controller:
    """Watches nodes and pods, and binds the gangs of pods that name it as their scheduler.

    Args:
        core_v1: A ``kubernetes.client.CoreV1Api``.
        levels: Level name -> node label key, outermost first (as for :class:`ClusterSync`).
        scheduler_name: The ``spec.schedulerName`` of the pods it schedules.
        gpu_resource: The resource that counts GPUs.
        tolerations: Tolerations every gang has (as for :class:`ClusterSync`).
        metrics: A ``prometheus_client`` registry to publish in (``None``: none).
        watch_timeout: Seconds each watch request lasts before it is made again.
        retry_seconds: Pause before a gang whose binding failed, or that cannot be read, is
            tried again.
        clock: Seconds for the cluster's reservations (default: ``time.monotonic``).

    Attributes:
        sync: The :class:`ClusterSync` holding the cluster.
        waiting: The pods waiting to be scheduled.

    Example:
        >>> from kubernetes import client, config  # doctest: +SKIP
        >>> config.load_kube_config()  # doctest: +SKIP
        >>> levels = {"rack": "example.com/rack"}
        >>> controller = Controller(client.CoreV1Api(), levels)  # doctest: +SKIP
        >>> controller.run(stop=threading.Event())  # doctest: +SKIP

    """

    def __init__(
        self,
        core_v1: Any,
        levels: Mapping[str, str],
        *,
        scheduler_name: str = "gangplace",
        gpu_resource: str = "nvidia.com/gpu",
        tolerations: Sequence[Mapping[str, Any]] = DEFAULT_TOLERATIONS,
        metrics: Any = None,
        watch_timeout: int = 60,
        retry_seconds: float = 5.0,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.core_v1 = core_v1
        self.levels = dict(levels)
        self.gpu_resource = gpu_resource
        self.sync = ClusterSync(
            levels,
            gpu_resource=gpu_resource,
            tolerations=tolerations,
            pod_owner="kube",
            clock=clock or monotonic,
        )
        self.waiting = WaitingPods(scheduler_name)
        self.metrics = None if metrics is None else ControllerMetrics(metrics)
        self.watch_timeout = watch_timeout
        self.retry_seconds = retry_seconds
        self.events: queue.Queue[Event] = queue.Queue()
        self.generation = 0
        self._watchers: list[Watcher] = []
        self._retry_at: dict[tuple[str, ...], float] = {}
        self._said: dict[tuple[str, ...], str] = {}  # the last warning per gang, said once
        self._dirty = True  # something changed since the gangs were last tried
        self._relist_at: float | None = None  # when a relist is due (after a 410 or a failure)

    # ------------------------------------------------------------------ the loop

    def run(self, stop: threading.Event) -> None:
        """Starts, then steps until ``stop`` is set; the watches end with it."""
        self.start()
        try:
            while not stop.is_set():
                self.step(timeout=1.0)
        finally:
            self.close()

    def start(self) -> None:
        """The first relist, and the two watches."""
        self.relist("start")

    def close(self) -> None:
        """Asks the watch threads to end (each within ``watch_timeout``)."""
        for watcher in self._watchers:
            watcher.stop()
        self._watchers = []

    def step(self, timeout: float = 0.0) -> list[GangOutcome]:
        """One turn of the loop.

        Applies the queued events (waiting up to ``timeout`` for the first), relists if a
        watch answered 410, then tries the waiting gangs if anything changed.
        """
        gone = False
        event = wait_for_queue(self.events, timeout)
        applied = 0
        while event is not None and applied < MAX_EVENTS_PER_STEP:
            gone = self._apply(event) or gone
            applied += 1
            event = wait_for_queue(self.events, 0.0)
        if event is not None:
            gone = self._apply(event) or gone
        if gone and self._relist_at is None:
            self._relist_at = monotonic()
        if self._relist_at is not None and monotonic() >= self._relist_at:
            self.relist("gone")
        return self.schedule()

    def _apply(self, event: Event) -> bool:
        """One queued event; ``True`` when it says a watch's version is gone."""
        generation, kind, event_type, obj = event
        if generation != self.generation:
            self._count(kind, "stale")
            return False
        if event_type == "gone":
            return True
        if event_type == "warning":
            self._warn(str(obj))
            return False
        result = self.sync.apply(event_type, obj)
        if kind == "pod" and isinstance(obj, Mapping):
            self.waiting.apply(event_type, obj)
        self._count(kind, result.action)
        for warning in result.warnings:
            self._warn(warning)
        self._dirty = True
        return False

    def relist(self, reason: str) -> None:
        """Lists nodes and pods, applies both in one resync, and restarts both watches."""
        began = monotonic()
        self.close()
        try:
            nodes, node_version = self._list(self.core_v1.list_node)
            pods, pod_version = self._list(self.core_v1.list_pod_for_all_namespaces)
        except Exception as error:  # the API's answer: retried after retry_seconds
            self._warn(f"relist failed ({type(error).__name__}: {error}); retried")
            self._relist_at = monotonic() + self.retry_seconds
            return
        self._relist_at = None
        for result in self.sync.resync(nodes, pods):
            for warning in result.warnings:
                self._warn(warning)
        self.waiting.relist(pods)
        self.generation += 1
        self._watchers = [
            Watcher(
                "node",
                self.core_v1.list_node,
                node_version,
                self.generation,
                self.events,
                self.watch_timeout,
            ),
            Watcher(
                "pod",
                self.core_v1.list_pod_for_all_namespaces,
                pod_version,
                self.generation,
                self.events,
                self.watch_timeout,
            ),
        ]
        for watcher in self._watchers:
            watcher.start()
        self._dirty = True
        if self.metrics is not None:
            self.metrics.relists.labels(reason).inc()
            self.metrics.relist_duration.observe(monotonic() - began)

    @staticmethod
    def _list(call: Callable[..., Any]) -> tuple[list[Any], str]:
        """The items (as dicts) and the list's ``resourceVersion``."""
        response = call(_preload_content=False)
        body = json.loads(response.data)
        items = body.get("items") or []
        version = str((body.get("metadata") or {}).get("resourceVersion") or "")
        return list(items), version

    # ------------------------------------------------------------------ scheduling

    def schedule(self) -> list[GangOutcome]:
        """Tries every waiting gang, highest priority first (when anything changed)."""
        now = monotonic()
        due = any(at <= now for at in self._retry_at.values())
        if not (self._dirty or due):
            return []
        self._dirty = False
        outcomes = []
        gangs = self.waiting.gangs()
        waiting = {key for key, _ in gangs}
        for kept in (self._retry_at, self._said):  # only gangs still waiting
            for key in [key for key in kept if key not in waiting]:
                del kept[key]
        for key, pods in gangs:
            if self._retry_at.get(key, 0.0) > now:
                continue
            self._retry_at.pop(key, None)
            outcomes.append(self._place(key, pods, now))
        if self.metrics is not None:
            self.metrics.waiting.set(len(self.waiting))
        return outcomes

    def _place(self, key: tuple[str, ...], pods: list[Any], now: float) -> GangOutcome:
        label = _label(key, pods)
        try:
            gang = request_from_pods(
                pods, levels=self.levels, gpu_resource=self.gpu_resource, name=label[:253]
            )
        except GangIncomplete as waiting:
            return GangOutcome(label, "waiting", str(waiting))
        except PodGroupError as bad:
            self._say(key, f"gang {label} not scheduled: {bad}")
            self._retry_at[key] = now + self.retry_seconds
            return GangOutcome(label, "waiting", str(bad))
        for warning in gang.warnings:
            self._say(key, warning)
        cluster = self.sync.cluster
        try:
            with self.sync.lock:
                hold = cluster.reserve(gang.request, ttl=RESERVE_TTL)
        except Unschedulable as no_room:
            return GangOutcome(label, "waiting", no_room.reason)
        except GangplaceError as error:
            self._say(key, f"gang {label} not scheduled: {error}")
            self._retry_at[key] = now + self.retry_seconds
            return GangOutcome(label, "waiting", str(error))
        result = bind(self.core_v1, hold.placement, list(gang.pods), allocation=hold.id)
        if result.ok:
            with self.sync.lock:
                cluster.commit(hold.id)
            self.waiting.bound([pod["metadata"]["uid"] for pod in gang.pods])
            self._binds("bound", len(result.bound))
            return GangOutcome(label, "bound")
        return self._failed(key, label, hold.id, result, now)

    def _failed(
        self, key: tuple[str, ...], label: str, hold: str, result: Any, now: float
    ) -> GangOutcome:
        """K9: the reservation is rolled back and the pods already bound are deleted."""
        # A reservation that expired meanwhile holds nothing.
        with self.sync.lock, contextlib.suppress(GangplaceError):
            self.sync.cluster.rollback(hold)
        for name in result.bound:
            namespace, pod = name.split("/", 1)
            try:
                self.core_v1.delete_namespaced_pod(pod, namespace)
            except Exception as error:
                self._warn(f"pod {name} bound before its gang failed, not deleted: {error}")
        pod, reason = result.failed
        self._warn(f"gang {label}: binding {pod} failed ({reason}); retried")
        self._binds("failed", 1)
        self._binds("deleted", len(result.bound))
        self._retry_at[key] = now + self.retry_seconds
        return GangOutcome(label, "failed", reason)

    # ------------------------------------------------------------------ reporting

    def _warn(self, text: str) -> None:
        LOG.warning("%s", text)
        if self.metrics is not None:
            self.metrics.warnings.inc()

    def _say(self, key: tuple[str, ...], text: str) -> None:
        """A gang's warning, once until it changes."""
        if self._said.get(key) != text:
            self._said[key] = text
            self._warn(text)

    def _count(self, kind: str, result: str) -> None:
        if self.metrics is not None:
            self.metrics.events.labels(kind, result).inc()

    def _binds(self, result: str, count: int) -> None:
        if self.metrics is not None and count:
            self.metrics.binds.labels(result).inc(count)


def _label(key: tuple[str, ...], pods: list[Any]) -> str:
    """A gang's name: ``namespace/value`` of its gang key, or a lone pod's ``namespace/name``.

    A LeaderWorkerSet group's index follows (``namespace/name/index``).
    """
    if key[1] == "pod":
        metadata = pods[0].get("metadata", {})
        return f"{metadata.get('namespace', 'default')}/{metadata.get('name', key[2])}"
    return "/".join((key[0], key[2], *key[3:]))
