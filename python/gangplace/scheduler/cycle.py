"""One scheduling cycle over the class-grouped queue (docs/scheduler.md, rules S4-S8).

The walk visits jobs in queue order, but through their classes (see
:mod:`gangplace.scheduler.queue`): a heap holds one candidate per class. Until the first job
that cannot start (the *head*), every job is tried as it is. After it: nothing
(``backfill="none"``), every job (``"any"``), or, with reservations (``"easy"``: the head's;
``"conservative"``: the first ``reservation_depth`` blocked jobs'), every job, kept off the
GPUs of each reservation whose time comes before the job's predicted end (see
:mod:`gangplace.scheduler.reservations`). Inside a walk the free GPUs only shrink and the
reservations only grow, so a job that failed while kept off the reservations up to time
``t`` proves that every later job of its class ending after ``t`` fails too: each class
keeps that *bound* and offers only jobs ending by it. When preemption or defragmentation
makes room for the head, the walk starts over.

With queues (docs/queues.md), a job also waits when its queue's quota does not
let it start (Q4), a ``queueing="fifo"`` queue's first blocked job stops the rest of that
queue (Q9), and each queue's first blocked job may reclaim (Q5-Q7), after which the walk
starts over. With fair sharing the heap is keyed by each class's queue share first (Q8):
a start only raises shares inside a walk, so a popped key that grew is pushed back.
"""

from __future__ import annotations

import heapq
import math

from gangplace._gangplace import Placement
from gangplace.errors import LimitExceeded, Unschedulable
from gangplace.scheduler.brakes import disrupted
from gangplace.scheduler.parts import Parts
from gangplace.scheduler.queue import ClassKey, OrderKey, QueuedJob
from gangplace.scheduler.reasons import LastWalk
from gangplace.scheduler.reclaim import reclaim
from gangplace.scheduler.reservations import BLIND_BOUND, WalkReservations
from gangplace.scheduler.values import Moved, Started

__all__ = ["HOLD_TTL", "run_cycle"]

# Reservations are committed in the same call; the ttl only has to outlive that call.
HOLD_TTL = 60.0

# (share, the job's order, class, its queue's starts at the share); the order is unique, so
# the class is never compared
Entry = tuple[tuple[tuple[float, float], ...], OrderKey, ClassKey, int]


def run_cycle(
    parts: Parts, now: float
) -> tuple[list[Started], list[str], list[Moved], str | None, LastWalk]:
    """Runs one cycle at ``now``.

    Returns:
        The started jobs, the evicted job (or hold) ids, the moved jobs, the blocked head,
        and what the last walk saw (for the reasons of S10).

    """
    started: list[Started] = []
    preempted: list[str] = []
    moved: list[Moved] = []
    head: list[str | None] = [None]
    walk = _Walk(parts, now)
    while walk.run(started, preempted, moved, head):
        walk = _Walk(parts, now)
    return started, preempted, moved, head[0], walk.record


class _Walk:
    """One walk over the queue."""

    def __init__(self, parts: Parts, now: float) -> None:
        self.parts = parts
        self.now = now
        # S15: a job started now runs until its walltime plus the grace of overrun="end"
        self.grace = parts.running.run_grace()
        self.ends_from = now + self.grace
        self.backfill = backfill = parts.settings.backfill
        depth = {"easy": 1, "conservative": parts.settings.reservation_depth}.get(backfill, 0)
        self.reservations = WalkReservations(depth)
        self.queue = parts.waiting.queue
        self.record = LastWalk(backfill, self.queue.added)
        self.bounds: dict[ClassKey, float] = {}  # class -> skip its jobs ending after this
        self.head: QueuedJob | None = None
        self.free = parts.cluster.stats().free  # healthy GPUs nothing holds, now
        self.quotas = parts.owners.quotas
        self.tenancy = parts.tenancy
        self.fair = self.tenancy is not None and self.tenancy.fair_sharing
        self.stopped: set[str] = set()  # Q9: fifo queues whose first blocked job was met
        self.reclaimers: set[str] = set()  # Q5: queues whose first blocked job was met
        self.nodes = self.tenancy.tree.nodes if self.tenancy is not None else {}
        # Queue -> the fewest GPUs its room refused in this walk, for preemptible jobs and
        # for the others (a smaller room): a queue's room only shrinks in a walk, so no job
        # as large of that queue can start.
        self.short: tuple[dict[str | None, int], dict[str | None, int]] = ({}, {})

    def _short(self, job: QueuedJob) -> bool:
        """Whether the queue's quota refuses the job for sure (Q4), as it refused as many GPUs.

        Only when nothing checked before the queue's room would refuse it first: its owner
        has no quota of its own and its queue is not stopped behind a fifo head (Q9), whose
        reasons take precedence.
        """
        refused = self.short[job.request.preemptible].get(job.queue)
        return (
            refused is not None
            and job.fewest_gpus >= refused
            and job.queue not in self.stopped
            and job.owner not in self.quotas
        )

    def _entry(self, job: QueuedJob, key: ClassKey) -> Entry:
        """The heap entry of a class's candidate.

        The queue's share once the job runs (fair sharing; else 0), then the job's order
        (unique, so the class key is never compared), then the queue's
        count of starts when the share was computed (a share changes only with its queue's
        usage, so an entry whose count is still current needs no new share).
        """
        if not self.fair or self.tenancy is None or job.queue is None:
            return ((), job.order, key, 0)
        tenancy = self.tenancy
        starts = tenancy.starts_seen(job.queue)
        return (tenancy.tree.path_share(job.queue, job.fewest_gpus), job.order, key, starts)

    def run(
        self,
        started: list[Started],
        preempted: list[str],
        moved: list[Moved],
        blocked: list[str | None],
    ) -> bool:
        """The walk; ``True`` when room was made and the walk must start over."""
        parts, queue = self.parts, self.queue
        blocked[0] = None
        heap = [
            self._entry(group.jobs[group.blocks[0][0]], key)
            for key, group in queue.classes.items()
            if group.blocks
        ]
        heapq.heapify(heap)
        pop, push, classes, failed = (
            heapq.heappop,
            heapq.heappush,
            queue.classes,
            self.record.failed,
        )
        fair = self.fair
        seen = self.tenancy.starts_seen if self.tenancy is not None else None
        shorts = self.short  # its two dicts change in place
        while heap:
            entry = pop(heap)
            share, order, key = entry[0], entry[1], entry[2]
            members = classes.get(key)
            job = members.jobs.get(order) if members is not None else None
            if job is None:
                continue
            if (shorts[0] or shorts[1]) and job.queue is not None and self._short(job):
                failed[key] = "queue-quota"  # as its queue's smaller jobs were
                continue
            if fair and entry[3] != seen(job.queue):  # type: ignore[arg-type,misc]
                fresh = self._entry(job, key)  # something of its tree started: shares grew
                if fresh[0] > share:
                    push(heap, fresh)  # its queue's share grew: later
                    continue
            outcome = self._attempt(job, key)
            if isinstance(outcome, Started):
                started.append(outcome)
                self._push_next(heap, key, order)
                continue
            if self._queue_blocked(job, outcome):
                reclaimed = self._reclaim(job)
                if reclaimed is not None:
                    if reclaimed[0] is not None:  # None: it starts after a grace (S17)
                        started.append(reclaimed[0])
                    preempted.extend(reclaimed[1])
                    return True
            if outcome in ("quota", "queue-quota"):
                failed[key] = outcome
                if outcome == "queue-quota" and self._try_unused(job):
                    # Q5: it was evicted in this cycle, so its queue's try goes to the next
                    # blocked job, which may be of its class: the class goes on.
                    self._push_next(heap, key, order)
                elif outcome == "queue-quota":
                    short = self.short[job.request.preemptible]
                    short[job.queue] = min(job.fewest_gpus, short.get(job.queue, 1 << 62))
                continue
            if outcome == "fifo":
                continue
            if self.head is None:
                room = None if self._evicted_now(job) else _make_room(parts, job, self.now)
                if room is not None:
                    if room[0] is not None:  # None: it starts after a grace (S17)
                        started.append(room[0])
                    preempted.extend(room[1])
                    moved.extend(room[2])
                    return True
                self.head = job
                blocked[0] = job.job_id
                self.record.blocked_by(job.job_id, key)
                if self.backfill == "none":
                    break
            if not self.reservations.full:
                # S5: a reserved job holds its GPUs for its walltime and the grace of "end"
                duration = math.inf if job.walltime is None else job.walltime + self.grace
                shadow = parts.book.reserve(
                    parts.cluster,
                    parts.running,
                    job.job_id,
                    parts.owners.request_for(job),
                    self.reservations,
                    duration,
                )
                quota = job.owner is not None and job.owner in self.quotas
                self.reservations.add(shadow, job.owner, quota=quota, duration=duration)
                self.record.reserved[job.job_id] = shadow
            self._push_next(heap, key, order)
        parts.book.keep_only(self.record.reserved)
        return False

    def _queue_blocked(self, job: QueuedJob, outcome: str) -> bool:
        """Q5, Q9: notes that the job's queue met a blocked job; whether it may reclaim."""
        if job.queue is None or outcome in ("quota", "fifo"):
            return False
        assert self.tenancy is not None
        if self.tenancy.tree.queues[job.queue].queueing == "fifo":
            self.stopped.add(job.queue)
        if job.queue in self.reclaimers or self._evicted_now(job):
            return False  # Q5: its queue tried; or it was evicted in this cycle
        self.reclaimers.add(job.queue)
        return True

    def _try_unused(self, job: QueuedJob) -> bool:
        """Q5: the job's queue has not used its reclaim in this walk (it was evicted now)."""
        return job.queue not in self.reclaimers and self._evicted_now(job)

    def _evicted_now(self, job: QueuedJob) -> bool:
        """Q5, S7: evicted in this cycle, so it may not preempt in it (no cascades)."""
        parts = self.parts
        return not parts.settings.evicted_may_preempt and job.job_id in parts.running.evicted_now

    def _reclaim(self, job: QueuedJob) -> tuple[Started | None, list[str]] | None:
        """Q5-Q7: the job's queue preempts what its policies allow, if that starts it."""
        tenancy = self.tenancy
        assert tenancy is not None and job.queue is not None
        if job.queue not in tenancy.may_preempt or job.queue in tenancy.failed_reclaims:
            return None  # Q6: its policies preempt nobody; or it failed in this cycle
        request = job.request
        if request.slices or request.numa != "none" or request.spares:
            return None  # plans count pods (as for S7)
        parts = self.parts
        return reclaim(parts, job, parts.owners.request_for(job, queue=False), self.now)

    def _attempt(self, job: QueuedJob, key: ClassKey) -> Started | str:
        """Tries ``job`` now: ``Started``, or why not (the class's bound set).

        Why not: ``"quota"`` (its owner's), ``"queue-quota"`` (Q4), ``"fifo"`` (Q9) or
        ``"nofit"``. The cheap refusals are recorded for every job; the engine is asked only
        for a job its class's bound does not already refuse.
        """
        parts, now = self.parts, self.now
        if job.owner in self.quotas and parts.owners.reason(job) is not None:
            return "quota"
        if job.queue is not None and self.tenancy is not None:
            if job.queue in self.stopped:
                self._fail(key, -math.inf, "fifo")  # Q9: behind its fifo queue's blocked job
                return "fifo"
            room = self.tenancy.room(job)
            if room < job.fewest_gpus:
                return "queue-quota"
        else:
            room = None
        if job.fewest_gpus > self.free:
            self._fail(key, -math.inf, "nofit")  # too few free GPUs for every job of its class
            return "nofit"
        if self.head is None or self.backfill == "any":  # no reservation to keep off
            if key in self.bounds:
                return "nofit"  # an earlier job of its class failed (a bound of -inf here)
            outcome = _try_start(parts, job, now, self.head is not None, None, room)
            if outcome == "nofit":
                self._fail(key, -math.inf, "nofit")
        else:
            end = self.ends_from + job.walltime if job.walltime is not None else math.inf
            if math.isinf(end) and self.reservations.blind():
                # S5: a job without a walltime never passes a blind reservation
                self._fail(key, BLIND_BOUND, "untimed")
                return "nofit"
            quota_bound = self.reservations.quota_bound(job.owner)
            if end > quota_bound:
                self._fail(key, quota_bound, "quota-reserved")  # its owner's quota is reserved
                return "nofit"
            if end > self.bounds.get(key, math.inf):
                return "nofit"  # known: an earlier job of its class failed under less
            avoid, bound = self.reservations.to_avoid(end)
            outcome = _try_start(parts, job, now, True, avoid, room)
            if outcome == "nofit":
                self._fail(key, bound, "nofit" if bound == -math.inf else "beside")
        if outcome.__class__ is Started:
            # The free GPUs the walk's quick test compares with: a start takes exactly its
            # placement's GPUs and its spares' (``held_gpus`` counts both), all free until then;
            # shares may take free GPUs or none (docs/resources.md F1): counted again.
            if job.request.gpu_milli is None:
                self.free -= job.held_gpus
            else:
                self.free = parts.cluster.stats().free
        return outcome

    def _fail(self, key: ClassKey, bound: float, why: str) -> None:
        if bound < self.bounds.get(key, math.inf):
            self.bounds[key] = bound
            self.record.failed[key] = why

    def _push_next(
        self,
        heap: list[Entry],
        key: ClassKey,
        after: OrderKey,
    ) -> None:
        """Pushes the class's next candidate after ``after``.

        While reservations are still handed out, that is its next job (a job known to fail
        still gets one); after, its next job ending by the class's bound.
        """
        group = self.queue.classes.get(key)
        if group is None:
            return
        head, bounds = self.head, self.bounds
        if head is None:  # before the head: a class's bound is -inf or none
            if key in bounds:
                return
            candidate = group.next_after(after)
        else:
            if self.backfill == "none":
                return
            bound = bounds.get(key, math.inf)
            if not self.reservations.full:
                bound = math.inf
            if bound == -math.inf:
                return
            if bound == math.inf:
                candidate = group.next_after(after)
            else:
                candidate = group.first_ending_by(self.ends_from, bound, after)
        if candidate is None:
            return
        short = self.short
        if (short[0] or short[1]) and candidate.queue is not None and self._short(candidate):
            self.record.failed[key] = "queue-quota"  # as it would be when popped (Q4)
            return
        heapq.heappush(heap, self._entry(candidate, key))


def _try_start(
    parts: Parts,
    job: QueuedJob,
    now: float,
    backfilled: bool,
    avoid: list[Placement] | None = None,
    queue_room: int | None = None,
) -> Started | str:
    """Reserves and commits ``job`` now, never on the GPUs of ``avoid``.

    The walk has checked its quota (``queue_room``: its queue's, as the walk found it)
    and the free GPUs. Returns the ``Started``, or ``"nofit"``, or ``"quota"`` when the
    cluster's owner cap refuses it.
    """
    try:
        request = parts.owners.request_for(job, queue_room=queue_room)
        allocation = parts.cluster._allocate(  # reserve and commit, in one call
            request, ttl=HOLD_TTL, owner=job.owner, avoid=avoid or ()
        )
    except Unschedulable:
        return "nofit"
    except LimitExceeded:
        return "quota"
    started = parts.running.started(job, allocation, now, backfilled)
    assert started is not None  # it evicted nobody
    return started


def _make_room(
    parts: Parts, head: QueuedJob, now: float
) -> tuple[Started | None, list[str], list[Moved]] | None:
    """Preemption, then defragmentation, for the blocked head; ``None`` if neither helps."""
    request = head.request
    shaped = bool(request.slices or request.numa != "none" or request.spares)
    settings = parts.settings
    if not (settings.preemption or settings.defrag) or shaped:
        return None  # slice, numa='single' and spared gangs never do (shares do: P8, D5)
    cluster, running, brakes = parts.cluster, parts.running, parts.brakes
    request = parts.owners.request_for(head)
    if settings.preemption:
        plan = brakes.plan(
            cluster,
            request,
            now,
            running.victim_of,
            running.allocation_of,
            protected=running.starting_holds(),
        )
        if plan is not None and plan.victims:
            brakes.record(plan.victims, now, running.victim_of, running.job_of)
            reservation = cluster.preempt(plan, owner=head.owner)
            evicted = running.evicted(plan.victims, now, for_job=head.job_id)
            allocation = cluster.commit(reservation, owner=head.owner)
            return running.started(head, allocation, now, False, tuple(evicted)), evicted, []
    if settings.defrag:  # both count resources besides GPUs (docs/resources.md)
        defrag = brakes.plan_defrag(cluster, request, now, running.victim_of)
        if defrag is not None and (defrag.moves or defrag.evictions):
            brakes.record(disrupted(defrag), now, running.victim_of, running.job_of)
            reservation, moves = cluster.apply_defrag(defrag, owner=head.owner)
            moved = running.moved(moves, defrag.moves, now)
            evicted = running.evicted(defrag.evictions, now, for_job=head.job_id)
            allocation = cluster.commit(reservation, owner=head.owner)
            return running.started(head, allocation, now, False, tuple(evicted)), evicted, moved
    return None
