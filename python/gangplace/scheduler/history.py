"""Every job's history: its waits, runs and stops (docs/scheduler.md, rule S14).

The scheduler records, per job, what happened to it and when: submitted, each start, each
stop (preempted, requeued, failed), moves and repairs, and how it ended (finished,
cancelled, failed). From that: the total time queued over every wait (not only the first),
the total time run, and for finished jobs the completion time (finish - submit) and the
slowdown (completion / time run). Ended jobs are kept up to ``limit`` (the oldest ended
are forgotten first); pending and running ones always.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Literal

from gangplace.errors import InvalidRequest, UnknownJob

__all__ = ["Histories", "HistorySummary", "JobEvent", "JobHistory"]

EventKind = Literal[
    "submitted",
    "started",
    "preempted",
    "moved",
    "repaired",
    "requeued",
    "failed",
    "finished",
    "cancelled",
    "overran",
    "timed_out",
]
JobState = Literal["pending", "running", "finished", "cancelled", "failed", "timed_out"]
ENDED = ("finished", "cancelled", "failed", "timed_out")


@dataclass(frozen=True)
class JobEvent:
    """One thing that happened to a job.

    Attributes:
        time: When (the scheduler's clock, seconds).
        kind: ``"submitted"``, ``"started"``, ``"preempted"`` (evicted, queued again),
            ``"moved"`` (defragmentation), ``"repaired"`` (lost ranks replaced in place),
            ``"requeued"`` (stopped and queued again: ``requeue()`` or lost ranks),
            ``"failed"``, ``"finished"``, ``"cancelled"``, ``"overran"`` (past its
            walltime, left running: docs/scheduler.md S15) or ``"timed_out"`` (ended at
            its walltime plus the grace).
        detail: The allocation id it started on or moved to, the job it was preempted
            for, the lost ranks, or ``""``.

    """

    time: float
    kind: EventKind
    detail: str = ""

    @classmethod
    def _made(cls, time: float, kind: EventKind, detail: str) -> JobEvent:
        """The constructor's value without its frozen ``__setattr__`` (one per event)."""
        made = object.__new__(cls)
        fields = made.__dict__
        fields["time"], fields["kind"], fields["detail"] = time, kind, detail
        return made


@dataclass(frozen=True)
class JobHistory:
    """A job's history as of ``as_of`` (see :meth:`Scheduler.history`).

    Attributes:
        job_id: The job.
        owner: Its owner.
        state: ``"pending"``, ``"running"``, ``"finished"``, ``"cancelled"`` or ``"failed"``.
        events: What happened, in order.
        as_of: The time the open wait or run (if any) is counted up to.
        waited: Seconds queued over every wait, the open one up to ``as_of``.
        ran: Seconds running over every run, the open one up to ``as_of``.
        starts: How many times it started.
        completion: ``finish - submit`` for a finished job, else ``None``.
        slowdown: ``completion / ran`` for a finished job that ran a positive time, else
            ``None``.

    """

    job_id: str
    owner: str | None
    state: JobState
    events: tuple[JobEvent, ...]
    as_of: float
    waited: float
    ran: float
    starts: int
    completion: float | None
    slowdown: float | None


@dataclass(frozen=True)
class HistorySummary:
    """Figures over the jobs the scheduler still remembers (see :meth:`Scheduler.summary`).

    Waits, completions and slowdowns are over the **finished** jobs kept; percentiles are
    nearest-rank (the smallest value with at least that share at or below it); ``None``
    when no job finished. Jobs that never started are not in those figures: ``pending``
    and ``longest_pending_wait`` stand next to them.

    Attributes:
        finished: Finished jobs kept.
        cancelled: Cancelled jobs kept.
        failed: Failed jobs kept.
        pending: Jobs queued now.
        running: Jobs running now.
        longest_pending_wait: The longest current wait of a queued job (0 when none).
        wait_mean: Mean total wait of the finished jobs.
        wait_p50: Median total wait.
        wait_p95: 95th percentile of the total wait.
        wait_max: Longest total wait.
        completion_mean: Mean completion time.
        completion_p95: 95th percentile of the completion time.
        slowdown_mean: Mean slowdown (over finished jobs that ran a positive time).
        slowdown_p95: 95th percentile of the slowdown.
        restarts: Starts beyond the first, over the finished jobs.
        timed_out: Jobs kept that were ended at their walltime (S15).

    """

    finished: int
    cancelled: int
    failed: int
    pending: int
    running: int
    longest_pending_wait: float
    wait_mean: float | None
    wait_p50: float | None
    wait_p95: float | None
    wait_max: float | None
    completion_mean: float | None
    completion_p95: float | None
    slowdown_mean: float | None
    slowdown_p95: float | None
    restarts: int
    timed_out: int = 0


class _Record:
    """One job's mutable history."""

    __slots__ = ("events", "job_id", "owner", "ran", "run_began", "state", "wait_began", "waited")

    def __init__(self, job_id: str, owner: str | None, now: float) -> None:
        self.job_id = job_id
        self.owner = owner
        # (time, kind, detail): made into ``JobEvent`` values only when a history is read
        self.events: list[tuple[float, EventKind, str]] = [(now, "submitted", "")]
        self.state: JobState = "pending"
        self.waited = 0.0
        self.ran = 0.0
        self.wait_began: float | None = now
        self.run_began: float | None = None

    def close(self, now: float) -> None:
        """Ends the open wait or run at ``now``."""
        if self.wait_began is not None:
            self.waited += now - self.wait_began
            self.wait_began = None
        if self.run_began is not None:
            self.ran += now - self.run_began
            self.run_began = None

    def view(self, as_of: float) -> JobHistory:
        waited = self.waited + (as_of - self.wait_began if self.wait_began is not None else 0.0)
        ran = self.ran + (as_of - self.run_began if self.run_began is not None else 0.0)
        completion = slowdown = None
        if self.state == "finished":
            completion = self.events[-1][0] - self.events[0][0]
            slowdown = completion / ran if ran > 0 else None
        starts = sum(1 for event in self.events if event[1] == "started")
        return JobHistory(
            self.job_id,
            self.owner,
            self.state,
            tuple(JobEvent._made(*event) for event in self.events),
            as_of,
            waited,
            ran,
            starts,
            completion,
            slowdown,
        )


class Histories:
    """The histories of a scheduler's jobs (mutable: the scheduler's own)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._live: dict[str, _Record] = {}
        self._ended: OrderedDict[str, _Record] = OrderedDict()

    @staticmethod
    def checked_limit(limit: object) -> int:
        """``history_limit`` as given to the scheduler: an int >= 0."""
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise TypeError("history_limit must be an int")
        if limit < 0:
            raise InvalidRequest(f"history_limit must be >= 0, got {limit}")
        return limit

    def submitted(self, job_id: str, owner: str | None, now: float) -> None:
        """A new job (a finished job of the same id is forgotten)."""
        self._ended.pop(job_id, None)
        self._live[job_id] = _Record(job_id, owner, now)

    def started(self, job_id: str, now: float, detail: str) -> None:
        """The job started: its wait ends."""
        record = self._live[job_id]
        record.close(now)
        record.run_began = now
        record.state = "running"
        record.events.append((now, "started", detail))

    def note(self, job_id: str, now: float, kind: EventKind, detail: str = "") -> None:
        """A running job moved or was repaired: it keeps running."""
        self._live[job_id].events.append((now, kind, detail))

    def stopped(self, job_id: str, now: float, kind: EventKind, detail: str = "") -> None:
        """A running job was preempted or requeued: its run ends and a wait begins."""
        record = self._live[job_id]
        record.close(now)
        record.wait_began = now
        record.state = "pending"
        record.events.append((now, kind, detail))

    def ended(self, job_id: str, now: float, kind: EventKind, detail: str = "") -> None:
        """The job finished, was cancelled or failed."""
        record = self._live.pop(job_id)
        record.close(now)
        record.state = kind  # type: ignore[assignment]
        record.events.append((now, kind, detail))
        self._ended[job_id] = record
        while len(self._ended) > self.limit:
            self._ended.popitem(last=False)

    def of(self, job_id: str, as_of: float) -> JobHistory:
        """The job's history (``UnknownJob``: never submitted, or forgotten)."""
        record = self._live.get(job_id) or self._ended.get(job_id)
        if record is None:
            raise UnknownJob(
                f"job {job_id!r} has no history (never submitted, or forgotten)", job_id
            )
        return record.view(as_of)

    def summary(self, as_of: float) -> HistorySummary:
        """The figures over the jobs kept (see :class:`HistorySummary`)."""
        finished = [r.view(as_of) for r in self._ended.values() if r.state == "finished"]
        states = [r.state for r in self._ended.values()]
        waits = sorted(h.waited for h in finished)
        completions = sorted(h.completion for h in finished if h.completion is not None)
        slowdowns = sorted(h.slowdown for h in finished if h.slowdown is not None)
        pending = [r for r in self._live.values() if r.state == "pending"]
        return HistorySummary(
            len(finished),
            states.count("cancelled"),
            states.count("failed"),
            len(pending),
            len(self._live) - len(pending),
            max((as_of - r.wait_began for r in pending if r.wait_began is not None), default=0.0),
            _mean(waits),
            _rank(waits, 50),
            _rank(waits, 95),
            waits[-1] if waits else None,
            _mean(completions),
            _rank(completions, 95),
            _mean(slowdowns),
            _rank(slowdowns, 95),
            sum(h.starts - 1 for h in finished),
            states.count("timed_out"),
        )


def _mean(values: list[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _rank(ordered: list[float], percent: int) -> float | None:
    """Nearest-rank percentile of sorted values (integer arithmetic: no rounding)."""
    if not ordered:
        return None
    return ordered[max(-(-percent * len(ordered) // 100) - 1, 0)]
