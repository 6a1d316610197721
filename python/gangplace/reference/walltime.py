"""Runs past their walltime and calls in time order, in the reference scheduler (S15, S16).

A mixin of :class:`gangplace.reference.scheduler.ReferenceScheduler`: every cycle sorts every
running job by its predicted end.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from gangplace._gangplace import Cluster, Placement
from gangplace.errors import InvalidRequest
from gangplace.reference.history import ReferenceHistories

__all__ = ["ReferenceWalltimes"]


class ReferenceWalltimes:
    """S15 and S16 for the reference scheduler."""

    cluster: Cluster
    running: list[Any]
    histories: ReferenceHistories
    overrun: str
    grace: float
    last_event: float

    if TYPE_CHECKING:  # provided by the scheduler

        def _end(self, job: Any, *, release: bool) -> None: ...

    def _in_order(self, now: float, *, record: bool = True) -> None:
        """S16: no call's ``now`` comes before an earlier call's."""
        if now < self.last_event:
            raise InvalidRequest(f"now = {now} s is before an earlier call's")
        if record:
            self.last_event = now

    def _overruns(self, now: float) -> tuple[list[str], list[str]]:
        """S15, by the running jobs' (predicted end, GPUs, job id)."""
        overran: list[str] = []
        ending: list[Any] = []
        for job in sorted(self.running, key=self._end_key):
            end = job.runs_until
            if end - self.grace > now:
                break
            if self.overrun == "end" and end <= now:
                ending.append(job)
                continue
            if self.overrun == "extend":
                assert job.walltime is not None
                job.runs_until = end + job.walltime * (math.floor((now - end) / job.walltime) + 1)
            elif job.overran:
                continue
            job.overran = True
            overran.append(job.job_id)
            detail = f"walltime {job.walltime:g} s"
            if self.overrun == "extend":
                detail += f"; predicted to end at {job.runs_until:g} s"
            self.histories.add(job.job_id, now, "overran", detail)
        for job in ending:
            self._end(job, release=True)
            self.histories.add(job.job_id, now, "timed_out", f"walltime {job.walltime:g} s")
        return overran, [job.job_id for job in ending]

    @staticmethod
    def _end_key(job: Any) -> tuple[float, int, str]:
        assert job.allocation is not None
        return (job.runs_until, job.allocation.placement.total_gpus, job.job_id)

    def _overrunning(self, placement: Placement) -> tuple[str, ...]:
        """S15: the running jobs past their walltime holding GPUs of ``placement``."""
        by_hold = {j.allocation.id: j for j in self.running if j.allocation is not None}
        late = set()
        for pod in placement.pods:
            for hold_id, gpus in self.cluster.holds_on(pod.node):
                holder = by_hold.get(hold_id)
                if holder is not None and holder.overran and set(gpus) & set(pod.gpus):
                    late.add(holder.job_id)
        return tuple(sorted(late))
