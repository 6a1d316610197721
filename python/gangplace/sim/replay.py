"""The event-driven replay: one job stream, one cluster, one policy.

Events at the same instant are handled in this order: finishes (they free GPUs), pod-by-pod
timeouts, arrivals, ladder steps; then one scheduling pass runs. The queue is FIFO by arrival
(ties by trace order). Without backfill the first job that cannot start blocks the ones behind
it; with ``backfill=True`` a later job may start when it fits now and its run ends before the
blocked head's shadow time (the earliest instant at which, by the running jobs' ends, enough
GPUs in total are free for the head): EASY backfilling counted in GPUs.

Policies:

- ``best-fit``, ``first-fit``: gangplace with that policy (topology-aware, all or nothing).
- ``blind``: all or nothing, but topology-blind: a cluster without levels whose nodes are
  renamed in a seeded random order, first-fit, so nodes are taken in a fixed order with no
  regard to racks.
- ``pod-by-pod``: how a default Kubernetes scheduler behaves. Each pod is bound on its own as
  soon as a node fits it (best-fit node); pods of the queued jobs are interleaved, one pod per
  job per round, in queue order. Bound pods hold their GPUs until the whole job is bound; a
  job starts when its last pod binds. A job still partial ``pod_timeout_s`` after its first
  pod bound releases its pods and retries after a seeded random backoff of up to one timeout
  (as coscheduling plugins back off). A deadlock is counted each time the cluster enters a
  state where partial jobs hold GPUs, no pod can bind and nothing is running.
Arrival-only traces (no durations: jobs never end) keep no queue: a job that cannot start when
it arrives is rejected (pod-by-pod: its bound pods are released), and the figure that matters
is the share of GPUs allocated at the end.

- ``ladder``: gangplace best-fit that requires the rack level for the first ``T1`` seconds of
  a job's wait, then the level above until ``T2``, then anywhere (like Slurm's
  ``--switches=count@max-time``).
"""

from __future__ import annotations

import heapq
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gangplace._gangplace import Allocation, GangRequest, Reservation
from gangplace.errors import Unschedulable
from gangplace.sim.clusters import ClusterSpec
from gangplace.sim.traces import Job

__all__ = ["POLICIES", "JobRecord", "Replay", "RunResult"]

POLICIES = ("best-fit", "first-fit", "blind", "pod-by-pod", "ladder")
FINISH, TIMEOUT, ARRIVAL, STEP = 0, 1, 2, 3
TTL = 7 * 24 * 3600.0


class SimClock:
    """The simulated time, read by the cluster for reservation lifetimes."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class JobRecord:
    """What happened to one job."""

    job: Job
    start_s: float | None = None
    end_s: float | None = None
    nodes: tuple[str, ...] = ()
    waited_with_free_gpus: bool = False
    bound: list[Allocation] = field(default_factory=list)
    first_bound_s: float | None = None
    retry_at_s: float = 0.0
    rejected: bool = False
    arrived: bool = False


@dataclass
class RunResult:
    """A finished replay: the job records and the time series."""

    policy: str
    records: list[JobRecord]
    makespan_s: float
    busy_gpu_seconds: float
    idle_held_gpu_seconds: float
    deadlocks: int
    placements: int
    engine_seconds: float
    samples: list[tuple[float, int, int]]  # (time, busy GPUs, queued jobs)
    truncated: bool = False


class Replay:
    """Replays ``jobs`` on a fresh cluster of ``spec`` under ``policy``."""

    def __init__(
        self,
        jobs: list[Job],
        spec: ClusterSpec,
        policy: str,
        *,
        ladder: tuple[float, float] = (300.0, 1800.0),
        pod_timeout_s: float | None = 600.0,
        backfill: bool = False,
        seed: int = 0,
        stop_after_gpus: float | None = None,
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}; choose from {', '.join(POLICIES)}")
        self.policy = policy
        self.spec = spec
        self.jobs = jobs
        self.ladder = ladder
        self.pod_timeout_s = pod_timeout_s
        self.backfill = backfill
        self.stop_after_gpus = stop_after_gpus
        self.clock = SimClock()
        self.alias: dict[str, str] = {}
        if policy == "blind":
            order = list(range(len(spec.names)))
            random.Random(seed).shuffle(order)
            flat = [""] * len(order)
            for position, index in enumerate(order):
                flat[index] = f"{position:07d}"
                self.alias[flat[index]] = spec.names[index]
            self.cluster = spec.build(policy="first-fit", clock=self.clock, flat=flat)
        else:
            kind = "first-fit" if policy == "first-fit" else "best-fit"
            self.cluster = spec.build(policy=kind, clock=self.clock)
        self.records = [JobRecord(job) for job in jobs]
        self.queue: list[JobRecord] = []
        self.running: dict[int, tuple[float, int]] = {}  # id(record) -> (end, gpus)
        self.events: list[tuple[float, int, int, JobRecord]] = []
        self.sequence = 0
        self.busy = 0
        self.held_partial = 0
        self.busy_gpu_seconds = 0.0
        self.idle_held_gpu_seconds = 0.0
        self.deadlocks = 0
        self.in_deadlock = False
        self.placements = 0
        self.engine_seconds = 0.0
        self.samples: list[tuple[float, int, int]] = []
        self.rng = random.Random(seed)
        # A safety stop: a livelock (partial gangs timing out and re-binding forever) must not
        # hang the simulation. Hitting it is reported as `truncated`.
        self.max_events = 1000 * max(len(jobs), 1)

    # ------------------------------------------------------------------ events

    def _push(self, at: float, kind: int, record: JobRecord) -> None:
        self.sequence += 1
        heapq.heappush(self.events, (at, kind, self.sequence, record))

    def run(self, progress: Callable[[int], object] | None = None) -> RunResult:
        """Runs to the end; ``progress`` is called with the number of events handled."""
        arrived = 0.0
        for record in self.records:
            if self.stop_after_gpus is not None and arrived >= self.stop_after_gpus:
                break
            arrived += record.job.gpus
            self._push(record.job.arrival_s, ARRIVAL, record)
        last = 0.0
        handled_total = 0
        truncated = False
        while self.events:
            if handled_total >= self.max_events:
                truncated = True
                break
            now = self.events[0][0]
            self._advance(last, now)
            last = now
            handled = 0
            while self.events and self.events[0][0] == now:
                _, kind, _, record = heapq.heappop(self.events)
                self._handle(kind, record, now)
                handled += 1
            handled_total += handled
            self._schedule(now)
            self.samples.append((now, self.busy, len(self.queue)))
            if progress is not None:
                progress(handled)
        return RunResult(
            self.policy,
            self.records,
            last,
            self.busy_gpu_seconds,
            self.idle_held_gpu_seconds,
            self.deadlocks,
            self.placements,
            self.engine_seconds,
            self.samples,
            truncated,
        )

    def _advance(self, last: float, now: float) -> None:
        span = now - last
        self.busy_gpu_seconds += self.busy * span
        self.idle_held_gpu_seconds += self.held_partial * span
        self.clock.now = now

    def _handle(self, kind: int, record: JobRecord, now: float) -> None:
        if kind == FINISH:
            for allocation in record.bound:
                self.cluster.release(allocation)
            self.busy -= record.job.gpus
            record.bound = []
            record.end_s = now
            del self.running[id(record)]
        elif kind == TIMEOUT:
            first = record.first_bound_s if record.first_bound_s is not None else math.inf
            deadline = first + (self.pod_timeout_s if self.pod_timeout_s is not None else math.inf)
            if record.start_s is None and record.bound and now >= deadline:
                self._drop_partial(record)
        elif kind == ARRIVAL:
            record.arrived = True
            self.queue.append(record)
            if self.policy == "ladder":
                for step in self.ladder:
                    self._push(now + step, STEP, record)
        # STEP: nothing to do but let the pass below look again.

    # ------------------------------------------------------------------ scheduling

    def _reserve(self, request: GangRequest) -> Reservation:
        """A reservation (raises ``Unschedulable``), timed for ``placements_per_s``."""
        start = time.perf_counter()
        try:
            return self.cluster.reserve(request, ttl=TTL)
        finally:
            self.engine_seconds += time.perf_counter() - start
            self.placements += 1

    def _request(self, record: JobRecord, now: float) -> GangRequest:
        job = record.job
        level = job.required_level
        if self.policy == "ladder" and level is None:
            waited = now - job.arrival_s
            rack, above = self.spec.levels[-1], self.spec.levels[-2:-1]
            if waited < self.ladder[0]:
                level = rack
            elif waited < self.ladder[1]:
                level = above[0] if above else None
        return GangRequest(job.pods, job.gpus_per_pod, required_level=level, name=job.id)

    def _start(self, record: JobRecord, allocations: list[Allocation], now: float) -> None:
        record.bound = allocations
        record.start_s = now
        nodes = {self.alias.get(n, n) for a in allocations for n in a.placement.nodes}
        record.nodes = tuple(sorted(nodes))
        self.busy += record.job.gpus
        end = now + record.job.duration_s if record.job.duration_s is not None else math.inf
        self.running[id(record)] = (end, record.job.gpus)
        if math.isfinite(end):
            self._push(end, FINISH, record)

    def _schedule(self, now: float) -> None:
        if self.policy == "pod-by-pod":
            self._schedule_pods(now)
            return
        blocked: JobRecord | None = None
        for record in list(self.queue):
            if blocked is not None and not self._may_backfill(blocked, record, now):
                continue
            request = self._request(record, now)
            try:
                reservation = self._reserve(request)
            except Unschedulable:
                if self.cluster.stats().free >= record.job.gpus:
                    record.waited_with_free_gpus = True
                if record.job.duration_s is None:
                    self._reject(record)
                    continue
                if blocked is None:
                    blocked = record
                    if not self.backfill:
                        return
                continue
            allocation = self.cluster.commit(reservation)
            self.queue.remove(record)
            self._start(record, [allocation], now)

    def _may_backfill(self, head: JobRecord, record: JobRecord, now: float) -> bool:
        if not self.backfill or record.job.duration_s is None:
            return False
        free = self.cluster.stats().free
        shadow = math.inf
        for end, gpus in sorted(self.running.values()):
            free += gpus
            if free >= head.job.gpus:
                shadow = end
                break
        return now + record.job.duration_s <= shadow

    def _schedule_pods(self, now: float) -> None:
        progress = True
        while progress:
            progress = False
            for record in list(self.queue):
                job = record.job
                if record.start_s is not None or len(record.bound) >= job.pods:
                    continue  # started earlier in this pass, or fully bound
                if record.retry_at_s > now:
                    continue  # backing off after a timeout
                pod = GangRequest(1, job.gpus_per_pod, name=job.id)
                try:
                    reservation = self._reserve(pod)
                except Unschedulable:
                    if self.cluster.stats().free >= job.gpus:
                        record.waited_with_free_gpus = True
                    if job.duration_s is None:
                        self._drop_partial(record)
                        self._reject(record)
                    continue
                record.bound.append(self.cluster.commit(reservation))
                self.held_partial += job.gpus_per_pod
                progress = True
                if record.first_bound_s is None:
                    record.first_bound_s = now
                    if self.pod_timeout_s is not None:
                        self._push(now + self.pod_timeout_s, TIMEOUT, record)
                if len(record.bound) == job.pods:
                    self.held_partial -= job.gpus
                    self.queue.remove(record)
                    bound, record.bound = record.bound, []
                    self._start(record, bound, now)
        partial = any(record.bound for record in self.queue)
        stuck = partial and not self.running
        if stuck and not self.in_deadlock:
            self.deadlocks += 1
        self.in_deadlock = stuck

    def _reject(self, record: JobRecord) -> None:
        """Rejects a job of an arrival-only replay that does not fit when it arrives.

        Such replays keep no queue, as the FGD paper's replay of the Alibaba lists.
        """
        record.rejected = True
        self.queue.remove(record)

    def _drop_partial(self, record: JobRecord) -> None:
        """Releases a timed-out partial gang.

        It retries after a seeded random backoff of up to one timeout, so that gangs that
        timed out together do not re-bind in lockstep.
        """
        for allocation in record.bound:
            self.cluster.release(allocation)
        self.held_partial -= len(record.bound) * record.job.gpus_per_pod
        record.bound = []
        record.first_bound_s = None
        record.retry_at_s = self.clock.now + self.rng.uniform(0.0, self.pod_timeout_s or 0.0)
        self._push(record.retry_at_s, STEP, record)
