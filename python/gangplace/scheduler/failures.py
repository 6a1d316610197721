"""Running jobs that lost hardware (README "Scheduler", rule S13).

Each cycle begins here: the engine lists the allocations with lost ranks
(``Cluster.allocations(lost=True)``), and every one the scheduler started is handled by its
job's ``on_failure``, jobs in queue order:

- ``"repair"``: ``plan_repair(widen=repair_widen)`` (spares first, then the slice's or the
  placement's domain, then, with ``repair_widen`` (default), the smallest enclosing domain
  up to the request's level); with
  ``preemption=True`` and no such room, the plan may end lower-priority jobs inside the
  placement's domain, if the brakes (S11) allow those victims. The repair is reserved and
  committed at once; when none fits (or the engine refuses it), the job is requeued.
- ``"requeue"``: its GPUs are released and it is queued again at its position.
- ``"fail"``: its GPUs are released and it ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gangplace._gangplace import RepairPlan
from gangplace.errors import GangplaceError
from gangplace.scheduler.queue import QueuedJob
from gangplace.scheduler.values import Repaired

if TYPE_CHECKING:
    from gangplace.scheduler.core import Scheduler

__all__ = ["ON_FAILURE", "handle_failures"]

ON_FAILURE = ("requeue", "repair", "fail")


def handle_failures(
    scheduler: Scheduler, now: float
) -> tuple[list[Repaired], list[str], list[str], list[str]]:
    """Handles the scheduler's jobs with lost ranks: repaired, requeued, failed, and evicted.

    ``evicted`` names the jobs (or holds) a repair's preemption ended.
    """
    damaged = [
        (scheduler._running[job_id], allocation)
        for allocation in scheduler.cluster.allocations(lost=True)
        if (job_id := scheduler._by_hold.get(allocation.id)) is not None
    ]
    repaired: list[Repaired] = []
    requeued: list[str] = []
    failed: list[str] = []
    evicted: list[str] = []
    for job, allocation in sorted(damaged, key=lambda pair: pair[0].order):
        if job.job_id not in scheduler._running:
            continue  # ended by an earlier repair's preemption
        ranks = ", ".join(str(rank) for rank in allocation.lost)
        if job.on_failure == "repair":
            done = _repair(scheduler, job, now, evicted)
            if done is not None:
                repaired.append(done)
                scheduler._histories.note(job.job_id, now, "repaired", f"ranks {ranks}")
                continue
        if job.on_failure == "fail":
            scheduler._end_running(job.job_id, release=True)
            scheduler._histories.ended(job.job_id, now, "failed", f"lost ranks {ranks}")
            failed.append(job.job_id)
            if scheduler.metrics is not None:
                scheduler.metrics.failed.inc()
            continue
        scheduler._end_running(job.job_id, release=True)
        scheduler._histories.stopped(job.job_id, now, "requeued", f"lost ranks {ranks}")
        scheduler._enqueue(job, now)
        requeued.append(job.job_id)
        if scheduler.metrics is not None:
            scheduler.metrics.job_requeued(job.owner, preempted=False)
    return repaired, requeued, failed, evicted


def _repair(
    scheduler: Scheduler, job: QueuedJob, now: float, evicted: list[str]
) -> Repaired | None:
    """Repairs ``job`` in place now, or ``None`` (nothing fits, or the engine refused)."""
    cluster, hold = scheduler.cluster, job.allocation_id
    assert hold is not None
    try:
        widen = scheduler.repair_widen
        plan = cluster.plan_repair(hold, widen=widen, owner=job.owner)
        if plan is None and scheduler.preemption:
            plan = cluster.plan_repair(hold, widen=widen, preempt=True, owner=job.owner)
            if plan is not None and not _braked_victims_allowed(scheduler, plan, now):
                plan = None
        if plan is None:
            return None
        victims = {victim: scheduler._victim_of(victim) for victim in plan.victims}
        reservation = cluster.repair(plan, owner=job.owner)
        allocation = cluster.commit_repair(reservation, owner=job.owner)
    except GangplaceError:
        return None  # Conflict or LimitExceeded: the job is requeued instead
    if victims:
        scheduler._brakes.record(plan.victims, now, victims.__getitem__, scheduler.job_of)
    evicted.extend(scheduler._evicted(plan.victims, now, for_job=f"repair of {job.job_id}"))
    scheduler._set_allocation(job.job_id, allocation)
    if scheduler.metrics is not None:
        scheduler.metrics.repairs.inc()
    return Repaired(job.job_id, plan, allocation)


def _braked_victims_allowed(scheduler: Scheduler, plan: RepairPlan, now: float) -> bool:
    """Whether the brakes (S11) let a repair end ``plan.victims`` now."""
    return scheduler._brakes.allow(
        plan.victims, now, scheduler._victim_of, scheduler._since_of, scheduler.job_of
    )
