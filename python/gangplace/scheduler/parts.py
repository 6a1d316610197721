"""The parts of a Scheduler that its cycle, failures and reclaims work on.

:class:`Parts` is a plain record of the scheduler's state objects, built once by
:class:`~gangplace.scheduler.Scheduler`: the cluster, the waiting jobs, the running jobs,
the owners' quotas, the queues (``tenancy``), the preemption brakes, the backfill
reservations, the histories and the metrics, and the settings a cycle reads. The helpers of
this package receive it (or the one part they use), never the Scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass

from gangplace._gangplace import Cluster
from gangplace.scheduler.brakes import Brakes
from gangplace.scheduler.history import Histories
from gangplace.scheduler.metrics import SchedulerMetrics
from gangplace.scheduler.owners import OwnerQuotas
from gangplace.scheduler.reservations import ShadowBook
from gangplace.scheduler.running import RunningJobs
from gangplace.scheduler.tenancy import Tenancy
from gangplace.scheduler.waiting import Waiting

__all__ = ["Parts", "Settings"]


@dataclass(frozen=True, slots=True)
class Settings:
    """What the scheduler was built with that a cycle reads (docs/scheduler.md)."""

    backfill: str  # S5: "easy", "conservative", "none" or "any"
    reservation_depth: int  # S5: conservative backfill's reservations per walk
    preemption: bool  # S7
    defrag: bool  # S7
    repair_widen: bool  # S13
    evicted_may_preempt: bool = False  # Q5, S7: a job evicted in a cycle preempts in it


@dataclass(frozen=True, slots=True)
class Parts:
    """The scheduler's state objects (each mutable; the record itself is not)."""

    cluster: Cluster
    settings: Settings
    waiting: Waiting
    running: RunningJobs
    owners: OwnerQuotas
    tenancy: Tenancy | None
    brakes: Brakes
    book: ShadowBook
    histories: Histories
    metrics: SchedulerMetrics | None
