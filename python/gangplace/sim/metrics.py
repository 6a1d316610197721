"""Metrics of a replay: the figures of ``report.json``.

Definitions (all times in seconds of the trace):

- ``wait_s``: start minus arrival, over the jobs that started (``mean``, ``p50``, ``p95``,
  ``p99``); ``wait_by_gpus_s`` the same per gang size (1, 2-8, 9-64, 65+ GPUs).
- ``utilization``: GPU-seconds of running jobs over healthy GPUs x makespan (GPUs held by
  partial pod-by-pod gangs do not count: they are ``idle_held_gpu_hours``);
  ``utilization_over_time`` the same per time bin (``bin_s`` wide, at most 500 bins).
- ``locality``: for gangs of more than one pod, how many ran within one ``node``, one
  ``rack`` (innermost level), one ``spine`` (the level above) or ``wider``.
- ``jobs_total`` counts the jobs that arrived (arrival-only replays stop once 130% of the
  healthy GPUs have arrived); ``jobs_rejected`` those an arrival-only replay could not start
  on arrival; ``allocation_at_end`` the share of healthy GPUs busy at the end.
- ``fragmentation_waits``: jobs that, at least once, could not start although the cluster
  had at least their number of GPUs free in total.
- ``placements_per_s``: engine placement calls per second of time spent inside them.
"""

from __future__ import annotations

import statistics
from typing import Any

from gangplace.sim.clusters import ClusterSpec
from gangplace.sim.replay import JobRecord, RunResult

__all__ = ["SIZE_BUCKETS", "percentiles", "summarize"]

SIZE_BUCKETS = (("1", 1, 1), ("2-8", 2, 8), ("9-64", 9, 64), ("65+", 65, 1 << 62))


def percentiles(values: list[float]) -> dict[str, float | None]:
    """Mean, median, p95 and p99 (``None`` when there are no values)."""
    if not values:
        return {"mean": None, "p50": None, "p95": None, "p99": None}
    ordered = sorted(values)

    def at(share: float) -> float:
        return ordered[min(len(ordered) - 1, int(share * len(ordered)))]

    return {
        "mean": statistics.fmean(ordered),
        "p50": statistics.median(ordered),
        "p95": at(0.95),
        "p99": at(0.99),
    }


def utilization_series(
    result: RunResult, spec: ClusterSpec, bins: int = 500
) -> tuple[float, list[float]]:
    """Busy share of the healthy GPUs per time bin, up to the makespan.

    At most ``bins`` equal bins, at least an hour wide: the series behind the utilization
    plot. Returns the bin width and the shares.
    """
    if not result.samples or not spec.healthy_gpus or result.makespan_s <= 0:
        return 0.0, []
    width = max(3600.0, result.makespan_s / bins)
    count = max(1, int(result.makespan_s // width) + 1)
    busy = [0.0] * count
    samples = result.samples
    for (start, gpus, _), (end, _, _) in zip(samples, [*samples[1:], samples[-1]], strict=True):
        first = min(int(start // width), count - 1)
        last = min(int(end // width), count - 1)
        for index in range(first, last + 1):
            overlap = min(end, (index + 1) * width) - max(start, index * width)
            if overlap > 0:
                busy[index] += gpus * overlap
    return width, [round(value / (width * spec.healthy_gpus), 4) for value in busy]


def _locality(record: JobRecord, spec: ClusterSpec, paths: dict[str, tuple[str, ...]]) -> str:
    nodes = record.nodes
    if len(nodes) <= 1:
        return "node"
    racks = {paths[node] for node in nodes}
    if len(racks) == 1:
        return "rack"
    if len(spec.levels) >= 2 and len({rack[:-1] for rack in racks}) == 1:
        return "spine"
    return "wider"


def summarize(result: RunResult, spec: ClusterSpec) -> dict[str, Any]:
    """The figures of one policy's run."""
    arrived = [r for r in result.records if r.arrived]
    started = [r for r in arrived if r.start_s is not None]
    finished = [r for r in result.records if r.end_s is not None]
    waits = [(r.start_s or 0.0) - r.job.arrival_s for r in started]
    by_size = {
        label: percentiles(
            [(r.start_s or 0.0) - r.job.arrival_s for r in started if low <= r.job.gpus <= high]
        )
        for label, low, high in SIZE_BUCKETS
    }
    paths = dict(zip(spec.names, spec.paths, strict=True))
    locality = {"node": 0, "rack": 0, "spine": 0, "wider": 0}
    for record in started:
        if record.job.pods > 1:
            locality[_locality(record, spec, paths)] += 1
    capacity = spec.healthy_gpus * result.makespan_s
    bin_s, series = utilization_series(result, spec)
    return {
        "jobs_total": len(arrived),
        "jobs_started": len(started),
        "jobs_finished": len(finished),
        "makespan_s": result.makespan_s,
        "wait_s": percentiles(waits),
        "wait_by_gpus_s": by_size,
        "utilization": result.busy_gpu_seconds / capacity if capacity else 0.0,
        "utilization_over_time": {"bin_s": bin_s, "share": series},
        "idle_held_gpu_hours": result.idle_held_gpu_seconds / 3600.0,
        "deadlocks": result.deadlocks,
        "locality": locality,
        "fragmentation_waits": sum(1 for r in result.records if r.waited_with_free_gpus),
        "placements": result.placements,
        "truncated": result.truncated,
        "jobs_rejected": sum(1 for r in result.records if r.rejected),
        "allocation_at_end": (
            result.samples[-1][1] / spec.healthy_gpus
            if result.samples and spec.healthy_gpus
            else 0.0
        ),
        "placements_per_s": (
            result.placements / result.engine_seconds if result.engine_seconds else None
        ),
    }
