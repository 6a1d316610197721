"""Backfill reservations: where and when blocked jobs will start (docs/scheduler.md, S5).

With ``backfill="easy"`` the blocked head, with ``"conservative"`` the first
``reservation_depth`` jobs that do not fit, each get a **shadow placement**: the placement
the rules give them once enough running jobs have ended by their walltimes
(``Cluster.place_after`` over the running jobs grouped by predicted end), with the GPUs of
the earlier reservations of the walk kept out of their way. Its time is the predicted end
that frees it. A later job may start now only if, for every reservation whose time comes
before the job's predicted end, it fits without any of that reservation's GPUs
(``Cluster.reserve(avoid=...)``), and, when its owner has a quota, it ends by the time of
every reservation of the same owner (so that it takes none of the quota that job needs);
so no reservation is delayed, as the walltimes predict.

A reservation is kept across cycles while it stays valid: the job is blocked in the same
form, and each of its GPUs is on a present, uncordoned node, healthy, and free or held by a
running job of this scheduler with a walltime (the reservation's time is then the latest
predicted end among those holders), and none is reserved by an earlier job of the walk.
A job that does not fit even once every running job with a walltime has ended gets a
*blind* reservation: no GPUs, time infinite; a job without a walltime never passes it.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from gangplace._gangplace import Allocation, Cluster, GangRequest, Placement
from gangplace.errors import UnknownNode
from gangplace.scheduler.values import Shadow

__all__ = ["BLIND_BOUND", "End", "RunningView", "ShadowBook", "WalkReservations"]

End = tuple[float, int, str]  # (predicted end, GPUs, job id) of a running job


class RunningView(Protocol):
    """What reservations read of the running jobs (``RunningJobs`` provides it)."""

    walk_now: float
    overrunning: set[str]

    def ends(self) -> list[End]:
        """Every running job's ``(predicted end, GPUs, job id)``, in order."""
        ...

    def finite_ends(self) -> int:
        """How many running jobs have a walltime."""
        ...

    def allocation(self, job_id: str) -> Allocation:
        """A running job's allocation."""
        ...

    def job_of(self, hold_id: str) -> str | None:
        """The running job holding an allocation, or ``None``."""
        ...

    def end_of(self, job_id: str) -> float:
        """A running job's predicted end, at least the walk's now."""
        ...


# A class whose job was refused by a blind reservation skips only jobs without a walltime.
BLIND_BOUND = sys.float_info.max


@dataclass
class _Kept:
    request: GangRequest
    shadow: Shadow


@dataclass
class WalkReservations:
    """The reservations made (or kept) so far in one walk, in queue order."""

    depth: int
    shadows: list[Shadow] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)  # each reservation's predicted end
    _taken: set[tuple[str, int]] = field(default_factory=set)
    _taken_upto: int = 0  # how many of ``shadows`` are in ``_taken``
    quota_times: dict[str | None, float] = field(default_factory=dict)  # owner -> earliest
    full: bool = False  # whether no more job gets a reservation in this walk

    def __post_init__(self) -> None:
        self.full = self.depth <= 0

    def blind(self) -> bool:
        """Whether a blind reservation was made."""
        return any(shadow.placement is None for shadow in self.shadows)

    def to_avoid(self, end: float) -> tuple[list[Placement], float]:
        """The placements a job ending at ``end`` must keep out of, and its failure bound.

        They are those of every reservation whose time comes before ``end`` (passed whole to
        ``reserve(avoid=...)``: docs/preemption.md L3); the bound is the latest such time (``-inf``
        when there is none): if the job does not fit, no job of its class ending after the bound
        fits either.
        """
        placements: list[Placement] = []
        bound = -math.inf
        for shadow in self.shadows:
            if shadow.placement is not None and shadow.time < end:
                placements.append(shadow.placement)
                bound = max(bound, shadow.time)
        return placements, bound

    def quota_bound(self, owner: str | None) -> float:
        """The earliest reservation time of a job of ``owner``, an owner with a quota.

        A job of that owner running past it could take quota the reserved job needs then,
        so it may pass only by ending by it (``inf``: no such reservation).
        """
        return self.quota_times.get(owner, math.inf)

    def add(
        self,
        shadow: Shadow,
        owner: str | None = None,
        *,
        quota: bool = False,
        duration: float = math.inf,
    ) -> None:
        """Records ``shadow`` as the walk's next reservation.

        ``quota``: its job's owner, ``owner``, has a quota in the scheduler. ``duration``:
        how long its job holds its GPUs once started (walltime and grace; ``inf`` without a
        walltime).
        """
        if quota:
            earlier = self.quota_times.get(owner, math.inf)
            self.quota_times[owner] = min(earlier, shadow.time)
        self.shadows.append(shadow)
        self.ends.append(shadow.time + duration)
        self.full = len(self.shadows) >= self.depth

    def overlapping(self, start: float, duration: float, *, just_after: bool) -> list[Placement]:
        """The placements of the reservations a job holding GPUs from ``start`` overlaps.

        A job from ``t`` for ``duration`` overlaps reservation ``r`` when
        ``t > r.time - duration`` and ``t < r.end`` (docs/scheduler.md S5). ``just_after``:
        for every ``t`` a little after ``start`` (up to the next boundary, see
        ``boundaries``) instead of ``start`` itself.
        """
        found = []
        for shadow, end in zip(self.shadows, self.ends, strict=True):
            if shadow.placement is None:
                continue
            begins = shadow.time - duration
            if (begins <= start if just_after else begins < start) and end > start:
                found.append(shadow.placement)
        return found

    def boundaries(self, now: float, duration: float) -> list[float]:
        """``now`` and every later time at which the overlapping reservations change."""
        points = {now}
        for shadow, end in zip(self.shadows, self.ends, strict=True):
            if shadow.placement is not None:
                points.update(t for t in (shadow.time - duration, end) if now < t < math.inf)
        return sorted(points)

    def taken(self) -> set[tuple[str, int]]:
        """The ``(node, GPU)`` pairs of every reservation so far.

        Brought up to date when asked (only a kept reservation after an earlier one of the
        walk asks), not on every ``add``: an EASY walk never asks (issue 51).
        """
        for shadow in self.shadows[self._taken_upto :]:
            if shadow.placement is not None:
                self._taken.update((p.node, gpu) for p in shadow.placement.pods for gpu in p.gpus)
        self._taken_upto = len(self.shadows)
        return self._taken


class ShadowBook:
    """The reservations kept across cycles (mutable: the scheduler's own)."""

    def __init__(self) -> None:
        self.kept: dict[str, _Kept] = {}

    def reserve(
        self,
        cluster: Cluster,
        running: RunningView,
        job_id: str,
        request: GangRequest,
        walk: WalkReservations,
        duration: float = math.inf,
    ) -> Shadow:
        """The job's reservation for this walk: the kept one if still valid, else a new one.

        ``duration``: how long the job holds its GPUs once started (``inf``: no walltime).
        It names the running jobs past their walltime whose GPUs it waits for (S15).
        """
        kept = self.kept.get(job_id)
        shadow: Shadow | None = None
        if kept is not None and kept.request == request:
            time = _still_valid(cluster, running, kept.shadow, walk)
            if time is not None:
                shadow = Shadow(job_id, time, kept.shadow.placement)
        if shadow is None:
            shadow = _fresh(cluster, running, job_id, request, walk, duration)
        if running.overrunning and shadow.placement is not None:
            late = _overrunning(cluster, running, shadow.placement)
            if late:
                shadow = Shadow(job_id, shadow.time, shadow.placement, late)
        self.kept[job_id] = _Kept(request, shadow)
        return shadow

    def keep_only(self, reserved: dict[str, Shadow]) -> None:
        """After a walk: only the jobs it reserved for keep their reservations."""
        self.kept = {job_id: kept for job_id, kept in self.kept.items() if job_id in reserved}

    def forget(self, job_id: str) -> None:
        """The job started, left the queue, or is no longer reserved for."""
        self.kept.pop(job_id, None)


def _overrunning(cluster: Cluster, running: RunningView, placement: Placement) -> tuple[str, ...]:
    """The running jobs past their walltime that hold GPUs of ``placement``, sorted."""
    wanted: dict[str, set[int]] = {}
    for pod in placement.pods:
        wanted.setdefault(pod.node, set()).update(pod.gpus)
    late = set()
    for node, gpus in wanted.items():
        for hold_id, held in cluster.holds_on(node):
            job_id = running.job_of(hold_id)
            if job_id in running.overrunning and not gpus.isdisjoint(held):
                late.add(job_id)
    return tuple(sorted(late))


# Groups passed to ``place_after`` beyond the first one at which enough GPUs are free in
# total; only when the gang does not fit within them are all groups passed.
EXTRA_GROUPS = 16


def _fresh(
    cluster: Cluster,
    running: RunningView,
    job_id: str,
    request: GangRequest,
    walk: WalkReservations,
    duration: float,
) -> Shadow:
    """A new reservation: the earliest time from which the gang fits for ``duration``.

    The times tried are the walk's ``boundaries`` (``now`` and where the overlapping earlier
    reservations change): at each one ``t``, and for the times just after it up to the
    next, ``place_after`` over the running jobs grouped by predicted end, kept off the
    overlapping reservations; the first answer whose group ends by then gives the time
    (``t`` itself, or that group's end). The earliest feasible time is always ``now`` or a
    predicted end: between two, nothing is freed and the overlapping set only grows.

    The groups are passed up to a little past the first at which the gang's fewest GPUs are
    free in total (most gangs fit by then); only if it does not fit within them, all of
    them. The answer is the same: the first prefix that fits is inside the shorter list
    whenever the shorter list holds one.
    """
    now = running.walk_now
    need = (request.min_pods or request.pods) * request.gpus_per_pod
    free = cluster.stats().free
    times, groups = _groups(running, now, need - free)
    every: tuple[list[float], list[list[Allocation | str]]] | None = None
    for point, avoid, last in _tries(walk, now, duration):
        found = cluster.place_after(request, groups, avoid=avoid)
        used = times
        if found is None and sum(len(group) for group in groups) < running.finite_ends():
            every = every or _groups(running, now, None)
            used = every[0]
            found = cluster.place_after(request, every[1], avoid=avoid)
        if found is None:
            continue
        k, placement = found
        when = max(used[k - 1] if k else now, point)
        if when == point or when < last:
            return Shadow(job_id, when, placement)
    return Shadow(job_id, math.inf, None, blocked_by=_blockers(cluster, running, request, walk))


def _tries(
    walk: WalkReservations, now: float, duration: float
) -> Iterator[tuple[float, list[Placement], float]]:
    """The tries of a fresh reservation, ``(t, avoid, last)``, in time order.

    At each boundary ``t``: the reservations a job from ``t`` overlaps (an answer must end
    by ``t`` itself), then those it overlaps just after ``t`` (an answer must end before
    the next boundary, ``last``); one try when both are the same. Without earlier
    reservations (EASY): one try, nothing to avoid.
    """
    if not walk.shadows:
        yield now, [], math.inf
        return
    points = walk.boundaries(now, duration)
    for index, point in enumerate(points):
        stop = points[index + 1] if index + 1 < len(points) else math.inf
        at = walk.overlapping(point, duration, just_after=False)
        after = walk.overlapping(point, duration, just_after=True)
        if len(at) != len(after):
            yield point, at, point
        yield point, after, stop


def _blockers(
    cluster: Cluster, running: RunningView, request: GangRequest, walk: WalkReservations
) -> tuple[str, ...]:
    """Why a reservation is blind: the jobs without a walltime in the way, sorted.

    Where the gang would go with no reservation in its way, now if it fits now, else once
    every running job had ended: the running jobs without a walltime holding GPUs there and
    the reserved jobs without one reserving GPUs there. Empty when it would not fit even
    then (the GPUs are held by work that is not this scheduler's, unhealthy, or too few).
    """
    ends = running.ends()
    untimed = {job_id for end, _, job_id in ends if end == math.inf}
    everything: list[Allocation | str] = [running.allocation(job_id) for _, _, job_id in ends]
    found = cluster.place_after(request, [everything])
    if found is None:
        return ()
    wanted: dict[str, set[int]] = {}
    for pod in found[1].pods:
        wanted.setdefault(pod.node, set()).update(pod.gpus)
    blockers = set()
    for node, gpus in wanted.items():
        for hold_id, held in cluster.holds_on(node):
            job_id = running.job_of(hold_id)
            if job_id in untimed and not gpus.isdisjoint(held):
                blockers.add(job_id)
    for shadow, end in zip(walk.shadows, walk.ends, strict=True):
        if shadow.placement is not None and end == math.inf:
            pods = shadow.placement.pods
            if any(not wanted.get(pod.node, set()).isdisjoint(pod.gpus) for pod in pods):
                blockers.add(shadow.job_id)
    return tuple(sorted(blockers))


def _groups(
    running: RunningView, now: float, short: int | None
) -> tuple[list[float], list[list[Allocation | str]]]:
    """The running jobs with a walltime grouped by predicted end, and the groups' times.

    Ends before ``now`` count as ``now``. All of them (``short`` is ``None``), or up to
    ``EXTRA_GROUPS`` past the first group by which ``short`` more GPUs are freed in total.
    """
    times: list[float] = []
    groups: list[list[Allocation | str]] = []
    group: list[Allocation | str] = []
    allocation = running.allocation
    freed, enough_at, last, inf = 0, None, None, math.inf
    for end, gpus, running_id in running.ends():  # one pass, no call but the lookup
        if end == inf:
            break
        when = end if end > now else now
        if when != last:
            if enough_at is not None and len(times) >= enough_at + EXTRA_GROUPS:
                break
            times.append(when)
            group = []
            groups.append(group)
            last = when
        group.append(allocation(running_id))
        if enough_at is None and short is not None:
            freed += gpus
            if freed >= short:
                enough_at = len(times)
    return times, groups


def _still_valid(
    cluster: Cluster, running: RunningView, shadow: Shadow, walk: WalkReservations
) -> float | None:
    """The kept reservation's time now if it is still valid, else ``None``."""
    placement = shadow.placement
    if placement is None:
        return None  # a blind reservation is made again: something may have ended
    if placement.gpu_milli is not None:
        return None  # shares are made again: the room of shared GPUs changes with every start
    now = running.walk_now
    taken = walk.taken() if walk.shadows else set()
    wanted: dict[str, set[int]] = {}
    for pod in placement.pods:
        wanted.setdefault(pod.node, set()).update(pod.gpus)
    latest = now
    for node_name, gpus in wanted.items():
        try:
            info = cluster.node(node_name)
        except UnknownNode:
            return None
        if info.cordoned or (taken and any((node_name, gpu) in taken for gpu in gpus)):
            return None
        held = gpus.difference(info.free)
        if not held:
            continue  # all free and healthy
        if not held.issubset({*info.allocated, *info.shared}):
            return None  # reserved by someone
        if not held.isdisjoint(info.unhealthy):
            return None  # failed
        covered: set[int] = set()
        for hold_id, gpus_held in cluster.holds_on(node_name):
            if held.isdisjoint(gpus_held):
                continue  # every holder of a GPU is read: a shared GPU has several
            job_id = running.job_of(hold_id)
            if job_id is None:
                return None  # held by something that is not a running job of this scheduler
            end = running.end_of(job_id)
            if math.isinf(end):
                return None
            latest = max(latest, end)
            covered.update(gpus_held)
        if not held.issubset(covered):
            return None  # held by something that is not a running job of this scheduler
    return latest
