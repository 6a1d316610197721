"""One simulation: traces, a cluster, the policies side by side on identical job streams.

Over one or several workload seeds; figures are summarised with 95% intervals.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gangplace.sim.clusters import ClusterSpec, parse_cluster
from gangplace.sim.errors import SimError
from gangplace.sim.jobs_out import JobRows
from gangplace.sim.metrics import Window, summarize
from gangplace.sim.paired import paired, paired_table
from gangplace.sim.policies import POLICIES, policy_for
from gangplace.sim.replay import Replay, RunResult
from gangplace.sim.report import table, write_json, write_plots
from gangplace.sim.scenarios import apply_scenarios
from gangplace.sim.settings import SimSettings, assumptions
from gangplace.sim.speed import model_for
from gangplace.sim.stats import figure, interval
from gangplace.sim.traces import Job, Trace, read_traces, with_cluster_resources

__all__ = ["HEADLINE", "Simulation", "aggregate", "run_policy", "simulate"]

# Arrival-only traces (no durations) are replayed until this share of capacity has arrived,
# as the FGD paper replays the Alibaba multigpu lists.
ARRIVAL_ONLY_LOAD = 1.3

# The figures summarised over seeds (dotted paths into one run's figures).
HEADLINE = (
    "jobs_total",
    "jobs_finished",
    "never_started",
    "jobs_rejected",
    "wait_s.mean",
    "wait_s.p50",
    "wait_s.p95",
    "wait_s.p99",
    "total_wait_s.mean",
    "total_wait_s.p95",
    "completion_s.mean",
    "completion_s.p50",
    "completion_s.p95",
    "completion_s.p99",
    "slowdown.mean",
    "slowdown.p50",
    "slowdown.p95",
    "slowdown.p99",
    "restarted_jobs",
    "admitted_elsewhere",
    "spread_gpu_hours",
    "utilization",
    "useful_utilization",
    "spread_share",
    "idle_held_share",
    "idle_held_share_to_end",
    "idle_held_gpu_hours",
    "deadlock_h",
    "drain_h",
    "locality.rack",
    "waited_with_room.jobs",
    "numa_split_pods",
    "allocation_at_end",
    "preemptions",
    "preempting_starts",
    "cascades",
    "restarted_at_once",
    "lost_gpu_hours",
    "goodput",
    "useful_gpu_hours",
    "repairs",
    "spare_gpu_hours",
)


@dataclass
class Simulation:
    """The outcome: the report (``report.json``), raw results of the first seed, files."""

    report: dict[str, Any]
    results: dict[str, RunResult]
    files: list[Path] = field(default_factory=list)

    def table(self) -> str:
        """The terminal table with its assumptions, then the paired comparisons."""
        compared = paired_table(self.report.get("paired", []))
        return table(self.report) + ("\n\n" + compared if compared else "")


def run_policy(
    jobs: list[Job],
    spec: ClusterSpec,
    policy: str,
    settings: SimSettings,
    *,
    window: Window,
    workload_seed: int,
    stop_after_gpus: float | None,
    progress: bool = False,
) -> tuple[dict[str, Any], RunResult | None]:
    """One policy on one job stream: its figures, or ``{"error": ...}`` when it cannot run."""
    began = time.perf_counter()
    try:
        replay = Replay(
            jobs,
            spec,
            policy_for(policy, settings),
            settings,
            workload_seed=workload_seed,
            stop_after_gpus=stop_after_gpus,
        )
        result = _run(replay, len(jobs), policy, progress)
    except SimError as error:
        return {"error": str(error)}, None
    figures = summarize(result, spec, window)
    figures["wall_s"] = round(time.perf_counter() - began, 3)
    return figures, result


def simulate(
    trace: str | Path | list[str | Path],
    *,
    trace_format: str | None = None,
    cluster: str = "tiny",
    policies: tuple[str, ...] = POLICIES,
    seeds: tuple[int, ...] = (0,),
    settings: SimSettings | None = None,
    out: str | Path | None = None,
    progress: bool = False,
    baseline: str | None = None,
    jobs_out: str | Path | None = None,
) -> Simulation:
    """Replays the trace(s) on ``cluster`` under each policy and each workload seed.

    Args:
        trace: A trace file, or several replayed together (each file's jobs owned by its
            stem, e.g. a Philly VC).
        trace_format: ``philly``, ``alibaba`` or ``csv``; from the file when ``None``.
        cluster: A ``gangplace.synth`` shape, ``tree:S,R,N,G``, a node-list CSV or JSON.
        policies: Names from :data:`gangplace.sim.policies.ALL_POLICIES`.
        seeds: Workload seeds (they draw synthetic durations and failures); the policy seed
            is ``settings.policy_seed``.
        settings: How the policies run (:class:`SimSettings`).
        out: Directory for ``report.json`` and the PNG plots.
        progress: Show a progress bar (tqdm) on stderr.
        baseline: The policy the others are compared with, seed by seed (default: the
            first of ``policies``); see :mod:`gangplace.sim.paired`.
        jobs_out: A file for one row per job, policy and seed (CSV, or Parquet when it ends
            in ``.parquet``); see :mod:`gangplace.sim.jobs_out`.

    A policy that cannot replay the trace gets ``{"error": ...}`` in its row; the others run.

    """
    settings = settings or SimSettings()
    if baseline is not None and baseline not in policies:
        run = ", ".join(policies)
        raise SimError(f"baseline {baseline!r} is not one of the policies run ({run})")
    paths = trace if isinstance(trace, list) else [trace]
    spec = parse_cluster(cluster, seed=settings.policy_seed)
    runs: dict[str, dict[str, Any]] = {}
    first_results: dict[str, RunResult] = {}
    rows = JobRows(jobs_out) if jobs_out is not None else None
    loaded: Trace | None = None
    for seed in seeds:
        loaded = apply_scenarios(
            read_traces(paths, format=trace_format, seed=seed, gpus_per_node=spec.gpus_per_node),
            settings,
            seed,
        )
        loaded = with_cluster_resources(loaded, {name for name, _ in spec.resources})
        jobs = loaded.jobs
        arrival_only = any(job.duration_s is None for job in jobs)
        stop = ARRIVAL_ONLY_LOAD * spec.healthy_gpus if arrival_only else None
        window = _window(jobs, stop)
        runs[str(seed)] = {}
        results: dict[str, RunResult] = {}
        for policy in policies:
            figures, result = run_policy(
                jobs,
                spec,
                policy,
                settings,
                window=window,
                workload_seed=seed,
                stop_after_gpus=stop,
                progress=progress,
            )
            runs[str(seed)][policy] = figures
            if result is not None:
                results[policy] = result
            if result is not None and seed == seeds[0]:
                first_results[policy] = result
        elsewhere = _same_jobs(results, runs[str(seed)], spec, window, arrival_only)
        if rows is not None:
            for policy, result in results.items():
                rows.add(seed, policy, result, spec, elsewhere.get(policy, set()))
    assert loaded is not None
    arrival_only = any(job.duration_s is None for job in loaded.jobs)
    report = {
        "trace": [str(path) for path in paths],
        "cluster": _describe(spec),
        "seeds": list(seeds),
        "settings": {**asdict(settings), "arrival_only_until_load": ARRIVAL_ONLY_LOAD}
        if arrival_only
        else asdict(settings),
        "arrival_only": arrival_only,
        "synthetic_durations": loaded.synthetic_durations,
        "assumptions": assumptions(settings, synthetic_durations=loaded.synthetic_durations),
        "placement_model": _model_rows(settings, loaded),
        "jobs": _describe_jobs(loaded),
        "policies": aggregate(runs, policies),
        "paired": paired(runs, policies, baseline),
        "runs": runs,
    }
    files: list[Path] = []
    if out is not None:
        directory = Path(out)
        directory.mkdir(parents=True, exist_ok=True)
        write_json(directory / "report.json", report)
        files = [directory / "report.json", *write_plots(directory, first_results, report)]
    if rows is not None:
        files.append(rows.write())
    return Simulation(report, first_results, files)


def _same_jobs(
    results: dict[str, RunResult],
    figures: dict[str, dict[str, Any]],
    spec: ClusterSpec,
    window: Window,
    arrival_only: bool,
) -> dict[str, set[str]]:
    """Issue 49: every policy's figures over the same jobs.

    A job one policy rejects (it can never fit that policy's rule, e.g. ``rack-only``'s
    rack) while another admits it is counted by the rejecting policy as a job that never
    started, its waits and completion censored at that run's end, so that no policy looks
    faster for refusing work (``figures["admitted_elsewhere"]`` counts them). Arrival-only
    replays reject for want of room on arrival, their measure: left as they are. Returns,
    per policy, the ids so counted.
    """
    if arrival_only or len(results) < 2:
        return {}
    admitted = {
        policy: {r.job.id for r in result.records if r.arrived and r.rejected is None}
        for policy, result in results.items()
    }
    union = set().union(*admitted.values())
    counted: dict[str, set[str]] = {}
    for policy, result in results.items():
        extra = union - admitted[policy]
        if not extra:
            continue
        wall = figures[policy].get("wall_s")
        figures[policy] = summarize(result, spec, window, admitted_elsewhere=extra)
        figures[policy]["admitted_elsewhere"] = len(extra)
        if wall is not None:
            figures[policy]["wall_s"] = wall
        counted[policy] = extra
    return counted


def aggregate(runs: dict[str, dict[str, Any]], policies: tuple[str, ...]) -> dict[str, Any]:
    """Per policy: each headline figure's mean and 95% interval over the seeds, and errors."""
    summary: dict[str, Any] = {}
    for policy in policies:
        rows = [runs[seed][policy] for seed in runs if policy in runs[seed]]
        errors = sorted({row["error"] for row in rows if "error" in row})
        good = [row for row in rows if "error" not in row]
        entry: dict[str, Any] = {
            name: _clipped(name, interval([figure(row, name) for row in good])) for name in HEADLINE
        }
        for group in ("wait_by_priority_s", "wait_by_owner_s"):
            keys = sorted({key for row in good for key in row.get(group, {})})
            entry[group.replace("_s", "_mean_s")] = {  # waits: never below 0 (issue 49)
                key: _clipped(
                    "wait_s.mean",
                    interval([row[group][key]["mean"] for row in good if key in row[group]]),
                )
                for key in keys
            }
        queues = sorted({name for row in good for name in row.get("queues") or {}})
        if queues:  # --queues: each queue's figures over the seeds
            entry["queues"] = {
                name: {
                    key: _clipped(key, interval([figure(row["queues"][name], key) for row in good]))
                    for key in QUEUE_FIGURES
                }
                for name in queues
            }
        entry["seeds_run"] = len(good)
        entry["errors"] = errors
        entry["standoffs"] = sum(1 for row in good if row.get("standoff"))
        entry["livelocks"] = sum(
            1 for row in good if (row.get("standoff") or {}).get("kind") == "livelock"
        )
        entry["cut"] = sum(1 for row in good if row.get("cut_at_h") is not None)
        entry["ended_queued"] = sum(1 for row in good if row.get("queued_at_end"))
        summary[policy] = entry
    return summary


QUEUE_FIGURES = (
    "wait_s.mean",
    "wait_s.p50",
    "wait_s.p95",
    "wait_s.never_started",
    "completion_s.mean",
    "mean_gpus",
    "borrowed_gpu_h",
    "share_received",
    "share_nominal",
    "reclaimed_jobs",
    "reclaimed_gpu_h",
)
SHARES = {
    "utilization",
    "useful_utilization",
    "spread_share",
    "idle_held_share",
    "idle_held_share_to_end",
    "locality.rack",
    "allocation_at_end",
    "goodput",
}


def _clipped(name: str, summary: dict[str, Any]) -> dict[str, Any]:
    """The interval clipped to what the figure can be: shares in 0..1, the rest >= 0."""
    high_bound = 1.0 if name in SHARES else None
    for key in ("low", "high"):
        value = summary[key]
        if value is not None:
            value = max(value, 0.0)
            summary[key] = min(value, high_bound) if high_bound is not None else value
    return summary


def _model_rows(settings: SimSettings, trace: Trace) -> list[dict[str, Any]] | None:
    """The placement model's table as it applied to this trace (``None``: no model)."""
    model = model_for(settings.placement_model, (job.job_type for job in trace.jobs))
    return model.rows() if model is not None else None


def _window(jobs: list[Job], stop: float | None) -> Window:
    """First to last arrival of the jobs the replay will see (the common window)."""
    arrived, last = 0.0, None
    for job in jobs:
        if stop is not None and arrived >= stop:
            break
        arrived += job.gpus
        last = job.arrival_s
    first = jobs[0].arrival_s if jobs else 0.0
    return (first, last if last is not None else first)


def _run(replay: Replay, jobs: int, policy: str, progress: bool) -> RunResult:
    if not progress:
        return replay.run()
    from tqdm import tqdm

    # delay: the bar only appears on runs longer than two seconds.
    with tqdm(total=jobs * 2, desc=policy, unit="event", leave=False, delay=2.0) as bar:
        return replay.run(progress=lambda handled: bar.update(handled))


def _describe(spec: ClusterSpec) -> dict[str, Any]:
    return {
        "spec": spec.name,
        "levels": list(spec.levels),
        "nodes": len(spec.names),
        "gpus": spec.total_gpus,
        "healthy_gpus": spec.healthy_gpus,
    }


def _describe_jobs(trace: Trace) -> dict[str, Any]:
    jobs = trace.jobs
    return {
        "count": len(jobs),
        "gpus": sum(job.gpus for job in jobs),
        "multi_pod": sum(1 for job in jobs if job.pods > 1),
        "first_arrival_s": jobs[0].arrival_s if jobs else None,
        "last_arrival_s": jobs[-1].arrival_s if jobs else None,
        "never_ran_in_trace": trace.never_ran,
        "fractions": trace.fractions,
        "unmodelled_requests": list(trace.unmodelled),
        "resources_per_pod": sorted({name for job in jobs for name, _ in job.resources_per_pod}),
        "owners": list(trace.owners),
    }
