"""Eviction grace in the reference scheduler (docs/scheduler.md, rule S17), naively.

A mixin of :class:`gangplace.reference.scheduler.ReferenceScheduler`: an evicted job waits
in a plain list until its pods have ended; a job that evicted others waits in a dict, holding
its allocation, until then; both are looked at in full at every cycle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gangplace.scheduler.values import Started

__all__ = ["ReferenceGrace"]


class ReferenceGrace:
    """S17 for the reference scheduler."""

    eviction_grace: float
    grace: float  # S15: the grace of overrun="end"
    ending: list[tuple[float, float, Any, str]]  # (until, evicted at, job, evicted for)
    starting: dict[str, tuple[float, tuple[str, ...]]]  # job id -> (until, its victims)
    running: list[Any]
    histories: Any
    cluster: Any

    if TYPE_CHECKING:  # provided by the scheduler

        def _queue(self, job: Any, now: float) -> None: ...

    def _grace_ending(self, job: Any, now: float, for_job: str) -> bool:
        """An evicted job: out of the queue until its pods end (``False``: no grace)."""
        if self.eviction_grace <= 0:
            return False
        job.wait_began = now
        self.ending.append((now + self.eviction_grace, now, job, for_job))
        return True

    def _grace_due(self, now: float) -> list[Started]:
        """The evicted jobs whose pods ended queue again; the due starts are reported."""
        for entry in sorted(
            (e for e in self.ending if e[0] <= now), key=lambda e: (e[0], e[2].job_id)
        ):
            self.ending.remove(entry)
            self._queue(entry[2], entry[1])
        started = []
        due = sorted((e[1][0], e[0]) for e in self.starting.items() if e[1][0] <= now)
        for _, job_id in due:
            victims = self.starting.pop(job_id)[1]
            job = next(job for job in self.running if job.job_id == job_id)
            current = {a.id: a for a in self.cluster.allocations()}
            job.allocation = current.get(job.allocation.id, job.allocation)
            job.started_at = now
            if job.walltime is not None:  # S17: its walltime counts from its report
                job.runs_until = now + job.walltime + self.grace
            self.histories.add(job_id, now, "started", job.allocation.id)
            started.append(Started(job_id, job.allocation, now - job.wait_began, False, victims))
        return started

    def _grace_reasons(self) -> dict[str, str]:
        """``pending()``'s reasons for the jobs waiting out a grace."""
        reasons = {}
        for until, at, job, for_job in self.ending:
            reasons[job.job_id] = (
                f"evicted for {for_job} at {at:g} s; its pods end by {until:g} s "
                "(eviction_grace), then it queues again"
            )
        for job_id, (until, victims) in self.starting.items():
            reasons[job_id] = (
                f"its GPUs are held; it starts at {until:g} s, once its victims' pods have "
                f"ended ({', '.join(victims)}; eviction_grace)"
            )
        return reasons

    def _grace_holds(self) -> list[str]:
        """The allocations of the starting jobs: never victims."""
        return [
            job.allocation.id
            for job in self.running
            if job.job_id in self.starting and job.allocation is not None
        ]
