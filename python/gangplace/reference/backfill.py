"""Backfill reservations (docs/scheduler.md, S5), restated naively for the tests.

Nothing here calls ``Cluster.place_after`` or ``reserve(avoid=...)``'s search shortcuts'
counterparts in the scheduler: a new reservation is found by restoring a copy of the cluster
for every predicted end in turn, releasing every job predicted to end by then, adopting the
earlier reservations' free GPUs as busy, and asking ``place_gang``; a kept reservation is
checked by finding, for each of its GPUs, the running job that holds it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gangplace._gangplace import Cluster, GangRequest, PodPlacement
from gangplace.scheduler.requests import whole_gpus
from gangplace.scheduler.values import Shadow

__all__ = ["ReferenceReservation", "fresh_reservation", "kept_time"]


@dataclass
class ReferenceReservation:
    """A reservation of the walk: its shadow and whose it is."""

    shadow: Shadow
    owner: str | None
    quota: bool


def _end(job: Any, now: float) -> float:
    """A running job's predicted end (S15: its run's end, at least now)."""
    return max(float(job.runs_until), now)


def fresh_reservation(
    cluster: Cluster,
    running: list[Any],
    job_id: str,
    request: GangRequest,
    earlier: list[ReferenceReservation],
    now: float,
) -> Shadow:
    """The first predicted end after which ``request`` fits, and where.

    The earlier reservations' GPUs are busy; a blind reservation when there is no such end.
    """
    times = sorted({_end(job, now) for job in running if math.isfinite(_end(job, now))})
    for k in range(len(times) + 1):
        copy = Cluster.restore(cluster.snapshot(), clock=lambda: now)
        for job in running:
            if k and _end(job, now) <= times[k - 1]:
                copy.release(job.allocation.id, owner=job.owner)
        busy: list[PodPlacement] = []
        for reservation in earlier:
            placement = reservation.shadow.placement
            for pod in placement.pods if placement is not None else ():
                free = set(copy.node(pod.node).free)
                busy.extend(PodPlacement(pod.node, [gpu]) for gpu in pod.gpus if gpu in free)
        if busy:
            copy.adopt(busy)
        placement = copy.place_gang(whole_gpus(request))  # as place_after: whole GPUs
        if placement is not None:
            return Shadow(job_id, times[k - 1] if k else now, placement)
    return Shadow(job_id, math.inf, None)


def kept_time(
    cluster: Cluster,
    running: list[Any],
    shadow: Shadow,
    earlier: list[ReferenceReservation],
    now: float,
) -> float | None:
    """A kept reservation's time now, or ``None`` when one of its GPUs went bad.

    Bad: its node is gone or cordoned, it is unhealthy or reserved, an earlier reservation
    of the walk has it, or something other than a running job with a walltime holds it.
    """
    if shadow.placement is None:
        return None
    taken = {
        (pod.node, gpu)
        for reservation in earlier
        if reservation.shadow.placement is not None
        for pod in reservation.shadow.placement.pods
        for gpu in pod.gpus
    }
    latest = now
    for pod in shadow.placement.pods:
        if pod.node not in cluster.nodes():
            return None
        info = cluster.node(pod.node)
        for gpu in pod.gpus:
            if info.cordoned or gpu in info.unhealthy or gpu in info.reserved:
                return None
            if (pod.node, gpu) in taken:
                return None
            if gpu not in info.allocated:
                continue
            holders = [job for job in running if _holds(job.allocation, pod.node, gpu)]
            if not holders or math.isinf(_end(holders[0], now)):
                return None
            latest = max(latest, _end(holders[0], now))
    return latest


def _holds(allocation: Any, node: str, gpu: int) -> bool:
    """Whether ``allocation`` holds ``gpu`` of ``node``, by a live rank or a spare.

    docs/repair.md "Spares": a spare's GPUs are held by its allocation until it ends.
    """
    placement = allocation.placement
    live = (pod for rank, pod in enumerate(placement.pods) if rank not in allocation.ended)
    return any(pod.node == node and gpu in pod.gpus for pod in (*live, *placement.spares))
