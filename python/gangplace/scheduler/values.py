"""The frozen values a :class:`~gangplace.scheduler.Scheduler` hands out."""

from __future__ import annotations

from dataclasses import dataclass

from gangplace._gangplace import Allocation, GangRequest, Move

__all__ = ["Decisions", "Moved", "PendingJob", "RunningJob", "Started"]


@dataclass(frozen=True)
class Started:
    """A job a cycle started.

    Attributes:
        job_id: The job.
        allocation: Its GPUs (committed: the caller binds its pods to them).
        waited: Seconds from the start of its current wait to now.
        backfilled: Whether it started behind a blocked head (EASY or ``"any"`` backfill).
        preempted: Job ids (or, for holds the scheduler did not make, allocation ids) ended
            to make room for it; empty unless preemption or defragmentation evicted them.

    """

    job_id: str
    allocation: Allocation
    waited: float
    backfilled: bool = False
    preempted: tuple[str, ...] = ()


@dataclass(frozen=True)
class Moved:
    """A running job that defragmentation moved.

    Stop it on ``move.source`` and restart it on ``allocation`` (``move.target``).
    """

    job_id: str
    move: Move
    allocation: Allocation


@dataclass(frozen=True)
class Decisions:
    """What one :meth:`~gangplace.scheduler.Scheduler.cycle` decided.

    Attributes:
        now: The cycle's time.
        started: Jobs started, in the order they started.
        preempted: Job ids evicted (by preemption or defragmentation) and put back in the
            queue at their old position; allocation ids for evicted holds the scheduler
            did not make. The caller stops their pods.
        moved: Jobs defragmentation moved (they keep running; the caller migrates them).
        timed_out: Jobs whose ``timeout`` passed in this cycle: an elastic gang may now
            start with ``min_pods``; a rigid one only gets reported.
        degraded: ``(job_id, required_level)`` for every ladder step taken in this cycle.
        pending: Jobs still queued after the cycle.
        head: The blocked head of the last walk (the first job that did not fit, not for
            quota), or ``None`` when no job was blocked.

    """

    now: float
    started: tuple[Started, ...] = ()
    preempted: tuple[str, ...] = ()
    moved: tuple[Moved, ...] = ()
    timed_out: tuple[str, ...] = ()
    degraded: tuple[tuple[str, str | None], ...] = ()
    pending: int = 0
    head: str | None = None


@dataclass(frozen=True)
class PendingJob:
    """A queued job, as :meth:`~gangplace.scheduler.Scheduler.pending` reports it.

    Attributes:
        job_id: The job.
        request: The request as it stands now (ladder level, elastic after its timeout).
        owner: Its owner.
        waited: Seconds since its current wait began.
        reason: Why it is not running: the engine's explanation, or the owner's quota.

    """

    job_id: str
    request: GangRequest
    owner: str | None
    waited: float
    reason: str


@dataclass(frozen=True)
class RunningJob:
    """A running job: its allocation, owner, start and walltime."""

    job_id: str
    allocation: Allocation
    owner: str | None
    started_at: float
    walltime: float | None
