"""Why a pending job is not running (README, Scheduler rule S10), from the last cycle's walk.

A cycle records, per class of jobs it tried, why the class stopped (``"nofit"``: its next
job did not fit; ``"quota"``: its owner's quota), which job was the blocked head and, with
EASY backfill, the head's shadow time. :func:`pending_reason` turns that into one sentence
per job in constant time, so that ``Scheduler.pending()`` costs O(jobs) (plus the sort into
queue order) however large the cluster: it never asks the engine. ``Scheduler.explain``
asks the engine about one job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gangplace.scheduler.queue import ClassKey, QueuedJob

__all__ = ["LastWalk", "pending_reason"]

HEAD = "the blocked head: it does not fit now (Scheduler.explain says why)"
QUOTA = "its owner's quota was full in the last cycle"
NOFIT = "does not fit now (a job like it was tried behind the blocked head)"


@dataclass
class LastWalk:
    """What the last walk of the last cycle saw (mutable while the walk runs)."""

    backfill: str
    queued: int  # the queue's count of additions when the walk began
    failed: dict[ClassKey, str] = field(default_factory=dict)
    head: str | None = None
    head_class: ClassKey | None = None
    shadow: float = math.inf
    texts: dict[str, str] = field(default_factory=dict)

    def blocked_by(self, head: str, key: ClassKey, shadow: float) -> None:
        """Records the walk's blocked head, its class and shadow time.

        The sentences that name it are made here, once for every job behind it.
        """
        self.head, self.head_class, self.shadow = head, key, shadow
        behind = f"behind the blocked head {head!r}"
        self.texts = {
            "twin": f"does not fit now, like the blocked head {head!r}",
            "none": f"{behind} (no backfill)",
            "untimed": f"{behind}: no walltime, so no backfill",
            "late": f"{behind}: it would not end by the head's shadow time ({shadow:g} s)",
            "behind": behind,
        }


def pending_reason(walk: LastWalk | None, job: QueuedJob) -> str:
    """The reason ``job`` is not running as of ``walk``.

    The owner's quota is asked first, by the caller.
    """
    if walk is None or job.queued_index >= walk.queued:
        return "not tried yet: queued after the last cycle"
    if job.job_id == walk.head:
        return HEAD
    outcome = walk.failed.get(job.class_key)
    if outcome == "quota":
        return QUOTA
    if outcome == "nofit" and job.class_key == walk.head_class:
        return walk.texts["twin"]
    if outcome == "nofit":
        return NOFIT
    if walk.head is None:
        return "not tried in the last cycle"
    if walk.backfill == "none":
        return walk.texts["none"]
    if walk.backfill == "easy":
        return walk.texts["late" if job.walltime is not None else "untimed"]
    return walk.texts["behind"]
