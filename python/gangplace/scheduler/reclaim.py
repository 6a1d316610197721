"""Reclaims: a queue's blocked job preempts to start (docs/queues.md, Q5-Q7).

Tried once per queue per walk (the queue's first blocked job), only for a queue in
``Tenancy.may_preempt`` and not in ``Tenancy.failed_reclaims`` (the walk checks both before
it asks); a failure is recorded there for the rest of the cycle. Other queues' jobs are
tried as victims first, then with the queue's own. The engine plans the victims that make
the gang fit (``Cluster.plan_preemption`` with the candidates of Q6, braked by S11); more
victims may be taken for the quota alone (Q7), and the whole is applied as one preemption.
"""

from __future__ import annotations

from gangplace._gangplace import GangRequest, PreemptionPlan
from gangplace.scheduler.parts import Parts
from gangplace.scheduler.queue import QueuedJob
from gangplace.scheduler.tenancy import Tenancy
from gangplace.scheduler.values import Started

__all__ = ["reclaim"]


def reclaim(
    parts: Parts, job: QueuedJob, request: GangRequest, now: float
) -> tuple[Started | None, list[str]] | None:
    """Q5-Q7: preempts what ``job`` may preempt to start it, or ``None``.

    The ``Started`` is ``None`` when the job starts once its victims' pods have ended (S17).
    """
    tenancy = parts.tenancy
    assert tenancy is not None and job.queue is not None
    if request.resources_per_pod:  # reclaims count GPUs only (docs/resources.md)
        return None
    others, own = tenancy.candidates(job)
    # Q7: borrowers first, each part in Q7's order (the extra victims are taken so).
    others, own = tenancy.ordered(others), tenancy.ordered(own)
    tried: list[list[QueuedJob]] = []
    for group in (others, others + own):
        if not group or group in tried:
            continue
        tried.append(group)
        chosen = _choose(parts, tenancy, job, request, group, now)
        if chosen is not None:
            return _apply(parts, tenancy, job, *chosen, now)
    tenancy.failed_reclaims.add(job.queue)
    return None


def _choose(
    parts: Parts,
    tenancy: Tenancy,
    job: QueuedJob,
    request: GangRequest,
    group: list[QueuedJob],
    now: float,
) -> tuple[PreemptionPlan, list[QueuedJob]] | None:
    """The plan and the extra victims (ended for quota alone) that start ``job``.

    A plan whose victims Q7's re-check refuses (``Tenancy.first_refused``) is made again
    without the refused one, until it passes or no plan remains.
    """
    running = parts.running
    group = list(group)
    while True:
        plan = _braked_plan(parts, request, now, [v.allocation_id or "" for v in group])
        if plan is None:
            return None
        victims = [running.jobs[running.by_hold[hold]] for hold in plan.victims]
        refused = tenancy.first_refused(job, victims)
        if refused is None:
            break
        group.remove(refused)
    gpus = plan.placement.total_gpus
    if tenancy.quota_after(job, gpus, victims):
        return plan, []
    # Q7: more victims for the quota alone, in candidate order, then each one that is
    # not needed (for the quota or the fit) restored, last taken first.
    chosen = list(victims)
    for victim in group:  # in Q7's order: borrowers, then the job's own queue
        if victim not in chosen and tenancy.first_refused(job, [*chosen, victim]) is None:
            chosen.append(victim)
            if tenancy.quota_after(job, gpus, chosen):
                break
    else:
        return None
    for victim in reversed(list(chosen)):
        rest = [other for other in chosen if other is not victim]
        if tenancy.quota_after(job, gpus, rest) and _fits_after(parts, request, rest):
            chosen = rest
    plan = _braked_plan(parts, request, now, [v.allocation_id or "" for v in chosen])
    if plan is None or not tenancy.quota_after(job, plan.placement.total_gpus, chosen):
        return None
    if tenancy.first_refused(job, chosen) is not None:
        return None
    extras = [victim for victim in chosen if victim.allocation_id not in plan.victims]
    holds = tuple(victim.allocation_id or "" for victim in chosen)
    if not parts.brakes.allow(holds, now, running.victim_of, running.since_of, running.job_of):
        return None
    return plan, extras


def _apply(
    parts: Parts,
    tenancy: Tenancy,
    job: QueuedJob,
    plan: PreemptionPlan,
    extras: list[QueuedJob],
    now: float,
) -> tuple[Started | None, list[str]]:
    """Ends the extra victims, then applies the plan (one atomic preemption)."""
    cluster, running = parts.cluster, parts.running
    holds = [victim.allocation_id or "" for victim in extras] + list(plan.victims)
    parts.brakes.record(holds, now, running.victim_of, running.job_of)
    for victim in extras:
        cluster.release(victim.allocation_id or "", owner=victim.owner)
    for hold in holds:
        victim = running.jobs[running.by_hold[hold]]
        assert victim.queue is not None
        tenancy.reclaimed[victim.queue] += 1
    reservation = cluster.preempt(plan, owner=job.owner)
    evicted = running.evicted(holds, now, for_job=job.job_id)
    allocation = cluster.commit(reservation, owner=job.owner)
    return running.started(job, allocation, now, False, tuple(evicted)), evicted


def _braked_plan(
    parts: Parts, request: GangRequest, now: float, candidates: list[str]
) -> PreemptionPlan | None:
    """The engine's plan with victims among ``candidates`` that the brakes allow (S11)."""
    running = parts.running
    return parts.brakes.plan(
        parts.cluster,
        request,
        now,
        running.victim_of,
        running.allocation_of,
        candidates=candidates,
    )


def _fits_after(parts: Parts, request: GangRequest, victims: list[QueuedJob]) -> bool:
    """Whether the gang fits once ``victims`` have ended (a pure query)."""
    holds = [victim.allocation_id or "" for victim in victims]
    return parts.cluster.place_after(request, [holds] if holds else []) is not None
