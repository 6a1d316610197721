"""The brakes of the reference scheduler (docs/scheduler.md, S11), restated naively.

A mixin of :class:`gangplace.reference.scheduler.ReferenceScheduler`: every count is redone
from the list of evictions each time it is needed.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from gangplace._gangplace import Cluster, GangRequest
from gangplace.reference.history import ReferenceHistories
from gangplace.scheduler.values import Moved, Started

__all__ = ["ReferenceBrakes"]


class ReferenceBrakes:
    """Preemption's and defragmentation's brakes for the reference scheduler."""

    cluster: Cluster
    running: list[Any]
    min_runtime: float
    cooldown: float
    preempted_at: dict[str, float]
    max_victims_per_cycle: int | None
    max_evicted_gpus_per_hour: int | None
    budgets: dict[str, int]
    evictions: list[tuple[float, str | None, int]]
    victims_this_cycle: int
    evicted_now: set[str]
    preemption: bool
    defrag: bool
    histories: ReferenceHistories

    if TYPE_CHECKING:  # provided by the scheduler

        def _request(self, job: Any) -> GangRequest: ...

        def _start(
            self, job: Any, allocation: Any, now: float, backfilled: bool, evicted: Any = ()
        ) -> Started | None: ...

        def _end(self, job: Any, *, release: bool) -> None: ...

        def _queue(self, job: Any, now: float) -> None: ...

        def _grace_holds(self) -> list[str]: ...

        def _grace_ending(self, job: Any, now: float, for_job: str) -> bool: ...

    def _victims_allowed(self, victims: tuple[str, ...], now: float) -> bool:
        """S11 for a repair's victims: every brake must let all of them go."""
        left = self._left()
        if left is not None and len(victims) > left:
            return False
        every = {a.id: a for a in self.cluster.allocations()}
        for victim in victims:
            of_job = [j.job_id for j in self.running if j.allocation and j.allocation.id == victim]
            preempted = self.preempted_at.get(of_job[0], -math.inf) if of_job else -math.inf
            young = self.min_runtime > 0 and now - every[victim].since < self.min_runtime
            if young or now - preempted < self.cooldown:
                return False
        return not self._over(list(victims), now) and not self._past_hourly(list(victims), now)

    def _count_evictions(self, victims: list[tuple[str, str | None, int]], now: float) -> None:
        """S11: evictions counted against the limits; victims' jobs start their cool-down."""
        for victim, owner, gpus in victims:
            self.evictions.append((now, owner, gpus))
            for job in self.running:
                hit = job.allocation is not None and job.allocation.id == victim
                if hit and self.cooldown > 0:
                    self.preempted_at[job.job_id] = now
        self.victims_this_cycle += len(victims)
        self.preempted_at = {j: t for j, t in self.preempted_at.items() if now - t < self.cooldown}

    def _braked_defrag(self, request: GangRequest, now: float) -> Any:
        """S11 for defragmentation: a moved job counts as a victim for every limit."""
        left = self._left()
        if left == 0:
            return None
        exempt = [owner for owner in self.budgets if self._spent(now, owner) >= self.budgets[owner]]
        while True:
            plan = self.cluster.plan_defrag(
                request,
                max_moves=16 if left is None else min(16, left),
                min_runtime=self.min_runtime,
                exempt_owners=exempt,
            )
            if plan is None or not (plan.moves or plan.evictions):
                return plan
            every = [m.allocation for m in plan.moves] + list(plan.evictions)
            over = self._over(every, now)
            if not over:
                break
            exempt.extend(over)
        return None if self._past_hourly(every, now) else plan

    def _left(self) -> int | None:
        """Victims this cycle may still take (``None``: no limit)."""
        if self.max_victims_per_cycle is None:
            return None
        return max(self.max_victims_per_cycle - self.victims_this_cycle, 0)

    def _spent(self, now: float, owner: str | None = None) -> int:
        """GPUs evicted over the last hour: ``owner``'s, or everyone's (``None``)."""
        recent = [(who, gpus) for when, who, gpus in self.evictions if when > now - 3600.0]
        return sum(gpus for who, gpus in recent if owner is None or who == owner)

    def _over(self, victims: list[str], now: float) -> list[str]:
        """Owners whose budget these victims would pass, sorted."""
        taking: dict[str, int] = {}
        for victim in victims:
            owner, gpus = self._victim(victim)
            if owner is not None and owner in self.budgets:
                taking[owner] = taking.get(owner, 0) + gpus
        return sorted(o for o, g in taking.items() if self._spent(now, o) + g > self.budgets[o])

    def _past_hourly(self, victims: list[str], now: float) -> bool:
        """Whether these victims would take the last hour's evictions past the limit."""
        limit = self.max_evicted_gpus_per_hour
        taking = sum(self._victim(victim)[1] for victim in victims)
        return limit is not None and self._spent(now) + taking > limit

    def _victim(self, hold_id: str) -> tuple[str | None, int]:
        """A victim's owner and GPUs."""
        for job in self.running:
            if job.allocation is not None and job.allocation.id == hold_id:
                return job.owner, job.allocation.placement.total_gpus
        held = next(a for a in self.cluster.allocations() if a.id == hold_id)
        return held.owner, held.placement.total_gpus

    def _braked_plan(
        self, request: GangRequest, now: float, candidates: list[str] | None = None
    ) -> Any:
        """S11: the preemption plan within the brakes (among ``candidates``: P7), or ``None``."""
        left = self._left()
        if left == 0:
            return None
        exempt = [owner for owner in self.budgets if self._spent(now, owner) >= self.budgets[owner]]
        cooling = [
            job.allocation.id
            for job in self.running
            if job.allocation is not None
            and job.job_id in self.preempted_at
            and now - self.preempted_at[job.job_id] < self.cooldown
        ] + self._grace_holds()  # S17: a job waiting for its victims' pods is no victim
        while True:
            plan = self.cluster.plan_preemption(
                request,
                max_victims=left,
                min_runtime=self.min_runtime,
                exempt_owners=exempt,
                exempt_allocations=cooling,
                candidates=candidates,
            )
            if plan is None or not plan.victims:
                return plan
            over = self._over(list(plan.victims), now)
            if not over:
                break
            exempt.extend(over)
        return None if self._past_hourly(list(plan.victims), now) else plan

    def _make_room(
        self, head: Any, now: float
    ) -> tuple[Started | None, list[str], list[Moved]] | None:
        """S7: preemption first, then defragmentation.

        Never for slice, NUMA or spared gangs: plans count pods of whole nodes' GPUs. Gangs
        asking resources or shares of a GPU do (docs/preemption.md "Resources", P8 and D5).
        """
        if head.request.slices or head.request.numa != "none" or head.request.spares:
            return None
        request = self._request(head)
        if self.preemption:
            plan = self._braked_plan(request, now)
            if plan is not None and plan.victims:
                victims = [(victim, *self._victim(victim)) for victim in plan.victims]
                self._count_evictions(victims, now)
                reservation = self.cluster.preempt(plan, owner=head.owner)
                evicted = self._evict(plan.victims, now, head.job_id)
                allocation = self.cluster.commit(reservation, owner=head.owner)
                return self._start(head, allocation, now, False, evicted), evicted, []
        if self.defrag:
            defrag = self._braked_defrag(request, now)
            if defrag is not None and (defrag.moves or defrag.evictions):
                every = [m.allocation for m in defrag.moves] + list(defrag.evictions)
                self._count_evictions([(v, *self._victim(v)) for v in every], now)
                reservation, new = self.cluster.apply_defrag(defrag, owner=head.owner)
                moved = []
                for move in defrag.moves:
                    renewed = new[move.allocation]
                    allocation = self.cluster.commit(renewed, owner=renewed.owner)
                    for job in self.running:
                        if job.allocation is not None and job.allocation.id == move.allocation:
                            job.allocation = allocation
                            moved.append(Moved(job.job_id, move, allocation))
                            self.histories.add(job.job_id, now, "moved", allocation.id)
                evicted = self._evict(defrag.evictions, now, head.job_id)
                allocation = self.cluster.commit(reservation, owner=head.owner)
                return self._start(head, allocation, now, False, evicted), evicted, moved
        return None

    def _evict(self, hold_ids: tuple[str, ...], now: float, for_job: str) -> list[str]:
        names = []
        for hold_id in hold_ids:
            match = [j for j in self.running if j.allocation and j.allocation.id == hold_id]
            if not match:
                names.append(hold_id)
                continue
            self._end(match[0], release=False)
            self.evicted_now.add(match[0].job_id)
            self.histories.add(match[0].job_id, now, "preempted", f"for {for_job}")
            if not self._grace_ending(match[0], now, for_job):  # S17
                self._queue(match[0], now)
            names.append(match[0].job_id)
        return names
