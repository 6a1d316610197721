"""The waiting side of the Scheduler: its queue, the jobs' forms and their classes.

docs/scheduler.md, rules S1 (order), S3 (form: ladder steps and timeouts) and S8 (classes).
:class:`Waiting` owns the :class:`~gangplace.scheduler.queue.PendingQueue`, the heap of the
times at which a pending job's form changes, and the numbering of job classes; it queues a
job (at submit, and again when a running job is requeued or evicted) and applies the form
changes that are due.
"""

from __future__ import annotations

import heapq

from gangplace.scheduler.queue import OrderKey, PendingQueue, QueuedJob

__all__ = ["Waiting"]


class Waiting:
    """The pending jobs, their due form changes and their class numbers (mutable)."""

    def __init__(self, order: str) -> None:
        self.order = order  # "fifo" or "priority" (S1)
        self.queue = PendingQueue()
        # (due, job order, job id, generation): a form change of a job's current wait
        self.stages: list[tuple[float, OrderKey, str, int]] = []
        self._class_numbers: dict[tuple[object, ...], int] = {}  # class tuple -> its number
        self._sequence = 0

    def next_order(self, priority: int, created: float) -> OrderKey:
        """The queue position of a job submitted now (S1).

        Priority first if ordered by it, then its creation time, then submission order.
        """
        self._sequence += 1
        return (-priority if self.order == "priority" else 0, created, self._sequence)

    def enqueue(self, job: QueuedJob, now: float) -> None:
        """Queues ``job`` at its position; a new wait begins at ``now`` (S3)."""
        job.wait_began = now
        job.generation += 1
        job.timed_out = False
        job.set_form(*job.form_at(now))
        job.class_key = self.class_key(job)
        self.queue.add(job)
        for due in job.due_times():
            heapq.heappush(self.stages, (due, job.order, job.job_id, job.generation))

    def class_key(self, job: QueuedJob) -> int:
        """The number of the job's class (S8): what makes jobs alike to the engine.

        The tuple is interned once per distinct class, so that the walk's lookups hash an
        int rather than a tuple of a dozen fields.
        """
        key = _class_tuple(job)
        number = self._class_numbers.get(key)
        if number is None:
            number = self._class_numbers[key] = len(self._class_numbers)
        return number

    def apply_stages(self, now: float) -> tuple[list[str], list[tuple[str, str | None]]]:
        """Applies the form changes due by ``now`` (S3): the timed-out and degraded jobs."""
        timed_out: list[str] = []
        degraded: list[tuple[str, str | None]] = []
        changed: dict[str, QueuedJob] = {}
        by_id = self.queue.by_id
        while self.stages and self.stages[0][0] <= now:
            _, _, job_id, generation = heapq.heappop(self.stages)
            job = by_id.get(job_id)
            if job is not None and job.generation == generation:
                changed[job_id] = job
        for job in sorted(changed.values(), key=lambda job: job.order):
            level, elastic = job.form_at(now)
            if (
                not job.timed_out
                and job.timeout  # a timeout of 0 never passes: elastic from the start
                and job.wait_began + job.timeout <= now
            ):
                job.timed_out = True
                timed_out.append(job.job_id)
            if level != job.level:
                degraded.append((job.job_id, level))
            if level != job.level or elastic != job.elastic:
                self.queue.remove(job)
                job.set_form(level, elastic)
                job.class_key = self.class_key(job)
                self.queue.add(job)
        return timed_out, degraded

    def next_wakeup(self) -> float | None:
        """The earliest due form change of a job still waiting in that form, or ``None``."""
        by_id = self.queue.by_id
        while self.stages:
            due, _, job_id, generation = self.stages[0]
            job = by_id.get(job_id)
            if job is not None and job.generation == generation:
                return due
            heapq.heappop(self.stages)
        return None


def _class_tuple(job: QueuedJob) -> tuple[object, ...]:
    request = job.request
    return (
        request.pods,
        request.gpus_per_pod,
        request.min_pods if job.elastic else None,
        job.level,
        tuple(sorted(request.selector.items())),
        request.affinity,  # docs/placement.md, rule 1
        request.tolerations,
        request.slices,
        request.spread,
        request.numa,
        request.spares,
        job.owner,
        job.queue,
        request.preemptible if job.queue is not None else None,
        tuple(sorted(request.resources_per_pod.items())),  # docs/resources.md
        request.gpu_milli,  # docs/resources.md, "Fractions of a GPU"
    )
