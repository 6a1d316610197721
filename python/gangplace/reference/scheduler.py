"""The Scheduler rules of docs/scheduler.md (S1-S16), implemented naively, for the tests.

Every cycle sorts the whole queue and walks it job by job; every form change is found by
looking at every job. Nothing here is grouped, cached or indexed: it is the readable
statement that :class:`gangplace.Scheduler` (which groups jobs into classes) must match
decision for decision.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any

from gangplace._gangplace import Allocation, Cluster, GangRequest
from gangplace.errors import (
    DuplicateJob,
    InvalidRequest,
    LimitExceeded,
    UnknownJob,
    Unschedulable,
)
from gangplace.reference import spares
from gangplace.reference.backfill import ReferenceReservation, fresh_reservation, kept_time
from gangplace.reference.brakes import ReferenceBrakes
from gangplace.reference.classes import ReferenceClasses
from gangplace.reference.failures import ReferenceFailures
from gangplace.reference.grace import ReferenceGrace
from gangplace.reference.history import ReferenceHistories
from gangplace.reference.live import ReferenceLive
from gangplace.reference.quota import ReferenceQuotas, ReferenceTenancy
from gangplace.reference.reasons import ReferenceReasons
from gangplace.reference.twin import empty_twin
from gangplace.reference.values import MAX_NAME_BYTES
from gangplace.reference.walltime import ReferenceWalltimes
from gangplace.scheduler.history import HistorySummary, JobHistory
from gangplace.scheduler.quota import Cohort, Queue
from gangplace.scheduler.values import Decisions, Moved, Shadow, Started

__all__ = ["ReferenceScheduler"]


@dataclass
class _Job:
    job_id: str
    request: GangRequest
    owner: str | None
    walltime: float | None
    timeout: float | None
    ladder: tuple[tuple[float, str | None], ...]
    sequence: int
    created: float = 0.0  # S1: the job's creation time
    wait_began: float = 0.0
    form: tuple[str | None, bool] = (None, False)
    timed_out: bool = False
    allocation: Allocation | None = None
    started_at: float | None = None
    on_failure: str = "requeue"
    queue: str | None = None
    runs_until: float = math.inf  # S15: the predicted end of its run
    overran: bool = False


class ReferenceScheduler(
    ReferenceClasses,
    ReferenceFailures,
    ReferenceBrakes,
    ReferenceTenancy,
    ReferenceWalltimes,
    ReferenceReasons,
    ReferenceLive,
    ReferenceGrace,
):
    """Same constructor, ``submit``, ``cancel``, ``finish``, ``requeue`` and ``cycle``."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        order: str = "fifo",
        backfill: str = "easy",
        preemption: bool = False,
        defrag: bool = False,
        quotas: dict[str, int] | None = None,
        min_runtime: float = 0.0,
        preemption_cooldown: float = 0.0,
        max_victims_per_cycle: int | None = None,
        max_evicted_gpus_per_hour: int | None = None,
        budgets: dict[str, int] | None = None,
        history_limit: int = 100_000,
        reservation_depth: int = 16,
        repair_widen: bool = True,
        queues: list[Queue] | None = None,
        cohorts: tuple[Cohort, ...] = (),
        fair_sharing: bool = False,
        fair_sharing_strategies: tuple[str, ...] = ("less_than_initial_share",),
        overrun: str = "end",
        overrun_grace: float = 0.0,
        evicted_may_preempt: bool = False,
        eviction_grace: float = 0.0,
    ) -> None:
        self.cluster = cluster
        self.eviction_grace = eviction_grace  # S17
        self.ending: list[tuple[float, float, Any, str]] = []
        self.starting: dict[str, tuple[float, tuple[str, ...]]] = {}
        self.evicted_may_preempt = evicted_may_preempt
        self.evicted_now: set[str] = set()  # Q5, S7: evicted in the cycle under way
        self.overrun = overrun
        self.grace = overrun_grace if overrun == "end" else 0.0
        self.last_event = -math.inf  # S16
        self.tenancy = None if queues is None else ReferenceQuotas(list(queues), list(cohorts))
        self.fair_sharing = fair_sharing
        self.fair_strategies = tuple(fair_sharing_strategies)
        self.failed_reclaims: set[str] = set()
        self.started_now: set[str] = set()
        self.repair_widen = repair_widen
        self.reservation_depth = reservation_depth
        self.kept: dict[str, tuple[GangRequest, Shadow]] = {}  # S5: job -> its reservation
        self.fresh: set[str] = set()  # S10: queued since the last walk
        self.outcomes: dict[tuple[object, ...], tuple[float, str]] = {}  # S10: per class
        self.head_class: tuple[object, ...] | None = None
        self.histories = ReferenceHistories(history_limit)
        self.min_runtime = min_runtime
        self.cooldown = preemption_cooldown
        self.preempted_at: dict[str, float] = {}  # job id -> its last preemption
        self.max_victims_per_cycle = max_victims_per_cycle
        self.max_evicted_gpus_per_hour = max_evicted_gpus_per_hour
        self.budgets = dict(budgets or {})
        self.evictions: list[tuple[float, str | None, int]] = []  # (when, owner, GPUs)
        self.victims_this_cycle = 0
        self.order = order
        self.backfill = backfill
        self.preemption = preemption
        self.defrag = defrag
        self.quotas = dict(quotas or {})
        self.pending: list[_Job] = []
        self.running: list[_Job] = []
        self.sequence = 0
        self._copy: tuple[tuple[int, int], Cluster] | None = None
        self.head: str | None = None

    # ---------------------------------------------------------------- S1-S3: the queue

    def submit(
        self,
        job_id: str,
        request: GangRequest,
        *,
        now: float,
        owner: str | None = None,
        walltime: float | None = None,
        timeout: float | None = None,
        ladder: tuple[tuple[float, str | None], ...] = (),
        on_failure: str = "requeue",
        queue: str | None = None,
        created: float | None = None,
    ) -> None:
        """S2: refuse what can never start; otherwise queue it, its wait beginning now."""
        if request.gpus_per_pod == 0:
            raise InvalidRequest("the Scheduler queues gangs with GPUs")
        if request.gpu_milli is not None and (self.quotas or self.tenancy is not None):
            raise InvalidRequest("quotas and queues count whole GPUs, not fractions")
        if (self.tenancy is None) != (queue is None) or (
            self.tenancy is not None and queue not in self.tenancy.queues
        ):
            raise InvalidRequest(f"queue {queue!r}")
        for what, name in (("job_id", job_id), ("owner", owner)):
            if name is not None and not 1 <= len(name.encode("utf-8")) <= MAX_NAME_BYTES:
                raise InvalidRequest(f"{what} must be 1 to {MAX_NAME_BYTES} bytes long")
        ending = [entry[2] for entry in self.ending]
        if any(job.job_id == job_id for job in self.pending + self.running + ending):
            raise DuplicateJob(job_id)
        self._in_order(now, record=False)
        levels = [request.required_level, *(level for _, level in ladder)]
        for level in levels if request.slices else ():  # slice layers must suit every form
            form = GangRequest(
                request.min_pods or request.pods,
                request.gpus_per_pod,
                required_level=level,
                slices=request.slices,
                spread=request.spread,
                numa=request.numa,
                spares=request.spares,
                resources_per_pod=request.resources_per_pod or None,
                gpu_milli=request.gpu_milli,
            )
            self._empty_copy().place_gang(form)
        loosest = GangRequest(
            request.min_pods or request.pods,
            request.gpus_per_pod,
            required_level=self._coarsest(levels),
            selector=request.selector,
            affinity=request.affinity,
            tolerations=request.tolerations,
            slices=request.slices,
            spread=request.spread,
            numa=request.numa,
            spares=request.spares,
            resources_per_pod=request.resources_per_pod or None,
            gpu_milli=request.gpu_milli,
        )
        quota = self.quotas.get(owner) if owner is not None else None
        if self._empty_copy().place_gang(loosest) is None or (
            quota is not None and loosest.total_gpus > quota
        ):
            raise Unschedulable(f"job {job_id!r} can never start")
        if self.tenancy is not None and queue is not None:  # Q4: above what it can reach
            reach = max(0, self.tenancy.available(queue, {}))
            if not request.preemptible:
                reach = min(reach, self.tenancy.queues[queue].nominal["gpu"])
            if loosest.total_gpus > reach:
                raise Unschedulable(f"job {job_id!r} can never start in queue {queue!r}")
        self._in_order(now)
        self.sequence += 1
        job = _Job(job_id, request, owner, walltime, timeout, tuple(ladder), self.sequence)
        job.created = now if created is None else float(created)
        job.on_failure = on_failure
        job.queue = queue
        self.histories.add(job_id, now, "submitted")
        self.fresh.add(job_id)
        self.histories.owners[job_id] = owner
        self._queue(job, now)

    def _queue(self, job: _Job, now: float) -> None:
        job.wait_began = now
        job.timed_out = False
        job.form = self._form(job, now)
        self.pending.append(job)

    def _coarsest(self, levels: list[str | None]) -> str | None:
        order = ["cluster", *self.cluster.levels, "node"]
        names = ["cluster" if level is None else level for level in levels]
        coarsest = min(names, key=order.index)
        return None if coarsest == "cluster" else coarsest

    def _empty_copy(self) -> Cluster:
        key = (len(self.cluster), self.cluster.stats().total)
        if self._copy is None or self._copy[0] != key:
            self._copy = (key, empty_twin(self.cluster))
        return self._copy[1]

    def _form(self, job: _Job, now: float) -> tuple[str | None, bool]:
        """S3: the ladder's level and whether the gang may start smaller."""
        level = job.request.required_level
        for seconds, step in job.ladder:
            if job.wait_began + seconds <= now:
                level = step
        elastic = job.request.min_pods is not None and (
            job.timeout is None or job.wait_began + job.timeout <= now
        )
        return level, elastic

    def cancel(self, job_id: str, now: float) -> bool:
        """Drops a pending job or releases a running one."""
        ending = any(entry[2].job_id == job_id for entry in self.ending)
        if not ending and not any(job.job_id == job_id for job in self.pending):
            self._running(job_id, starting=True)
        self._in_order(now)
        for entry in self.ending:  # S17: evicted, its pods still ending
            if entry[2].job_id == job_id:
                self.ending.remove(entry)
                self.histories.add(job_id, now, "cancelled")
                return False
        for job in self.pending:
            if job.job_id == job_id:
                self.pending.remove(job)
                self.histories.add(job_id, now, "cancelled")
                return False
        self._end(self._running(job_id, starting=True), release=True)
        self.histories.add(job_id, now, "cancelled")
        return True

    def finish(self, job_id: str, now: float) -> None:
        """Releases a running job."""
        job = self._running(job_id)
        self._in_order(now)
        self._end(job, release=True)
        self.histories.add(job_id, now, "finished")

    def requeue(self, job_id: str, now: float) -> None:
        """Releases a running job and queues it again at its old position."""
        job = self._running(job_id)
        self._in_order(now)
        self._end(job, release=True)
        self.histories.add(job_id, now, "requeued", "requeue()")
        self.fresh.add(job_id)
        self._queue(job, now)

    def history(self, job_id: str, now: float) -> JobHistory:
        """S14: the job's history as of ``now``."""
        return self.histories.of(job_id, now)

    def summary(self, now: float) -> HistorySummary:
        """S14: the figures over the finished jobs kept."""
        return self.histories.summary(now)

    def _running(self, job_id: str, starting: bool = False) -> _Job:
        """A running job (S17: one waiting for its victims' pods only if ``starting``)."""
        for job in self.running:
            if job.job_id == job_id and (starting or job_id not in self.starting):
                return job
        raise UnknownJob(job_id, job_id)

    def _end(self, job: _Job, *, release: bool) -> None:
        assert job.allocation is not None
        if release:
            self.cluster.release(job.allocation, owner=job.owner)
        self.running.remove(job)
        self.starting.pop(job.job_id, None)
        job.allocation = job.started_at = None
        job.runs_until, job.overran = math.inf, False

    # ---------------------------------------------------------------- S4-S9: a cycle

    def cycle(self, now: float) -> Decisions:
        """S13 first (running jobs that lost ranks), then S4.

        Due form changes are applied, then the queue is walked until no walk makes room.
        """
        self._in_order(now)
        self.victims_this_cycle = 0
        self.failed_reclaims = set()
        self.started_now = set(self.starting)  # Q6: a cycle never undoes its own starts
        self.evicted_now = set()
        overran, walltime_ended = self._overruns(now)
        repaired, requeued, failed, repair_evicted = self._failures(now)
        due = self._grace_due(now)  # S17
        timed_out, degraded = [], []
        for job in sorted(self.pending, key=self._order):
            form = self._form(job, now)
            passed = bool(job.timeout) and job.wait_began + (job.timeout or 0.0) <= now
            if passed and not job.timed_out:
                job.timed_out = True
                timed_out.append(job.job_id)
            if form[0] != job.form[0]:
                degraded.append((job.job_id, form[0]))
            job.form = form
        started: list[Started] = due
        evicted: list[str] = []
        moved: list[Moved] = []
        while self._walk(now, started, evicted, moved):
            pass
        head = self.head
        return Decisions(
            now,
            tuple(started),
            tuple(repair_evicted + evicted),
            tuple(moved),
            tuple(timed_out),
            tuple(degraded),
            len(self.pending) + len(self.ending) + len(self.starting),
            head,
            tuple(repaired),
            tuple(requeued),
            tuple(failed),
            self.reasons(),
            tuple(overran),
            tuple(walltime_ended),
            tuple(shadow for _, shadow in self.kept.values()),
        )

    def _no_cascade(self, job: _Job) -> bool:
        """Q5, S7: a job evicted in this cycle does not preempt in it (unless allowed)."""
        return not self.evicted_may_preempt and job.job_id in self.evicted_now

    def _order(self, job: _Job) -> tuple[int, float, int]:
        """S1: priority first if ordered by it, then creation time, then submission order."""
        priority = job.request.priority if self.order == "priority" else 0
        return (-priority, job.created, job.sequence)

    def _walk(
        self, now: float, started: list[Started], evicted: list[str], moved: list[Moved]
    ) -> bool:
        """S5-S7: one walk; True when room was made for the head (start over).

        Every job's outcome is recorded for S10's reasons: per class, the failure with the
        smallest bound (the first of equal ones): ``-inf`` for a job that did not fit as it
        is, the latest reservation time it had to stay off for one that did not fit beside
        the reservations, the earliest reservation of its owner for one refused for quota.
        """
        head: _Job | None = None
        self.head = None
        depth = {"easy": 1, "conservative": self.reservation_depth}.get(self.backfill, 0)
        walk: list[ReferenceReservation] = []
        self.outcomes = {}
        self.bounds: dict[tuple[object, ...], float] = {}  # class -> its least failure bound
        self.head_class = None
        self.stopped: set[str] = set()  # Q9
        reclaimers: set[str] = set()  # Q5
        visited: set[str] = set()
        while unvisited := [j for j in self.pending if j.job_id not in visited]:
            job = min(unvisited, key=self._share_key)  # Q8: the smallest share, then order
            visited.add(job.job_id)
            if head is not None and self.backfill == "none":
                break
            if head is not None and len(walk) >= depth and self._past_bound(job, now):
                continue  # S8: an earlier job of its class failed under less: not tried
            outcome = self._outcome(job, now, head, walk)
            if isinstance(outcome, Started):
                started.append(outcome)
                continue
            if job.queue is not None and outcome not in ("quota", "fifo"):
                if self.tenancy and self.tenancy.queues[job.queue].queueing == "fifo":
                    self.stopped.add(job.queue)
                if job.queue not in reclaimers and not self._no_cascade(job):
                    reclaimers.add(job.queue)
                    shaped = bool(job.request.slices or job.request.numa != "none")
                    shaped = shaped or bool(job.request.spares or job.request.resources_per_pod)
                    back = None if shaped else self._reclaim(job, self._request(job, False), now)
                    if back is not None:
                        if back[0] is not None:  # None: after the victims' grace (S17)
                            started.append(back[0])
                        evicted.extend(back[1])
                        return True
            if outcome in ("quota", "queue-quota"):
                self.outcomes[self._class(job)] = (-math.inf, outcome)
                continue
            if outcome == "fifo":
                continue
            if head is None:
                made = None if self._no_cascade(job) else self._make_room(job, now)
                if made is not None:
                    if made[0] is not None:  # None: after the victims' grace (S17)
                        started.append(made[0])
                    evicted.extend(made[1])
                    moved.extend(made[2])
                    return True
                head = job
                self.head = job.job_id
                self.head_class = self._class(job)
                if self.backfill == "none":
                    break
            if len(walk) < depth:
                quota = job.owner is not None and job.owner in self.quotas
                duration = math.inf if job.walltime is None else job.walltime + self.grace
                shadow = self._reserve(job, walk, now, duration)
                walk.append(ReferenceReservation(shadow, job.owner, quota, duration))
        self.kept = {r.shadow.job_id: self.kept[r.shadow.job_id] for r in walk}
        self.fresh.clear()
        return False

    def _outcome(
        self, job: _Job, now: float, head: _Job | None, walk: list[ReferenceReservation]
    ) -> Started | str:
        """S4-S6 for one job: started, ``"quota"`` or ``"nofit"`` (recorded for S10)."""
        cap = self.quotas.get(job.owner) if job.owner is not None else None
        if cap is not None and self._fewest(job) > cap - self._usage(job.owner):
            return "quota"  # the quota first, before any backfill rule
        if job.queue is not None and job.queue in self.stopped:
            self._failed(job, -math.inf, "fifo")
            return "fifo"
        if job.queue is not None and self._queue_room(job) < self._fewest(job):
            return "queue-quota"
        if self._fewest(job) > self.cluster.stats().free:
            return self._failed(job, -math.inf, "nofit")
        end = math.inf if job.walltime is None else now + self.grace + job.walltime
        if head is None or self.backfill == "any":
            outcome = self._try(job, now, head is not None)
            return self._failed(job, -math.inf, "nofit") if outcome == "nofit" else outcome
        if math.isinf(end) and any(r.shadow.placement is None for r in walk):
            return self._failed(job, sys.float_info.max, "untimed")
        mine = [r.shadow.time for r in walk if r.quota and r.owner == job.owner]
        if mine and end > min(mine):
            return self._failed(job, min(mine), "quota-reserved")
        before = [r for r in walk if r.shadow.placement is not None and r.shadow.time < end]
        avoid = [pod for r in before if r.shadow.placement for pod in r.shadow.placement.pods]
        outcome = self._try(job, now, True, avoid)
        if outcome != "nofit":
            return outcome
        bound = max((r.shadow.time for r in before), default=-math.inf)
        return self._failed(job, bound, "nofit" if bound == -math.inf else "beside")

    def _reserve(
        self, job: _Job, walk: list[ReferenceReservation], now: float, duration: float
    ) -> Shadow:
        """S5: the job's reservation: the kept one while valid, else a new one."""
        request = self._request(job)
        kept = self.kept.get(job.job_id)
        shadow: Shadow | None = None
        if kept is not None and kept[0] == request:
            time = kept_time(self.cluster, self.running, kept[1], walk, now)
            if time is not None:
                shadow = Shadow(job.job_id, time, kept[1].placement)
        if shadow is None:
            shadow = fresh_reservation(
                self.cluster, self.running, job.job_id, request, walk, now, duration
            )
        if shadow.placement is not None:  # S15: the jobs past their walltime it waits for
            late = self._overrunning(shadow.placement)
            if late:
                shadow = Shadow(job.job_id, shadow.time, shadow.placement, late)
        self.kept[job.job_id] = (request, shadow)
        return shadow

    def _request(self, job: _Job, queue: bool = True) -> GangRequest:
        request = job.request
        level, elastic = job.form
        pods = request.pods
        quota = self.quotas.get(job.owner) if job.owner is not None else None
        if quota is not None:
            pods = min(pods, (quota - self._usage(job.owner)) // request.gpus_per_pod)
        if queue and job.queue is not None:  # Q4: capped by its queue's room
            pods = min(pods, self._queue_room(job) // request.gpus_per_pod)
        outer = request.slices[0][1] if request.slices else 1
        pods = pods // outer * outer  # slice gangs shrink in whole outermost slices
        return GangRequest(
            pods,
            request.gpus_per_pod,
            min_pods=min(request.min_pods or pods, pods) if elastic else None,
            required_level=level,
            selector=request.selector,
            affinity=request.affinity,
            tolerations=request.tolerations,
            name=request.name or job.job_id,
            priority=request.priority,
            preemptible=request.preemptible,
            movable=request.movable,
            slices=request.slices,
            spread=request.spread,
            numa=request.numa,
            spares=request.spares,
            resources_per_pod=request.resources_per_pod or None,
            gpu_milli=request.gpu_milli,
        )

    def _usage(self, owner: str | None) -> int:
        return sum(
            job.allocation.placement.total_gpus
            for job in self.running
            if job.owner == owner and job.allocation is not None
        )

    def _fewest(self, job: _Job) -> int:
        request = job.request
        if request.gpu_milli is not None:
            return 0  # shares hold no whole GPU: free GPUs bound nothing (docs/resources.md)
        pods = (request.min_pods or request.pods) if job.form[1] else request.pods
        layers = tuple(request.slices)
        return spares.placed_pods(pods, request.spares, layers) * request.gpus_per_pod

    def _try(self, job: _Job, now: float, backfilled: bool, avoid: Any = ()) -> Started | str:
        quota = self.quotas.get(job.owner) if job.owner is not None else None
        if quota is not None and self._fewest(job) > quota - self._usage(job.owner):
            return "quota"
        try:
            reservation = self.cluster.reserve(
                self._request(job), ttl=60.0, owner=job.owner, avoid=avoid
            )
        except Unschedulable:
            return "nofit"
        except LimitExceeded:
            return "quota"
        allocation = self.cluster.commit(reservation, owner=job.owner)
        started = self._start(job, allocation, now, backfilled)
        assert started is not None  # it evicted nobody
        return started

    def _start(
        self, job: _Job, allocation: Allocation, now: float, backfilled: bool, evicted: Any = ()
    ) -> Started | None:
        """The job runs; ``None`` when it waits for its victims' pods first (S17)."""
        self.pending.remove(job)
        self.kept.pop(job.job_id, None)
        job.allocation, job.started_at = allocation, now
        begins = now + self.eviction_grace if evicted and self.eviction_grace > 0 else now
        job.runs_until = math.inf if job.walltime is None else begins + job.walltime + self.grace
        job.overran = False
        self.running.append(job)
        self.started_now.add(job.job_id)
        if begins > now:
            self.starting[job.job_id] = (begins, tuple(evicted))
            return None
        detail = allocation.id + (" (backfilled)" if backfilled else "")
        self.histories.add(job.job_id, now, "started", detail)
        return Started(job.job_id, allocation, now - job.wait_began, backfilled, tuple(evicted))
