"""The Scheduler: a gang queue and its cycle around a :class:`~gangplace.Cluster`.

The contract is docs/scheduler.md (rules S1-S16) and, for queues, docs/queues.md (Q1-Q10);
this module builds the scheduler's parts (:mod:`gangplace.scheduler.parts`) and answers its
calls, and :mod:`gangplace.reference.scheduler` implements the rules again, naively, for the
tests.
"""

from __future__ import annotations

import dataclasses
import math
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from gangplace._gangplace import Cluster, GangRequest
from gangplace.errors import DuplicateJob, InvalidRequest, UnknownJob, Unschedulable
from gangplace.scheduler.admission import EmptyTwin, every_form, relaxed
from gangplace.scheduler.arguments import (
    checked_choice,
    checked_ladder,
    checked_name,
    checked_quotas,
    checked_seconds,
)
from gangplace.scheduler.brakes import Brakes
from gangplace.scheduler.cycle import run_cycle
from gangplace.scheduler.failures import ON_FAILURE, handle_failures
from gangplace.scheduler.history import Histories
from gangplace.scheduler.live import LiveQueues
from gangplace.scheduler.metrics import SchedulerMetrics
from gangplace.scheduler.owners import OwnerQuotas
from gangplace.scheduler.parts import Parts, Settings
from gangplace.scheduler.queue import QueuedJob
from gangplace.scheduler.quota import Cohort, Queue
from gangplace.scheduler.reasons import LastWalk
from gangplace.scheduler.requests import copied
from gangplace.scheduler.reservations import ShadowBook
from gangplace.scheduler.running import RunningJobs
from gangplace.scheduler.tenancy import Tenancy
from gangplace.scheduler.values import Decisions, PendingReasons, Started
from gangplace.scheduler.views import SchedulerViews
from gangplace.scheduler.waiting import Waiting

__all__ = ["Scheduler"]

ORDERS = ("fifo", "priority")
BACKFILLS = ("easy", "conservative", "none", "any")
OVERRUNS = ("end", "report", "extend")


class Scheduler(SchedulerViews, LiveQueues):
    """A gang queue with backfill, priorities, timeouts and metrics around one cluster.

    The scheduler owns the holds it makes: a started job's GPUs are reserved and committed
    at once (the caller binds its pods), and released by :meth:`finish` or :meth:`cancel`.
    The simulator (``gangplace simulate``) drives this same class. The rules are
    docs/scheduler.md (S1-S16).

    Args:
        cluster: The cluster to place on.
        order: ``"fifo"`` (submission order) or ``"priority"`` (higher
            ``GangRequest.priority`` first, then submission order).
        backfill: ``"easy"`` (default, EASY backfill): the blocked head gets a reservation
            (its shadow placement, where and when it starts as the walltimes predict),
            and a later job starts now only if it ends by then or fits without the
            reservation's GPUs. ``"conservative"``: the first ``reservation_depth`` jobs
            that do not fit each get one, and a later job may delay none of them.
            ``"none"``: nothing passes a blocked head. ``"any"``: anything that fits starts.
        reservation_depth: How many blocked jobs get a reservation with
            ``backfill="conservative"`` (Slurm's ``bf_max_job_test`` plays this part).
        repair_widen: Whether a repair (``on_failure="repair"``, S13) may go beyond the
            placement's domain, up to the request's ``required_level``.
        preemption: Let the blocked head evict lower-priority preemptible allocations
            (``Cluster.plan_preemption``); evicted jobs go back to the queue.
        defrag: Let the blocked head move movable jobs (``Cluster.plan_defrag``).
        clock: Zero-argument callable returning seconds (default ``time.monotonic``);
            ``now=`` of ``submit``, ``cancel``, ``finish``, ``requeue`` and ``cycle``
            overrides it. Events must come in time order (rule S16).
        overrun: What a running job past its walltime gets (rule S15): ``"end"`` (default,
            as Slurm does): ended once ``overrun_grace`` more seconds have passed, reported
            in ``Decisions.walltime_ended`` and as ``timed_out`` in its history;
            ``"report"``: left running, reported once in ``Decisions.overran``;
            ``"extend"``: left running, its predicted end moved on by its walltime,
            reported each time.
        overrun_grace: Seconds a job may run past its walltime before ``"end"`` ends it
            (Slurm's ``OverTimeLimit``); the backfill counts them in its predictions.
        evicted_may_preempt: Whether a job evicted in a cycle may preempt (S7) or reclaim
            (docs/queues.md Q5) in that same cycle. ``False`` (default): no cascades; it may
            still start on free GPUs.
        eviction_grace: Seconds a preempted job's pods take to end (docs/scheduler.md
            S17). ``0`` (default): its GPUs are free at once. Else it queues again only
            then, and the job that preempted holds its GPUs and quota from the eviction
            but is reported started only then.
        metrics: A ``prometheus_client`` registry to publish metrics in (extra
            ``gangplace[metrics]``); ``None``: no metrics.
        quotas: Owner -> the most GPUs that owner's running jobs may hold at once. Owners
            not listed have no quota.
        min_runtime: Seconds a job must have run before preemption or defragmentation
            may take it (S11).
        preemption_cooldown: Seconds after a job's preemption during which it is no victim.
        max_victims_per_cycle: The most jobs one cycle may evict (``None``: no limit).
        max_evicted_gpus_per_hour: The most GPUs evicted over any hour (sliding window).
        budgets: Owner -> the most of its GPUs evicted over any hour (a disruption budget).
        history_limit: Ended jobs whose histories are kept (the oldest ended are forgotten
            first; rule S14).
        queues: The teams' :class:`~gangplace.Queue` values (docs/queues.md):
            with them, every job names its queue at ``submit``, starts only within what its
            queue may take, and may preempt as its queue's policies allow. ``None``: no
            queues.
        cohorts: The :class:`~gangplace.Cohort` values the queues lend through.
        fair_sharing_strategies: With fair sharing, when a job that must borrow may take a
            victim of another queue (Kueue's ``preemptionStrategies``, Q7): any of
            ``"less_than_initial_share"`` (default: the victim's queue's share before the
            victim leaves is above the job's queue's share once the job runs) and
            ``"less_than_or_equal_to_final_share"`` (its share once the victim left is at
            least that); a victim passes if one of them allows it.
        fair_sharing: Walk the queue in order of each job's queue's weighted share (Q8)
            and let a job that must borrow preempt queues above its share.

    Raises:
        InvalidRequest: Unknown ``order`` or ``backfill``, a negative quota, limit or
            budget, or a ``min_runtime`` or ``eviction_grace`` that is not finite and
            >= 0; bad queues or
            cohorts (docs/queues.md, Q1: names, parents, cycles, quantities), or ``preemption=True``
            with queues (their policies say who preempts whom).
        TypeError: ``cluster`` is not a ``Cluster``.

    Example:
        >>> from gangplace import Cluster, GangRequest, Scheduler
        >>> cluster = Cluster(("rack",))
        >>> cluster.add_node("a", gpus=8, topology={"rack": "r1"})
        >>> scheduler = Scheduler(cluster, clock=lambda: 0.0)
        >>> scheduler.submit("train", GangRequest(1, 8), walltime=3600)
        >>> [s.job_id for s in scheduler.cycle().started]
        ['train']

    """

    def __init__(
        self,
        cluster: Cluster,
        *,
        order: Literal["fifo", "priority"] = "fifo",
        backfill: Literal["easy", "conservative", "none", "any"] = "easy",
        preemption: bool = False,
        defrag: bool = False,
        clock: Callable[[], float] | None = None,
        metrics: Any = None,
        quotas: Mapping[str, int] | None = None,
        min_runtime: float = 0.0,
        preemption_cooldown: float = 0.0,
        max_victims_per_cycle: int | None = None,
        max_evicted_gpus_per_hour: int | None = None,
        budgets: Mapping[str, int] | None = None,
        history_limit: int = 100_000,
        reservation_depth: int = 16,
        repair_widen: bool = True,
        queues: Iterable[Queue] | None = None,
        cohorts: Iterable[Cohort] = (),
        fair_sharing: bool = False,
        fair_sharing_strategies: Iterable[str] = ("less_than_initial_share",),
        overrun: Literal["end", "report", "extend"] = "end",
        overrun_grace: float = 0.0,
        evicted_may_preempt: bool = False,
        eviction_grace: float = 0.0,
    ) -> None:
        if not isinstance(cluster, Cluster):
            raise TypeError(f"cluster must be a gangplace.Cluster, not {type(cluster).__name__}")
        if order not in ORDERS:
            raise InvalidRequest(f"order must be one of {', '.join(ORDERS)}; got {order!r}")
        if backfill not in BACKFILLS:
            raise InvalidRequest(
                f"backfill must be one of {', '.join(BACKFILLS)}; got {backfill!r}"
            )
        self.quotas = checked_quotas(quotas)
        self._tenancy: Tenancy | None = None
        if queues is not None:
            self._tenancy = Tenancy(queues, cohorts, fair_sharing, fair_sharing_strategies)
            if preemption:
                raise InvalidRequest(
                    "preemption=True with queues: the queues' policies say who preempts whom"
                )
        elif cohorts or fair_sharing:
            raise InvalidRequest("cohorts and fair_sharing need queues")
        if isinstance(reservation_depth, bool) or not isinstance(reservation_depth, int):
            raise TypeError("reservation_depth must be an int")
        if reservation_depth < 1:
            raise InvalidRequest(f"reservation_depth must be >= 1, got {reservation_depth}")
        self.reservation_depth = reservation_depth
        self.repair_widen = bool(repair_widen)
        histories = Histories(Histories.checked_limit(history_limit))
        brakes = Brakes.checked(
            min_runtime,
            preemption_cooldown,
            max_victims_per_cycle,
            max_evicted_gpus_per_hour,
            budgets,
        )
        self.cluster = cluster
        self.order = order
        self.backfill = backfill
        self.preemption = bool(preemption)
        self.defrag = bool(defrag)
        self.clock = clock or time.monotonic
        self.metrics = SchedulerMetrics(metrics) if metrics is not None else None
        if self.metrics is not None:
            brakes.refused = self.metrics.brake_refused
        self._waiting = waiting = Waiting(order)
        self._queue = waiting.queue
        owners = OwnerQuotas(self.quotas, self._tenancy)
        book = ShadowBook()
        self._running = RunningJobs(
            cluster, waiting, owners, self._tenancy, book, histories, self.metrics
        )
        self._running.overrun = checked_choice("overrun", overrun, OVERRUNS)
        grace = checked_seconds("overrun_grace", overrun_grace, positive=False)
        if grace and overrun != "end":
            raise InvalidRequest('overrun_grace is the grace of overrun="end"')
        self._running.grace = grace or 0.0
        self.evicted_may_preempt = bool(evicted_may_preempt)
        seconds = checked_seconds("eviction_grace", eviction_grace, positive=False)
        self._running.eviction_grace.seconds = seconds or 0.0
        self._grace = self._running.eviction_grace
        settings = Settings(
            backfill,
            reservation_depth,
            self.preemption,
            self.defrag,
            self.repair_widen,
            self.evicted_may_preempt,
        )
        self._settings_key: tuple[Any, ...] = dataclasses.astuple(settings)  # cycle compares
        self._parts = Parts(
            cluster,
            settings,
            waiting,
            self._running,
            owners,
            self._tenancy,
            brakes,
            book,
            histories,
            self.metrics,
        )
        self._owners = owners
        self._histories = histories
        self._twin = EmptyTwin()
        self._last_cycle = -math.inf
        self._last_event = -math.inf  # S16: the latest time any call was given
        self._last_walk: LastWalk | None = None
        self._reasons: weakref.ref[PendingReasons] | None = None

    # ------------------------------------------------------------------ queue

    def submit(
        self,
        job_id: str,
        request: GangRequest,
        *,
        owner: str | None = None,
        walltime: float | None = None,
        timeout: float | None = None,
        ladder: Iterable[tuple[float, str | None]] | None = None,
        on_failure: str = "requeue",
        queue: str | None = None,
        now: float | None = None,
        created: float | None = None,
    ) -> None:
        """Queues a job (docs/scheduler.md, rules S1-S3).

        Args:
            job_id: Unique among pending and running jobs.
            request: The gang; its ``priority`` orders the queue under ``order="priority"``.
            owner: Who runs it: the cluster owner of its holds, and the key of ``quotas``.
            walltime: Its run-time limit in seconds: the backfill's predictions need it.
            timeout: Seconds of waiting after which an elastic gang (``min_pods``) may start
                smaller; before it, only whole. ``None``: elastic at once.
            ladder: ``(seconds waited, required_level or None)`` steps, increasing: the
                level the gang may span from that wait on (a soft constraint that degrades).
            on_failure: What a cycle does when the running job loses ranks (rule S13):
                ``"requeue"`` (release it and queue it again at its position), ``"repair"``
                (replace the lost ranks in place if a repair fits, else requeue) or
                ``"fail"`` (release it; it ends).
            queue: Its queue, required when the scheduler has queues (docs/queues.md); its
                GPUs count against that queue's quota.
            now: When it is submitted; default ``clock()`` (rule S16).
            created: When the job was created, for its queue position (S1: submission order
                is creation order; Kueue's creation timestamp, for a queue carried across a
                restart or replayed from another system): any finite time, also before
                ``now``; default ``now``. Ties keep submission order.

        Raises:
            Unschedulable: It cannot fit even the empty, all-healthy cluster (or its
                owner's quota); it is not queued. ``.reason`` says why.
            DuplicateJob: ``job_id`` is pending or running.
            InvalidRequest: A ``job_id`` or ``owner`` that is empty or over 253 bytes of
                UTF-8 (the engine's limit for names), a bad walltime, timeout, ladder or
                ``on_failure``, an unknown level, a missing, unknown or unexpected
                ``queue``, pods without GPUs (``gpus_per_pod=0``), fractions of a GPU
                (``gpu_milli``) on a Scheduler with quotas or queues, or a ``now`` before an
                earlier call's (S16). Nothing is queued.
            TypeError: Wrong argument types.

        """
        checked_name("job_id", job_id)
        if not isinstance(request, GangRequest):
            raise TypeError(f"request must be a GangRequest, not {type(request).__name__}")
        if request.gpus_per_pod == 0:
            raise InvalidRequest(
                "the Scheduler queues gangs with GPUs; place pods without GPUs with "
                "Cluster.reserve (docs/resources.md)"
            )
        if request.gpu_milli is not None and (self.quotas or self._tenancy is not None):
            raise InvalidRequest(
                "quotas and queues count whole GPUs: a Scheduler with them does not queue "
                'fractions of a GPU (docs/resources.md, "Fractions of a GPU")'
            )
        if owner is not None:
            checked_name("owner", owner)
        if job_id in self._queue.by_id or job_id in self._running.jobs or self._ending(job_id):
            raise DuplicateJob(f"job {job_id!r} is already pending or running")
        walltime = checked_seconds("walltime", walltime, positive=True)
        timeout = checked_seconds("timeout", timeout, positive=False)
        steps = checked_ladder(ladder, self.cluster.levels)
        on_failure = checked_choice("on_failure", on_failure, ON_FAILURE)
        if self._tenancy is not None:
            queue = self._tenancy.checked_queue(queue)
        elif queue is not None:
            raise InvalidRequest(f"queue {queue!r}: this scheduler has no queues")
        when = self._checked_now(now)
        created_at = _created(created, when)
        self._admit(job_id, request, owner, steps, queue)
        self._freeze_reasons()
        self._last_event = when
        order = self._waiting.next_order(request.priority, created_at)
        if not request.name:  # its holds are named after it; copied once, not per form
            request = copied(request, name=job_id)
        job = QueuedJob(job_id, request, owner, walltime, timeout, steps, order, 0.0)
        job.on_failure = on_failure
        job.queue = queue
        self._histories.submitted(job_id, owner, when)
        self._waiting.enqueue(job, when)

    def _admit(
        self,
        job_id: str,
        request: GangRequest,
        owner: str | None,
        steps: tuple[tuple[float, str | None], ...],
        queue: str | None,
    ) -> None:
        if request.slices:  # an InvalidRequest now, not in a later cycle
            for form in every_form(request, steps):
                self._twin.fits(self.cluster, form)
        loosest = relaxed(request, steps, self.cluster.levels)
        reason = self._twin.fits(self.cluster, loosest)
        quota = self.quotas.get(owner) if owner is not None else None
        if reason is None and quota is not None and loosest.total_gpus > quota:
            reason = f"needs {loosest.total_gpus} GPUs, above owner {owner!r}'s quota of {quota}"
        if reason is None and queue is not None and self._tenancy is not None:
            most = self._tenancy.most(queue, request.preemptible)
            if loosest.total_gpus > most:
                reason = (
                    f"needs {loosest.total_gpus} GPUs, above the {most} queue {queue!r} can reach"
                )
        if reason is not None:
            if self.metrics is not None:
                self.metrics.attempts.labels(result="rejected").inc()
                self.metrics.rejections.inc()
            raise Unschedulable(f"job {job_id!r} can never start on this cluster: {reason}")

    def cancel(self, job_id: str, now: float | None = None) -> bool:
        """Removes a pending job, or ends a running one and frees its GPUs.

        Args:
            job_id: The job.
            now: When; default ``clock()`` (rule S16).

        Returns:
            ``True`` if it was running (its GPUs were released), ``False`` if it was pending.

        Raises:
            UnknownJob: Neither pending nor running.
            InvalidRequest: ``now`` is before an earlier call's (S16); nothing changed.

        """
        known = job_id in self._queue.by_id or job_id in self._running.jobs
        if not known and not self._ending(job_id):
            raise UnknownJob(f"job {job_id!r} is neither pending nor running", job_id)
        when = self._at(now)
        self._freeze_reasons()
        if self._ending(job_id):  # S17: evicted, its pods still ending
            del self._grace.ending[job_id]
            self._histories.ended(job_id, when, "cancelled")
            return False
        if job_id in self._queue.by_id:
            self._queue.remove(self._queue.by_id[job_id])
            self._histories.ended(job_id, when, "cancelled")
            self._set_pending_gauge()
            return False
        self._running.end(job_id, release=True)
        self._histories.ended(job_id, when, "cancelled")
        return True

    def finish(self, job_id: str, now: float | None = None) -> None:
        """A running job ended: frees its GPUs.

        Args:
            job_id: The job.
            now: When it ended; default ``clock()`` (rule S16).

        Raises:
            UnknownJob: Not running (also a job the scheduler ended at its walltime, S15).
            InvalidRequest: ``now`` is before an earlier call's (S16); nothing changed.

        """
        self._check_running(job_id)
        when = self._at(now)
        self._freeze_reasons()
        self._running.end(job_id, release=True)
        self._histories.ended(job_id, when, "finished")

    def requeue(self, job_id: str, now: float | None = None) -> None:
        """Ends a running job and queues it again at its old position (a new wait begins).

        For a job whose pods failed or were evicted by something else than this scheduler.

        Raises:
            UnknownJob: Not running.
            InvalidRequest: ``now`` is before an earlier call's (S16); nothing changed.

        """
        self._check_running(job_id)
        when = self._at(now)
        self._freeze_reasons()
        job = self._running.end(job_id, release=True)
        self._histories.stopped(job_id, when, "requeued", "requeue()")
        self._waiting.enqueue(job, when)
        if self.metrics is not None:
            self.metrics.job_requeued(job.owner, preempted=False)
        self._set_pending_gauge()

    def _ending(self, job_id: str) -> bool:
        """S17: evicted, out of the queue until its pods have ended."""
        return bool(self._grace.ending) and job_id in self._grace.ending

    def _check_running(self, job_id: str) -> None:
        """``UnknownJob`` unless the job runs (S17: a starting job does not yet)."""
        if job_id not in self._running.jobs:
            raise UnknownJob(f"job {job_id!r} is not running", job_id)
        if job_id in self._grace.starting:
            until = self._grace.starting[job_id].until
            raise UnknownJob(
                f"job {job_id!r} is not running: it starts at {until:g} s, once its "
                "victims' pods have ended (eviction_grace)",
                job_id,
            )

    def cycle(self, now: float | None = None) -> Decisions:
        """One scheduling pass (docs/scheduler.md, rules S4-S13): starts what the rules allow.

        Args:
            now: The cycle's time; default ``clock()``.

        Returns:
            What was decided. Started jobs are already committed; the caller binds them,
            stops the preempted ones and migrates the moved ones.

        Raises:
            InvalidRequest: ``now`` is not finite, or before an earlier call's (S16).

        """
        began = time.perf_counter()
        now = self._at(now)
        self._last_cycle = now
        self._running.walk_now = now
        self._running.evicted_now.clear()
        self._freeze_reasons()
        self._parts.brakes.victims_this_cycle = 0
        if self._tenancy is not None:
            self._tenancy.failed_reclaims.clear()
            self._tenancy.started_now.clear()
            self._tenancy.started_now.update(self._grace.starting)  # S17: not victims yet
        key = (  # the attributes as they are now (a caller may have set them)
            self.backfill,
            self.reservation_depth,
            self.preemption,
            self.defrag,
            self.repair_widen,
            self.evicted_may_preempt,
        )
        if key != self._settings_key:
            self._settings_key = key
            self._parts = dataclasses.replace(self._parts, settings=Settings(*key))
        # Only what can apply is called (issue 51: each call a cycle meets costs it cold):
        # overruns and failures need running jobs, form changes a due stage.
        running = bool(self._running.jobs)
        overran, walltime_ended = self._overruns(now) if running else ([], [])
        repaired, requeued, failed, evicted = (
            handle_failures(self._parts, now) if running else ([], [], [], [])
        )
        due: list[Started] = self._running.report_due(now)[0] if self._grace else []
        stages = self._waiting.stages
        timed_out, degraded = (
            self._waiting.apply_stages(now) if stages and stages[0][0] <= now else ([], [])
        )
        started, preempted, moved, head, self._last_walk = run_cycle(self._parts, now)
        started = due + started
        reasons = PendingReasons(
            lambda: {job.job_id: job.reason for job in self.pending()}, self._sealed_reasons
        )
        self._reasons = weakref.ref(reasons)
        decisions = Decisions(
            now,
            tuple(started),
            tuple(evicted + preempted),
            tuple(moved),
            tuple(timed_out),
            tuple(degraded),
            self.queue_length,
            head,
            tuple(repaired),
            tuple(requeued),
            tuple(failed),
            reasons,
            tuple(overran),
            tuple(walltime_ended),
            tuple(self._last_walk.reserved.values()),
        )
        if self.metrics is not None:
            seconds = time.perf_counter() - began
            self.metrics.cycle_done(self.cluster.stats(), seconds, len(self._queue))
            self._set_pending_gauge()
            if self._tenancy is not None:
                pending = {queue or "": count for queue, count in self._queue.per_queue.items()}
                self.metrics.queues_done(self._tenancy, pending)
        return decisions

    def _freeze_reasons(self) -> None:
        """Makes the last cycle's ``Decisions.reasons`` now if someone still holds them."""
        view = self._reasons() if self._reasons is not None else None
        if view is not None:
            view.freeze()
        self._reasons = None

    # ------------------------------------------------------------------ for the cycle

    def _checked_now(self, now: float | None) -> float:
        """S16: ``now`` (or ``clock()``), finite and not before an earlier call's."""
        value = self.clock() if now is None else now
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidRequest(f"now must be a finite number of seconds, got {value!r}")
        if not math.isfinite(value):
            raise InvalidRequest(f"now must be a finite number of seconds, got {value!r}")
        if value < self._last_event:
            raise InvalidRequest(
                f"now = {value} s is before an earlier call's ({self._last_event} s): give "
                "every call one clock, or now= on every call (docs/scheduler.md S16)"
            )
        return float(value)

    def _at(self, now: float | None) -> float:
        """``_checked_now``, and the time recorded as the latest."""
        value = self._checked_now(now)
        self._last_event = value
        return value

    def _overruns(self, now: float) -> tuple[list[str], list[str]]:
        """S15: reports the jobs past their walltime, and ends those ``"end"`` ends."""
        running = self._running
        overran, ending = running.overruns(now)
        for job_id in overran:
            job = running.jobs[job_id]
            detail = f"walltime {job.walltime:g} s"
            if running.overrun == "extend":
                detail += f"; predicted to end at {job.runs_until:g} s"
            self._histories.note(job_id, now, "overran", detail)
        for job_id in ending:
            job = running.end(job_id, release=True)
            self._histories.ended(job_id, now, "timed_out", f"walltime {job.walltime:g} s")
        return overran, ending

    def _set_pending_gauge(self) -> None:
        if self.metrics is not None:
            self.metrics.queue_changed(self._queue.per_owner)


def _created(created: float | None, now: float) -> float:
    """S1: a job's creation time (``now`` when not given), finite."""
    if created is None:
        return now
    if isinstance(created, bool) or not isinstance(created, (int, float)):
        raise InvalidRequest(f"created must be a finite number of seconds, got {created!r}")
    if not math.isfinite(created):
        raise InvalidRequest(f"created must be a finite number of seconds, got {created!r}")
    return float(created)
