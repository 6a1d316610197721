"""Metrics of a replay: the figures of ``report.json`` (docs/command-line.md).

Definitions (times in seconds of the trace):

- Waits are over **every job that arrived and was not rejected**: start minus arrival for
  jobs that started; for jobs that never started, a *censored* wait: the run's end minus
  arrival (the least they waited). ``wait_s`` (mean, p50, p95, p99) therefore never hides
  a job that never ran; ``never_started`` counts those; ``wait_started_s`` is the same over
  started jobs only, for comparison. ``wait_by_gpus_s`` per gang size, ``wait_by_owner_s``
  per owner.
- ``total_wait_s``: every queued period of a job summed (time queued again after a
  preemption, a failure or a requeue included; the period open at the run's end censored
  there); ``completion_s``: finish minus arrival over every admitted job, a job that did not
  finish censored at the run's end (``censored`` counts them: a lower bound, issue 49);
  ``slowdown``: completion over run time, censored likewise; ``restarted_jobs``: jobs
  stopped and queued again at least once.
- ``utilization``: GPU-seconds of running jobs inside the **common window** (first to last
  arrival of the trace, the same for every policy) over healthy GPUs x the window;
  ``useful_utilization`` and ``spread_share`` split it into the work's GPU-time and what
  spreading cost (a job the placement model slows by ``speed`` uses its GPUs ``1/speed`` for
  its work: the rest is lost to spreading; issue 49);
  ``idle_held_share`` the same for GPUs held by partial pod-by-pod gangs
  (``idle_held_share_to_end`` from the first arrival to the run's end, where a deadlock
  after the last arrival shows); ``drain_h`` the
  time from the last arrival to the run's end (each policy's own busy period after arrivals).
- ``deadlock_h``: time during which partial gangs held GPUs and no job ran; ``standoff``:
  where the run was stopped (see :mod:`gangplace.sim.replay`).
- ``locality``: shares of the multi-pod gangs that ran within one rack (innermost level),
  one spine (the level above, but not one rack) or wider.
- ``rejected``: jobs refused because they cannot fit the cluster as built, or (arrival-only)
  because there was no room on arrival; ``allocation_at_end`` the busy share of healthy GPUs
  at the end; ``load_curve`` (arrival-only) the allocated share against the arrived load.
- ``spread_gpu_hours``: GPU-hours jobs ran beyond their run time at the tightest span they
  could have, because the placement model slowed their placement down; ``by_job_type`` the
  waits, completion times, slowdowns and spreading cost of the multi-node jobs of each job
  type family.
- ``lost_gpu_hours``: work thrown away by preemptions and failures (restarts from scratch);
  ``goodput`` the share of busy GPU-time that was not lost; ``useful_gpu_hours`` the busy
  GPU-time that was not lost, over the whole run. ``repairs``: failures repaired in place
  (``+repair``, ``+spares``), ``ranks_from_spares`` the lost ranks spares took,
  ``spare_gpu_hours`` the GPU-time held as spares (idle and never free: the price of
  ``+spares``, not in ``utilization``). ``preemptions``: jobs evicted; ``preempting_starts``
  the starts that evicted them; ``cascades`` those starts by a job itself evicted in the same
  cycle (docs/queues.md Q5); ``restarted_at_once`` the victims started again in the cycle
  that evicted them (by a cascade, or on GPUs freed meanwhile).
- ``real_wait_s``: the waits the trace itself recorded (Alibaba), beside the simulated ones.
"""

from __future__ import annotations

import bisect
from typing import Any

from gangplace.sim.clusters import ClusterSpec
from gangplace.sim.replay import JobRecord, RunResult
from gangplace.sim.stats import percentiles

__all__ = ["SIZE_BUCKETS", "Window", "summarize", "utilization_series"]

SIZE_BUCKETS = (("1", 1, 1), ("2-8", 2, 8), ("9-64", 9, 64), ("65+", 65, 1 << 62))
Window = tuple[float, float]


def _integrate(
    samples: list[tuple[float, float, int, int, float]], column: int, window: Window
) -> float:
    """The integral of one sample column (piecewise constant after each sample) on ``window``."""
    low, high = window
    total = 0.0
    for (start, *values), nxt in zip(samples, [*samples[1:], None], strict=True):
        end = nxt[0] if nxt is not None else start
        lo, hi = max(start, low), min(end, high)
        if hi > lo:
            total += values[column - 1] * (hi - lo)
    return total


def utilization_series(
    result: RunResult, window: Window, bins: int = 200
) -> tuple[float, list[float], list[float]]:
    """Busy and idle-held shares of the healthy GPUs per time bin over ``window``.

    One pass over the samples. Returns the bin width and the two series (``bins`` bins).
    """
    low, high = window
    if high <= low or not result.healthy_gpus:
        return 0.0, [], []
    width = (high - low) / bins
    busy, held = [0.0] * bins, [0.0] * bins
    samples = result.samples
    for (start, busy_gpus, held_gpus, *_), nxt in zip(samples, [*samples[1:], None], strict=True):
        end = nxt[0] if nxt is not None else start
        lo, hi = max(start, low), min(end, high)
        if hi <= lo or not (busy_gpus or held_gpus):
            continue
        first = min(int((lo - low) / width), bins - 1)
        last = min(int((hi - low) / width), bins - 1)
        for index in range(first, last + 1):
            overlap = min(hi, low + (index + 1) * width) - max(lo, low + index * width)
            if overlap > 0:
                busy[index] += busy_gpus * overlap
                held[index] += held_gpus * overlap
    capacity = width * result.healthy_gpus
    return (
        width,
        [round(value / capacity, 4) for value in busy],
        [round(value / capacity, 4) for value in held],
    )


def _first_wait(record: JobRecord) -> float | None:
    return record.first_start_s - record.job.arrival_s if record.first_start_s is not None else None


def _locality(record: JobRecord, spec: ClusterSpec, paths: dict[str, tuple[str, ...]]) -> str:
    racks = {paths[node] for node in record.nodes}
    if len(racks) == 1:
        return "rack"
    if len(spec.levels) >= 2 and len({rack[:-1] for rack in racks}) == 1:
        return "spine"
    return "wider"


def _free_before(result: RunResult) -> Any:
    """Free GPUs just before an instant, as an arriving job found the cluster.

    Healthy minus busy minus idle-held GPUs at the last sample strictly earlier.
    """
    times = [sample[0] for sample in result.samples]

    def free_at(instant: float) -> float:
        index = bisect.bisect_left(times, instant) - 1
        if index < 0:
            return result.healthy_gpus
        _, busy, held, *_ = result.samples[index]
        return result.healthy_gpus - busy - held

    return free_at


def _waited_with_room(records: list[JobRecord], free_at: Any) -> dict[str, Any]:
    """Jobs that waited although enough GPUs were free in total when they arrived.

    They were kept out by fragmentation (no single domain or node held them) or by the queue
    (a blocked head without backfill); the tie-break is meant to lower the first kind.
    """
    waited = [r for r in records if (_first_wait(r) or 0.0) > 0 or r.first_start_s is None]
    with_room = [r for r in waited if free_at(r.job.arrival_s) >= r.job.gpus]
    return {
        "jobs": len(with_room),
        "share_of_admitted": len(with_room) / len(records) if records else None,
        "multi_node": sum(1 for r in with_room if r.job.pods > 1),
    }


def _share_to_end(result: RunResult, start: float) -> float | None:
    """Idle-held GPU-time from ``start`` to the run's end over healthy GPUs x that span."""
    span = result.end_s - start
    if span <= 0 or not result.healthy_gpus:
        return None
    return _integrate(result.samples, 2, (start, result.end_s)) / (result.healthy_gpus * span)


def summarize(
    result: RunResult,
    spec: ClusterSpec,
    window: Window,
    admitted_elsewhere: set[str] | frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """The figures of one policy's run, over the common ``window``.

    ``admitted_elsewhere``: ids of jobs this policy rejected but another policy of the same
    comparison admitted; they are counted as admitted jobs that never started (issue 49).
    """
    arrived = [r for r in result.records if r.arrived]
    admitted = [r for r in arrived if r.rejected is None or r.job.id in admitted_elsewhere]
    ever_started = [r for r in admitted if r.first_start_s is not None]
    never = [r for r in admitted if r.first_start_s is None]
    finished = [r for r in admitted if r.end_s is not None]

    def wait(record: JobRecord) -> float:
        first = _first_wait(record)
        return first if first is not None else max(0.0, result.end_s - record.job.arrival_s)

    def total_wait(record: JobRecord) -> float:
        """Every queued period, the one open at the end included (censored there)."""
        if record.rejected is not None:  # admitted elsewhere: waiting to the end here
            return max(0.0, result.end_s - record.job.arrival_s)
        open_s = record.queued_since_s
        return record.waited_s + (max(0.0, result.end_s - open_s) if open_s is not None else 0.0)

    # Issue 49: over every admitted job, a job that did not finish censored at the run's end
    # (a lower bound), so a run that leaves jobs unfinished never looks faster for it.
    # Arrival-only traces have no durations: completions of finished jobs only (none).
    arrival_only = any(r.job.duration_s is None for r in result.records)
    timed = [] if arrival_only else admitted
    unfinished = [r for r in timed if r.end_s is None]

    def completion(record: JobRecord) -> float:
        end = record.end_s if record.end_s is not None else max(result.end_s, record.job.arrival_s)
        return end - record.job.arrival_s

    completions = [completion(r) for r in timed]
    slowdowns = [completion(r) / r.job.duration_s for r in timed if r.job.duration_s]

    def waits_of(records: list[JobRecord]) -> dict[str, Any]:
        figures: dict[str, Any] = dict(percentiles([wait(r) for r in records]))
        figures["jobs"] = len(records)
        figures["never_started"] = sum(1 for r in records if r.first_start_s is None)
        return figures

    paths = dict(zip(spec.names, spec.paths, strict=True))
    free_at = _free_before(result)
    multi = [r for r in ever_started if r.job.pods > 1 and r.nodes]
    counts = {"rack": 0, "spine": 0, "wider": 0}
    for record in multi:
        counts[_locality(record, spec, paths)] += 1
    low, high = window
    span = max(high - low, 0.0)
    capacity = result.healthy_gpus * span
    busy = _integrate(result.samples, 1, window)
    held = _integrate(result.samples, 2, window)
    spread = _integrate(result.samples, 4, window)
    busy_total = _integrate(result.samples, 1, (-1e300, 1e300))
    lost = sum(r.lost_gpu_s for r in result.records)
    owners = sorted({r.job.owner for r in admitted if r.job.owner is not None})
    real = [r.job.real_wait_s for r in admitted if r.job.real_wait_s is not None]
    standoff = result.standoff
    return {
        "jobs_total": len(arrived),
        "jobs_not_arrived": len(result.records) - len(arrived),
        "queued_at_end": result.queued_at_end,
        "jobs_started": len(ever_started),
        "jobs_finished": len(finished),
        "never_started": len(never),
        "jobs_rejected": len(arrived) - len(admitted),
        "rejected_never_fit": sum(1 for r in arrived if (r.rejected or "").startswith("never")),
        "end_s": result.end_s,
        "drain_h": max(0.0, result.end_s - high) / 3600.0,
        "wait_s": {**percentiles([wait(r) for r in admitted]), "censored": len(never)},
        "wait_started_s": percentiles([wait(r) for r in ever_started]),
        "total_wait_s": percentiles([total_wait(r) for r in admitted]),
        "completion_s": {
            **percentiles(completions),
            "jobs": len(completions),
            "censored": len(unfinished),
        },
        "slowdown": percentiles(slowdowns),
        "restarted_jobs": sum(1 for r in admitted if r.restarts),
        "wait_by_gpus_s": {
            label: waits_of([r for r in admitted if low_ <= r.job.gpus <= high_])
            for label, low_, high_ in SIZE_BUCKETS
        },
        "wait_by_owner_s": {
            owner: waits_of([r for r in admitted if r.job.owner == owner]) for owner in owners
        },
        "wait_by_priority_s": {
            str(priority): waits_of([r for r in admitted if r.job.priority == priority])
            for priority in sorted({r.job.priority for r in admitted})
        },
        "window_s": [low, high],
        "utilization": busy / capacity if capacity else None,
        # Issue 49: busy GPU-time split into the work's and what spreading cost (the placement
        # model's slowdown of jobs across nodes, racks or spines), both over the window
        "useful_utilization": (busy - spread) / capacity if capacity else None,
        "spread_share": spread / capacity if capacity else None,
        "idle_held_share": held / capacity if capacity else None,
        "idle_held_gpu_hours": _integrate(result.samples, 2, (-1e300, 1e300)) / 3600.0,
        # Issue 49: the same share from the first arrival to the run's end (a standoff or a
        # livelock after the last arrival shows here, not in the window's share)
        "idle_held_share_to_end": _share_to_end(result, low),
        "deadlock_h": result.deadlock_s / 3600.0,
        "standoff": None
        if standoff is None
        else {
            "at_h": standoff.at_s / 3600.0,
            "nothing_started_for_h": (standoff.at_s - standoff.since_s) / 3600.0,
            "held_gpus": standoff.held_gpus,
            "held_gpu_hours": standoff.held_gpu_hours,
            "kind": standoff.kind,
        },
        "cut_at_h": None if result.cut_at_s is None else result.cut_at_s / 3600.0,
        "waited_with_room": _waited_with_room(admitted, free_at),
        "locality": {
            "multi_pod_gangs": len(multi),
            **{kind: (count / len(multi) if multi else None) for kind, count in counts.items()},
        },
        "placements": result.placements,
        "numa_split_pods": result.numa_split_pods,
        "preemptions": result.preemptions,
        "preempting_starts": result.preempting_starts,
        "cascades": result.cascades,
        "restarted_at_once": result.restarted_at_once,
        "moves": result.moves,
        "failures": result.failures,
        "restarts": sum(r.restarts for r in result.records),
        "lost_gpu_hours": lost / 3600.0,
        "spread_gpu_hours": sum(r.spread_gpu_s for r in result.records) / 3600.0,
        "by_job_type": _by_job_type(finished, admitted, wait),
        "goodput": 1.0 - lost / busy_total if busy_total else None,
        "useful_gpu_hours": (busy_total - lost) / 3600.0,
        "repairs": result.repairs,
        "ranks_from_spares": result.ranks_from_spares,
        "spare_gpu_hours": result.spare_gpu_s / 3600.0,
        "allocation_at_end": (
            result.samples[-1][1] / result.healthy_gpus
            if result.samples and result.healthy_gpus
            else 0.0
        ),
        "load_curve": _thin(result.load_curve, 200),
        "real_wait_s": percentiles(real) if real else None,
        "scheduler_seconds": result.engine_seconds,
        "queues": _queues(result, window, waits_of, admitted),
    }


def _queues(
    result: RunResult,
    window: tuple[float, float],
    waits_of: Any,
    admitted: list[JobRecord],
) -> dict[str, Any] | None:
    """With ``--queues``: per queue, its usage figures, waits and completion times."""
    figures = result.queues
    if figures is None or figures.setup is None:
        return None
    out: dict[str, Any] = figures.summary(window, result.healthy_gpus)
    for name, entry in out.items():
        mine = [r for r in admitted if figures.setup.queue_of(r.job.owner) == name]
        done = [  # unfinished jobs censored at the run's end, as in the headline figures
            (r.end_s if r.end_s is not None else max(result.end_s, r.job.arrival_s))
            - r.job.arrival_s
            for r in mine
            if r.job.duration_s is not None
        ]
        entry["wait_s"] = waits_of(mine)
        censored = sum(1 for r in mine if r.end_s is None and r.job.duration_s is not None)
        entry["completion_s"] = {**percentiles(done), "jobs": len(done), "censored": censored}
    return out


def _family(job_type: str | None) -> str:
    """``"ResNet-50 (batch size 64)"`` -> ``"ResNet-50"``; no type -> ``"(none)"``."""
    return job_type.split(" (batch size", 1)[0] if job_type else "(none)"


def _by_job_type(
    finished: list[JobRecord], admitted: list[JobRecord], wait: Any
) -> dict[str, dict[str, Any]]:
    """Per job type family: jobs, waits, completion times, slowdowns and spreading cost.

    Completion and slowdown are over the finished multi-node jobs of the family (the ones
    placement can slow down), waits over every admitted multi-node job of it.
    """
    families: dict[str, dict[str, Any]] = {}
    ended = {id(r): r.end_s for r in finished if r.end_s is not None and r.job.duration_s}
    for family in sorted({_family(r.job.job_type) for r in admitted}):
        mine = [r for r in admitted if _family(r.job.job_type) == family and r.job.pods > 1]
        completions = {
            id(r): end - r.job.arrival_s for r in mine if (end := ended.get(id(r))) is not None
        }
        families[family] = {
            "multi_node_jobs": len(mine),
            "never_started": sum(1 for r in mine if r.first_start_s is None),
            "wait_s": percentiles([wait(r) for r in mine]),
            "completion_s": percentiles(list(completions.values())),
            "slowdown": percentiles(
                [
                    completions[id(r)] / (r.job.duration_s or 1.0)
                    for r in mine
                    if id(r) in completions
                ]
            ),
            "spread_gpu_hours": sum(r.spread_gpu_s for r in mine) / 3600.0,
        }
    return families


def _thin(points: list[tuple[float, float]], most: int) -> list[list[float]]:
    """At most ``most`` evenly spaced points of a curve (the last one kept)."""
    if len(points) <= most:
        return [[round(x, 4), round(y, 4)] for x, y in points]
    step = len(points) / most
    chosen = [points[int(index * step)] for index in range(most - 1)] + [points[-1]]
    return [[round(x, 4), round(y, 4)] for x, y in chosen]
