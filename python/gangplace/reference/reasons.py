"""Why each pending job waits, in the reference scheduler (docs/scheduler.md, S10).

A mixin of :class:`gangplace.reference.scheduler.ReferenceScheduler`: every reason is made
again from the last walk's outcomes each time it is asked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gangplace.scheduler.reasons import HEAD, NOFIT, QUEUE_QUOTA, QUOTA, LastWalk, blind_reason
from gangplace.scheduler.values import Shadow

__all__ = ["ReferenceReasons"]


class ReferenceReasons:
    """S10 for the reference scheduler."""

    backfill: str
    head: str | None
    head_class: tuple[object, ...] | None
    kept: dict[str, tuple[Any, Shadow]]
    pending: list[Any]
    quotas: dict[str, int]
    fresh: set[str]
    outcomes: dict[tuple[object, ...], tuple[float, str]]

    if TYPE_CHECKING:  # provided by the scheduler and its tenancy

        def _order(self, job: Any) -> tuple[int, float, int]: ...

        def _usage(self, owner: str | None) -> int: ...

        def _fewest(self, job: Any) -> int: ...

        def _queue_reason(self, job: Any) -> str | None: ...

        def _class(self, job: Any) -> tuple[object, ...]: ...

        def _grace_reasons(self) -> dict[str, str]: ...

    def reasons(self) -> dict[str, str]:
        """S10: why each pending job is not running, from the last walk, naively."""
        texts = LastWalk(self.backfill, 0)
        if self.head is not None:
            texts.blocked_by(self.head, -1)
        reserved = {job_id: kept[1] for job_id, kept in self.kept.items()}
        reasons = {}
        for job in sorted(self.pending, key=self._order):
            cap = self.quotas.get(job.owner) if job.owner is not None else None
            room = None if cap is None else cap - self._usage(job.owner)
            if cap is not None and room is not None and self._fewest(job) > room:
                left = f"has {room} of its {cap} GPUs of quota left"
                reasons[job.job_id] = f"owner {job.owner!r} {left}"
            elif job.queue is not None and self._queue_reason(job) is not None:
                reasons[job.job_id] = self._queue_reason(job) or ""
            elif job.job_id in self.fresh:
                reasons[job.job_id] = "not tried yet: queued after the last cycle"
            elif job.job_id == self.head:
                reasons[job.job_id] = HEAD
            elif job.job_id in reserved:
                shadow = reserved[job.job_id]
                reasons[job.job_id] = (
                    blind_reason(shadow)
                    if shadow.placement is None
                    else f"does not fit now; its GPUs are reserved from {shadow.time:g} s"
                )
            else:
                reasons[job.job_id] = self._class_reason(job, texts)
        return reasons | self._grace_reasons()  # S17

    def _class_reason(self, job: Any, texts: LastWalk) -> str:
        why = self.outcomes.get(self._class(job), (0.0, ""))[1]
        if why == "quota":
            return QUOTA
        if why == "queue-quota":
            return QUEUE_QUOTA
        if why == "fifo":
            return f"behind the first blocked job of its queue {job.queue!r} (queueing='fifo')"
        if why == "nofit":
            return texts.texts["twin"] if self._class(job) == self.head_class else NOFIT
        if why in ("beside", "untimed", "quota-reserved"):
            return texts.texts[why]
        if self.head is None:
            return "not tried in the last cycle"
        return texts.texts["none" if self.backfill == "none" else "behind"]
