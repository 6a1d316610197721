"""Running jobs that lose hardware, in the reference scheduler (docs/scheduler.md, S13).

A mixin of :class:`gangplace.reference.scheduler.ReferenceScheduler`: every cycle looks at
every running job's allocation, in queue order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gangplace._gangplace import Cluster
from gangplace.errors import GangplaceError
from gangplace.reference.history import ReferenceHistories
from gangplace.scheduler.values import Repaired

__all__ = ["ReferenceFailures"]


class ReferenceFailures:
    """S13 for the reference scheduler."""

    cluster: Cluster
    running: list[Any]
    histories: ReferenceHistories
    repair_widen: bool
    preemption: bool
    starting: dict[str, Any]  # S17: jobs reported started once their victims' pods end

    if TYPE_CHECKING:  # provided by the scheduler and its brakes

        def _order(self, job: Any) -> tuple[int, float, int]: ...

        def _end(self, job: Any, *, release: bool) -> None: ...

        def _queue(self, job: Any, now: float) -> None: ...

        def _victims_allowed(self, victims: tuple[str, ...], now: float) -> bool: ...

        def _victim(self, hold_id: str) -> tuple[str | None, int]: ...

        def _count_evictions(
            self, victims: list[tuple[str, str | None, int]], now: float
        ) -> None: ...

        def _evict(self, hold_ids: tuple[str, ...], now: float, for_job: str) -> list[str]: ...

    def _failures(self, now: float) -> tuple[list[Repaired], list[str], list[str], list[str]]:
        """S13: every running job with lost ranks, in queue order, by its ``on_failure``."""
        repaired: list[Repaired] = []
        requeued: list[str] = []
        failed: list[str] = []
        evicted: list[str] = []
        lost = {a.id: a.lost for a in self.cluster.allocations() if a.lost}
        for job in sorted(self.running, key=self._order):
            if job not in self.running or job.allocation is None:
                continue  # ended by an earlier repair's preemption
            if job.allocation.id not in lost:
                continue
            ranks = ", ".join(str(rank) for rank in lost[job.allocation.id])
            if job.on_failure == "repair":
                done = self._repair(job, now, evicted)
                if done is not None:
                    if job.job_id not in self.starting:  # S17: reported started, repaired
                        repaired.append(done)
                        self.histories.add(job.job_id, now, "repaired", f"ranks {ranks}")
                    continue
            self._end(job, release=True)
            if job.on_failure == "fail":
                self.histories.add(job.job_id, now, "failed", f"lost ranks {ranks}")
                failed.append(job.job_id)
                continue
            self.histories.add(job.job_id, now, "requeued", f"lost ranks {ranks}")
            self._queue(job, now)
            requeued.append(job.job_id)
        return repaired, requeued, failed, evicted

    def _repair(self, job: Any, now: float, evicted: list[str]) -> Repaired | None:
        """S13: a repair in place (widened; with preemption, victims the brakes allow)."""
        assert job.allocation is not None
        hold = job.allocation.id
        try:
            widen = self.repair_widen
            plan = self.cluster.plan_repair(hold, widen=widen, owner=job.owner)
            if plan is None and self.preemption:
                plan = self.cluster.plan_repair(hold, widen=widen, preempt=True, owner=job.owner)
                if plan is not None and not self._victims_allowed(plan.victims, now):
                    plan = None
            if plan is None:
                return None
            victims = [(victim, *self._victim(victim)) for victim in plan.victims]
            reservation = self.cluster.repair(plan, owner=job.owner)
            allocation = self.cluster.commit_repair(reservation, owner=job.owner)
        except GangplaceError:
            return None
        self._count_evictions(victims, now)
        evicted.extend(self._evict(plan.victims, now, f"repair of {job.job_id}"))
        job.allocation = allocation
        return Repaired(job.job_id, plan, allocation)
