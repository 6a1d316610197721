"""The pending queue, grouped into classes of interchangeable jobs.

Two pending jobs are in one class when the engine cannot tell them apart: same pods, GPUs per
pod, effective ``min_pods`` and required level, selector, and owner (caps and quotas are per
owner). Inside a cycle the free GPUs only shrink (until room is made by preemption, which
restarts the walk), so once one job of a class fails to fit, every later one fails too: a
cycle tries classes, not jobs, and its cost grows with the number of classes and of starts,
not with the length of the queue (README, Scheduler rule S5).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

from gangplace._gangplace import GangRequest

__all__ = ["ClassKey", "JobClass", "OrderKey", "PendingQueue", "QueuedJob"]

OrderKey = tuple[int, int]  # (-priority or 0, submission sequence)
ClassKey = tuple[object, ...]


@dataclass(eq=False)
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
    class_key: ClassKey = ()
    queued_index: int = 0  # the queue's count of additions when it was last added
    # ``effective()`` for the form it was made for: (level, elastic, request)
    _current: tuple[str | None, bool, GangRequest] | None = field(default=None, repr=False)
    # running state
    allocation_id: str | None = None
    started_at: float | None = None

    def form_at(self, now: float) -> tuple[str | None, bool]:
        """``(required_level, elastic)`` at ``now`` (README, rule S3).

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
        return GangRequest(
            pods,
            request.gpus_per_pod,
            min_pods=min(request.min_pods or pods, pods) if self.elastic else None,
            required_level=self.level,
            selector=request.selector,
            name=request.name or self.job_id,
            priority=request.priority,
            preemptible=request.preemptible,
            movable=request.movable,
            slices=request.slices,
            spread=request.spread,
            numa=request.numa,
            spares=request.spares,
        )

    def current(self) -> GangRequest:
        """``effective()``, made once per form (a request is immutable: reports reuse it)."""
        cached = self._current
        if cached is None or cached[0] != self.level or cached[1] != self.elastic:
            cached = self._current = (self.level, self.elastic, self.effective())
        return cached[2]

    @property
    def fewest_gpus(self) -> int:
        """The fewest GPUs it can start with in its current form."""
        request = self.request
        pods = (request.min_pods or request.pods) if self.elastic else request.pods
        if request.spares:  # README "Spares": they are placed with the gang
            inner = request.slices[-1][1] if request.slices else None
            spares = request.spares
            pods = pods + spares if inner is None else pods // inner * (inner + spares)
        return pods * request.gpus_per_pod


@dataclass
class JobClass:
    """Pending jobs of one class, sorted by order key, with their walltimes sorted."""

    orders: list[OrderKey] = field(default_factory=list)
    jobs: dict[OrderKey, QueuedJob] = field(default_factory=dict)
    walltimes: list[float] = field(default_factory=list)

    def add(self, job: QueuedJob) -> None:
        """Inserts ``job`` at its order."""
        bisect.insort(self.orders, job.order)
        self.jobs[job.order] = job
        if job.walltime is not None:
            bisect.insort(self.walltimes, job.walltime)

    def remove(self, job: QueuedJob) -> None:
        """Removes ``job``."""
        del self.orders[bisect.bisect_left(self.orders, job.order)]
        del self.jobs[job.order]
        if job.walltime is not None:
            del self.walltimes[bisect.bisect_left(self.walltimes, job.walltime)]

    def first(self) -> QueuedJob | None:
        """The first job in order."""
        return self.jobs[self.orders[0]] if self.orders else None

    def first_ending_by(
        self, now: float, shadow: float, after: OrderKey | None
    ) -> QueuedJob | None:
        """The first job after ``after`` whose ``now + walltime <= shadow`` (EASY backfill)."""
        if not self.walltimes or now + self.walltimes[0] > shadow:
            return None
        start = 0 if after is None else bisect.bisect_right(self.orders, after)
        for order in self.orders[start:]:
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

    def __len__(self) -> int:
        return len(self.by_id)

    def add(self, job: QueuedJob) -> None:
        """Queues ``job`` in the class of its current form."""
        job.queued_index = self.added
        self.added += 1
        self.by_id[job.job_id] = job
        self.classes.setdefault(job.class_key, JobClass()).add(job)

    def remove(self, job: QueuedJob) -> None:
        """Takes ``job`` out of the queue."""
        del self.by_id[job.job_id]
        group = self.classes[job.class_key]
        group.remove(job)
        if not group.orders:
            del self.classes[job.class_key]

    def in_order(self) -> list[QueuedJob]:
        """Every pending job in queue order (for reports; O(n log n))."""
        return sorted(self.by_id.values(), key=lambda job: job.order)


def shadow_time(now: float, free: int, need: int, ends: list[tuple[float, int, str]]) -> float:
    """A lower bound on the blocked head's earliest start, by the running jobs' walltimes.

    ``ends`` is sorted ``(predicted end, GPUs, job id)`` of the running jobs (``inf`` for a job
    without a walltime; a job past its walltime is taken to end ``now``). When fewer than
    ``need`` GPUs are free, the first instant at which enough are free in total; when enough
    are free but the head does not fit (the free GPUs are in the wrong places), the first
    predicted end, since nothing frees a GPU before it (README, rule S6). ``inf`` when no
    instant qualifies.
    """
    if free >= need:
        return max(ends[0][0], now) if ends else math.inf
    for end, gpus, _ in ends:  # stops at the first instant with enough: O(jobs ending first)
        free += gpus
        if free >= need:
            return max(end, now)
    return math.inf
