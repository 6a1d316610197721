"""The pending queue, grouped into classes of interchangeable jobs.

Two pending jobs are in one class when the engine cannot tell them apart: same pods, GPUs per
pod, effective ``min_pods`` and required level, selector, and owner (caps and quotas are per
owner). Inside a cycle the free GPUs only shrink (until room is made by preemption, which
restarts the walk), so once one job of a class fails to fit, every later one fails too: a
cycle tries classes, not jobs, and its cost grows with the number of classes and of starts,
not with the length of the queue (docs/scheduler.md, Scheduler rule S5).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

from gangplace._gangplace import GangRequest
from gangplace.scheduler.requests import copied

__all__ = ["ClassKey", "JobClass", "OrderKey", "PendingQueue", "QueuedJob"]

OrderKey = tuple[int, float, int]  # (-priority or 0, creation time, submission sequence)
ClassKey = int  # a class's number: its key's tuple is interned once (Scheduler._class_key)


@dataclass(eq=False, slots=True)
class QueuedJob:
    """A submitted job and its current form (mutable: the scheduler's own record)."""

    job_id: str
    request: GangRequest
    owner: str | None
    walltime: float | None
    timeout: float | None
    ladder: tuple[tuple[float, str | None], ...]
    order: OrderKey
    wait_began: float
    level: str | None = None
    elastic: bool = False
    generation: int = 0
    timed_out: bool = False
    class_key: ClassKey = -1
    queued_index: int = 0  # the queue's count of additions when it was last added
    # ``effective()`` for the form it was made for: (level, elastic, request)
    _current: tuple[str | None, bool, GangRequest] | None = field(default=None, repr=False)
    fewest_gpus: int = 0  # the fewest GPUs it can start with in its current form
    # The GPUs its placement holds when that is known from the request alone (a fixed-size
    # gang of whole GPUs; ``None`` otherwise), and its spares per slice: read once at
    # ``set_form``, not per start (each read of a request's field builds a Python object)
    exact_gpus: int | None = None
    spares: int = 0
    on_failure: str = "requeue"  # docs/scheduler.md rule S13
    queue: str | None = None  # docs/queues.md
    # running state
    allocation_id: str | None = None
    started_at: float | None = None
    held_gpus: int = 0  # GPUs its allocation holds, spares included (set when it starts)
    # docs/scheduler.md S15: the predicted end of the current run (inf: no walltime), and
    # whether it passed its walltime
    runs_until: float = math.inf
    overran: bool = False

    def form_at(self, now: float) -> tuple[str | None, bool]:
        """``(required_level, elastic)`` at ``now`` (docs/scheduler.md, rule S3).

        A step of ``s`` seconds applies once ``wait_began + s <= now``: the same sum as the
        due time of the step, so that a due step always changes the form.
        """
        level = self.request.required_level
        for seconds, step_level in self.ladder:
            if self.wait_began + seconds <= now:
                level = step_level
        elastic = self.request.min_pods is not None and (
            self.timeout is None or self.wait_began + self.timeout <= now
        )
        return level, elastic

    def due_times(self) -> list[float]:
        """The instants at which this wait's form changes (ladder steps, the timeout)."""
        offsets = [seconds for seconds, _ in self.ladder]
        if self.timeout is not None:
            offsets.append(self.timeout)
        return sorted(self.wait_began + offset for offset in offsets if offset > 0)

    def effective(self, max_pods: int | None = None) -> GangRequest:
        """The request in its current form, at most ``max_pods`` pods when elastic."""
        request = self.request
        pods = request.pods if max_pods is None else min(request.pods, max_pods)
        outer = request.slices[0][1] if request.slices else 1
        pods = pods // outer * outer  # slice gangs shrink in whole outermost slices
        if (
            pods == request.pods
            and self.level == request.required_level
            and (self.elastic or request.min_pods is None)
            and request.name
        ):
            return request  # its form is the request itself: no copy (issue 51)
        return copied(
            request,
            pods=pods,
            min_pods=min(request.min_pods or pods, pods) if self.elastic else None,
            required_level=self.level,
            name=request.name or self.job_id,
        )

    def current(self) -> GangRequest:
        """``effective()``, made once per form (a request is immutable: reports reuse it)."""
        cached = self._current
        if cached is None or cached[0] != self.level or cached[1] != self.elastic:
            cached = self._current = (self.level, self.elastic, self.effective())
        return cached[2]

    def set_form(self, level: str | None, elastic: bool) -> None:
        """Its current form (docs/scheduler.md S3), and the fewest GPUs it can start with in it."""
        self.level, self.elastic = level, elastic
        self.fewest_gpus = self._count_fewest()
        request = self.request
        fixed = request.min_pods is None and request.gpu_milli is None
        self.exact_gpus = request.pods * request.gpus_per_pod if fixed else None
        self.spares = request.spares
        self._current = (level, elastic, self.effective())  # made here, once per form

    def _count_fewest(self) -> int:
        """The fewest GPUs it can start with in its current form."""
        request = self.request
        pods = (request.min_pods or request.pods) if self.elastic else request.pods
        if request.spares:  # docs/repair.md "Spares": they are placed with the gang
            inner = request.slices[-1][1] if request.slices else None
            spares = request.spares
            pods = pods + spares if inner is None else pods // inner * (inner + spares)
        # A fraction holds no whole GPU (docs/resources.md "Fractions of a GPU"): free GPUs bound
        # nothing.
        return 0 if request.gpu_milli is not None else pods * request.gpus_per_pod


BLOCK = 64  # orders per block of a class (split at twice that)


@dataclass
class JobClass:
    """Pending jobs of one class in order, in blocks that know their shortest walltime.

    The orders are kept sorted across a list of blocks of at most ``2 * BLOCK`` each, every
    block with its last order and its shortest walltime (``inf`` when none of its jobs has
    one), so that EASY backfill's question, the first job after a given one that ends by the
    shadow time, skips whole blocks of longer jobs instead of reading them one by one
    (docs/scheduler.md, rule S5; issue 25, item 6).
    """

    blocks: list[list[OrderKey]] = field(default_factory=list)
    lasts: list[OrderKey] = field(default_factory=list)
    shortest: list[float] = field(default_factory=list)
    jobs: dict[OrderKey, QueuedJob] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.jobs)

    def _shortest_of(self, block: list[OrderKey]) -> float:
        walltimes = (self.jobs[order].walltime for order in block)
        return min((w for w in walltimes if w is not None), default=math.inf)

    def _refresh(self, at: int) -> None:
        """Block ``at`` changed: its last order and shortest walltime again (or it goes)."""
        block = self.blocks[at]
        if not block:
            del self.blocks[at], self.lasts[at], self.shortest[at]
            return
        self.lasts[at] = block[-1]
        self.shortest[at] = self._shortest_of(block)

    def add(self, job: QueuedJob) -> None:
        """Inserts ``job`` at its order."""
        self.jobs[job.order] = job
        walltime = math.inf if job.walltime is None else job.walltime
        if not self.blocks:
            self.blocks.append([job.order])
            self.lasts.append(job.order)
            self.shortest.append(walltime)
            return
        at = min(bisect.bisect_left(self.lasts, job.order), len(self.blocks) - 1)
        block = self.blocks[at]
        bisect.insort(block, job.order)
        if len(block) > 2 * BLOCK:
            self.blocks[at : at + 1] = [block[:BLOCK], block[BLOCK:]]
            self.lasts.insert(at, block[BLOCK - 1])
            self.shortest.insert(at, math.inf)
            self._refresh(at + 1)
            self._refresh(at)
            return
        self.lasts[at] = block[-1]
        self.shortest[at] = min(self.shortest[at], walltime)  # no rescan on an insert

    def remove(self, job: QueuedJob) -> None:
        """Removes ``job``.

        When it may have been its block's shortest, the block's shortest is marked unknown
        (``-inf``, a bound that skips nothing) and found again only if a backfill question
        reads it: a cycle that starts many jobs of a class does not rescan its blocks.
        """
        at = bisect.bisect_left(self.lasts, job.order)
        block = self.blocks[at]
        del block[bisect.bisect_left(block, job.order)]
        del self.jobs[job.order]
        if not block:
            del self.blocks[at], self.lasts[at], self.shortest[at]
            return
        self.lasts[at] = block[-1]
        walltime = math.inf if job.walltime is None else job.walltime
        if walltime <= self.shortest[at]:
            self.shortest[at] = -math.inf

    def first(self) -> QueuedJob | None:
        """The first job in order."""
        return self.jobs[self.blocks[0][0]] if self.blocks else None

    def next_after(self, after: OrderKey) -> QueuedJob | None:
        """The first job after ``after`` in order."""
        at = bisect.bisect_right(self.lasts, after)
        if at == len(self.blocks):
            return None
        block = self.blocks[at]
        return self.jobs[block[bisect.bisect_right(block, after)]]

    def first_ending_by(
        self, now: float, shadow: float, after: OrderKey | None
    ) -> QueuedJob | None:
        """The first job after ``after`` whose ``now + walltime <= shadow`` (EASY backfill)."""
        at = 0 if after is None else bisect.bisect_right(self.lasts, after)
        for index in range(at, len(self.blocks)):
            block, shortest = self.blocks[index], self.shortest[index]
            if shortest == -math.inf:  # unknown since a removal: found again
                shortest = self.shortest[index] = self._shortest_of(block)
            if now + shortest > shadow:  # the same sum as below: never skips one
                continue
            start = 0 if after is None else bisect.bisect_right(block, after)
            for order in block[start:]:
                job = self.jobs[order]
                if job.walltime is not None and now + job.walltime <= shadow:
                    return job
        return None


class PendingQueue:
    """All pending jobs: by id, and by class."""

    def __init__(self) -> None:
        self.by_id: dict[str, QueuedJob] = {}
        self.classes: dict[ClassKey, JobClass] = {}
        self.added = 0  # additions so far: which jobs a walk may have seen
        # Pending jobs per owner and per queue, kept for the metrics' gauges (no pass over
        # the queue per cycle: issue 51).
        self.per_owner: dict[str | None, int] = {}
        self.per_queue: dict[str | None, int] = {}
        # Classes whose members (``JobClass.jobs``) a sealed cycle's reasons share (S12):
        # such a class copies its members before its next change (copy on write), so
        # keeping old ``Decisions`` costs a copy of each class that changes, not a pass
        # over the queue.
        self._shared: set[ClassKey] = set()

    def __len__(self) -> int:
        return len(self.by_id)

    def seal(self) -> dict[ClassKey, dict[OrderKey, QueuedJob]]:
        """Every class's members by order as they are now, shared until the class changes.

        A member's job id and order never change; what else a reason reads of it, the
        caller takes now.
        """
        self._shared = set(self.classes)
        return {key: group.jobs for key, group in self.classes.items()}

    def add(self, job: QueuedJob) -> None:
        """Queues ``job`` in the class of its current form."""
        job.queued_index = self.added
        self.added += 1
        self.by_id[job.job_id] = job
        self.per_owner[job.owner] = self.per_owner.get(job.owner, 0) + 1
        self.per_queue[job.queue] = self.per_queue.get(job.queue, 0) + 1
        key = job.class_key
        group = self.classes.get(key)
        if group is None:
            group = self.classes[key] = JobClass()
        elif key in self._shared:  # a sealed snapshot keeps the members it saw
            group.jobs = dict(group.jobs)
            self._shared.discard(key)
        group.add(job)

    def remove(self, job: QueuedJob) -> None:
        """Takes ``job`` out of the queue."""
        del self.by_id[job.job_id]
        per_owner, per_queue, owner, queue = self.per_owner, self.per_queue, job.owner, job.queue
        left = per_owner[owner] = per_owner[owner] - 1
        if not left:
            del per_owner[owner]
        left = per_queue[queue] = per_queue[queue] - 1
        if not left:
            del per_queue[queue]
        key = job.class_key
        group = self.classes[key]
        if key in self._shared:  # a sealed snapshot keeps the members it saw
            group.jobs = dict(group.jobs)
            self._shared.discard(key)
        group.remove(job)
        if not group.jobs:
            del self.classes[key]

    def in_order(self) -> list[QueuedJob]:
        """Every pending job in queue order (for reports; O(n log n))."""
        return sorted(self.by_id.values(), key=lambda job: job.order)
