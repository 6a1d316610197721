"""The Scheduler's record of its running jobs (docs/scheduler.md, S4-S7, S11, S13).

:class:`RunningJobs` starts a job, ends it, and keeps every view of the running jobs
consistent (by hold, by predicted end, GPUs per owner and per queue) when defragmentation
moves one, preemption evicts one (it goes back to the queue) or a repair replaces its lost
ranks.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping
from typing import Any

from gangplace._gangplace import Allocation, Cluster
from gangplace.scheduler.grace import Ending, EvictionGrace, Starting
from gangplace.scheduler.history import Histories
from gangplace.scheduler.metrics import SchedulerMetrics
from gangplace.scheduler.owners import OwnerQuotas
from gangplace.scheduler.queue import QueuedJob
from gangplace.scheduler.reservations import End, ShadowBook
from gangplace.scheduler.tenancy import Tenancy
from gangplace.scheduler.values import Moved, Started
from gangplace.scheduler.waiting import Waiting

__all__ = ["EndOrder", "RunningJobs"]


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
    """The running jobs: by id, by hold, by predicted end (mutable: the scheduler's own).

    Args:
        cluster: The scheduler's cluster (releases and commits go to it).
        waiting: Where evicted jobs are queued again.
        owners: GPUs per owner, kept as jobs start and end.
        tenancy: The queues' usage, kept likewise (``None``: no queues).
        book: The backfill reservations, forgotten for a job that starts.
        histories: Where starts, evictions and moves are recorded (S14).
        metrics: The scheduler's metrics, or ``None``.

    """

    def __init__(
        self,
        cluster: Cluster,
        waiting: Waiting,
        owners: OwnerQuotas,
        tenancy: Tenancy | None,
        book: ShadowBook,
        histories: Histories,
        metrics: SchedulerMetrics | None,
    ) -> None:
        self.cluster = cluster
        self.waiting = waiting
        self.owners = owners
        self.tenancy = tenancy
        self.book = book
        self.histories = histories
        self.metrics = metrics
        self.jobs: dict[str, QueuedJob] = {}
        self.by_hold: dict[str, str] = {}
        self.allocations: dict[str, Allocation] = {}
        self._ends = EndOrder()  # (predicted end, GPUs, job id) of every running job
        self.walk_now = 0.0  # the time of the cycle under way (ends before it count as it)
        # docs/scheduler.md S15: what a run past its walltime gets, and the grace of "end"
        self.overrun = "end"
        self.grace = 0.0
        self.overrunning: set[str] = set()  # running jobs past their walltime
        self.evicted_now: set[str] = set()  # jobs evicted in the cycle under way (Q5, S7)
        self.eviction_grace = EvictionGrace()  # S17: victims' pods ending, and who waits

    def __len__(self) -> int:
        return len(self.jobs)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self.jobs

    def set_allocation(self, job_id: str, allocation: Allocation | None) -> None:
        """The job's allocation is now ``allocation`` (``None``: it ended)."""
        if allocation is None:
            del self.allocations[job_id]
        else:
            self.allocations[job_id] = allocation

    def allocation(self, job_id: str) -> Allocation:
        """A running job's allocation as the scheduler last saw it."""
        return self.allocations[job_id]

    def ends(self) -> list[End]:
        """``(predicted end, GPUs, job id)`` of every running job, in order (do not change)."""
        return self._ends.ordered()

    def finite_ends(self) -> int:
        """How many running jobs have a walltime (the others sort last)."""
        return self._ends.finite()

    def end_of(self, job_id: str) -> float:
        """A running job's predicted end (``inf`` without a walltime; at least the walk's now)."""
        return max(self.jobs[job_id].runs_until, self.walk_now)

    def run_grace(self) -> float:
        """Seconds past its walltime a job may run (S15: the grace of ``"end"``, else 0)."""
        return self.grace if self.overrun == "end" else 0.0

    def overruns(self, now: float) -> tuple[list[str], list[str]]:
        """S15: the jobs newly past their walltime at ``now``, and those to end.

        ``"end"``: a job ends once ``now`` reaches its walltime plus the grace (returned
        second, still running: the caller ends it), and is reported once it passes its
        walltime within the grace. ``"report"``: reported once, left running (predicted to
        end at any moment). ``"extend"``: its predicted end moves on by whole walltimes past
        ``now``, reported each time.
        """
        grace = self.run_grace()
        overran: list[str] = []
        ending: list[str] = []
        moves: list[tuple[End, float]] = []
        for end, gpus, job_id in self._ends.ordered():  # the prefix past its walltime only
            if end - grace > now:
                break
            job = self.jobs[job_id]
            if self.overrun == "end" and end <= now:
                ending.append(job_id)
            elif self.overrun == "extend":
                assert job.walltime is not None
                later = end + job.walltime * (math.floor((now - end) / job.walltime) + 1)
                moves.append(((end, gpus, job_id), later))
                overran.append(job_id)
            elif not job.overran:
                overran.append(job_id)
            else:
                continue
            job.overran = True
            self.overrunning.add(job_id)
        for (_, gpus, job_id), later in moves:  # after the walk over the order
            self._predict_end(job_id, gpus, later)
        return overran, ending

    def _predict_end(self, job_id: str, gpus: int, until: float) -> None:
        """A running job's predicted end moves to ``until`` (it holds ``gpus``)."""
        job = self.jobs[job_id]
        self._ends.remove((job.runs_until, gpus, job_id))
        job.runs_until = until
        self._ends.add((until, gpus, job_id))

    def end(self, job_id: str, *, release: bool) -> QueuedJob:
        """Ends a running job (its GPUs released if ``release``); returns its record."""
        job = self.jobs.pop(job_id)
        allocation_id = job.allocation_id
        assert allocation_id is not None
        if release:
            self.cluster.release(allocation_id, owner=job.owner)
        del self.by_hold[allocation_id]
        gpus = self.allocations[job_id].placement.total_gpus
        self.set_allocation(job_id, None)
        self.owners.took(job.owner, -gpus)
        if self.tenancy is not None:
            self.tenancy.ended(job)
        self._ends.remove((job.runs_until, gpus, job_id))
        self.overrunning.discard(job_id)
        self.eviction_grace.starting.pop(job_id, None)
        job.allocation_id = job.started_at = None
        job.runs_until, job.overran = math.inf, False
        return job

    def started(
        self,
        job: QueuedJob,
        allocation: Allocation,
        now: float,
        backfilled: bool,
        preempted: tuple[str, ...] = (),
    ) -> Started | None:
        """Records ``job`` as started on ``allocation`` (taken out of the queue).

        Returns its ``Started``; ``None`` when it evicted jobs under an eviction grace
        (S17): it holds its GPUs from ``now`` and is reported by ``report_due``.
        """
        job_id, allocation_id = job.job_id, allocation.id
        self.waiting.queue.remove(job)
        self.book.forget(job_id)
        job.allocation_id = allocation_id
        job.started_at = now
        self.jobs[job_id] = job
        self.by_hold[allocation_id] = job_id
        self.allocations[job_id] = allocation
        # A fixed-size gang of whole GPUs holds exactly its pods' GPUs (its form may only have
        # changed its level): no need to build the placement, as each read of
        # ``allocation.placement`` does (issue 51); an elastic or fractional gang's are counted.
        gpus = job.exact_gpus
        if gpus is None:
            gpus = allocation.placement.total_gpus
        spares = allocation.spares if job.spares else ()
        job.held_gpus = gpus + (sum(len(pod.gpus) for pod in spares) if spares else 0)
        self.owners.took(job.owner, gpus)
        if self.tenancy is not None:
            self.tenancy.started(job, gpus)
        grace = self.run_grace()
        begins = now
        if preempted and self.eviction_grace.seconds > 0:
            begins = now + self.eviction_grace.seconds  # S17: once its victims' pods ended
            self.eviction_grace.starting[job_id] = Starting(begins, preempted)
        job.runs_until = math.inf if job.walltime is None else begins + job.walltime + grace
        job.overran = False
        self._ends.add((job.runs_until, gpus, job_id))
        if begins > now:
            return None
        return self._reported(job, allocation, now, backfilled, preempted)

    def _reported(
        self,
        job: QueuedJob,
        allocation: Allocation,
        now: float,
        backfilled: bool,
        preempted: tuple[str, ...],
    ) -> Started:
        waited = now - job.wait_began
        detail = allocation.id + " (backfilled)" if backfilled else allocation.id
        self.histories.started(job.job_id, now, detail)
        if self.metrics is not None:
            self.metrics.job_started(job.owner, waited, backfilled)
        return Started._made(job.job_id, allocation, waited, backfilled, preempted)

    def report_due(self, now: float) -> tuple[list[Started], list[str]]:
        """S17: the starts due by ``now``, and the evicted jobs queued again (their ids).

        The evicted jobs first, each back at its position with its wait begun at its
        eviction; then each due start, on its allocation (as moves and repairs left it;
        failures were handled before, S13).
        """
        grace = self.eviction_grace
        queued = []
        for ending in grace.due_ending(now):
            self.waiting.enqueue(ending.job, ending.evicted_at)
            queued.append(ending.job.job_id)
        started = []
        for job_id, entry in grace.due_starting(now):
            job = self.jobs[job_id]
            allocation = self.allocations[job_id]  # kept through moves and repairs
            job.started_at = now
            if job.walltime is not None and now > entry.until:
                # S17: the caller binds its pods now, so its walltime counts from now (the
                # first cycle at or after t + g), not from t + g
                gpus = allocation.placement.total_gpus  # as ``end`` finds its entry
                self._predict_end(job_id, gpus, now + job.walltime + self.run_grace())
            started.append(self._reported(job, allocation, now, False, entry.preempted))
        return started, queued

    def starting_holds(self) -> list[str]:
        """S17: the allocations of the jobs waiting for their victims' pods to end."""
        starting = self.eviction_grace.starting
        return [self.jobs[job_id].allocation_id or "" for job_id in starting] if starting else []

    def job_of(self, hold_id: str) -> str | None:
        """The running job holding allocation ``hold_id``, or ``None``."""
        return self.by_hold.get(hold_id)

    def allocation_of(self, job_id: str) -> str | None:
        """The allocation id of a running job, or ``None`` when it is not running."""
        job = self.jobs.get(job_id)
        return None if job is None else job.allocation_id

    def since_of(self, hold_id: str) -> float:
        """When allocation ``hold_id`` was committed (the scheduler's, else the cluster's)."""
        job_id = self.by_hold.get(hold_id)
        if job_id is not None:
            return self.allocations[job_id].since
        return next(a for a in self.cluster.allocations() if a.id == hold_id).since

    def victim_of(self, hold_id: str) -> tuple[str | None, int]:
        """A victim's owner and GPUs (S11): the scheduler's job's, else the cluster's hold's."""
        job_id = self.by_hold.get(hold_id)
        if job_id is not None:
            return self.jobs[job_id].owner, self.allocations[job_id].placement.total_gpus
        held = next(a for a in self.cluster.allocations() if a.id == hold_id)
        return held.owner, held.placement.total_gpus

    def evicted(self, hold_ids: Iterable[str], now: float, *, for_job: str) -> list[str]:
        """Requeues the scheduler's jobs among evicted holds; returns job or hold ids."""
        names = []
        for hold_id in hold_ids:
            job_id = self.by_hold.get(hold_id)
            if job_id is None:
                names.append(hold_id)
                continue
            job = self.end(job_id, release=False)
            self.evicted_now.add(job_id)
            self.histories.stopped(job_id, now, "preempted", f"for {for_job}")
            seconds = self.eviction_grace.seconds
            if seconds > 0:  # S17: out of the queue until its pods have ended
                job.wait_began = now
                self.eviction_grace.ending[job_id] = Ending(now + seconds, now, job, for_job)
            else:
                self.waiting.enqueue(job, now)
            names.append(job_id)
            if self.metrics is not None:
                self.metrics.job_requeued(job.owner, preempted=True)
        return names

    def moved(self, moves: Mapping[str, Any], plan_moves: Iterable[Any], now: float) -> list[Moved]:
        """Commits the moved allocations' new reservations; the scheduler's jobs follow."""
        moved = []
        for move in plan_moves:
            job_id = self.by_hold.get(move.allocation)
            reservation = moves[move.allocation]
            owner = reservation.owner
            allocation = self.cluster.commit(reservation, owner=owner)
            if job_id is None:
                continue
            job = self.jobs[job_id]
            del self.by_hold[move.allocation]
            job.allocation_id = allocation.id
            self.by_hold[allocation.id] = job_id
            self.set_allocation(job_id, allocation)
            moved.append(Moved(job_id, move, allocation))
            self.histories.note(job_id, now, "moved", allocation.id)
            if self.metrics is not None:
                self.metrics.moves.inc()
        return moved
