"""A gang scheduler around the engine: queue, backfill, priorities, timeouts, metrics.

:class:`Scheduler` is what an embedder puts around a :class:`~gangplace.Cluster` and what
``gangplace simulate`` drives. The rules are docs/scheduler.md (S1-S16) and docs/queues.md;
:mod:`gangplace.reference.scheduler` is a naive implementation of the same rules that the
tests compare it with.
"""

from gangplace.scheduler.core import Scheduler
from gangplace.scheduler.history import HistorySummary, JobEvent, JobHistory
from gangplace.scheduler.quota import Cohort, Queue
from gangplace.scheduler.values import (
    Decisions,
    Moved,
    PendingJob,
    PendingReasons,
    Repaired,
    RunningJob,
    Shadow,
    Started,
)

__all__ = [
    "Cohort",
    "Decisions",
    "HistorySummary",
    "JobEvent",
    "JobHistory",
    "Moved",
    "PendingJob",
    "PendingReasons",
    "Queue",
    "Repaired",
    "RunningJob",
    "Scheduler",
    "Shadow",
    "Started",
]
