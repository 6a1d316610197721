"""Backfill reservations (docs/scheduler.md, S5), restated naively for the tests.

Nothing here calls ``Cluster.place_after`` or ``reserve(avoid=...)``'s search shortcuts'
counterparts in the scheduler: a new reservation is found by trying, in order, ``now`` and
every later predicted end (of a running job or of an earlier reservation): at each such time
``t``, the earlier reservations the job would overlap from ``t`` are known, and copies of the
cluster, one per prefix of the running jobs' predicted ends, release those jobs, adopt the
overlapped reservations' free GPUs as busy and ask ``place_gang``; the first prefix that fits
must end by ``t``. A kept reservation is checked by finding, for each of its GPUs, the
running job that holds it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gangplace._gangplace import Cluster, GangRequest, PodPlacement
from gangplace.scheduler.values import Shadow

__all__ = ["ReferenceReservation", "fresh_reservation", "kept_time"]


@dataclass
class ReferenceReservation:
    """A reservation of the walk: its shadow and whose it is."""

    shadow: Shadow
    owner: str | None
    quota: bool
    duration: float = math.inf  # how long its job holds its GPUs once started

    @property
    def end(self) -> float:
        """When its job is predicted to end, started at the reservation's time."""
        return self.shadow.time + self.duration


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
    duration: float = math.inf,
) -> Shadow:
    """The earliest predicted end from which ``request`` fits for ``duration``, and where.

    A job from ``t`` for ``duration`` overlaps an earlier reservation ``r`` when
    ``t > r.time - duration`` and ``t < r.end``; the GPUs of those it overlaps are busy.
    A blind reservation when there is no such time.
    """
    times = sorted({_end(job, now) for job in running if math.isfinite(_end(job, now))})
    ends = {r.end for r in earlier if r.shadow.placement is not None and now < r.end < math.inf}
    for start in sorted({now, *times, *ends}):
        overlapped = [
            r.shadow.placement
            for r in earlier
            if r.shadow.placement is not None and r.shadow.time - duration < start and r.end > start
        ]
        for k in range(len(times) + 1):
            placement = _placed(
                cluster, running, request, times[k - 1] if k else None, now, overlapped
            )
            if placement is not None:
                if (times[k - 1] if k else now) <= start:
                    return Shadow(job_id, start, placement)
                break  # the first prefix that fits ends after ``start``
    return Shadow(
        job_id, math.inf, None, blocked_by=_blockers(cluster, running, request, earlier, now)
    )


def _placed(
    cluster: Cluster,
    running: list[Any],
    request: GangRequest,
    upto: float | None,
    now: float,
    busy: list[Any],
) -> Any:
    """``place_gang`` on a copy where every job ending by ``upto`` ended, ``busy`` held."""
    copy = Cluster.restore(cluster.snapshot(), clock=lambda: now)
    for job in running:
        if upto is not None and _end(job, now) <= upto:
            copy.release(job.allocation.id, owner=job.owner)
    taken = {  # two reservations one after the other may share GPUs: each counted once
        (pod.node, gpu) for placement in busy for pod in placement.pods for gpu in pod.gpus
    }
    pods = [
        PodPlacement(node, [gpu]) for node, gpu in sorted(taken) if gpu in set(copy.node(node).free)
    ]
    if pods:
        copy.adopt(pods)
    for node, gpu in sorted(taken):  # as place_after: a busy shared GPU is filled up
        used = copy.node(node).shared.get(gpu)
        if used is not None and used < 1000:
            copy.adopt([PodPlacement(node, [gpu])], gpu_milli=1000 - used)
    return copy.place_gang(request)


def _blockers(
    cluster: Cluster,
    running: list[Any],
    request: GangRequest,
    earlier: list[ReferenceReservation],
    now: float,
) -> tuple[str, ...]:
    """A blind reservation's ``blocked_by``: the untimed jobs where it would go.

    Where: now if it fits now, else once every running job has ended, with no reservation
    in its way.
    """
    placement = _placed(cluster, running, request, None, now, [])
    if placement is None:
        placement = _placed(cluster, running, request, math.inf, now, [])
    if placement is None:
        return ()
    wanted = {(pod.node, gpu) for pod in placement.pods for gpu in pod.gpus}
    blockers = {
        job.job_id
        for job in running
        if job.walltime is None and any(_holds(job.allocation, node, gpu) for node, gpu in wanted)
    }
    for r in earlier:
        pods = r.shadow.placement.pods if r.shadow.placement is not None else ()
        if r.end == math.inf and any((pod.node, gpu) in wanted for pod in pods for gpu in pod.gpus):
            blockers.add(r.shadow.job_id)
    return tuple(sorted(blockers))


def kept_time(
    cluster: Cluster,
    running: list[Any],
    shadow: Shadow,
    earlier: list[ReferenceReservation],
    now: float,
) -> float | None:
    """A kept reservation's time now, or ``None`` when one of its GPUs went bad.

    Bad: its node is gone or cordoned, it is unhealthy or reserved, an earlier reservation
    of the walk has it, or something other than a running job with a walltime holds it (or
    holds a share of it: every share of a shared GPU must be such a job's).
    """
    if shadow.placement is None or shadow.placement.gpu_milli is not None:
        return None  # blind, or shares: made again
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
            if gpu not in info.allocated and gpu not in info.shared:
                continue
            holders = [job for job in running if _holds(job.allocation, pod.node, gpu)]
            shares = sum(_share(job.allocation, pod.node, gpu) for job in holders)
            if gpu in info.shared and shares != info.shared[gpu]:
                return None  # every share of a shared GPU must be a running job's
            if not holders or any(math.isinf(_end(job, now)) for job in holders):
                return None
            latest = max(latest, *(_end(job, now) for job in holders))
    return latest


def _live(allocation: Any) -> Iterator[PodPlacement]:
    """The pods of ``allocation``'s live ranks."""
    placement = allocation.placement
    return (pod for rank, pod in enumerate(placement.pods) if rank not in allocation.ended)


def _share(allocation: Any, node: str, gpu: int) -> int:
    """The thousandths of ``gpu`` of ``node`` that a fractional ``allocation``'s live pods use."""
    on = sum(1 for pod in _live(allocation) if pod.node == node and gpu in pod.gpus)
    return on * (allocation.placement.gpu_milli or 0)


def _holds(allocation: Any, node: str, gpu: int) -> bool:
    """Whether ``allocation`` holds ``gpu`` of ``node``, by a live rank or a spare.

    docs/repair.md "Spares": a spare's GPUs are held by its allocation until it ends.
    """
    pods = (*_live(allocation), *allocation.placement.spares)
    return any(pod.node == node and gpu in pod.gpus for pod in pods)
