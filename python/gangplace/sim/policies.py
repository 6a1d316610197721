"""The placement policies a replay compares, one object each.

- ``best-fit``, ``first-fit`` (:class:`GangPolicy`): gangplace's :class:`~gangplace.Scheduler`
  with that placement rule (topology-aware, all or nothing), the settings' order and backfill.
- ``best-fit-path``: best-fit with ties broken by path alone (the rule before the ancestor
  tie-break), to measure what the tie-break changes.
- ``best-fit+slices``: best-fit where every gang of 32 GPUs or more keeps slices inside one
  domain of the innermost level (the NVLink rack on ``nvl72``), by NVIDIA's guidance for
  GB200 NVL72 (:func:`nvidia_slices`: 16 pods per slice from 128 GPUs, 4 below).
- ``best-fit+numa``: best-fit with ``numa="single"``: no pod's GPUs span two NUMA groups
  (with ``--numa-split``, where nodes have two NUMA halves).
- ``best-fit+repair``, ``best-fit+spares``: best-fit where a failed GPU under a running job
  is repaired in place (``plan_repair(widen=True)``, ``repair``, ``commit_repair``: the job
  resumes from its last checkpoint on the repaired placement, keeping its other pods)
  instead of requeueing the job; ``+spares`` also holds ``SimSettings.spares`` spare pods
  next to every gang, so that repairs take spares first (docs/repair.md "Repair after failures",
  "Spares"). A job is requeued only when no repair fits.
- ``best-fit+preempt``, ``best-fit+defrag``: the same with preemption, or defragmentation, for
  the blocked head (jobs of the trace carry their priorities; every job is preemptible and,
  for defragmentation, movable).
- ``blind`` (:class:`BlindPolicy`): all or nothing but topology-blind: a cluster without
  levels whose nodes are renamed in a seeded random order, first-fit.
- ``ladder`` (:class:`GangPolicy` with a ladder): best-fit that requires the rack for the
  first ``T1`` seconds of a job's wait, then the level above until ``T2``, then anywhere
  (Slurm's ``--switches=count@max-time``).
- ``pod-by-pod`` (:class:`PodByPodPolicy`): each pod bound on its own as a default Kubernetes
  scheduler does; bound pods hold their GPUs until the whole job is bound.

Every policy refuses, on arrival, a job that cannot fit the cluster as built (Scheduler rule
S2), so all of them are compared on the same set of admissible jobs.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from gangplace._gangplace import Allocation, Cluster, GangRequest
from gangplace.errors import InvalidRequest, Unschedulable
from gangplace.scheduler import Scheduler
from gangplace.sim.clusters import ClusterSpec
from gangplace.sim.errors import PolicyError, SimError
from gangplace.sim.pod_by_pod import PodByPodPolicy
from gangplace.sim.queues import QueueFigures, QueueSetup
from gangplace.sim.replay import WAKE
from gangplace.sim.settings import SimSettings

if TYPE_CHECKING:
    from gangplace.sim.replay import JobRecord, Replay, SimClock
    from gangplace.sim.traces import Job

__all__ = [
    "ALL_POLICIES",
    "POLICIES",
    "BlindPolicy",
    "GangPolicy",
    "PodByPodPolicy",
    "nvidia_slices",
    "policy_for",
]

POLICIES = ("best-fit", "first-fit", "blind", "pod-by-pod", "ladder")
EXTRA_POLICIES = (
    "best-fit+preempt",
    "best-fit+defrag",
    "best-fit-path",
    "best-fit+slices",
    "best-fit+numa",
    "best-fit+repair",
    "best-fit+spares",
    "rack-only",
)
ALL_POLICIES = POLICIES + EXTRA_POLICIES


class GangPolicy:
    """Whole gangs through :class:`gangplace.Scheduler`."""

    def __init__(
        self,
        name: str,
        kind: str,
        *,
        preemption: bool = False,
        defrag: bool = False,
        slices: bool = False,
        numa_single: bool = False,
        ladder: tuple[float, float] | None = None,
        on_failure: str = "requeue",
        rack_only: bool = False,
    ) -> None:
        self.name = name
        self.kind = kind
        self.preemption = preemption
        self.defrag = defrag
        self.slices = slices
        self.numa_single = numa_single
        self.ladder = ladder
        self.on_failure = on_failure  # "requeue", "repair" or "spares"
        self.rack_only = rack_only  # every multi-pod job required within one rack (hard)
        self.alias: dict[str, str] = {}
        self.scheduler: Scheduler | None = None
        self.queue_setup: QueueSetup | None = None  # with --queues
        self.queue_figures: QueueFigures | None = None

    def build(self, spec: ClusterSpec, clock: SimClock, settings: SimSettings) -> Cluster:
        """The spec's cluster with this policy's placement rule, and its scheduler."""
        cluster = self.make_cluster(spec, clock)
        self.levels = spec.levels
        self.settings = settings
        self.queue_setup = None
        tenancy: dict[str, Any] = {}
        if settings.queues is not None:
            if self.preemption:
                raise SimError(
                    f"policy {self.name} preempts by priority; with --queues the queues' "
                    "policies say who preempts whom: run it without queues"
                )
            self.queue_setup = setup = QueueSetup.parse(settings.queues)
            tenancy = {
                "queues": list(setup.queues),
                "cohorts": list(setup.cohorts),
                "fair_sharing": setup.fair_sharing,
                "evicted_may_preempt": setup.evicted_may_preempt,
                "eviction_grace": setup.eviction_grace,
            }
            self.queue_figures = QueueFigures(
                tuple(q.name for q in setup.queues),
                tuple(q.nominal["gpu"] for q in setup.queues),
                setup,
            )
        self.scheduler = Scheduler(
            cluster,
            order=settings.order,  # type: ignore[arg-type]
            backfill=settings.backfill,  # type: ignore[arg-type]
            preemption=self.preemption,
            defrag=self.defrag,
            clock=clock,
            quotas=settings.quotas,
            # The replay ends jobs itself when their run (slowed by a spread placement under
            # the placement-speed model) is over: a run past its walltime is reported, and
            # the backfill predicts it ends at any moment (docs/scheduler.md S15).
            overrun="report",
            **tenancy,
        )
        return cluster

    def make_cluster(self, spec: ClusterSpec, clock: SimClock) -> Cluster:
        """The cluster to schedule on."""
        return spec.build(policy=self.kind, clock=clock)

    def node_name(self, name: str) -> str:
        """The cluster's name of the spec's node ``name``."""
        return name

    def request(self, record: JobRecord) -> tuple[GangRequest, list[tuple[float, str | None]]]:
        """The job as a gang and its ladder."""
        job = record.job
        level = job.required_level
        ladder: list[tuple[float, str | None]] = []
        if self.rack_only and level is None and self.levels and job.pods > 1:
            level = self.levels[-1]
        if self.ladder is not None and level is None and self.levels:
            level = self.levels[-1]
            above = self.levels[-2] if len(self.levels) >= 2 else None
            first, second = self.ladder
            ladder = [(first, above), (second, None)] if second > first else [(first, None)]
        slices: tuple[tuple[str, int], ...] = ()
        if self.slices and self.levels:
            slices = nvidia_slices(job.pods, job.gpus, self.levels[-1])
        numa = "single" if self.numa_single else "none"
        request = GangRequest(
            job.pods,
            job.gpus_per_pod,
            required_level=level,
            name=job.id,
            priority=job.priority,
            movable=self.defrag,
            slices=slices,
            numa=numa,  # type: ignore[arg-type]
            spares=self.settings.spares if self.on_failure == "spares" else 0,
            resources_per_pod=dict(job.resources_per_pod) or None,
            gpu_milli=self.gpu_milli(job),
        )
        return request, ladder

    def gpu_milli(self, job: Job) -> int | None:
        """The job's fraction of a GPU, or ``None`` (a whole GPU).

        Whole when quotas or queues count whole GPUs here, or when spares or
        ``numa="single"`` are asked (which fractions do not take).
        """
        whole = self.settings.quotas or self.queue_setup is not None or self.numa_single
        whole = whole or self.on_failure == "spares"
        return None if whole else job.gpu_milli

    def arrived(self, replay: Replay, record: JobRecord, now: float) -> None:
        """Submits the job; a job that can never fit is rejected."""
        assert self.scheduler is not None
        job = record.job
        request, ladder = self.request(record)
        walltime = None
        if job.duration_s is not None:
            walltime = max(job.duration_s * self.settings.walltime_factor, 1e-6)
        queue = None
        if self.queue_setup is not None:
            queue = self.queue_setup.queue_of(job.owner)
            if queue is None:
                replay.reject(record, f"owner {job.owner!r} has no queue in the queues file")
                return
        try:
            self.scheduler.submit(
                job.id,
                request,
                owner=job.owner,
                walltime=walltime,
                ladder=ladder,
                on_failure="requeue" if self.on_failure == "requeue" else "repair",
                queue=queue,
            )
        except Unschedulable as error:
            replay.reject(record, f"never fits: {error.reason}")
        except InvalidRequest as error:
            raise PolicyError(f"policy {self.name} cannot replay job {job.id}: {error}") from None

    def schedule(self, replay: Replay, now: float) -> None:
        """One :meth:`Scheduler.cycle`; arrival-only replays reject what did not start."""
        assert self.scheduler is not None
        began = time.perf_counter()
        decisions = self.scheduler.cycle(now)
        replay.engine_seconds += time.perf_counter() - began
        for job_id in decisions.requeued:  # lost ranks (rule S13): before any restart
            replay.stopped(replay.by_id[job_id], now)
        for repaired in decisions.repaired:
            kept = replay.by_id[repaired.job_id]
            nodes = repaired.allocation.placement.nodes
            replay.repaired(kept, nodes, len(repaired.plan.from_spares), now)
            replay.hold_spares(kept, _spare_gpus(repaired.allocation), now)
        for victim in decisions.preempted:
            record = replay.by_id.get(victim)
            if record is not None and record.start_s is not None:
                if self.queue_setup is not None and self.queue_figures is not None:
                    queue = self.queue_setup.queue_of(record.job.owner) or ""  # a reclaim
                    self.queue_figures.reclaimed(queue, record.job.gpus, now - record.start_s)
                replay.stopped(record, now)
                replay.preemptions += 1
        evicted_now = set(decisions.preempted)
        for started in decisions.started:
            again = started.job_id in evicted_now  # evicted and started in one cycle
            replay.restarted_at_once += again
            if started.preempted:  # docs/queues.md Q5: a start that evicted, maybe a cascade
                replay.preempting_starts += 1
                replay.cascades += again
            replay.placements += 1
            record = replay.by_id[started.job_id]
            replay.count_numa_splits(started.allocation.placement.pods, record)
            replay.started(record, started.allocation.placement.nodes, now)
            replay.hold_spares(record, _spare_gpus(started.allocation), now)
        for moved in decisions.moved:
            replay.moved(replay.by_id[moved.job_id], moved.allocation.placement.nodes, now)
            replay.moves += 1
        for shadow in decisions.reservations:  # S5: each waiting job's first promise
            record = replay.by_id[shadow.job_id]
            waiting = record.promised_s is None and record.first_start_s is None
            if waiting and shadow.time < math.inf:
                record.promised_s = shadow.time
        tenancy, figures = self.scheduler._tenancy, self.queue_figures
        if tenancy is not None and figures is not None:
            figures.sample(now, tuple(tenancy.tree.usage(name) for name in figures.names))
        wake = self.scheduler.next_wakeup()
        if wake is not None and wake > now:
            replay.push(wake, WAKE, None)
        if replay.arrival_only:
            for pending in self.scheduler.pending_ids():
                self.scheduler.cancel(pending)
                replay.reject(replay.by_id[pending], "no room on arrival (arrival-only replay)")

    def finished(self, replay: Replay, record: JobRecord) -> None:
        """Frees the job's GPUs."""
        assert self.scheduler is not None
        self.scheduler.finish(record.job.id)

    def timeout(self, replay: Replay, record: JobRecord, now: float) -> None:
        """Gang policies set no pod timeouts."""

    def lost(self, replay: Replay, holders: list[str], now: float) -> None:
        """A GPU failed under these holds: the cycle at ``now`` handles their jobs.

        The scheduler repairs in place (``+repair``, ``+spares``: ``on_failure="repair"``)
        or requeues them (docs/scheduler.md, rule S13); ``schedule`` reports it to the
        replay. Here only a failed spare (no rank lost: the job runs on) is counted.
        """
        assert self.scheduler is not None
        running = {job.job_id: job.allocation for job in self.scheduler.running()}
        for hold_id in holders:
            job_id = self.scheduler.job_of(hold_id)
            if job_id is None or job_id not in running or running[job_id].lost:
                continue
            replay.hold_spares(replay.by_id[job_id], _spare_gpus(running[job_id]), now)

    def queued(self, replay: Replay) -> int:
        """Jobs waiting."""
        return self.scheduler.queue_length if self.scheduler is not None else 0


class BlindPolicy(GangPolicy):
    """Whole gangs, first-fit on a cluster without levels, nodes in a seeded shuffled order."""

    def __init__(self, seed: int) -> None:
        super().__init__("blind", "first-fit")
        self.seed = seed
        self.renamed: dict[str, str] = {}

    def make_cluster(self, spec: ClusterSpec, clock: SimClock) -> Cluster:
        """A flat cluster whose node names sort in a seeded random order."""
        import random

        order = list(range(len(spec.names)))
        random.Random(self.seed).shuffle(order)
        flat = [""] * len(order)
        for position, index in enumerate(order):
            flat[index] = f"{position:07d}"
            self.alias[flat[index]] = spec.names[index]
            self.renamed[spec.names[index]] = flat[index]
        return spec.build(policy="first-fit", clock=clock, flat=flat)

    def node_name(self, name: str) -> str:
        """The shuffled name of the spec's node ``name``."""
        return self.renamed[name]

    def build(self, spec: ClusterSpec, clock: SimClock, settings: SimSettings) -> Cluster:
        """As for gangs, on the flat cluster (no levels, so no required level)."""
        cluster = super().build(spec, clock, settings)
        self.levels = ()
        return cluster

    def request(self, record: JobRecord) -> tuple[GangRequest, list[tuple[float, str | None]]]:
        """The job as a gang; a required level cannot be honoured without levels."""
        job = record.job
        if job.required_level is not None:
            raise PolicyError(
                f"policy blind cannot replay job {job.id}: it has no levels for "
                f"required_level {job.required_level!r}"
            )
        asks = dict(job.resources_per_pod) or None
        request = GangRequest(
            job.pods,
            job.gpus_per_pod,
            name=job.id,
            priority=job.priority,
            resources_per_pod=asks,
            gpu_milli=self.gpu_milli(job),
        )
        return request, []


def nvidia_slices(pods: int, gpus: int, level: str) -> tuple[tuple[str, int], ...]:
    """NVIDIA's slice guidance for GB200 NVL72 as a slice layer of ``level``.

    Segments of 16 pods for jobs of 128 GPUs or more, of 4 for 32 to 127 GPUs, none below;
    only when the segment divides the pods (a job that does not split evenly keeps no
    slices, as it could not be segmented either).
    """
    size = 16 if gpus >= 128 else 4 if gpus >= 32 else 0
    if size == 0 or pods < size or pods % size:
        return ()
    return ((level, size),)


def _spare_gpus(allocation: Allocation) -> int:
    return sum(len(pod.gpus) for pod in allocation.spares)


def policy_for(name: str, settings: SimSettings) -> GangPolicy | PodByPodPolicy:
    """A fresh policy object called ``name`` (one of :data:`ALL_POLICIES`).

    Raises:
        PolicyError: An unknown name.

    """
    if name in ("best-fit", "first-fit", "best-fit-path"):
        return GangPolicy(name, name)
    if name == "best-fit+slices":
        return GangPolicy(name, "best-fit", slices=True)
    if name == "best-fit+numa":
        return GangPolicy(name, "best-fit", numa_single=True)
    if name == "best-fit+preempt":
        return GangPolicy(name, "best-fit", preemption=True)
    if name == "best-fit+defrag":
        return GangPolicy(name, "best-fit", defrag=True)
    if name == "best-fit+repair":
        return GangPolicy(name, "best-fit", on_failure="repair")
    if name == "best-fit+spares":
        return GangPolicy(name, "best-fit", on_failure="spares")
    if name == "blind":
        return BlindPolicy(settings.policy_seed)
    if name == "rack-only":
        return GangPolicy(name, "best-fit", rack_only=True)
    if name == "ladder":
        return GangPolicy(name, "best-fit", ladder=settings.ladder_s)
    if name == "pod-by-pod":
        return PodByPodPolicy()
    raise PolicyError(f"unknown policy {name!r}; choose from {', '.join(ALL_POLICIES)}")
