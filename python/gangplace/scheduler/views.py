"""The Scheduler's read-only views: queues, running jobs, histories (README rules S10, S14).

A mixin of :class:`~gangplace.scheduler.core.Scheduler`, kept apart so that the module that
changes state stays readable; every method here only reads.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Literal

from gangplace._gangplace import Allocation, Cluster, Explanation
from gangplace.errors import UnknownJob
from gangplace.scheduler.history import Histories, HistorySummary, JobHistory
from gangplace.scheduler.queue import PendingQueue, QueuedJob
from gangplace.scheduler.reasons import LastWalk, pending_reason
from gangplace.scheduler.tenancy import Tenancy
from gangplace.scheduler.values import PendingJob, RunningJob

__all__ = ["SchedulerViews"]


class SchedulerViews:
    """The queries of the Scheduler (see its class docstring)."""

    cluster: Cluster
    clock: Callable[[], float]
    quotas: dict[str | None, int]
    _queue: PendingQueue
    _running: dict[str, QueuedJob]
    _by_hold: dict[str, str]
    _allocations: dict[str, Allocation]
    _stages: list[tuple[float, tuple[int, int], str, int]]
    _last_walk: LastWalk | None
    _histories: Histories
    order: str
    backfill: str
    _tenancy: Tenancy | None

    def _quota_reason(self, job: QueuedJob) -> str | None:
        raise NotImplementedError

    def _live_reason(self, job: QueuedJob) -> str | None:
        """The owner's quota (S10), then the queue's (Q4), as they stand now."""
        if job.owner in self.quotas:
            reason = self._quota_reason(job)
            if reason is not None:
                return reason
        tenancy = self._tenancy
        return None if tenancy is None or job.queue is None else tenancy.reason(job)

    def pending(self) -> list[PendingJob]:
        """The queued jobs in queue order, each with the reason it is not running (S10).

        The reason comes from the last cycle (the owner's quota, the blocked head, behind
        it, ...) in constant time per job: the engine is not asked. ``explain(job_id)``
        asks it about one job.
        """
        now, walk = self.clock(), self._last_walk
        live = self._tenancy is not None or bool(self.quotas)
        reserved = walk.reserved if walk is not None else {}
        seen = walk.queued if walk is not None else 0
        made = PendingJob._made
        return [
            made(
                job.job_id,
                job.current(),
                job.owner,
                now - job.wait_began,
                (live and self._live_reason(job)) or pending_reason(walk, job),
                reserved.get(job.job_id) if reserved and job.queued_index < seen else None,
                job.queue,
            )
            for job in self._queue.in_order()
        ]

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
        jobs = sorted(self._running.values(), key=lambda job: (job.started_at or 0.0, job.order))
        current = {a.id: a for a in self.cluster.allocations()} if jobs else {}
        return [
            RunningJob(
                job.job_id,
                current.get(job.allocation_id or "", self._allocations[job.job_id]),
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
        if job_id in self._queue.by_id:
            return "pending"
        if job_id in self._running:
            return "running"
        raise UnknownJob(f"job {job_id!r} is neither pending nor running", job_id)

    def next_wakeup(self) -> float | None:
        """The earliest time a pending job's form changes (a ladder step or timeout).

        An event loop cycles then even when nothing else happens; ``None`` if no change is due.
        """
        while self._stages:
            due, _, job_id, generation = self._stages[0]
            job = self._queue.by_id.get(job_id)
            if job is not None and job.generation == generation:
                return due
            heapq.heappop(self._stages)
        return None

    def pending_ids(self) -> list[str]:
        """The pending jobs' ids in queue order."""
        return [job.job_id for job in self._queue.in_order()]

    def job_of(self, hold_id: str) -> str | None:
        """The running job holding allocation ``hold_id``, or ``None``."""
        return self._by_hold.get(hold_id)

    @property
    def queue_length(self) -> int:
        """Jobs pending."""
        return len(self._queue)

    def __len__(self) -> int:
        """Pending plus running jobs."""
        return len(self._queue) + len(self._running)

    def __repr__(self) -> str:
        return (
            f"Scheduler(order={self.order!r}, backfill={self.backfill!r}, "
            f"pending={len(self._queue)}, running={len(self._running)})"
        )

    def history(self, job_id: str) -> JobHistory:
        """Everything that happened to a job, with its waits and runs summed (rule S14).

        Its open wait or run is counted up to the clock's now.

        Raises:
            UnknownJob: Never submitted, or an ended job forgotten past ``history_limit``.

        """
        return self._histories.of(job_id, self.clock())

    def summary(self) -> HistorySummary:
        """Waits, completion times and slowdowns over the finished jobs kept (rule S14)."""
        return self._histories.summary(self.clock())
