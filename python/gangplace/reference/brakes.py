"""The brakes of the reference scheduler (README "Scheduler", S11), restated naively.

A mixin of :class:`gangplace.reference.scheduler.ReferenceScheduler`: every count is redone
from the list of evictions each time it is needed.
"""

from __future__ import annotations

import math
from typing import Any

from gangplace._gangplace import Cluster, GangRequest

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

    def _victims_allowed(self, victims: tuple[str, ...], now: float) -> bool:
        """S11 for a repair's victims: every brake must let all of them go."""
        left = None
        if self.max_victims_per_cycle is not None:
            left = self.max_victims_per_cycle - self.victims_this_cycle
        if left is not None and len(victims) > left:
            return False
        every = {a.id: a for a in self.cluster.allocations()}
        for victim in victims:
            of_job = [j.job_id for j in self.running if j.allocation and j.allocation.id == victim]
            preempted = self.preempted_at.get(of_job[0], -math.inf) if of_job else -math.inf
            if now - every[victim].since < self.min_runtime or now - preempted < self.cooldown:
                return False
        recent = [(owner, gpus) for when, owner, gpus in self.evictions if when > now - 3600.0]
        taking: dict[str, int] = {}
        for victim in victims:
            owner, gpus = self._victim(victim)
            if owner is not None and owner in self.budgets:
                taking[owner] = taking.get(owner, 0) + gpus
        for owner, gpus in taking.items():
            if sum(g for who, g in recent if who == owner) + gpus > self.budgets[owner]:
                return False
        limit = self.max_evicted_gpus_per_hour
        evicting = sum(self._victim(victim)[1] for victim in victims)
        return limit is None or sum(gpus for _, gpus in recent) + evicting <= limit

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
        left = None
        if self.max_victims_per_cycle is not None:
            left = max(self.max_victims_per_cycle - self.victims_this_cycle, 0)
            if left == 0:
                return None
        recent = [(owner, gpus) for when, owner, gpus in self.evictions if when > now - 3600.0]
        exempt = [o for o, b in self.budgets.items() if sum(g for w, g in recent if w == o) >= b]
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
            taking: dict[str, int] = {}
            for victim in every:
                owner, gpus = self._victim(victim)
                if owner is not None and owner in self.budgets:
                    taking[owner] = taking.get(owner, 0) + gpus
            over = [
                o
                for o, g in sorted(taking.items())
                if sum(x for w, x in recent if w == o) + g > self.budgets[o]
            ]
            if not over:
                break
            exempt.extend(over)
        limit = self.max_evicted_gpus_per_hour
        moving = sum(self._victim(victim)[1] for victim in every)
        if limit is not None and sum(gpus for _, gpus in recent) + moving > limit:
            return None
        return plan

    def _victim(self, hold_id: str) -> tuple[str | None, int]:
        """A victim's owner and GPUs."""
        for job in self.running:
            if job.allocation is not None and job.allocation.id == hold_id:
                return job.owner, job.allocation.placement.total_gpus
        held = next(a for a in self.cluster.allocations() if a.id == hold_id)
        return held.owner, held.placement.total_gpus

    def _braked_plan(self, request: GangRequest, now: float) -> Any:
        """S11: the preemption plan within the brakes, or ``None``."""
        left = None
        if self.max_victims_per_cycle is not None:
            left = max(self.max_victims_per_cycle - self.victims_this_cycle, 0)
            if left == 0:
                return None
        recent = [(owner, gpus) for when, owner, gpus in self.evictions if when > now - 3600.0]

        def used(owner: str) -> int:
            return sum(gpus for who, gpus in recent if who == owner)

        exempt = [owner for owner, budget in self.budgets.items() if used(owner) >= budget]
        cooling = [
            job.allocation.id
            for job in self.running
            if job.allocation is not None
            and job.job_id in self.preempted_at
            and now - self.preempted_at[job.job_id] < self.cooldown
        ]
        while True:
            plan = self.cluster.plan_preemption(
                request,
                max_victims=left,
                min_runtime=self.min_runtime,
                exempt_owners=exempt,
                exempt_allocations=cooling,
            )
            if plan is None or not plan.victims:
                return plan
            taking: dict[str, int] = {}
            for victim in plan.victims:
                owner, gpus = self._victim(victim)
                if owner is not None and owner in self.budgets:
                    taking[owner] = taking.get(owner, 0) + gpus
            over = sorted(o for o, g in taking.items() if used(o) + g > self.budgets[o])
            if not over:
                break
            exempt.extend(over)
        limit = self.max_evicted_gpus_per_hour
        evicting = sum(self._victim(victim)[1] for victim in plan.victims)
        if limit is not None and sum(gpus for _, gpus in recent) + evicting > limit:
            return None
        return plan
