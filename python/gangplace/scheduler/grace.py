"""Eviction grace: a victim's pods take time to end (docs/scheduler.md, rule S17).

With ``Scheduler(eviction_grace=g)`` and ``g > 0``, a job evicted at ``t`` (S7's
preemption, a reclaim Q5-Q7, a repair's preemption S13) waits out of the queue until
``t + g`` (its pods are still ending; a job never runs twice), and a job started by evicting
others holds its GPUs and its quota from ``t`` (nobody else takes them meanwhile) but is
reported started, and its walltime counts, only from the first cycle at or after ``t + g``.
:class:`EvictionGrace` keeps both kinds of jobs; :class:`~gangplace.scheduler.running.
RunningJobs` and the cycle consult it. With ``g == 0`` (the default) it stays empty.
"""

from __future__ import annotations

from dataclasses import dataclass

from gangplace.scheduler.queue import QueuedJob

__all__ = ["Ending", "EvictionGrace", "Starting"]


@dataclass(slots=True)
class Ending:
    """A job evicted at ``evicted_at`` whose pods end by ``until`` (out of the queue)."""

    until: float
    evicted_at: float
    job: QueuedJob
    for_job: str


@dataclass(slots=True)
class Starting:
    """A job holding its GPUs (it is in ``RunningJobs``), reported started at ``until``."""

    until: float
    preempted: tuple[str, ...]


class EvictionGrace:
    """The jobs waiting out an eviction grace (mutable: the scheduler's own)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.ending: dict[str, Ending] = {}
        self.starting: dict[str, Starting] = {}

    def __len__(self) -> int:
        return len(self.ending) + len(self.starting)

    def due_ending(self, now: float) -> list[Ending]:
        """Removes and returns the evicted jobs whose pods have ended by ``now``.

        In order of that time, then job id (the order they queue again in; each goes back to
        its own position anyway).
        """
        due = sorted(
            (entry for entry in self.ending.values() if entry.until <= now),
            key=lambda entry: (entry.until, entry.job.job_id),
        )
        for entry in due:
            del self.ending[entry.job.job_id]
        return due

    def due_starting(self, now: float) -> list[tuple[str, Starting]]:
        """Removes and returns the starting jobs due by ``now``, by time then job id."""
        due = sorted(
            ((job_id, entry) for job_id, entry in self.starting.items() if entry.until <= now),
            key=lambda item: (item[1].until, item[0]),
        )
        for job_id, _ in due:
            del self.starting[job_id]
        return due

    def ending_reason(self, entry: Ending) -> str:
        """``pending()``'s reason for an evicted job waiting for its pods to end."""
        return (
            f"evicted for {entry.for_job} at {entry.evicted_at:g} s; its pods end by "
            f"{entry.until:g} s (eviction_grace), then it queues again"
        )

    def starting_reason(self, entry: Starting) -> str:
        """``pending()``'s reason for a job whose victims' pods are ending."""
        return (
            f"its GPUs are held; it starts at {entry.until:g} s, once its victims' pods "
            f"have ended ({', '.join(entry.preempted)}; eviction_grace)"
        )
