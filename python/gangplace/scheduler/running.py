"""The Scheduler's record of its running jobs (README "Scheduler", S4-S7, S11, S13).

A mixin of :class:`~gangplace.scheduler.core.Scheduler`: starting a job, ending it, and
keeping every view of the running jobs consistent (by hold, by predicted end, GPUs per
owner) when defragmentation moves one, preemption evicts one or a repair replaces its
lost ranks.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping
from typing import Any

from gangplace._gangplace import Allocation, Cluster
from gangplace.scheduler.history import Histories
from gangplace.scheduler.metrics import SchedulerMetrics
from gangplace.scheduler.queue import PendingQueue, QueuedJob
from gangplace.scheduler.reservations import ShadowBook
from gangplace.scheduler.tenancy import Tenancy
from gangplace.scheduler.values import Moved, Started

__all__ = ["EndOrder", "RunningJobs"]

End = tuple[float, int, str]  # (predicted end, GPUs, job id)


class EndOrder:
    """The running jobs by predicted end (``inf`` last), sorted only when read.

    A cycle that starts hundreds of jobs would pay a sorted insert into a list of thousands
    for each; here a start appends, and the order is restored (one sort of a sorted list
    with a short unsorted tail) the next time anyone reads it, which a cycle does at most
    once per reservation it makes.
    """

    def __init__(self) -> None:
        self._sorted: list[End] = []
        self._added: set[End] = set()  # appended to ``_sorted`` since it was last sorted

    def add(self, end: End) -> None:
        """A job started."""
        self._sorted.append(end)
        self._added.add(end)

    def remove(self, end: End) -> None:
        """A job ended."""
        if end in self._added:
            items, first = self._sorted, self._sorted_length()
            for index in range(len(items) - 1, first - 1, -1):  # in the unsorted tail
                if items[index] == end:
                    del items[index]
                    break
            self._added.discard(end)
            return
        del self._sorted[bisect.bisect_left(self._sorted, end, hi=self._sorted_length())]

    def _sorted_length(self) -> int:
        return len(self._sorted) - len(self._added)

    def ordered(self) -> list[End]:
        """Every entry in order (do not change the list)."""
        if self._added:
            self._sorted.sort()
            self._added.clear()
        return self._sorted

    def finite(self) -> int:
        """How many running jobs have a walltime."""
        return bisect.bisect_left(self.ordered(), (math.inf,))


class RunningJobs:
    """Starting, ending, moving and repairing running jobs (see the Scheduler)."""

    cluster: Cluster
    metrics: SchedulerMetrics | None
    _queue: PendingQueue
    _running: dict[str, QueuedJob]
    _by_hold: dict[str, str]
    _ends: EndOrder
    _allocations: dict[str, Allocation]
    _usage: dict[str | None, int]
    _histories: Histories
    _book: ShadowBook
    _walk_now: float
    _tenancy: Tenancy | None

    def _enqueue(self, job: QueuedJob, now: float) -> None:
        raise NotImplementedError

    def _set_allocation(self, job_id: str, allocation: Allocation | None) -> None:
        """The job's allocation is now ``allocation`` (``None``: it ended)."""
        if allocation is None:
            del self._allocations[job_id]
        else:
            self._allocations[job_id] = allocation

    def _finite_ends(self) -> int:
        """How many running jobs have a walltime (``_ends`` sorts the others last)."""
        return self._ends.finite()

    def _end_of(self, job_id: str) -> float:
        """A running job's predicted end (``inf`` without a walltime; at least the walk's now)."""
        return max(_predicted_end(self._running[job_id]), self._walk_now)

    def _end_running(self, job_id: str, *, release: bool) -> QueuedJob:
        job = self._running.pop(job_id)
        allocation_id = job.allocation_id
        assert allocation_id is not None
        if release:
            self.cluster.release(allocation_id, owner=job.owner)
        del self._by_hold[allocation_id]
        gpus = self._allocations[job_id].placement.total_gpus
        self._set_allocation(job_id, None)
        self._usage[job.owner] = self._usage.get(job.owner, 0) - gpus
        if self._tenancy is not None:
            self._tenancy.ended(job)
        end = _predicted_end(job)
        self._ends.remove((end, gpus, job_id))
        job.allocation_id = job.started_at = None
        return job

    def _started(
        self,
        job: QueuedJob,
        allocation: Allocation,
        now: float,
        backfilled: bool,
        preempted: tuple[str, ...] = (),
    ) -> Started:
        job_id, allocation_id = job.job_id, allocation.id
        self._queue.remove(job)
        self._book.forget(job_id)
        job.allocation_id = allocation_id
        job.started_at = now
        self._running[job_id] = job
        self._by_hold[allocation_id] = job_id
        self._allocations[job_id] = allocation
        gpus = allocation.placement.total_gpus  # each read of ``placement`` builds it anew
        spares = allocation.spares
        job.held_gpus = gpus + (sum(len(pod.gpus) for pod in spares) if spares else 0)
        self._usage[job.owner] = self._usage.get(job.owner, 0) + gpus
        if self._tenancy is not None:
            self._tenancy.started(job, gpus)
        self._ends.add((_predicted_end(job), gpus, job_id))
        waited = now - job.wait_began
        detail = allocation_id + " (backfilled)" if backfilled else allocation_id
        self._histories.started(job_id, now, detail)
        if self.metrics is not None:
            self.metrics.job_started(job.owner, waited, backfilled)
        return Started._made(job_id, allocation, waited, backfilled, preempted)

    def _allocation_of(self, job_id: str) -> str | None:
        job = self._running.get(job_id)
        return None if job is None else job.allocation_id

    def _since_of(self, hold_id: str) -> float:
        """When allocation ``hold_id`` was committed (the scheduler's, else the cluster's)."""
        job_id = self._by_hold.get(hold_id)
        if job_id is not None:
            return self._allocations[job_id].since
        return next(a for a in self.cluster.allocations() if a.id == hold_id).since

    def _victim_of(self, hold_id: str) -> tuple[str | None, int]:
        """A victim's owner and GPUs (S11): the scheduler's job's, else the cluster's hold's."""
        job_id = self._by_hold.get(hold_id)
        if job_id is not None:
            return self._running[job_id].owner, self._allocations[job_id].placement.total_gpus
        held = next(a for a in self.cluster.allocations() if a.id == hold_id)
        return held.owner, held.placement.total_gpus

    def _evicted(self, hold_ids: Iterable[str], now: float, *, for_job: str) -> list[str]:
        """Requeues the scheduler's jobs among evicted holds; returns job or hold ids."""
        names = []
        for hold_id in hold_ids:
            job_id = self._by_hold.get(hold_id)
            if job_id is None:
                names.append(hold_id)
                continue
            job = self._end_running(job_id, release=False)
            self._histories.stopped(job_id, now, "preempted", f"for {for_job}")
            self._enqueue(job, now)
            names.append(job_id)
            if self.metrics is not None:
                self.metrics.job_requeued(job.owner, preempted=True)
        return names

    def _moved(
        self, moves: Mapping[str, Any], plan_moves: Iterable[Any], now: float
    ) -> list[Moved]:
        moved = []
        for move in plan_moves:
            job_id = self._by_hold.get(move.allocation)
            reservation = moves[move.allocation]
            owner = reservation.owner
            allocation = self.cluster.commit(reservation, owner=owner)
            if job_id is None:
                continue
            job = self._running[job_id]
            del self._by_hold[move.allocation]
            job.allocation_id = allocation.id
            self._by_hold[allocation.id] = job_id
            self._set_allocation(job_id, allocation)
            moved.append(Moved(job_id, move, allocation))
            self._histories.note(job_id, now, "moved", allocation.id)
            if self.metrics is not None:
                self.metrics.moves.inc()
        return moved


def _predicted_end(job: QueuedJob) -> float:
    if job.walltime is None or job.started_at is None:
        return math.inf
    return job.started_at + job.walltime
