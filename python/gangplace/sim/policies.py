"""The placement policies a replay compares, one object each behind one protocol.

A :class:`Policy` builds the cluster it schedules on, reacts to arrivals, turns a queued job
into a request, and runs one scheduling pass over the queue; the replay loop
(:mod:`gangplace.sim.replay`) only moves time and calls them. :func:`policy_for` makes one by
name (:data:`POLICIES`):

- ``best-fit``, ``first-fit`` (:class:`GangPolicy`): gangplace with that policy
  (topology-aware, all or nothing).
- ``blind`` (:class:`BlindPolicy`): all or nothing but topology-blind: a cluster without
  levels whose nodes are renamed in a seeded random order, first-fit.
- ``pod-by-pod`` (:class:`PodByPodPolicy`): each pod bound on its own, as a default
  Kubernetes scheduler does (see the replay's module docs for timeouts and deadlocks).
- ``ladder`` (:class:`LadderPolicy`): best-fit that requires the rack level for the first
  ``T1`` seconds of a job's wait, then the level above until ``T2``, then anywhere (like
  Slurm's ``--switches=count@max-time``).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Protocol

from gangplace._gangplace import Cluster, GangRequest
from gangplace.errors import Unschedulable
from gangplace.sim.clusters import ClusterSpec
from gangplace.sim.errors import PolicyError

if TYPE_CHECKING:
    from gangplace.sim.replay import JobRecord, Replay, SimClock

__all__ = [
    "POLICIES",
    "BlindPolicy",
    "GangPolicy",
    "LadderPolicy",
    "PodByPodPolicy",
    "Policy",
    "policy_for",
]

POLICIES = ("best-fit", "first-fit", "blind", "pod-by-pod", "ladder")


class Policy(Protocol):
    """What a replay needs of a policy."""

    name: str

    def build(self, spec: ClusterSpec, clock: SimClock) -> tuple[Cluster, dict[str, str]]:
        """The cluster to schedule on, and its node names -> the spec's (for reports)."""

    def arrived(self, replay: Replay, record: JobRecord, now: float) -> None:
        """A job joined the queue (a policy may schedule later events for it)."""

    def schedule(self, replay: Replay, now: float) -> None:
        """One scheduling pass over the queue at time ``now``."""


class GangPolicy:
    """Whole gangs through gangplace, in queue order, blocking or backfilling behind a head."""

    def __init__(self, name: str, kind: str) -> None:
        self.name = name
        self.kind = kind

    def build(self, spec: ClusterSpec, clock: SimClock) -> tuple[Cluster, dict[str, str]]:
        """The spec's cluster with this policy's placement rule."""
        return spec.build(policy=self.kind, clock=clock), {}

    def arrived(self, replay: Replay, record: JobRecord, now: float) -> None:
        """Nothing to do: the next pass looks at the queue."""

    def request(self, replay: Replay, record: JobRecord, now: float) -> GangRequest:
        """The job as a gang, with its own required level."""
        job = record.job
        return GangRequest(
            job.pods, job.gpus_per_pod, required_level=job.required_level, name=job.id
        )

    def schedule(self, replay: Replay, now: float) -> None:
        """Starts what fits, in queue order; behind a blocked head only with backfill."""
        blocked: JobRecord | None = None
        for record in list(replay.queue):
            if blocked is not None and not replay.may_backfill(blocked, record, now):
                continue
            try:
                reservation = replay.reserve(self.request(replay, record, now))
            except Unschedulable:
                replay.note_waiting(record)
                if record.job.duration_s is None:
                    replay.reject(record)
                    continue
                if blocked is None:
                    blocked = record
                    if not replay.backfill:
                        return
                continue
            allocation = replay.cluster.commit(reservation)
            replay.queue.remove(record)
            replay.start(record, [allocation], now)


class BlindPolicy(GangPolicy):
    """Whole gangs, first-fit on a cluster without levels, nodes in a seeded shuffled order."""

    def __init__(self, seed: int) -> None:
        super().__init__("blind", "first-fit")
        self.seed = seed

    def build(self, spec: ClusterSpec, clock: SimClock) -> tuple[Cluster, dict[str, str]]:
        """A flat cluster whose node names sort in a seeded random order."""
        order = list(range(len(spec.names)))
        random.Random(self.seed).shuffle(order)
        flat = [""] * len(order)
        alias: dict[str, str] = {}
        for position, index in enumerate(order):
            flat[index] = f"{position:07d}"
            alias[flat[index]] = spec.names[index]
        return spec.build(policy="first-fit", clock=clock, flat=flat), alias

    def request(self, replay: Replay, record: JobRecord, now: float) -> GangRequest:
        """The job as a gang; a required level cannot be honoured without levels."""
        job = record.job
        if job.required_level is not None:
            raise PolicyError(
                f"policy blind cannot replay job {job.id}: it has no levels for "
                f"required_level {job.required_level!r}"
            )
        return GangRequest(job.pods, job.gpus_per_pod, name=job.id)


class LadderPolicy(GangPolicy):
    """Best-fit that widens a job's required level as it waits: rack, the level above, any."""

    def __init__(self, steps: tuple[float, float]) -> None:
        super().__init__("ladder", "best-fit")
        self.steps = steps

    def arrived(self, replay: Replay, record: JobRecord, now: float) -> None:
        """Wakes the queue when the job reaches each step."""
        for step in self.steps:
            replay.wake(now + step, record)

    def request(self, replay: Replay, record: JobRecord, now: float) -> GangRequest:
        """The job as a gang at the level its wait so far allows."""
        job = record.job
        level = job.required_level
        if level is None:
            waited = now - job.arrival_s
            rack, above = replay.spec.levels[-1], replay.spec.levels[-2:-1]
            if waited < self.steps[0]:
                level = rack
            elif waited < self.steps[1]:
                level = above[0] if above else None
        return GangRequest(job.pods, job.gpus_per_pod, required_level=level, name=job.id)


class PodByPodPolicy:
    """Each pod bound on its own as soon as a node fits it, one pod per job per round."""

    name = "pod-by-pod"

    def build(self, spec: ClusterSpec, clock: SimClock) -> tuple[Cluster, dict[str, str]]:
        """The spec's cluster, best-fit nodes."""
        return spec.build(policy="best-fit", clock=clock), {}

    def arrived(self, replay: Replay, record: JobRecord, now: float) -> None:
        """Nothing to do: the next pass binds its pods."""

    def schedule(self, replay: Replay, now: float) -> None:
        """Binds pods round by round until none binds; a job starts with its last pod."""
        progress = True
        while progress:
            progress = False
            for record in list(replay.queue):
                job = record.job
                if record.start_s is not None or len(record.bound) >= job.pods:
                    continue  # started earlier in this pass, or fully bound
                if record.retry_at_s > now:
                    continue  # backing off after a timeout
                try:
                    reservation = replay.reserve(GangRequest(1, job.gpus_per_pod, name=job.id))
                except Unschedulable:
                    replay.note_waiting(record)
                    if job.duration_s is None:
                        replay.drop_partial(record)
                        replay.reject(record)
                    continue
                replay.bind_pod(record, replay.cluster.commit(reservation), now)
                progress = True
        replay.note_deadlock()


def policy_for(name: str, *, ladder: tuple[float, float], seed: int) -> Policy:
    """The policy called ``name`` (one of :data:`POLICIES`).

    Raises:
        PolicyError: An unknown name.

    """
    if name in ("best-fit", "first-fit"):
        return GangPolicy(name, name)
    if name == "blind":
        return BlindPolicy(seed)
    if name == "ladder":
        return LadderPolicy(ladder)
    if name == "pod-by-pod":
        return PodByPodPolicy()
    raise PolicyError(f"unknown policy {name!r}; choose from {', '.join(POLICIES)}")
