"""Prometheus metrics of a :class:`~gangplace.scheduler.Scheduler` (extra ``gangplace[metrics]``).

Names follow Volcano's and the scheduler-plugins' (``podgroup_pending_duration_seconds``,
``schedule_attempts_total``), prefixed ``gangplace_``:

- ``gangplace_pending_duration_seconds`` (histogram): the wait of every started job.
- ``gangplace_schedule_attempts_total{result}``: ``started`` per start, ``waiting`` per job
  still pending after a cycle, ``rejected`` per refused ``submit``.
- ``gangplace_placements_total``, ``gangplace_preemptions_total`` (jobs or holds evicted),
  ``gangplace_moves_total`` (defragmentation moves), ``gangplace_rejections_total``.
- ``gangplace_pending_jobs`` (gauge) and ``gangplace_cycle_duration_seconds`` (histogram).
- Per owner (label ``owner``; ``""`` for jobs without one): ``gangplace_owner_pending_jobs``
  (gauge), ``gangplace_owner_started_total``, ``gangplace_owner_preempted_total``,
  ``gangplace_owner_pending_duration_seconds`` (histogram).
- ``gangplace_gpus{state}`` (gauge, after every cycle): the cluster's ``free``, ``reserved``,
  ``allocated`` and ``unhealthy`` GPUs as ``Cluster.stats()`` counts them (``unhealthy``
  includes failed GPUs still held).
- ``gangplace_backfills_total`` (jobs started past a blocked head),
  ``gangplace_requeues_total`` (running jobs queued again: preempted, ``requeue``, or lost
  ranks), ``gangplace_repairs_total`` and ``gangplace_failed_jobs_total`` (running jobs with
  lost ranks repaired in place, or ended: rule S13).
- Per queue (label ``queue``; docs/queues.md, Q10), after every cycle:
  ``gangplace_queue_usage_gpus``, ``gangplace_queue_nominal_gpus``,
  ``gangplace_queue_borrowed_gpus``, ``gangplace_queue_lent_gpus``,
  ``gangplace_queue_pending_jobs``, ``gangplace_queue_weighted_share`` (gauges),
  ``gangplace_queue_admitted_total`` and ``gangplace_queue_reclaim_victims_total``.
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
        self.registry = registry
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
        self.owner_pending = Gauge(
            "gangplace_owner_pending_jobs",
            "Jobs in the queue, per owner.",
            ["owner"],
            registry=registry,
        )
        self.owner_started = Counter(
            "gangplace_owner_started_total",
            "Jobs started, per owner.",
            ["owner"],
            registry=registry,
        )
        self.owner_preempted = Counter(
            "gangplace_owner_preempted_total",
            "Jobs preempted, per owner.",
            ["owner"],
            registry=registry,
        )
        self.owner_pending_duration = Histogram(
            "gangplace_owner_pending_duration_seconds",
            "Seconds a gang waited before it started, per owner.",
            ["owner"],
            buckets=WAIT_BUCKETS,
            registry=registry,
        )
        self.gpus = Gauge(
            "gangplace_gpus",
            "The cluster's GPUs by state after the last cycle (unhealthy includes held ones).",
            ["state"],
            registry=registry,
        )
        self.backfills = Counter(
            "gangplace_backfills_total", "Jobs started past a blocked head.", registry=registry
        )
        self.requeues = Counter(
            "gangplace_requeues_total",
            "Running jobs queued again (preempted, requeue, or lost ranks).",
            registry=registry,
        )
        self.repairs = Counter(
            "gangplace_repairs_total",
            "Running jobs whose lost ranks a cycle repaired in place (rule S13).",
            registry=registry,
        )
        self.failed = Counter(
            "gangplace_failed_jobs_total",
            "Running jobs ended because they lost ranks (on_failure='fail', rule S13).",
            registry=registry,
        )
        self.brake_refusals = Counter(
            "gangplace_brake_refusals_total",
            "Room not made, or an owner spared, because of a preemption brake (rule S11).",
            ["brake"],
            registry=registry,
        )
        self._owners_seen: set[str] = set()
        # The labelled series a start updates, looked up once each (``labels()`` takes a lock
        # and builds a key on every call: most of a start's metrics cost, issue 51).
        self._per_owner: dict[str, tuple[Any, Any]] = {}
        self._started_attempts: Any = None

    def job_started(self, owner: str | None, waited: float, backfilled: bool) -> None:
        """One start: the wait, the counts, per owner too."""
        label = owner or ""
        series = self._per_owner.get(label)
        if series is None:
            series = self._per_owner[label] = (
                self.owner_pending_duration.labels(owner=label),
                self.owner_started.labels(owner=label),
            )
        if self._started_attempts is None:
            self._started_attempts = self.attempts.labels(result="started")
        self.pending_duration.observe(waited)
        series[0].observe(waited)
        self._started_attempts.inc()
        self.placements.inc()
        series[1].inc()
        if backfilled:
            self.backfills.inc()

    def job_requeued(self, owner: str | None, *, preempted: bool) -> None:
        """A running job queued again."""
        self.requeues.inc()
        if preempted:
            self.preemptions.inc()
            self.owner_preempted.labels(owner=owner or "").inc()

    def brake_refused(self, brake: str) -> None:
        """A brake held: ``victims_per_cycle``, ``evicted_gpus_per_hour`` or ``budget``."""
        self.brake_refusals.labels(brake=brake).inc()

    def queue_changed(self, per_owner: dict[str | None, int]) -> None:
        """The pending gauges, from the queued jobs' count per owner."""
        self.pending.set(sum(per_owner.values()))
        counts: dict[str, int] = {}
        for owner, count in per_owner.items():
            counts[owner or ""] = counts.get(owner or "", 0) + count
        for label in self._owners_seen - set(counts):
            self.owner_pending.labels(owner=label).set(0)
        for label, count in counts.items():
            self.owner_pending.labels(owner=label).set(count)
        self._owners_seen |= set(counts)

    def queues_done(self, tenancy: Any, pending: dict[str, int]) -> None:
        """After a cycle: every queue's gauges and counters (docs/queues.md Q10)."""
        from prometheus_client import Counter, Gauge

        if not hasattr(self, "queue_gauges"):
            registry = self.registry
            self.queue_gauges = {
                name: Gauge(f"gangplace_queue_{name}", text, ["queue"], registry=registry)
                for name, text in (
                    ("usage_gpus", "GPUs the queue's running jobs hold."),
                    ("nominal_gpus", "The queue's nominal quota."),
                    ("borrowed_gpus", "GPUs the queue uses above its nominal quota."),
                    ("lent_gpus", "Its unused lendable GPUs that borrowers of its tree use."),
                    ("pending_jobs", "Jobs queued in the queue."),
                    ("weighted_share", "The queue's weighted share (fair sharing, Q8)."),
                )
            }
            self.queue_counters = {
                name: Counter(f"gangplace_queue_{name}", text, ["queue"], registry=registry)
                for name, text in (
                    ("admitted", "Jobs of the queue started."),
                    ("reclaim_victims", "Jobs of the queue preempted by a reclaim."),
                )
            }
            self.queue_counted: dict[tuple[str, str], int] = {}
            self.queue_seen: set[str] = set()
        tree = tenancy.tree
        for gone in sorted(self.queue_seen - set(tree.queues)):  # Q11: a queue removed
            for metric in [*self.queue_gauges.values(), *self.queue_counters.values()]:
                metric.remove(gone)
            self.queue_counted = {k: v for k, v in self.queue_counted.items() if k[1] != gone}
        self.queue_seen = set(tree.queues)
        for queue in tree.queues:
            node = tree.nodes[queue]
            values = {
                "usage_gpus": node.usage,
                "nominal_gpus": node.nominal,
                "borrowed_gpus": tree.borrowed(queue),
                "lent_gpus": tree.lent(queue),
                "pending_jobs": pending.get(queue, 0),
                "weighted_share": min(tree.share(queue)[0], 1e300),
            }
            for name, value in values.items():
                self.queue_gauges[name].labels(queue=queue).set(value)
            for name, counts in (
                ("admitted", tenancy.admitted),
                ("reclaim_victims", tenancy.reclaimed),
            ):
                delta = counts[queue] - self.queue_counted.get((name, queue), 0)
                if delta:
                    self.queue_counters[name].labels(queue=queue).inc(delta)
                self.queue_counted[(name, queue)] = counts[queue]

    def cycle_done(self, stats: Any, seconds: float, waiting: int) -> None:
        """After a cycle: the GPU-state gauges, its duration, the jobs still waiting."""
        self.attempts.labels(result="waiting").inc(waiting)
        self.cycle_duration.observe(seconds)
        for state in ("free", "reserved", "allocated", "unhealthy"):
            self.gpus.labels(state=state).set(getattr(stats, state))
