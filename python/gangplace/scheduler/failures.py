"""Running jobs that lost hardware (docs/scheduler.md, rule S13).

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

from gangplace._gangplace import RepairPlan
from gangplace.errors import GangplaceError
from gangplace.scheduler.parts import Parts
from gangplace.scheduler.queue import QueuedJob
from gangplace.scheduler.values import Repaired

__all__ = ["ON_FAILURE", "handle_failures"]

ON_FAILURE = ("requeue", "repair", "fail")


def handle_failures(
    parts: Parts, now: float
) -> tuple[list[Repaired], list[str], list[str], list[str]]:
    """Handles the scheduler's jobs with lost ranks: repaired, requeued, failed, and evicted.

    ``evicted`` names the jobs (or holds) a repair's preemption ended.
    """
    running, histories, metrics = parts.running, parts.histories, parts.metrics
    damaged = [
        (running.jobs[job_id], allocation)
        for allocation in parts.cluster.allocations(lost=True)
        if (job_id := running.job_of(allocation.id)) is not None
    ]
    repaired: list[Repaired] = []
    requeued: list[str] = []
    failed: list[str] = []
    evicted: list[str] = []
    for job, allocation in sorted(damaged, key=lambda pair: pair[0].order):
        if job.job_id not in running:
            continue  # ended by an earlier repair's preemption
        ranks = ", ".join(str(rank) for rank in allocation.lost)
        if job.on_failure == "repair":
            done = _repair(parts, job, now, evicted)
            if done is not None:
                if job.job_id not in running.eviction_grace.starting:
                    # S17: a starting job is not bound yet: it is reported started, repaired
                    repaired.append(done)
                    histories.note(job.job_id, now, "repaired", f"ranks {ranks}")
                continue
        if job.on_failure == "fail":
            running.end(job.job_id, release=True)
            histories.ended(job.job_id, now, "failed", f"lost ranks {ranks}")
            failed.append(job.job_id)
            if metrics is not None:
                metrics.failed.inc()
            continue
        running.end(job.job_id, release=True)
        histories.stopped(job.job_id, now, "requeued", f"lost ranks {ranks}")
        parts.waiting.enqueue(job, now)
        requeued.append(job.job_id)
        if metrics is not None:
            metrics.job_requeued(job.owner, preempted=False)
    return repaired, requeued, failed, evicted


def _repair(parts: Parts, job: QueuedJob, now: float, evicted: list[str]) -> Repaired | None:
    """Repairs ``job`` in place now, or ``None`` (nothing fits, or the engine refused)."""
    cluster, running, hold = parts.cluster, parts.running, job.allocation_id
    assert hold is not None
    try:
        widen = parts.settings.repair_widen
        plan = cluster.plan_repair(hold, widen=widen, owner=job.owner)
        if plan is None and parts.settings.preemption:
            plan = cluster.plan_repair(hold, widen=widen, preempt=True, owner=job.owner)
            if plan is not None and not _braked_victims_allowed(parts, plan, now):
                plan = None
        if plan is None:
            return None
        victims = {victim: running.victim_of(victim) for victim in plan.victims}
        reservation = cluster.repair(plan, owner=job.owner)
        allocation = cluster.commit_repair(reservation, owner=job.owner)
    except GangplaceError:
        return None  # Conflict or LimitExceeded: the job is requeued instead
    if victims:
        parts.brakes.record(plan.victims, now, victims.__getitem__, running.job_of)
    evicted.extend(running.evicted(plan.victims, now, for_job=f"repair of {job.job_id}"))
    running.set_allocation(job.job_id, allocation)
    if parts.metrics is not None:
        parts.metrics.repairs.inc()
    return Repaired(job.job_id, plan, allocation)


def _braked_victims_allowed(parts: Parts, plan: RepairPlan, now: float) -> bool:
    """Whether the brakes (S11) let a repair end ``plan.victims`` now."""
    running = parts.running
    return parts.brakes.allow(
        plan.victims, now, running.victim_of, running.since_of, running.job_of
    )
