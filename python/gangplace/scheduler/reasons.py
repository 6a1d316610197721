"""Why a pending job is not running (docs/scheduler.md, S10), from the last cycle's walk.

A cycle records, per class of jobs it tried, why the class stopped (``"nofit"``: its next
job did not fit; ``"beside"``: it did not fit off the reserved GPUs; ``"untimed"``: no
walltime behind a head whose start cannot be predicted; ``"quota-reserved"``: a reserved
job of its owner needs the quota; ``"quota"``: its owner's quota; ``"queue-quota"``: its
queue's quota; ``"fifo"``: behind its fifo queue's blocked job), which job was the
blocked head, and the reservations made (docs/scheduler.md S5). :func:`pending_reason` turns that
into one sentence per job in constant time, so that ``Scheduler.pending()`` costs O(jobs) (plus
the sort into queue order) however large the cluster: it never asks the engine.
``Scheduler.explain`` asks it about one job.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gangplace.scheduler.queue import ClassKey, OrderKey, QueuedJob
from gangplace.scheduler.values import Shadow

__all__ = ["LastWalk", "SealedClass", "blind_reason", "pending_reason", "reason_of", "reasons_from"]

HEAD = "the blocked head: it does not fit now (Scheduler.explain says why)"
QUOTA = "its owner's quota was full in the last cycle"
QUEUE_QUOTA = "its queue's quota was full in the last cycle"
NOFIT = "does not fit now (a job like it was tried behind the blocked head)"


@dataclass
class LastWalk:
    """What the last walk of the last cycle saw (mutable while the walk runs)."""

    backfill: str
    queued: int  # the queue's count of additions when the walk began
    failed: dict[ClassKey, str] = field(default_factory=dict)
    head: str | None = None
    head_class: ClassKey | None = None
    reserved: dict[str, Shadow] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)

    def blocked_by(self, head: str, key: ClassKey) -> None:
        """Records the walk's blocked head and its class.

        The sentences that name it are made here, once for every job behind it.
        """
        self.head, self.head_class = head, key
        behind = f"behind the blocked head {head!r}"
        self.texts = {
            "twin": f"does not fit now, like the blocked head {head!r}",
            "none": f"{behind} (no backfill)",
            "untimed": f"{behind}: no walltime, and the head's start cannot be predicted",
            "beside": (
                f"{behind}: it does not fit without the GPUs reserved for earlier jobs, "
                "and would still run when their reservations begin"
            ),
            "quota-reserved": (
                f"{behind}: a reserved job of its owner needs the owner's quota before it would end"
            ),
            "behind": behind,
        }


def blind_reason(shadow: Shadow) -> str:
    """The reason of a job whose reservation is blind (S5): what blocks it for good."""
    if shadow.blocked_by:
        names = ", ".join(repr(job_id) for job_id in shadow.blocked_by)
        return (
            "does not fit now, nor once every running job with a walltime has ended and every "
            f"earlier reservation with one is over: {names} (no walltime) hold or reserve "
            "GPUs where it would go"
        )
    return (
        "does not fit now, nor once every job of this scheduler has ended: the GPUs it "
        "needs are held by other work, unhealthy, or too few"
    )


def pending_reason(walk: LastWalk | None, job: QueuedJob) -> str:
    """The reason ``job`` is not running as of ``walk``.

    The owner's quota is asked first, by the caller.
    """
    return reason_of(walk, job.job_id, job.queued_index, job.class_key, job.queue)


def reason_of(
    walk: LastWalk | None, job_id: str, queued_index: int, class_key: ClassKey, queue: str | None
) -> str:
    """``pending_reason`` from what it reads of the job, given as values."""
    if walk is None or queued_index >= walk.queued:
        return "not tried yet: queued after the last cycle"
    if job_id == walk.head:
        return HEAD
    shadow = walk.reserved.get(job_id)
    if shadow is not None:
        if shadow.placement is None:
            return blind_reason(shadow)
        return f"does not fit now; its GPUs are reserved from {shadow.time:g} s"
    outcome = walk.failed.get(class_key)
    if outcome == "quota":
        return QUOTA
    if outcome == "queue-quota":
        return QUEUE_QUOTA
    if outcome == "fifo":
        return f"behind the first blocked job of its queue {queue!r} (queueing='fifo')"
    if outcome == "nofit" and class_key == walk.head_class:
        return walk.texts["twin"]
    if outcome == "nofit":
        return NOFIT
    if outcome in ("beside", "untimed", "quota-reserved"):
        return walk.texts[outcome]
    if walk.head is None:
        return "not tried in the last cycle"
    return walk.texts["none" if walk.backfill == "none" else "behind"]


# A class as a cycle's sealed reasons see it: its key, its queue, the reason its owner's or
# its queue's quota gave when sealed (``None``: none), and its members by order (shared
# with the queue until the class changes: only their ids and orders are read).
SealedClass = tuple[ClassKey, str | None, str | None, dict[OrderKey, QueuedJob]]


def reasons_from(
    walk: LastWalk | None,
    classes: list[SealedClass],
    untried: set[str],
    grace: list[tuple[str, str]],
) -> dict[str, str]:
    """A cycle's reasons from what was sealed before the scheduler changed (S12).

    The same text ``Scheduler.pending()`` gave then, job by job, in queue order; ``untried``
    are the jobs queued after the last walk began, ``grace`` the ids and reasons of the jobs
    waiting out an eviction grace (last).
    """
    rows = []
    for key, queue, live, members in classes:
        for order, job in members.items():
            job_id = job.job_id
            index = walk.queued if walk is not None and job_id in untried else -1
            rows.append((order, job_id, live or reason_of(walk, job_id, index, key, queue)))
    rows.sort()
    reasons = {job_id: reason for _, job_id, reason in rows}
    reasons.update(grace)
    return reasons
