"""The ``pod-by-pod`` policy: each pod bound on its own, as a default Kubernetes scheduler does.

Bound pods hold their GPUs until the whole job is bound (or its pod timeout passes): the
partial gangs that deadlock a cluster, which the gang policies of
:mod:`gangplace.sim.policies` never make. docs/command-line.md states what the replay
compares.
"""

from __future__ import annotations

import bisect
import math
from typing import TYPE_CHECKING

from gangplace._gangplace import Cluster, GangRequest
from gangplace.errors import Unschedulable
from gangplace.scheduler.admission import EmptyTwin
from gangplace.sim.clusters import ClusterSpec
from gangplace.sim.replay import TIMEOUT, WAKE
from gangplace.sim.settings import SimSettings

if TYPE_CHECKING:
    from gangplace.sim.replay import JobRecord, Replay, SimClock
    from gangplace.sim.traces import Job

__all__ = ["PodByPodPolicy"]


class PodByPodPolicy:
    """Each pod bound on its own as soon as a node fits it (see the module docstring).

    ``kube`` order: pending jobs by (priority descending, arrival), each job's pods together,
    as kube-scheduler's active queue orders pods; a pod that does not fit is passed over and
    the next job's pods are tried. ``interleaved``: one pod per job per round (the worst
    case). A job still partial ``pod_timeout_s`` after its first pod bound releases its pods
    and retries after a seeded random backoff of up to one timeout.

    It admits exactly the jobs the gang policies admit: a job that cannot fit the cluster at
    its required level, or needs more GPUs than its owner's quota, is rejected with the
    Scheduler's reason. While running, every bound pod of an owner (of running and partial
    jobs alike) counts against the owner's quota: a pod that would pass it is not bound.
    """

    name = "pod-by-pod"

    @staticmethod
    def gpu_milli(job: Job) -> int | None:
        """The job's fraction of a GPU (docs/resources.md "Fractions of a GPU"); ``None``: whole."""
        return job.gpu_milli

    def __init__(self) -> None:
        self.alias: dict[str, str] = {}
        self.pending: list[tuple[int, float, int, JobRecord]] = []
        self.sizes: list[int] = []
        self.index = 0
        self.owner_of: dict[str, JobRecord] = {}
        self.keys: dict[int, tuple[int, float, int]] = {}
        self.held: dict[str, int] = {}  # GPUs bound per owner, partial gangs included

    def build(self, spec: ClusterSpec, clock: SimClock, settings: SimSettings) -> Cluster:
        """The spec's cluster, best-fit nodes."""
        self.settings = settings
        self.twin = EmptyTwin()
        self.cluster = spec.build(policy="best-fit", clock=clock)
        return self.cluster

    def node_name(self, name: str) -> str:
        """Node names are the spec's."""
        return name

    def arrived(self, replay: Replay, record: JobRecord, now: float) -> None:
        """Queues the job's pods, unless the job can never fit."""
        job = record.job
        request = GangRequest(
            job.pods,
            job.gpus_per_pod,
            required_level=job.required_level,
            resources_per_pod=dict(job.resources_per_pod) or None,
        )
        reason = self.twin.fits(self.cluster, request)
        quota = self.settings.quotas.get(job.owner) if job.owner is not None else None
        if reason is None and quota is not None and job.gpus > quota:
            reason = f"needs {job.gpus} GPUs, above owner {job.owner!r}'s quota of {quota}"
        if reason is not None:
            replay.reject(record, f"never fits: {reason}")
            return
        self._queue(record)

    def _quota_allows(self, record: JobRecord) -> bool:
        """Whether one more pod of the job keeps its owner within quota."""
        owner = record.job.owner
        quota = self.settings.quotas.get(owner) if owner is not None else None
        if quota is None or owner is None:
            return True
        return self.held.get(owner, 0) + record.job.gpus_per_pod <= quota

    def _held(self, record: JobRecord, gpus: int) -> None:
        owner = record.job.owner
        if owner is not None:
            self.held[owner] = self.held.get(owner, 0) + gpus

    def _queue(self, record: JobRecord) -> None:
        self.index += 1
        key = (-record.job.priority, record.job.arrival_s, self.index)
        self.keys[id(record)] = key
        position = bisect.bisect_left(self.pending, key, key=lambda item: item[:3])
        self.pending.insert(position, (*key, record))
        bisect.insort(self.sizes, record.job.gpus_per_pod)

    def _dequeue(self, record: JobRecord) -> None:
        key = self.keys.pop(id(record))
        del self.pending[bisect.bisect_left(self.pending, key, key=lambda item: item[:3])]
        del self.sizes[bisect.bisect_left(self.sizes, record.job.gpus_per_pod)]

    def schedule(self, replay: Replay, now: float) -> None:
        """Binds pods until none binds; a job starts when its last pod binds."""
        if self.settings.pod_order == "kube":
            self._kube_pass(replay, now)
        else:
            while self._interleaved_round(replay, now):
                pass
        if replay.arrival_only:
            for *_, record in list(self.pending):
                self._drop_partial(replay, record, now, retry=False)
                self._dequeue(record)
                replay.reject(record, "no room on arrival (arrival-only replay)")

    def _kube_pass(self, replay: Replay, now: float) -> None:
        smallest_failed = math.inf
        for *_, record in list(self.pending):
            if self.sizes and smallest_failed <= self.sizes[0]:
                break  # no pending pod is small enough to fit any more
            size = record.job.gpus_per_pod
            if record.retry_at_s > now or size >= smallest_failed:
                continue
            while len(record.bound) < record.job.pods:
                if not self._quota_allows(record):
                    break  # this owner's quota, not the cluster: other jobs may still bind
                if not self._bind_one(replay, record, now):
                    smallest_failed = size
                    break

    def _interleaved_round(self, replay: Replay, now: float) -> bool:
        progress = False
        smallest_failed = math.inf
        for *_, record in list(self.pending):
            size = record.job.gpus_per_pod
            if record.retry_at_s > now or size >= smallest_failed:
                continue
            if not self._quota_allows(record):
                continue
            if self._bind_one(replay, record, now):
                progress = True
            else:
                smallest_failed = size
        return progress

    def _bind_one(self, replay: Replay, record: JobRecord, now: float) -> bool:
        job = record.job
        replay.placements += 1
        try:
            pod = GangRequest(
                1,
                job.gpus_per_pod,
                name=job.id,
                resources_per_pod=dict(job.resources_per_pod) or None,
                gpu_milli=self.gpu_milli(job),
            )
            reservation = self.cluster.reserve(pod)
        except Unschedulable:
            return False
        allocation = self.cluster.commit(reservation)
        self.owner_of[allocation.id] = record
        record.bound.append(allocation)
        self._held(record, job.gpus_per_pod)
        replay.held_partial += job.gpus_per_pod
        if record.first_bound_s is None:
            record.first_bound_s = now
            if self.settings.pod_timeout_s is not None:
                replay.push(now + self.settings.pod_timeout_s, TIMEOUT, record)
        if len(record.bound) == job.pods:
            replay.held_partial -= job.gpus
            self._dequeue(record)
            record.first_bound_s = None
            nodes = tuple({node for a in record.bound for node in a.placement.nodes})
            replay.count_numa_splits(
                [pod for a in record.bound for pod in a.placement.pods], record
            )
            replay.started(record, nodes, now)
        return True

    def timeout(self, replay: Replay, record: JobRecord, now: float) -> None:
        """Releases a partial gang whose timeout passed; it retries after a backoff."""
        timeout = self.settings.pod_timeout_s
        first = record.first_bound_s
        partial = record.start_s is None and record.bound and first is not None
        if partial and timeout is not None and first is not None and now >= first + timeout:
            self._drop_partial(replay, record, now, retry=True)

    def _drop_partial(self, replay: Replay, record: JobRecord, now: float, *, retry: bool) -> None:
        for allocation in record.bound:
            self.cluster.release(allocation)
            self.owner_of.pop(allocation.id, None)
        replay.held_partial -= len(record.bound) * record.job.gpus_per_pod
        self._held(record, -len(record.bound) * record.job.gpus_per_pod)
        record.bound = []
        record.first_bound_s = None
        if retry:
            record.retry_at_s = now + replay.rng.uniform(0.0, self.settings.pod_timeout_s or 0.0)
            replay.push(record.retry_at_s, WAKE, None)

    def finished(self, replay: Replay, record: JobRecord) -> None:
        """Frees every pod of the job."""
        for allocation in record.bound:
            self.cluster.release(allocation)
            self.owner_of.pop(allocation.id, None)
        self._held(record, -len(record.bound) * record.job.gpus_per_pod)
        record.bound = []

    def lost(self, replay: Replay, holders: list[str], now: float) -> None:
        """A GPU failed: a running job restarts from the queue; a partial one loses the pod."""
        for hold_id in holders:
            record = self.owner_of.get(hold_id)
            if record is None:
                continue
            if record.start_s is not None:
                self.finished(replay, record)
                replay.stopped(record, now)
                self._queue(record)
            else:
                lost = [a for a in record.bound if a.id == hold_id]
                for allocation in lost:
                    self.cluster.release(allocation)
                    record.bound.remove(allocation)
                    self.owner_of.pop(hold_id, None)
                    replay.held_partial -= record.job.gpus_per_pod
                    self._held(record, -record.job.gpus_per_pod)

    def queued(self, replay: Replay) -> int:
        """Jobs waiting (partial or not)."""
        return len(self.pending)
