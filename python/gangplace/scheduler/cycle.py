"""One scheduling cycle over the class-grouped queue (README, rules S4-S8).

The walk visits jobs in queue order, but through their classes (see
:mod:`gangplace.scheduler.queue`): a heap holds one candidate per class, and a class that
failed to fit is dropped for the rest of the walk. Until the first job that cannot start
(the *head*), every job is a candidate. After it: nothing (``backfill="none"``), every job
(``"any"``), or the jobs whose walltime ends by the head's shadow time (``"easy"``). When
preemption or defragmentation makes room for the head, the walk starts over.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from gangplace.scheduler.queue import ClassKey, OrderKey, QueuedJob
from gangplace.scheduler.reasons import LastWalk
from gangplace.scheduler.values import Moved, Started

if TYPE_CHECKING:
    from gangplace.scheduler.core import Scheduler

__all__ = ["run_cycle"]


def run_cycle(
    scheduler: Scheduler, now: float
) -> tuple[list[Started], list[str], list[Moved], str | None]:
    """Runs one cycle at ``now``: started jobs, evicted ids, moved jobs, the blocked head."""
    started: list[Started] = []
    preempted: list[str] = []
    moved: list[Moved] = []
    head: list[str | None] = [None]
    while _walk(scheduler, now, started, preempted, moved, head):
        pass
    return started, preempted, moved, head[0]


def _walk(
    scheduler: Scheduler,
    now: float,
    started: list[Started],
    preempted: list[str],
    moved: list[Moved],
    blocked: list[str | None],
) -> bool:
    """One walk over the queue; ``True`` when room was made and the walk must start over.

    ``blocked[0]`` is set to the walk's blocked head (``None`` if none).
    """
    blocked[0] = None
    walk = LastWalk(scheduler.backfill, scheduler._queue.added)
    scheduler._last_walk = walk
    queue = scheduler._queue
    failed: set[ClassKey] = set()
    heap: list[tuple[OrderKey, ClassKey]] = []
    for key, group in queue.classes.items():
        first = group.first()
        if first is not None:
            heap.append((first.order, key))
    heapq.heapify(heap)
    head: QueuedJob | None = None
    shadow = 0.0
    while heap:
        order, key = heapq.heappop(heap)
        if key in failed:
            continue
        members = queue.classes.get(key)
        job = members.jobs.get(order) if members is not None else None
        if job is None:
            continue
        outcome = scheduler._try_start(job, now, backfilled=head is not None)
        if isinstance(outcome, Started):
            started.append(outcome)
            nxt = _next_candidate(scheduler, key, order, head is not None, now, shadow)
            if nxt is not None:
                heapq.heappush(heap, (nxt.order, key))
            continue
        failed.add(key)
        walk.failed[key] = "quota" if outcome == "quota" else "nofit"
        if outcome == "quota" or head is not None:
            continue
        room = _make_room(scheduler, job, now)
        if room is not None:
            started.append(room[0])
            preempted.extend(room[1])
            moved.extend(room[2])
            return True
        head = job
        blocked[0] = job.job_id
        if scheduler.backfill == "easy":
            shadow = scheduler._shadow(head, now)
        walk.blocked_by(job.job_id, key, shadow)
        if scheduler.backfill == "none":
            break
        if scheduler.backfill == "easy":
            heap = _easy_candidates(scheduler, heap, failed, now, shadow)
    return False


def _next_candidate(
    scheduler: Scheduler,
    key: ClassKey,
    after: OrderKey,
    backfilling: bool,
    now: float,
    shadow: float,
) -> QueuedJob | None:
    group = scheduler._queue.classes.get(key)
    if group is None:
        return None
    if backfilling and scheduler.backfill == "easy":
        return group.first_ending_by(now, shadow, after)
    return group.first()


def _easy_candidates(
    scheduler: Scheduler,
    heap: list[tuple[OrderKey, ClassKey]],
    failed: set[ClassKey],
    now: float,
    shadow: float,
) -> list[tuple[OrderKey, ClassKey]]:
    """The heap rebuilt with each class's first job that ends by ``shadow``."""
    rebuilt = []
    for _, key in heap:
        if key in failed:
            continue
        group = scheduler._queue.classes.get(key)
        candidate = group.first_ending_by(now, shadow, None) if group is not None else None
        if candidate is not None:
            rebuilt.append((candidate.order, key))
    heapq.heapify(rebuilt)
    return rebuilt


def _make_room(
    scheduler: Scheduler, head: QueuedJob, now: float
) -> tuple[Started, list[str], list[Moved]] | None:
    """Preemption, then defragmentation, for the blocked head; ``None`` if neither helps."""
    request = head.request
    shaped = request.slices or request.numa != "none" or request.spares
    if not (scheduler.preemption or scheduler.defrag) or shaped:
        return None  # slice, numa='single' and spared gangs never make room: plans count pods
    cluster = scheduler.cluster
    request = scheduler._within_quota(head)
    if scheduler.preemption:
        brakes = scheduler._brakes
        plan = brakes.plan(cluster, request, now, scheduler._victim_of, scheduler._allocation_of)
        if plan is not None and plan.victims:
            brakes.record(plan.victims, now, scheduler._victim_of, scheduler.job_of)
            reservation = cluster.preempt(plan, owner=head.owner)
            evicted = scheduler._evicted(plan.victims, now, for_job=head.job_id)
            allocation = cluster.commit(reservation, owner=head.owner)
            return scheduler._started(head, allocation, now, False, tuple(evicted)), evicted, []
    if scheduler.defrag:
        defrag = cluster.plan_defrag(request, min_runtime=scheduler._brakes.min_runtime)
        if defrag is not None and (defrag.moves or defrag.evictions):
            reservation, moves = cluster.apply_defrag(defrag, owner=head.owner)
            moved = scheduler._moved(moves, defrag.moves, now)
            evicted = scheduler._evicted(defrag.evictions, now, for_job=head.job_id)
            allocation = cluster.commit(reservation, owner=head.owner)
            return scheduler._started(head, allocation, now, False, tuple(evicted)), evicted, moved
    return None
