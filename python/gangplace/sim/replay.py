"""The event-driven replay: one job stream, one cluster, one policy.

Gang policies run :class:`gangplace.Scheduler` (the same code an embedder uses); pod-by-pod
binds pods itself (:mod:`gangplace.sim.policies`). Events at one instant are handled in this
order: finishes, failures and repairs, pod-by-pod timeouts, arrivals, wake-ups; then one
scheduling pass. Arrival-only traces (no durations) keep no queue: a job that cannot start
when it arrives is rejected, as the FGD paper replays the Alibaba multigpu lists.

A run ends when every admitted job has finished or been rejected, or as a **standoff**: partial
gangs hold GPUs and no job has run (nor started) for ``standoff_s``, no pending timeout or
repair can change that, and every job has arrived (issue 49: a run that deadlocks early
still takes every later arrival, which waits, censored, to the stop; none is left out);
the run stops there and the report says so. Failure, repair and timeout
events keep a run going while jobs are queued; a run that ends with jobs still queued (no
event left that could start them) says so (``queued_at_end``). Every job that arrived and
never started is a censored wait (at least the run's end minus its arrival).

Two rules make every run end (issue 49, item 1):

- a **livelock** (pod-by-pod): the standoff's conditions hold except that pod timeouts are
  still pending: for ``standoff_s`` nothing ran while every timeout released a partial gang
  and the retries built new ones. It is stopped as a standoff of
  kind ``"livelock"``. This is a rule, not a proof: another backoff order might still have
  started a job; ``standoff_s`` (default 24 h) of timeouts and retries without one start is
  taken as enough.
- a **bound**: no run goes past its trace's last arrival plus twice the GPU-seconds of all
  its jobs over the cluster's healthy GPUs, plus its longest job, plus ``standoff_s``
  (``bound_s``), run times taken at the placement model's largest slowdown: the time to run
  every job back to back at half the cluster's use, placed as badly as it can be, and
  more. A run that reaches it stops there (``cut_at_s``); every job not finished then is
  censored, and the report says so.
"""

from __future__ import annotations

import dataclasses
import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gangplace._gangplace import Allocation, Cluster
from gangplace.sim.clusters import ClusterSpec
from gangplace.sim.settings import SimSettings
from gangplace.sim.speed import model_for, reference_span, span_of
from gangplace.sim.traces import Job

__all__ = ["JobRecord", "Replay", "RunResult", "SimClock", "Standoff"]

FINISH, FAILURE, REPAIR, TIMEOUT, ARRIVAL, WAKE = range(6)


class SimClock:
    """The simulated time, read by the cluster and the scheduler."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        """The simulated time, in seconds."""
        return self.now


@dataclass
class JobRecord:
    """What happened to one job."""

    job: Job
    arrived: bool = False
    start_s: float | None = None
    end_s: float | None = None
    nodes: tuple[str, ...] = ()
    rejected: str | None = None  # why, when it was refused or had no room on arrival
    first_start_s: float | None = None
    promised_s: float | None = None  # its first finite backfill reservation's time (S5)
    restarts: int = 0
    waited_s: float = 0.0  # every queued period that ended in a start, summed
    queued_since_s: float | None = None  # when it last entered the queue (None: not queued)
    lost_gpu_s: float = 0.0
    done_s: float = 0.0  # work saved by checkpoints before a stop (seconds at full speed)
    speed: float = 1.0  # run-time factor of its current placement (gangplace.sim.speed)
    spread_gpu_s: float = 0.0  # GPU-seconds its placements cost beyond its reference span
    spreading: float = 0.0  # of its busy GPUs, those lost to spreading while it runs now
    numa_split: bool = False  # a pod of its current placement spans two NUMA halves
    generation: int = 0  # bumps when a start is undone (stale finish events are ignored)
    spare_gpus: int = 0  # GPUs its allocation holds as spares now (docs/repair.md "Spares")
    busy_milli: int = 0  # thousandths of GPUs it uses while it runs (a fraction: docs/resources.md
    # "Fractions of a GPU"; else its GPUs x 1000)
    spare_since_s: float = 0.0
    # Every run: [start, end (None while it runs), nodes, placement factor] (``--jobs-out``)
    periods: list[list[Any]] = field(default_factory=list)
    # pod-by-pod
    bound: list[Allocation] = field(default_factory=list)
    first_bound_s: float | None = None
    retry_at_s: float = 0.0


@dataclass(frozen=True)
class Standoff:
    """Where a run was stopped: partial gangs held GPUs while nothing started.

    ``kind``: ``"standoff"`` (nothing could change it) or ``"livelock"`` (pod timeouts and
    retries went on for the standoff window without a start; see the module's text).
    """

    at_s: float
    since_s: float
    held_gpus: int
    held_gpu_hours: float
    kind: str = "standoff"


@dataclass
class RunResult:
    """A finished replay: the job records, the time series and the counters."""

    policy: str
    records: list[JobRecord]
    end_s: float
    # (time, busy GPUs, idle-held GPUs, queued, busy GPUs lost to spreading)
    samples: list[tuple[float, float, int, int, float]]
    deadlock_s: float
    placements: int
    engine_seconds: float
    healthy_gpus: int
    standoff: Standoff | None = None
    preemptions: int = 0
    moves: int = 0
    failures: int = 0
    load_curve: list[tuple[float, float]] = field(default_factory=list)
    numa_split_pods: int = 0
    repairs: int = 0  # failures repaired in place (``+repair``, ``+spares`` policies)
    ranks_from_spares: int = 0  # lost ranks those repairs gave to spares
    spare_gpu_s: float = 0.0  # GPU-seconds held as spares (idle, never free)
    queued_at_end: int = 0  # admitted jobs still queued when the run ended (not a standoff)
    preempting_starts: int = 0  # starts that evicted jobs (docs/queues.md Q5, S7)
    cascades: int = 0  # of those, by a job itself evicted in the same cycle
    restarted_at_once: int = 0  # victims started again in the cycle that evicted them
    queues: Any = None  # gangplace.sim.queues.QueueFigures with --queues
    cut_at_s: float | None = None  # the bound where the run was stopped (module's text)


class Replay:
    """Replays ``jobs`` on a fresh cluster of ``spec`` under ``policy``.

    ``policy`` is a name of :data:`gangplace.sim.policies.ALL_POLICIES` or a policy object.
    """

    def __init__(
        self,
        jobs: list[Job],
        spec: ClusterSpec,
        policy: Any,
        settings: SimSettings | None = None,
        *,
        workload_seed: int = 0,
        stop_after_gpus: float | None = None,
    ) -> None:
        self.settings = settings or SimSettings()
        if isinstance(policy, str):
            from gangplace.sim.policies import policy_for  # policies import this module

            policy = policy_for(policy, self.settings)
        self.policy = policy
        if self.settings.numa_split:
            spec = dataclasses.replace(spec, numa_split=True)
        self.spec = spec
        self.clock = SimClock()
        self.cluster: Cluster = policy.build(spec, self.clock, self.settings)
        # Preemption and defragmentation break their last ties by hold id: seeded ids make
        # every run of the same inputs identical.
        self.cluster.seed_ids(self.settings.policy_seed)
        self.records = [JobRecord(job) for job in jobs]
        self.by_id = {record.job.id: record for record in self.records}
        self.stop_after_gpus = stop_after_gpus
        self.events: list[tuple[float, int, int, Any]] = []
        self.sequence = 0
        self.busy_milli = 0  # thousandths of GPUs the running jobs use
        self.held_partial = 0
        self.last_start_s = 0.0
        self.held_since_start = 0.0
        self.deadlock_s = 0.0
        self.in_deadlock = False
        self.placements = 0
        self.numa_split_pods = 0  # started pods whose GPUs span two NUMA groups
        self.engine_seconds = 0.0
        self.preemptions = self.moves = self.failures = 0
        self.preempting_starts = self.cascades = self.restarted_at_once = 0
        self.repairs = self.ranks_from_spares = 0
        self.spare_gpu_s = 0.0
        self.samples: list[tuple[float, float, int, int, float]] = []
        self.spreading = 0.0  # of the busy GPUs, those lost to spreading (gangplace.sim.speed)
        self.load_curve: list[tuple[float, float]] = []
        self.arrived_gpus = 0.0
        self.rng = random.Random(self.settings.policy_seed)
        self.failure_rng = random.Random(workload_seed * 7919 + 1)
        self.arrival_only = any(job.duration_s is None for job in jobs)
        self.job_events = 0  # events other than failures and repairs still queued
        self.pending = [0] * 6  # events still queued, by kind
        self.arrival_times: list[float] = []  # of the arrivals pushed, sorted
        self.arrivals_handled = 0
        # Since when partial gangs hold GPUs with nothing running (None: something runs)
        self.quiet_since: float | None = None
        self.paths = dict(zip(spec.names, spec.paths, strict=True))
        self.largest_node = max(spec.gpus, default=0)
        self.speed_model = model_for(self.settings.placement_model, (j.job_type for j in jobs))
        self.bound_s = _bound(jobs, spec.healthy_gpus, self.settings.standoff_s, self.speed_model)

    # ------------------------------------------------------------------ the loop

    def push(self, at: float, kind: int, payload: Any) -> None:
        """Schedules an event."""
        self.sequence += 1
        if kind not in (FAILURE, REPAIR):
            self.job_events += 1
        self.pending[kind] += 1
        heapq.heappush(self.events, (at, kind, self.sequence, payload))

    def run(self, progress: Callable[[int], object] | None = None) -> RunResult:
        """Runs to the end or to a standoff; ``progress`` gets the events handled."""
        arrived = 0.0
        for record in self.records:
            if self.stop_after_gpus is not None and arrived >= self.stop_after_gpus:
                break
            arrived += record.job.gpu_share
            self.push(record.job.arrival_s, ARRIVAL, record)
            self.arrival_times.append(record.job.arrival_s)
        self.arrival_times.sort()
        if self.settings.failures_per_gpu_hour and self.records:
            self._next_failure(self.records[0].job.arrival_s)
        last = self.events[0][0] if self.events else 0.0
        standoff, cut = None, None
        while self.job_events or (self.pending[REPAIR] and self.policy.queued(self)):
            now = self.events[0][0]
            if now > self.bound_s:
                cut = self.bound_s  # no run goes on forever (the module's text)
                self._advance(last, cut)
                last = cut
                break
            self._advance(last, now)
            last = now
            handled = 0
            while self.events and self.events[0][0] == now:
                _, kind, _, payload = heapq.heappop(self.events)
                if kind not in (FAILURE, REPAIR):
                    self.job_events -= 1
                self.pending[kind] -= 1
                if kind == ARRIVAL:
                    self.arrivals_handled += 1
                self._handle(kind, payload, now)
                handled += 1
            self.policy.schedule(self, now)
            self._note_deadlock()
            if self.in_deadlock and self.quiet_since is None:
                # Wake up when the standoff window would close, even if nothing else happens.
                self.quiet_since = now
                self.push(now + self.settings.standoff_s, WAKE, None)
            elif not self.in_deadlock:
                self.quiet_since = None
            queued = self.policy.queued(self)
            self.samples.append((now, self.busy, self.held_partial, queued, self.spreading))
            if self.arrival_only and self.spec.healthy_gpus:
                healthy = self.spec.healthy_gpus
                self.load_curve.append((self.arrived_gpus / healthy, self.busy / healthy))
            standoff = self._standoff(now)
            if standoff is not None:
                break
            if progress is not None:
                progress(handled)
        queued = self.policy.queued(self)
        if standoff is None and cut is None and self.held_partial and queued:
            standoff = Standoff(
                last, self.last_start_s, self.held_partial, self.held_since_start / 3600.0
            )
        return RunResult(
            self.policy.name,
            self.records,
            last,
            self.samples,
            self.deadlock_s,
            self.placements,
            self.engine_seconds,
            self.spec.healthy_gpus,
            standoff,
            self.preemptions,
            self.moves,
            self.failures,
            self.load_curve,
            self.numa_split_pods,
            self.repairs,
            self.ranks_from_spares,
            self.spare_gpu_s,
            0 if standoff is not None else queued,
            preempting_starts=self.preempting_starts,
            cascades=self.cascades,
            restarted_at_once=self.restarted_at_once,
            queues=getattr(self.policy, "queue_figures", None),
            cut_at_s=cut,
        )

    def _advance(self, last: float, now: float) -> None:
        span = now - last
        if self.in_deadlock:
            self.deadlock_s += span
        self.held_since_start += self.held_partial * span
        self.clock.now = now

    @property
    def busy(self) -> float:
        """GPUs the running jobs use (a fractional pod counts its share of one GPU)."""
        return self.busy_milli / 1000

    def _handle(self, kind: int, payload: Any, now: float) -> None:
        if kind == FINISH:
            record, generation = payload
            if generation == record.generation and record.start_s is not None:
                self.policy.finished(self, record)
                self.busy_milli -= record.busy_milli
                self._spreading(record, 0.0)
                self._ran(record, now - record.start_s, now - record.start_s)
                record.end_s = now
                if record.periods and record.periods[-1][1] is None:
                    record.periods[-1][1] = now
                self.hold_spares(record, 0, now)
        elif kind == FAILURE:
            self._fail(payload, now)
        elif kind == REPAIR:
            node, gpu = payload
            self.cluster.set_gpu_health(node, gpu, True)
        elif kind == TIMEOUT:
            self.policy.timeout(self, payload, now)
        elif kind == ARRIVAL:
            payload.arrived = True
            payload.queued_since_s = now
            self.arrived_gpus += payload.job.gpu_share
            self.policy.arrived(self, payload, now)
        # WAKE: only the pass below.

    # ------------------------------------------------------------------ for the policies

    def count_numa_splits(self, pods: Any, record: JobRecord) -> None:
        """NUMA-split scenario: counts started pods whose GPUs span two NUMA groups.

        ``record`` (the job starting) remembers whether it has such a pod: the placement
        model slows it down (:mod:`gangplace.sim.speed`).
        """
        if self.spec.numa_split:
            grouped = {gpus for gpus in self.spec.gpus if gpus >= 2 and gpus % 2 == 0}
            by_name = dict(zip(self.spec.names, self.spec.gpus, strict=True))
            split = sum(
                1 for pod in pods if pod.affinity == "node" and by_name.get(pod.node) in grouped
            )
            self.numa_split_pods += split
            record.numa_split = split > 0

    def started(self, record: JobRecord, nodes: tuple[str, ...], now: float) -> None:
        """A job runs from ``now`` on ``nodes``."""
        record.start_s = now
        record.end_s = None
        if record.first_start_s is None:
            record.first_start_s = now
        if record.queued_since_s is not None:
            record.waited_s += now - record.queued_since_s
            record.queued_since_s = None
        record.nodes = tuple(sorted(self.policy.alias.get(n, n) for n in nodes))
        milli = self.policy.gpu_milli(record.job) if hasattr(self.policy, "gpu_milli") else None
        record.busy_milli = record.job.gpus * 1000 if milli is None else milli
        self.busy_milli += record.busy_milli
        self.last_start_s = now
        self.held_since_start = 0.0
        self._schedule_finish(record, now)
        record.periods.append([now, None, record.nodes, record.speed])

    def _schedule_finish(self, record: JobRecord, now: float) -> None:
        """Sets the job's speed from its placement and schedules the end of its work."""
        record.speed = self._speed(record)
        # A job running 1/speed as fast uses its GPUs that much for its work: the rest of
        # its busy GPUs is lost to spreading while it runs (issue 49, item 3).
        self._spreading(record, record.busy_milli / 1000 * (1.0 - 1.0 / record.speed))
        duration = record.job.duration_s
        if duration is not None:
            left = (duration - record.done_s) * record.speed
            self.push(now + left, FINISH, (record, record.generation))

    def _spreading(self, record: JobRecord, gpus: float) -> None:
        """The job's busy GPUs lost to spreading are ``gpus`` from now."""
        self.spreading += gpus - record.spreading
        record.spreading = gpus

    def _speed(self, record: JobRecord) -> float:
        """The placement model's run-time factor for the job's nodes (1 without a model)."""
        model = self.speed_model
        if model is None or not record.nodes:
            return 1.0
        span = span_of(record.nodes, self.paths)
        reference = reference_span(record.job.gpus, self.largest_node)
        return model.factor(record.job.job_type, span, reference, numa_split=record.numa_split)

    def _ran(self, record: JobRecord, ran_s: float, kept_s: float) -> None:
        """Books ``kept_s`` of the ``ran_s`` it ran as work, and the spreading cost of it."""
        record.done_s += kept_s / record.speed
        record.spread_gpu_s += kept_s * (1.0 - 1.0 / record.speed) * record.job.gpus
        record.lost_gpu_s += (ran_s - kept_s) * record.job.gpus

    def _interrupt(self, record: JobRecord, now: float) -> None:
        """Keeps a running job's work up to its last checkpoint; counts the rest as lost.

        Checkpoints come every ``checkpoint_s`` of run time (none: everything is lost).
        Finish events scheduled before are made stale.
        """
        assert record.start_s is not None
        ran = now - record.start_s
        every = self.settings.checkpoint_s
        saved = (ran // every) * every if every else 0.0
        self._ran(record, ran, saved)
        record.generation += 1
        if record.periods and record.periods[-1][1] is None:
            record.periods[-1][1] = now  # the run ends here (a stop, or a move's restart)

    def stopped(self, record: JobRecord, now: float) -> None:
        """A running job was ended early (preempted, or a GPU failed); it waits again."""
        self._interrupt(record, now)
        self.hold_spares(record, 0, now)
        record.restarts += 1
        record.start_s = None
        record.queued_since_s = now
        record.nodes = ()
        self.busy_milli -= record.busy_milli
        self._spreading(record, 0.0)

    def moved(self, record: JobRecord, nodes: tuple[str, ...], now: float) -> None:
        """Defragmentation moved a running job: it restarts on ``nodes`` from its checkpoint."""
        self._interrupt(record, now)
        record.start_s = now
        record.nodes = tuple(sorted(self.policy.alias.get(n, n) for n in nodes))
        self._schedule_finish(record, now)
        record.periods.append([now, None, record.nodes, record.speed])

    def repaired(
        self, record: JobRecord, nodes: tuple[str, ...], from_spares: int, now: float
    ) -> None:
        """A failure under a running job was repaired in place.

        The job resumes on ``nodes`` from its last checkpoint (restart time not modelled),
        without waiting in the queue.
        """
        self.moved(record, nodes, now)
        self.repairs += 1
        self.ranks_from_spares += from_spares

    def hold_spares(self, record: JobRecord, gpus: int, now: float) -> None:
        """The job's allocation holds ``gpus`` spare GPUs from ``now`` (counted as held, idle)."""
        self.spare_gpu_s += record.spare_gpus * (now - record.spare_since_s)
        record.spare_gpus, record.spare_since_s = gpus, now

    def reject(self, record: JobRecord, why: str) -> None:
        """The job will never run here (refused, or no room on arrival in arrival-only mode)."""
        record.rejected = why

    def _note_deadlock(self) -> None:
        self.in_deadlock = bool(self.held_partial) and self.busy_milli == 0

    def _standoff(self, now: float) -> Standoff | None:
        """A standoff at ``now``, or ``None`` while something could still move.

        See the module's docstring for the rule.
        """
        window = self.settings.standoff_s
        quiet = self.quiet_since
        if self.held_since_start <= 0 or quiet is None or now - quiet < window:
            return None  # something ran or started within the window
        if self.busy_milli > 0 or self.pending[REPAIR]:
            return None  # a running job's end or a repair may let one start
        if self.arrivals_handled < len(self.arrival_times):
            return None  # every job arrives before a run stops (issue 49: none left out)
        # Pod timeouts pending: timeouts and retries went on for the window without a start
        kind = "livelock" if self.pending[TIMEOUT] else "standoff"
        held_h = self.held_since_start / 3600.0
        return Standoff(now, self.last_start_s, self.held_partial, held_h, kind)

    # ------------------------------------------------------------------ failures

    def _next_failure(self, after: float) -> None:
        rate = self.settings.failures_per_gpu_hour * self.spec.total_gpus / 3600.0
        at = after + self.failure_rng.expovariate(rate)
        index = self.failure_rng.randrange(len(self.spec.names))
        gpu = self.failure_rng.randrange(self.spec.gpus[index])
        self.push(at, FAILURE, (self.spec.names[index], gpu))

    def _fail(self, payload: tuple[str, int], now: float) -> None:
        node, gpu = payload
        name = self.policy.node_name(node)
        if gpu not in self.cluster.node(name).unhealthy:
            self.failures += 1
            holders = self.cluster.set_gpu_health(name, gpu, False)
            self.policy.lost(self, holders, now)
            self.push(now + self.settings.repair_s, REPAIR, (name, gpu))
        if self.job_events:
            self._next_failure(now)


def _bound(jobs: list[Job], healthy_gpus: int, standoff_s: float, model: Any = None) -> float:
    """The time no run goes past (the module's text); ``inf`` for an arrival-only trace.

    Run times are the trace's times the placement model's largest slowdown (a job placed as
    widely as it can be), so that a policy that spreads jobs is not cut for it.
    """
    if not jobs or any(job.duration_s is None for job in jobs):
        return float("inf")  # no queue: every job starts on arrival or is rejected
    slowest = 1.0
    if model is not None:
        slowest = max(max(e.times) / min(e.times) * e.numa for e in model.entries.values())
    work = sum(job.gpu_share * (job.duration_s or 0.0) for job in jobs) * slowest
    longest = max(job.duration_s or 0.0 for job in jobs) * slowest
    last = max(job.arrival_s for job in jobs)
    return last + 2.0 * work / max(healthy_gpus, 1) + longest + standoff_s
