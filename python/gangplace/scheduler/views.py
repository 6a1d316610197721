"""The Scheduler's read-only views: queues, running jobs, histories (docs/scheduler.md, S10, S14).

The queries of :class:`~gangplace.scheduler.Scheduler`, kept apart so that the module that
changes state stays readable: a base class whose methods read the scheduler's parts (the
waiting jobs, the running jobs, the owners' quotas, the histories, the last walk) and never
change them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Literal

from gangplace._gangplace import Cluster, Explanation
from gangplace.errors import UnknownJob
from gangplace.scheduler.grace import EvictionGrace
from gangplace.scheduler.history import Histories, HistorySummary, JobHistory
from gangplace.scheduler.owners import OwnerQuotas
from gangplace.scheduler.queue import PendingQueue
from gangplace.scheduler.reasons import LastWalk, SealedClass, pending_reason, reasons_from
from gangplace.scheduler.running import RunningJobs
from gangplace.scheduler.tenancy import Tenancy
from gangplace.scheduler.values import PendingJob, RunningJob
from gangplace.scheduler.waiting import Waiting

__all__ = ["SchedulerViews"]


class SchedulerViews:
    """The queries of the Scheduler (see its class docstring)."""

    cluster: Cluster
    clock: Callable[[], float]
    quotas: dict[str | None, int]
    order: str
    backfill: str
    _waiting: Waiting
    _queue: PendingQueue  # the waiting jobs' queue
    _running: RunningJobs
    _owners: OwnerQuotas
    _tenancy: Tenancy | None
    _histories: Histories
    _last_walk: LastWalk | None
    _grace: EvictionGrace

    def pending(self, now: float | None = None) -> list[PendingJob]:
        """The queued jobs in queue order, each with the reason it is not running (S10).

        The reason comes from the last cycle (the owner's quota, the blocked head, behind
        it, ...) in constant time per job: the engine is not asked. ``explain(job_id)``
        asks it about one job. Waits are counted up to ``now`` (default ``clock()``).
        After the queue come the jobs waiting out an eviction grace (S17): the evicted ones
        whose pods are ending, then those that will start once their victims' pods have
        ended, each by that time, then job id.
        """
        now, walk = self.clock() if now is None else now, self._last_walk
        live = self._tenancy is not None or bool(self.quotas)
        reserved = walk.reserved if walk is not None else {}
        seen = walk.queued if walk is not None else 0
        made, live_reason = PendingJob._made, self._owners.live_reason
        queued = [
            made(
                job.job_id,
                job.current(),
                job.owner,
                now - job.wait_began,
                (live and live_reason(job)) or pending_reason(walk, job),
                reserved.get(job.job_id) if reserved and job.queued_index < seen else None,
                job.queue,
            )
            for job in self._queue.in_order()
        ]
        return queued + self._in_grace(now) if self._grace else queued

    def _sealed_reasons(self) -> Callable[[], dict[str, str]]:
        """What the last cycle's reasons are made from, kept as it is now (S12).

        Each class's members (shared with the queue until the class next changes), the
        quotas' reason for each class (its owner, queue and fewest GPUs are the class's),
        the walk's record and the reasons of the jobs in grace: a call that reads
        O(classes + jobs in grace), not the queue.
        """
        walk, queue = self._last_walk, self._queue
        live = self._tenancy is not None or bool(self.quotas)
        classes: list[SealedClass] = []
        for key, members in queue.seal().items():
            first = queue.classes[key].first()
            assert first is not None
            text = self._owners.live_reason(first) if live else None
            classes.append((key, first.queue, text, members))
        untried: set[str] = set()  # queued after the last walk began (rare: a pass then)
        if walk is None or queue.added > walk.queued:
            seen = walk.queued if walk is not None else 0
            untried = {job.job_id for job in queue.by_id.values() if job.queued_index >= seen}
        grace = [(job.job_id, job.reason) for job in self._in_grace(0.0)] if self._grace else []
        return functools.partial(reasons_from, walk, classes, untried, grace)

    def _in_grace(self, now: float) -> list[PendingJob]:
        """S17: ``pending()``'s entries for the jobs waiting out an eviction grace."""
        grace, made = self._grace, PendingJob._made
        ending = sorted(grace.ending.values(), key=lambda e: (e.until, e.job.job_id))
        views = [
            made(
                entry.job.job_id,
                entry.job.current(),
                entry.job.owner,
                now - entry.job.wait_began,
                grace.ending_reason(entry),
                None,
                entry.job.queue,
            )
            for entry in ending
        ]
        for job_id, entry in sorted(grace.starting.items(), key=lambda e: (e[1].until, e[0])):
            job = self._running.jobs[job_id]
            waited, reason = now - job.wait_began, grace.starting_reason(entry)
            views.append(made(job_id, job.current(), job.owner, waited, reason, None, job.queue))
        return views

    def explain(self, job_id: str) -> Explanation:
        """The engine's explanation of a pending job's request (``UnknownJob``: not pending)."""
        job = self._queue.by_id.get(job_id)
        if job is None:
            raise UnknownJob(f"job {job_id!r} is not pending", job_id)
        return self.cluster.explain(job.effective())

    def running(self) -> list[RunningJob]:
        """The running jobs in the order they started, each with its current allocation.

        The allocations are read from the cluster, so a repair committed, a GPU lost or a
        node removed since shows (``allocation.lost``, ``allocation.placement``).
        """
        running, starting = self._running, self._grace.starting
        jobs = sorted(
            (job for job in running.jobs.values() if job.job_id not in starting),
            key=lambda job: (job.started_at or 0.0, job.order),
        )
        current = {a.id: a for a in self.cluster.allocations()} if jobs else {}
        return [
            RunningJob(
                job.job_id,
                current.get(job.allocation_id or "", running.allocation(job.job_id)),
                job.owner,
                job.started_at or 0.0,
                job.walltime,
                job.queue,
            )
            for job in jobs
        ]

    def status(self, job_id: str) -> Literal["pending", "running"]:
        """``"pending"`` or ``"running"``.

        Raises:
            UnknownJob: Neither (never submitted, finished or cancelled).

        """
        if job_id in self._queue.by_id or job_id in self._grace.ending:
            return "pending"
        if job_id in self._grace.starting:
            return "pending"  # S17: it holds its GPUs, its victims' pods are ending
        if job_id in self._running.jobs:
            return "running"
        raise UnknownJob(f"job {job_id!r} is neither pending nor running", job_id)

    def next_wakeup(self) -> float | None:
        """The earliest time a pending job's form changes (a ladder step or timeout).

        Also the earliest end of an eviction grace (S17: an evicted job queues again, a
        job starts). An event loop cycles then even when nothing else happens; ``None`` if
        no change is due.
        """
        due = self._waiting.next_wakeup()
        grace = self._grace
        if not grace:
            return due
        ends = [e.until for e in grace.ending.values()] + [e.until for e in grace.starting.values()]
        return min(ends) if due is None else min(due, *ends)

    def pending_ids(self) -> list[str]:
        """The pending jobs' ids in queue order."""
        queued = [job.job_id for job in self._queue.in_order()]
        return queued + [job.job_id for job in self._in_grace(0.0)] if self._grace else queued

    def job_of(self, hold_id: str) -> str | None:
        """The running job holding allocation ``hold_id``, or ``None``."""
        return self._running.job_of(hold_id)

    @property
    def queue_length(self) -> int:
        """Jobs pending (those waiting out an eviction grace too, S17)."""
        return len(self._queue) + len(self._grace)

    def __len__(self) -> int:
        """Pending plus running jobs."""
        return len(self._queue) + len(self._running.jobs) + len(self._grace.ending)

    def __repr__(self) -> str:
        running = len(self._running.jobs) - len(self._grace.starting)
        return (
            f"Scheduler(order={self.order!r}, backfill={self.backfill!r}, "
            f"pending={self.queue_length}, running={running})"
        )

    def history(self, job_id: str, now: float | None = None) -> JobHistory:
        """Everything that happened to a job, with its waits and runs summed (rule S14).

        Its open wait or run is counted up to ``now`` (default ``clock()``).

        Raises:
            UnknownJob: Never submitted, or an ended job forgotten past ``history_limit``.

        """
        return self._histories.of(job_id, self.clock() if now is None else now)

    def summary(self, now: float | None = None) -> HistorySummary:
        """Waits, completion times and slowdowns over the finished jobs kept (rule S14).

        Open waits are counted up to ``now`` (default ``clock()``).
        """
        return self._histories.summary(self.clock() if now is None else now)
