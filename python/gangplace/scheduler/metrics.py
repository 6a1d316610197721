"""Prometheus metrics of a :class:`~gangplace.scheduler.Scheduler` (extra ``gangplace[metrics]``).

Names follow Volcano's and the scheduler-plugins' (``podgroup_pending_duration_seconds``,
``schedule_attempts_total``), prefixed ``gangplace_``:

- ``gangplace_pending_duration_seconds`` (histogram): the wait of every started job.
- ``gangplace_schedule_attempts_total{result}``: ``started`` per start, ``waiting`` per job
  still pending after a cycle, ``rejected`` per refused ``submit``.
- ``gangplace_placements_total``, ``gangplace_preemptions_total`` (jobs or holds evicted),
  ``gangplace_moves_total`` (defragmentation moves), ``gangplace_rejections_total``.
- ``gangplace_pending_jobs`` (gauge) and ``gangplace_cycle_duration_seconds`` (histogram).
"""

from __future__ import annotations

from typing import Any

__all__ = ["SchedulerMetrics"]

# Waits span seconds to weeks: 1 s to 28 days, roughly x4 apart.
WAIT_BUCKETS = (1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 12 * 3600, 86400, 7 * 86400, 28 * 86400)
CYCLE_BUCKETS = (1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0)


class SchedulerMetrics:
    """The metric objects, registered in one ``prometheus_client`` registry."""

    def __init__(self, registry: Any) -> None:
        try:
            from prometheus_client import Counter, Gauge, Histogram
        except ImportError:  # pragma: no cover - depends on the environment
            raise ImportError(
                "Scheduler(metrics=...) needs prometheus_client: pip install 'gangplace[metrics]'"
            ) from None
        self.pending_duration = Histogram(
            "gangplace_pending_duration_seconds",
            "Seconds a gang waited in the queue before it started.",
            buckets=WAIT_BUCKETS,
            registry=registry,
        )
        self.attempts = Counter(
            "gangplace_schedule_attempts_total",
            "Scheduling attempts by result: started, waiting (still pending after a cycle), "
            "rejected (refused at submit).",
            ["result"],
            registry=registry,
        )
        self.placements = Counter("gangplace_placements_total", "Gangs started.", registry=registry)
        self.preemptions = Counter(
            "gangplace_preemptions_total",
            "Jobs or holds evicted by preemption or defragmentation.",
            registry=registry,
        )
        self.moves = Counter(
            "gangplace_moves_total", "Running jobs moved by defragmentation.", registry=registry
        )
        self.rejections = Counter(
            "gangplace_rejections_total",
            "Jobs refused at submit because they cannot fit the cluster even when empty.",
            registry=registry,
        )
        self.pending = Gauge("gangplace_pending_jobs", "Jobs in the queue.", registry=registry)
        self.cycle_duration = Histogram(
            "gangplace_cycle_duration_seconds",
            "Wall-clock seconds of one scheduling cycle.",
            buckets=CYCLE_BUCKETS,
            registry=registry,
        )
