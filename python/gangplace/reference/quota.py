"""Queues and quotas (docs/queues.md, Q1-Q10), restated naively for the tests.

Every quantity is computed again from the queue and cohort values and the list of running
jobs each time it is asked for: nothing is kept up to date. :class:`ReferenceTenancy` is the
mixin of :class:`gangplace.reference.scheduler.ReferenceScheduler` that applies the rules.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from gangplace._gangplace import Cluster, GangRequest
from gangplace.errors import InvalidRequest
from gangplace.scheduler.quota import Cohort, Queue
from gangplace.scheduler.values import Started

__all__ = ["ReferenceQuotas", "ReferenceTenancy"]


class ReferenceQuotas:
    """Q1-Q3 and Q8 over a fixed tree, from the running jobs given to each question."""

    def __init__(self, queues: list[Queue], cohorts: list[Cohort]) -> None:
        names = [q.name for q in queues] + [c.name for c in cohorts]
        if not queues or len(set(names)) != len(names):
            raise InvalidRequest("no queue, or a name used twice")
        self.queues = {q.name: q for q in queues}
        self.cohorts = {c.name: c for c in cohorts}
        parents = [q.cohort for q in queues] + [c.parent for c in cohorts]
        for parent in parents:
            if parent is not None and parent not in self.cohorts:
                raise InvalidRequest(f"unknown cohort {parent!r}")
        for cohort in cohorts:
            seen = [cohort.name]
            while self._parent(seen[-1]) is not None:
                seen.append(self._parent(seen[-1]) or "")
                if seen[-1] in seen[:-1]:
                    raise InvalidRequest("a cycle of parents")

    def _parent(self, name: str) -> str | None:
        if name in self.queues:
            return self.queues[name].cohort
        return self.cohorts[name].parent

    def _children(self, name: str) -> list[str]:
        return [n for n in [*self.queues, *self.cohorts] if self._parent(n) == name]

    def _spec(self, name: str) -> Queue | Cohort:
        return self.queues.get(name) or self.cohorts[name]

    def root(self, name: str) -> str:
        """The root cohort of a node's tree (itself for a root)."""
        while self._parent(name) is not None:
            name = self._parent(name) or ""
        return name

    def subtree(self, name: str) -> int:
        """Q2: its nominal plus what each child lends it."""
        own = self._spec(name).nominal["gpu"]
        return own + sum(self.subtree(c) - self.guaranteed(c) for c in self._children(name))

    def guaranteed(self, name: str) -> int:
        """Q2: the part of its subtree never lent."""
        limit = self._spec(name).lending_limit
        return 0 if limit is None else max(0, self.subtree(name) - limit["gpu"])

    def usage(self, name: str, running: dict[str, int]) -> int:
        """Q2: ``running`` maps each queue to the GPUs its running jobs hold."""
        if name in self.queues:
            return running.get(name, 0)
        return sum(
            max(0, self.usage(c, running) - self.guaranteed(c)) for c in self._children(name)
        )

    def available(self, name: str, running: dict[str, int]) -> int:
        """Q3, as docs/queues.md states it (may be < 0 when over)."""
        usage, guaranteed = self.usage(name, running), self.guaranteed(name)
        parent = self._parent(name)
        if parent is None:
            return self.subtree(name) - usage
        from_parent = self.available(parent, running)
        limit = self._spec(name).borrowing_limit
        if limit is not None:
            stored = self.subtree(name) - guaranteed
            from_parent = min(from_parent, stored - max(0, usage - guaranteed) + limit["gpu"])
        return max(0, guaranteed - usage) + from_parent

    def share(self, queue: str, running: dict[str, int], extra: int = 0) -> tuple[float, float]:
        """Q8: (borrowed over the root's subtree divided by the weight, not divided)."""
        borrowed = running.get(queue, 0) + extra - self.queues[queue].nominal["gpu"]
        if borrowed <= 0:
            return (0.0, 0.0)
        raw = borrowed / max(self.subtree(self.root(queue)), 1)
        weight = self.queues[queue].weight
        return (math.inf if weight == 0 else raw / weight, raw)

    def node_share(self, name: str, running: dict[str, int]) -> tuple[float, float]:
        """Q8 for a queue or cohort: ``(weighted, unweighted)`` share.

        Its use beyond its quota (a queue's nominal, a cohort's subtree) over the root's
        subtree, divided by its weight; then not divided.
        """
        spec = self._spec(name)
        quota = spec.nominal["gpu"] if name in self.queues else self.subtree(name)
        borrowed = self.usage(name, running) - quota
        if borrowed <= 0:
            return (0.0, 0.0)
        raw = borrowed / max(self.subtree(self.root(name)), 1)
        return (math.inf if spec.weight == 0 else raw / spec.weight, raw)

    def path_share(
        self, queue: str, running: dict[str, int], extra: int = 0
    ) -> tuple[tuple[float, float], ...]:
        """Q8: the shares of the nodes below the root down to the queue (Kueue's tournament)."""
        used = dict(running)
        used[queue] = used.get(queue, 0) + extra
        chain = [queue]
        while (parent := self._parent(chain[-1])) is not None and self._parent(parent) is not None:
            chain.append(parent)
        return tuple(self.node_share(name, used) for name in reversed(chain))

    def ancestors(self, name: str) -> list[str]:
        """Its cohorts, bottom up."""
        found = []
        while (parent := self._parent(name)) is not None:
            found.append(parent)
            name = parent
        return found

    def same_tree(self, a: str, b: str) -> bool:
        """Whether two queues lend to each other (one root cohort)."""
        both = self.queues[a].cohort is not None and self.queues[b].cohort is not None
        return both and self.root(a) == self.root(b)


class ReferenceTenancy:
    """Q4-Q9 for the reference scheduler (a mixin: the scheduler gives jobs and the cluster)."""

    cluster: Cluster
    running: list[Any]
    tenancy: ReferenceQuotas | None
    fair_sharing: bool
    fair_strategies: tuple[str, ...]
    failed_reclaims: set[str]
    started_now: set[str]

    if TYPE_CHECKING:  # provided by the scheduler and its brakes

        def _fewest(self, job: Any) -> int: ...

        def _order(self, job: Any) -> tuple[int, float, int]: ...

        def _braked_plan(
            self, request: GangRequest, now: float, candidates: list[str] | None = None
        ) -> Any: ...

        def _victims_allowed(self, victims: tuple[str, ...], now: float) -> bool: ...

        def _count_evictions(
            self, victims: list[tuple[str, str | None, int]], now: float
        ) -> None: ...

        def _victim(self, hold_id: str) -> tuple[str | None, int]: ...

        def _evict(self, hold_ids: tuple[str, ...], now: float, for_job: str) -> list[str]: ...

        def _start(
            self, job: Any, allocation: Any, now: float, backfilled: bool, evicted: Any = ()
        ) -> Started | None: ...

    def _used(self, without: list[Any] = ()) -> dict[str, int]:  # type: ignore[assignment]
        used: dict[str, int] = {}
        for job in self.running:
            if job.allocation is not None and all(job is not w for w in without):
                used[job.queue] = used.get(job.queue, 0) + job.allocation.placement.total_gpus
        return used

    def _queue_room(self, job: Any, without: list[Any] = ()) -> int:  # type: ignore[assignment]
        """Q4: what the job's queue lets it take (never borrowing unless preemptible)."""
        assert self.tenancy is not None
        used = self._used(without)
        room = max(0, self.tenancy.available(job.queue, used))
        if not job.request.preemptible:
            room = min(
                room, max(0, self.tenancy.queues[job.queue].nominal["gpu"] - used.get(job.queue, 0))
            )
        return room

    def _queue_reason(self, job: Any) -> str | None:
        assert self.tenancy is not None
        room = self._queue_room(job)
        if self._fewest(job) <= room:
            return None
        nominal = self.tenancy.queues[job.queue].nominal["gpu"]
        never = "" if job.request.preemptible else "; it is not preemptible, so never borrows"
        return (
            f"queue {job.queue!r} lets it take {room} GPUs now, it needs {self._fewest(job)} "
            f"(nominal {nominal}, in use {self._used().get(job.queue, 0)}{never})"
        )

    def _share_key(self, job: Any) -> tuple[tuple[tuple[float, float], ...], Any]:
        """Q8: the walk's order (the path of shares once the job runs, then S1's order)."""
        share: tuple[tuple[float, float], ...] = ()
        if self.tenancy is not None and self.fair_sharing:
            share = self.tenancy.path_share(job.queue, self._used(), self._fewest(job))
        return (share, self._order(job))

    def _policy(
        self, job: Any, other: str, used: dict[str, int], start: dict[str, int] | None = None
    ) -> tuple[str | None, Any, bool]:
        """Q6 for another queue of the job's tree: ``(policy, ceiling, fair check)``.

        As ``gangplace.scheduler.tenancy.Tenancy._policy`` states it, recomputed naively:
        whether the other queue is over its quota below the common cohort by ``used``; the
        job's advantage by ``start`` (default ``used``).
        """
        assert self.tenancy is not None
        tree, mine = self.tenancy, self.tenancy.queues[job.queue]
        if not tree.same_tree(job.queue, other):
            return None, None, False
        mine_up, other_up = tree.ancestors(job.queue), tree.ancestors(other)
        common = next(c for c in mine_up if c in other_up)
        if used.get(other, 0) <= tree.queues[other].nominal["gpu"]:
            return None, None, False
        below = other_up[: other_up.index(common)]
        if any(tree.usage(c, used) <= tree.subtree(c) for c in below):
            return None, None, False
        after = dict(used if start is None else start)
        after[job.queue] = after.get(job.queue, 0) + self._fewest(job)
        fits = after[job.queue] <= mine.nominal["gpu"]
        mine_below = mine_up[: mine_up.index(common)]
        if fits or any(tree.usage(c, after) <= tree.subtree(c) for c in mine_below):
            return mine.reclaim_within_cohort, None, False
        if self.fair_sharing:
            return mine.reclaim_within_cohort, None, True
        return mine.borrow_within_cohort, mine.borrow_within_cohort_max_priority, False

    def _gives(self, job: Any, victim: Any, used: dict[str, int]) -> bool:
        """Q7: whether a fair-sharing strategy lets the victim's queue give it to the job."""
        assert self.tenancy is not None
        tree = self.tenancy
        mine = tree.path_share(job.queue, used, self._fewest(job))
        gpus = victim.allocation.placement.total_gpus
        initial = tree.path_share(victim.queue, used) > mine
        final = tree.path_share(victim.queue, used, -gpus) >= mine
        return ("less_than_initial_share" in self.fair_strategies and initial) or (
            "less_than_or_equal_to_final_share" in self.fair_strategies and final
        )

    def _victim_key(self, victim: Any, used: dict[str, int]) -> tuple[object, ...]:
        """Q7's order.

        The queue furthest above its share first (fair sharing), then lower priority, the
        latest started, job id.
        """
        assert self.tenancy is not None
        shares = self.tenancy.path_share(victim.queue, used) if self.fair_sharing else ()
        above = tuple((-weighted, -raw) for weighted, raw in shares)
        return (above, victim.request.priority, -(victim.started_at or 0.0), victim.job_id)

    def _candidates(self, job: Any) -> tuple[list[Any], list[Any]]:
        """Q6: other queues' jobs it may preempt, then its own queue's, each in Q7's order."""
        assert self.tenancy is not None
        tree, used, mine = self.tenancy, self._used(), self.tenancy.queues[job.queue]
        final = "less_than_or_equal_to_final_share" in self.fair_strategies
        priority = job.request.priority
        others, own = [], []
        for other in self.running:
            if other.job_id in self.started_now:
                continue  # Q6: a cycle never undoes its own starts
            if other.queue == job.queue:
                newer = self._order(other)[1:] > self._order(job)[1:]
                if mine.within_queue != "never" and (
                    other.request.priority < priority
                    or (
                        mine.within_queue == "lower_or_newer_equal_priority"
                        and other.request.priority == priority
                        and newer
                    )
                ):
                    own.append(other)
                continue
            policy, ceiling, fair = self._policy(job, other.queue, used)
            if policy is None:
                continue
            if fair:
                share = tree.path_share(other.queue, used)
                after = tree.path_share(job.queue, used, self._fewest(job))
                if share < after or (share == after and not final):
                    continue
            if ceiling is not None and other.request.priority > ceiling:
                continue
            if policy == "any" or (policy != "never" and other.request.priority < priority):
                others.append(other)

        def order(victim: Any) -> tuple[object, ...]:
            return self._victim_key(victim, used)

        return sorted(others, key=order), sorted(own, key=order)

    def _reclaim(
        self, job: Any, request: GangRequest, now: float
    ) -> tuple[Started | None, list[str]] | None:
        """Q5-Q7: the first group of candidates whose victims start the job."""
        if job.queue in self.failed_reclaims:
            return None
        others, own = self._candidates(job)
        groups = [
            g
            for i, g in enumerate([others, others + own])
            if g and g not in [others, others + own][:i]
        ]
        for group in groups:
            chosen = self._choose_victims(job, request, group, now)
            if chosen is not None:
                plan, extras = chosen
                return self._apply_reclaim(job, plan, extras, now)
        self.failed_reclaims.add(job.queue)
        return None

    def _first_refused(self, job: Any, victims: list[Any]) -> Any:
        """Q7's re-check: victims taken one by one, each the first in Q7's order then."""
        assert self.tenancy is not None
        used, start = self._used(), self._used()
        left = list(victims)
        while left:
            victim = min(left, key=lambda v: self._victim_key(v, used))
            if victim.queue != job.queue:
                # over its quota as now; the job's advantage as at the start
                policy, _, fair = self._policy(job, victim.queue, used, start)
                if policy is None:
                    return victim
                if fair and not self._gives(job, victim, used):
                    return victim
            used[victim.queue] -= victim.allocation.placement.total_gpus
            left.remove(victim)
        return None

    def _choose_victims(self, job: Any, request: GangRequest, group: list[Any], now: float) -> Any:
        group = list(group)
        while True:  # Q7: a plan the re-check refuses is made again without that victim
            holds = {v.allocation.id: v for v in group}
            plan = self._braked_plan(request, now, list(holds))
            if plan is None:
                return None
            victims = [holds[h] for h in plan.victims]
            refused = self._first_refused(job, victims)
            if refused is None:
                break
            group.remove(refused)
        gpus = plan.placement.total_gpus
        if self._queue_room(job, victims) >= gpus:
            return plan, []
        chosen = list(victims)
        for victim in group:  # Q7: more for the quota alone, in order
            if victim in chosen or self._first_refused(job, [*chosen, victim]) is not None:
                continue
            chosen.append(victim)
            if self._queue_room(job, chosen) >= gpus:
                break
        else:
            return None
        for victim in reversed(list(chosen)):  # then each one not needed restored
            rest = [v for v in chosen if v is not victim]
            releases = [[v.allocation.id for v in rest]] if rest else []
            fits = self.cluster.place_after(request, releases) is not None
            if fits and self._queue_room(job, rest) >= gpus:
                chosen = rest
        plan = self._braked_plan(request, now, [v.allocation.id for v in chosen])
        if plan is None or self._queue_room(job, chosen) < plan.placement.total_gpus:
            return None
        if self._first_refused(job, chosen) is not None:
            return None
        if not self._victims_allowed(tuple(v.allocation.id for v in chosen), now):
            return None
        return plan, [v for v in chosen if v.allocation.id not in plan.victims]

    def _apply_reclaim(
        self, job: Any, plan: Any, extras: list[Any], now: float
    ) -> tuple[Started | None, list[str]]:
        holds = [v.allocation.id for v in extras] + list(plan.victims)
        self._count_evictions([(h, *self._victim(h)) for h in holds], now)
        for victim in extras:
            self.cluster.release(victim.allocation, owner=victim.owner)
        reservation = self.cluster.preempt(plan, owner=job.owner)
        evicted = self._evict(tuple(holds), now, job.job_id)
        allocation = self.cluster.commit(reservation, owner=job.owner)
        return self._start(job, allocation, now, False, evicted), evicted
