"""The frozen values a :class:`~gangplace.scheduler.Scheduler` hands out."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from gangplace._gangplace import Allocation, GangRequest, Move, Placement, RepairPlan

__all__ = ["Decisions", "Moved", "PendingJob", "Repaired", "RunningJob", "Shadow", "Started"]


@dataclass(frozen=True)
class Shadow:
    """A blocked job's reservation (docs/scheduler.md, S5).

    Attributes:
        job_id: The job.
        time: When its placement's GPUs are all predicted free (by the running jobs'
            walltimes); ``inf`` for a blind reservation.
        placement: Where it will start then (``None`` for a blind reservation: it does not
            fit even once every running job with a walltime has ended).
        overrunning: Running jobs past their walltime whose GPUs it waits for (rule S15):
            the promise slips while they run on.
        blocked_by: For a blind reservation, the jobs without a walltime, running or
            reserved earlier in the cycle, that hold or reserve GPUs of where it would go
            were every job of the scheduler gone (sorted); empty when it would not fit even
            then (the GPUs are held by other work, unhealthy, or too few). Empty otherwise.

    """

    job_id: str
    time: float
    placement: Placement | None
    overrunning: tuple[str, ...] = ()
    blocked_by: tuple[str, ...] = ()


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

    @classmethod
    def _made(
        cls,
        job_id: str,
        allocation: Allocation,
        waited: float,
        backfilled: bool,
        preempted: tuple[str, ...],
    ) -> Started:
        """The constructor's value without its frozen ``__setattr__`` (one per start)."""
        made = object.__new__(cls)
        fields = made.__dict__
        fields["job_id"], fields["allocation"], fields["waited"] = job_id, allocation, waited
        fields["backfilled"], fields["preempted"] = backfilled, preempted
        return made


@dataclass(frozen=True)
class Moved:
    """A running job that defragmentation moved.

    Stop it on ``move.source`` and restart it on ``allocation`` (``move.target``).
    """

    job_id: str
    move: Move
    allocation: Allocation


@dataclass(frozen=True)
class Repaired:
    """A running job whose lost ranks a cycle repaired in place (``on_failure="repair"``).

    Attributes:
        job_id: The job.
        plan: The repair committed: ``plan.replacements`` are the ``(rank, pod)`` pairs to
            restart (from its checkpoint); its other ranks keep running where they are.
        allocation: The job's allocation after the repair (same id, no lost ranks).

    """

    job_id: str
    plan: RepairPlan
    allocation: Allocation


class PendingReasons(Mapping[str, str]):
    """Job id -> why it did not start in one cycle (docs/scheduler.md rule S12), read-only.

    Made when first read, from that cycle's walk. Before the scheduler next changes (a
    submit, finish, cancel, requeue or cycle) it seals what the reasons are made from (the
    walk's record, each class's members, the quotas' reasons per class: no pass over the
    queue), so it always tells that cycle's reasons, and keeping it costs no cycle a pass
    over the pending jobs.
    """

    def __init__(
        self,
        make: Callable[[], dict[str, str]],
        seal: Callable[[], Callable[[], dict[str, str]]] | None = None,
    ) -> None:
        self._make: Callable[[], dict[str, str]] | None = make
        self._seal = seal
        self._reasons: dict[str, str] | None = None

    def freeze(self) -> None:
        """Seals what the reasons are made from (the scheduler calls it before it changes).

        Without a ``seal``, makes them now.
        """
        if self._reasons is not None:
            return
        if self._seal is not None:
            self._make, self._seal = self._seal(), None
        else:
            self._all()

    def _all(self) -> dict[str, str]:
        if self._reasons is None:
            assert self._make is not None
            self._reasons, self._make, self._seal = self._make(), None, None
        return self._reasons

    def __getitem__(self, job_id: str) -> str:
        return self._all()[job_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def __repr__(self) -> str:
        return f"PendingReasons({self._all()!r})"


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
        repaired: Running jobs with lost ranks repaired in place (``on_failure="repair"``,
            docs/scheduler.md rule S13), before the walk.
        requeued: Running jobs with lost ranks released and queued again at their position
            (``on_failure="requeue"``, or a repair that did not fit).
        failed: Running jobs with lost ranks ended for good (``on_failure="fail"``).
        reasons: Job id -> why it did not start in this cycle, for every job still queued
            (rule S12; made when first read).
        overran: Running jobs found past their walltime in this cycle and left running
            (rule S15: ``overrun="report"`` once, ``"extend"`` at each extension, ``"end"``
            within ``overrun_grace``).
        walltime_ended: Jobs ended in this cycle at their walltime plus the grace
            (``overrun="end"``; history ``timed_out``). The caller stops their pods.
        reservations: The backfill reservations of the last walk, made or kept, in the
            order it made them (rule S5: the head's with ``"easy"``, the first
            ``reservation_depth`` blocked jobs' with ``"conservative"``): each job's
            promise as of this cycle, without the cost of ``pending()``.

    """

    now: float
    started: tuple[Started, ...] = ()
    preempted: tuple[str, ...] = ()
    moved: tuple[Moved, ...] = ()
    timed_out: tuple[str, ...] = ()
    degraded: tuple[tuple[str, str | None], ...] = ()
    pending: int = 0
    head: str | None = None
    repaired: tuple[Repaired, ...] = ()
    requeued: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    reasons: Mapping[str, str] = field(default_factory=dict, compare=False)
    overran: tuple[str, ...] = ()
    walltime_ended: tuple[str, ...] = ()
    reservations: tuple[Shadow, ...] = ()


@dataclass(frozen=True)
class PendingJob:
    """A queued job, as :meth:`~gangplace.scheduler.Scheduler.pending` reports it.

    Attributes:
        job_id: The job.
        request: The request as it stands now (ladder level, elastic after its timeout).
        owner: Its owner.
        waited: Seconds since its current wait began.
        reason: Why it is not running: the engine's explanation, or the owner's or its
            queue's quota.
        shadow: Its backfill reservation from the last cycle (where and when it is predicted
            to start), if it got one (docs/scheduler.md rule S5).
        queue: Its queue (docs/queues.md), or ``None`` without queues.

    """

    job_id: str
    request: GangRequest
    owner: str | None
    waited: float
    reason: str
    shadow: Shadow | None = None
    queue: str | None = None

    @classmethod
    def _made(
        cls,
        job_id: str,
        request: GangRequest,
        owner: str | None,
        waited: float,
        reason: str,
        shadow: Shadow | None,
        queue: str | None,
    ) -> PendingJob:
        """The same value as the constructor's, made without its frozen ``__setattr__``.

        ``Scheduler.pending()`` makes one per queued job.
        """
        made = object.__new__(cls)
        made.__dict__.update(
            job_id=job_id,
            request=request,
            owner=owner,
            waited=waited,
            reason=reason,
            shadow=shadow,
            queue=queue,
        )
        return made


@dataclass(frozen=True)
class RunningJob:
    """A running job: its allocation, owner, start, walltime and queue."""

    job_id: str
    allocation: Allocation
    owner: str | None
    started_at: float
    walltime: float | None
    queue: str | None = None
