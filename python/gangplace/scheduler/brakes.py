"""Preemption's brakes (docs/scheduler.md, rule S11).

A blocked head may evict lower-priority jobs (S7) only within limits: victims committed at
least ``min_runtime`` seconds ago and not preempted less than ``cooldown`` seconds ago (the
engine's ``min_runtime`` and ``exempt_allocations``, so the search stays in the core); at
most ``max_victims_per_cycle`` victims in one cycle; at most ``max_evicted_gpus_per_hour``
GPUs evicted over the last hour (a sliding window of 3,600 s); and per owner of victims, at
most ``budgets[owner]`` of its GPUs evicted over the last hour. An owner whose budget a plan
would exceed is left out of the candidates and the plan made again, so the victims stay
1-minimal among the eligible allocations; a plan over the cluster-wide hourly limit is not
applied, and the cycle makes no more room. Defragmentation is braked alike: a moved job
counts as a victim for every limit (and starts its cool-down).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gangplace._gangplace import Cluster, DefragPlan, GangRequest, PreemptionPlan
from gangplace.errors import InvalidRequest
from gangplace.scheduler.arguments import checked_name

__all__ = ["DEFRAG_MOVES", "HOUR", "Brakes", "disrupted"]

HOUR = 3600.0
DEFRAG_MOVES = 16  # plan_defrag's own default for max_moves


def disrupted(plan: DefragPlan) -> tuple[str, ...]:
    """The allocations a defragmentation plan moves or evicts, in the plan's order."""
    return (*(move.allocation for move in plan.moves), *plan.evictions)


@dataclass
class Brakes:
    """The limits and the evictions counted against them (mutable: the scheduler's own)."""

    min_runtime: float = 0.0
    cooldown: float = 0.0
    max_victims_per_cycle: int | None = None
    max_evicted_gpus_per_hour: int | None = None
    budgets: dict[str, int] = field(default_factory=dict)
    evicted: deque[tuple[float, str | None, int]] = field(default_factory=deque)
    victims_this_cycle: int = 0
    preempted_at: dict[str, float] = field(default_factory=dict)  # job id -> last eviction
    # Told the name of each brake that holds (the scheduler's metrics), if set.
    refused: Callable[[str], None] | None = None

    def _held(self, brake: str) -> None:
        if self.refused is not None:
            self.refused(brake)

    @classmethod
    def checked(
        cls,
        min_runtime: float,
        cooldown: float,
        max_victims_per_cycle: int | None,
        max_evicted_gpus_per_hour: int | None,
        budgets: Mapping[str, int] | None,
    ) -> Brakes:
        """The brakes, after checking every argument (``TypeError``, ``InvalidRequest``)."""
        for what, seconds in (("min_runtime", min_runtime), ("preemption_cooldown", cooldown)):
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
                raise TypeError(f"{what} must be a number of seconds")
            if not math.isfinite(seconds) or seconds < 0:
                raise InvalidRequest(f"{what} must be finite and >= 0, got {seconds!r}")
        for what, limit in (
            ("max_victims_per_cycle", max_victims_per_cycle),
            ("max_evicted_gpus_per_hour", max_evicted_gpus_per_hour),
            *((f"budget of owner {owner!r}", gpus) for owner, gpus in (budgets or {}).items()),
        ):
            if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
                raise TypeError(f"{what} must be an int or None")
            if limit is not None and limit < 0:
                raise InvalidRequest(f"{what} must be >= 0, got {limit}")
        if any(not isinstance(owner, str) for owner in budgets or {}):
            raise TypeError("budgets must map owner names (str) to GPUs per hour (int)")
        for owner in budgets or {}:
            checked_name("owner of budgets", owner)  # as the engine takes exempt_owners
        return cls(
            float(min_runtime),
            float(cooldown),
            max_victims_per_cycle,
            max_evicted_gpus_per_hour,
            dict(budgets or {}),
        )

    def _recent(self, now: float) -> deque[tuple[float, str | None, int]]:
        while self.evicted and self.evicted[0][0] <= now - HOUR:
            self.evicted.popleft()
        return self.evicted

    def _used(self, now: float, owner: str | None = None, *, everyone: bool = False) -> int:
        return sum(gpus for _, who, gpus in self._recent(now) if everyone or who == owner)

    def plan(
        self,
        cluster: Cluster,
        request: GangRequest,
        now: float,
        victim_of: Callable[[str], tuple[str | None, int]],
        allocation_of: Callable[[str], str | None],
        candidates: list[str] | None = None,
        protected: Iterable[str] = (),
    ) -> PreemptionPlan | None:
        """The preemption plan the brakes allow for ``request`` now, or ``None``.

        ``victim_of(allocation_id)`` gives a victim's owner and GPUs; ``allocation_of(job_id)``
        a running job's allocation (``None`` when it is not running); ``candidates`` the
        only allocations that may be victims, whatever their priority (a queue's reclaim,
        docs/preemption.md P7 and Q6); ``protected`` allocations are never victims (the
        jobs of S17 waiting for their own victims' pods to end).
        """
        left = self._victims_left()
        if left == 0:
            self._held("victims_per_cycle")
            return None
        exempt = self._spent_owners(now)
        cooling = [
            allocation
            for job_id, when in self.preempted_at.items()
            if now - when < self.cooldown and (allocation := allocation_of(job_id)) is not None
        ]
        cooling.extend(protected)
        while True:
            plan = cluster.plan_preemption(
                request,
                max_victims=left,
                min_runtime=self.min_runtime,
                exempt_owners=exempt,
                exempt_allocations=cooling,
                candidates=candidates,
            )
            if plan is None or not plan.victims:
                return plan
            over = self._over_budget(plan.victims, now, victim_of)
            if not over:
                break
            exempt.extend(over)
            self._held("budget")
        return None if self._past_hourly(plan.victims, now, victim_of) else plan

    def _victims_left(self) -> int | None:
        if self.max_victims_per_cycle is None:
            return None
        return max(self.max_victims_per_cycle - self.victims_this_cycle, 0)

    def plan_defrag(
        self,
        cluster: Cluster,
        request: GangRequest,
        now: float,
        victim_of: Callable[[str], tuple[str | None, int]],
    ) -> DefragPlan | None:
        """The defragmentation plan the brakes allow for ``request`` now, or ``None``.

        A moved or evicted job counts as a victim for every limit: at most the victims left
        this cycle are moved (``max_moves``), owners out of budget are left out
        (``exempt_owners``) and the plan made again, and a plan over the hourly limit is not
        applied.
        """
        left = self._victims_left()
        if left == 0:
            self._held("victims_per_cycle")
            return None
        exempt = self._spent_owners(now)
        while True:
            plan = cluster.plan_defrag(
                request,
                max_moves=DEFRAG_MOVES if left is None else min(DEFRAG_MOVES, left),
                min_runtime=self.min_runtime,
                exempt_owners=exempt,
            )
            if plan is None or not (plan.moves or plan.evictions):
                return plan
            over = self._over_budget(disrupted(plan), now, victim_of)
            if not over:
                break
            exempt.extend(over)
            self._held("budget")
        return None if self._past_hourly(disrupted(plan), now, victim_of) else plan

    def allow(
        self,
        victims: tuple[str, ...],
        now: float,
        victim_of: Callable[[str], tuple[str | None, int]],
        since_of: Callable[[str], float],
        job_of: Callable[[str], str | None],
    ) -> bool:
        """Whether every brake lets these victims (a repair's, rule S13) be ended now.

        ``since_of(allocation_id)`` gives when a victim was committed.
        """
        left = self._victims_left()
        if left is not None and len(victims) > left:
            self._held("victims_per_cycle")
            return False
        for victim in victims:
            job_id = job_of(victim)
            preempted = -math.inf if job_id is None else self.preempted_at.get(job_id, -math.inf)
            young = self.min_runtime > 0 and now - since_of(victim) < self.min_runtime
            if young or now - preempted < self.cooldown:  # (no clock compared without a limit)
                return False
        if self._over_budget(victims, now, victim_of):
            self._held("budget")
            return False
        return not self._past_hourly(victims, now, victim_of)

    def _spent_owners(self, now: float) -> list[str]:
        """Owners whose budget the last hour's evictions have used up."""
        return [owner for owner in self.budgets if self._used(now, owner) >= self.budgets[owner]]

    def _past_hourly(
        self,
        victims: tuple[str, ...],
        now: float,
        victim_of: Callable[[str], tuple[str | None, int]],
    ) -> bool:
        """Whether ending ``victims`` would take the last hour's evicted GPUs past the limit."""
        if self.max_evicted_gpus_per_hour is None:
            return False
        evicting = sum(victim_of(victim)[1] for victim in victims)
        if self._used(now, everyone=True) + evicting <= self.max_evicted_gpus_per_hour:
            return False
        self._held("evicted_gpus_per_hour")
        return True

    def _over_budget(
        self,
        victims: tuple[str, ...],
        now: float,
        victim_of: Callable[[str], tuple[str | None, int]],
    ) -> list[str]:
        """Owners whose budget the victims would exceed, sorted."""
        evicting: dict[str, int] = {}
        for victim in victims:
            owner, gpus = victim_of(victim)
            if owner is not None and owner in self.budgets:
                evicting[owner] = evicting.get(owner, 0) + gpus
        return sorted(
            owner
            for owner, gpus in evicting.items()
            if self._used(now, owner) + gpus > self.budgets[owner]
        )

    def record(
        self,
        victims: Any,
        now: float,
        victim_of: Callable[[str], tuple[str | None, int]],
        job_of: Callable[[str], str | None],
    ) -> None:
        """Counts applied evictions against the limits, and starts their jobs' cool-down."""
        for victim in victims:
            owner, gpus = victim_of(victim)
            self.evicted.append((now, owner, gpus))
            self.victims_this_cycle += 1
            job_id = job_of(victim)
            if job_id is not None and self.cooldown > 0:
                self.preempted_at[job_id] = now
        for job_id in [j for j, when in self.preempted_at.items() if now - when >= self.cooldown]:
            del self.preempted_at[job_id]
