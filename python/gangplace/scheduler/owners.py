"""Owners' quotas in the Scheduler (docs/scheduler.md, rules S4, S6 and S10).

``Scheduler(quotas={owner: gpus})`` caps the GPUs an owner's running jobs hold.
:class:`OwnerQuotas` keeps every owner's GPUs in use (the running jobs' placements, counted
as they start and end) and answers how much an owner may still take, why its quota keeps a
job waiting, and the request a job may start with now: its pods capped by its owner's room
and, with queues, by its queue's (docs/queues.md, Q4).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gangplace._gangplace import GangRequest
from gangplace.scheduler.queue import QueuedJob

if TYPE_CHECKING:
    from gangplace.scheduler.tenancy import Tenancy

__all__ = ["OwnerQuotas"]


class OwnerQuotas:
    """Owner -> quota, and owner -> GPUs its running jobs hold (mutable)."""

    def __init__(self, quotas: dict[str | None, int], tenancy: Tenancy | None) -> None:
        self.quotas = quotas
        self.usage: dict[str | None, int] = {}
        self.tenancy = tenancy

    def took(self, owner: str | None, gpus: int) -> None:
        """A job of ``owner`` started holding ``gpus`` (negative: one ended)."""
        self.usage[owner] = self.usage.get(owner, 0) + gpus

    def room(self, job: QueuedJob) -> int | None:
        """GPUs the job's owner may still take (``None``: no quota)."""
        quota = self.quotas.get(job.owner) if job.owner is not None else None
        return None if quota is None else quota - self.usage.get(job.owner, 0)

    def reason(self, job: QueuedJob) -> str | None:
        """Why the owner's quota keeps the job waiting, or ``None`` when it does not."""
        room = self.room(job)
        if room is None or job.fewest_gpus <= room:
            return None
        return f"owner {job.owner!r} has {room} of its {self.quotas[job.owner]} GPUs of quota left"

    def live_reason(self, job: QueuedJob) -> str | None:
        """The owner's quota (S10), then the queue's (Q4), as they stand now."""
        if job.owner in self.quotas:
            reason = self.reason(job)
            if reason is not None:
                return reason
        tenancy = self.tenancy
        return None if tenancy is None or job.queue is None else tenancy.reason(job)

    def request_for(
        self, job: QueuedJob, *, queue: bool = True, queue_room: int | None = None
    ) -> GangRequest:
        """The job's current request, its pods capped by the owner's remaining quota (S4).

        And by its queue's room (Q4; ``queue_room`` when the caller has it), unless
        ``queue`` is false (a reclaim makes room).
        """
        tenancy = self.tenancy
        if not self.quotas and tenancy is None:
            return job.current()  # nothing caps it (the common case: one check, issue 51)
        room = self.room(job)
        if queue and tenancy is not None and job.queue is not None:
            if queue_room is None:
                queue_room = tenancy.room(job)
            room = queue_room if room is None else min(room, queue_room)
        if room is None or room >= job.request.total_gpus:
            return job.current()  # made once per form
        return job.effective(room // job.request.gpus_per_pod)
