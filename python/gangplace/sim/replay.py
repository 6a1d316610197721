"""The event-driven replay: one job stream, one cluster, one policy.

Events at the same instant are handled in this order: finishes (they free GPUs), pod-by-pod
timeouts, arrivals, ladder steps; then one scheduling pass runs. The queue is FIFO by arrival
(ties by trace order). Without backfill the first job that cannot start blocks the ones behind
it; with ``backfill=True`` a later job may start when it fits now and its run ends before the
blocked head's shadow time (the earliest instant at which, by the running jobs' ends, enough
GPUs in total are free for the head): EASY backfilling counted in GPUs.

The policies themselves are objects of :mod:`gangplace.sim.policies`. Pod-by-pod details:
pods of the queued jobs are interleaved, one pod per job per round, in queue order. Bound pods
hold their GPUs until the whole job is bound; a job starts when its last pod binds. A job
still partial ``pod_timeout_s`` after its first pod bound releases its pods and retries after
a seeded random backoff of up to one timeout (as coscheduling plugins back off). A deadlock is
counted each time the cluster enters a state where partial jobs hold GPUs, no pod can bind
and nothing is running.

Arrival-only traces (no durations: jobs never end) keep no queue: a job that cannot start when
it arrives is rejected (pod-by-pod: its bound pods are released), and the figure that matters
is the share of GPUs allocated at the end.
"""

from __future__ import annotations

import heapq
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gangplace._gangplace import Allocation, GangRequest, Reservation
from gangplace.sim.clusters import ClusterSpec
from gangplace.sim.policies import POLICIES, policy_for
from gangplace.sim.traces import Job

__all__ = ["POLICIES", "JobRecord", "Replay", "RunResult", "SimClock"]

FINISH, TIMEOUT, ARRIVAL, STEP = 0, 1, 2, 3
TTL = 7 * 24 * 3600.0


class SimClock:
    """The simulated time, read by the cluster for reservation lifetimes."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        """The simulated time, in seconds."""
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
        self.rules = policy_for(policy, ladder=ladder, seed=seed)
        self.policy = policy
        self.spec = spec
        self.jobs = jobs
        self.ladder = ladder
        self.pod_timeout_s = pod_timeout_s
        self.backfill = backfill
        self.stop_after_gpus = stop_after_gpus
        self.clock = SimClock()
        self.cluster, self.alias = self.rules.build(spec, self.clock)
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
            self.rules.schedule(self, now)
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
                self.drop_partial(record)
        elif kind == ARRIVAL:
            record.arrived = True
            self.queue.append(record)
            self.rules.arrived(self, record, now)
        # STEP: nothing to do but let the pass below look again.

    # ------------------------------------------------------------------ for the policies

    def wake(self, at: float, record: JobRecord) -> None:
        """Runs a scheduling pass at ``at`` for ``record`` (a ladder step, a retry)."""
        self._push(at, STEP, record)

    def reserve(self, request: GangRequest) -> Reservation:
        """A reservation (raises ``Unschedulable``), timed for ``placements_per_s``."""
        start = time.perf_counter()
        try:
            return self.cluster.reserve(request, ttl=TTL)
        finally:
            self.engine_seconds += time.perf_counter() - start
            self.placements += 1

    def note_waiting(self, record: JobRecord) -> None:
        """The job could not start: notes whether enough GPUs were free in total."""
        if self.cluster.stats().free >= record.job.gpus:
            record.waited_with_free_gpus = True

    def start(self, record: JobRecord, allocations: list[Allocation], now: float) -> None:
        """The job runs from ``now`` on its allocations."""
        record.bound = allocations
        record.start_s = now
        nodes = {self.alias.get(n, n) for a in allocations for n in a.placement.nodes}
        record.nodes = tuple(sorted(nodes))
        self.busy += record.job.gpus
        end = now + record.job.duration_s if record.job.duration_s is not None else math.inf
        self.running[id(record)] = (end, record.job.gpus)
        if math.isfinite(end):
            self._push(end, FINISH, record)

    def may_backfill(self, head: JobRecord, record: JobRecord, now: float) -> bool:
        """EASY backfilling in GPUs: whether ``record`` may pass the blocked ``head``.

        It may when it ends by the head's shadow time: the earliest instant at which, by the
        running jobs' ends, enough GPUs in total are free for the head.
        """
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

    def bind_pod(self, record: JobRecord, allocation: Allocation, now: float) -> None:
        """Pod-by-pod: one more pod of ``record`` is bound; the last one starts the job."""
        job = record.job
        record.bound.append(allocation)
        self.held_partial += job.gpus_per_pod
        if record.first_bound_s is None:
            record.first_bound_s = now
            if self.pod_timeout_s is not None:
                self._push(now + self.pod_timeout_s, TIMEOUT, record)
        if len(record.bound) == job.pods:
            self.held_partial -= job.gpus
            self.queue.remove(record)
            bound, record.bound = record.bound, []
            self.start(record, bound, now)

    def note_deadlock(self) -> None:
        """Pod-by-pod: counts entering a state where partial gangs hold GPUs and none run."""
        partial = any(record.bound for record in self.queue)
        stuck = partial and not self.running
        if stuck and not self.in_deadlock:
            self.deadlocks += 1
        self.in_deadlock = stuck

    def reject(self, record: JobRecord) -> None:
        """Rejects a job of an arrival-only replay that does not fit when it arrives.

        Such replays keep no queue, as the FGD paper's replay of the Alibaba lists.
        """
        record.rejected = True
        self.queue.remove(record)

    def drop_partial(self, record: JobRecord) -> None:
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
        self.wake(record.retry_at_s, record)
