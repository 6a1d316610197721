"""Sweeps: traces x clusters x policies x seeds, in parallel, aggregated with intervals.

Each task is one (trace, cluster, policy, seed) replay, run by :func:`run_task` in a worker:
a local process pool by default, or Ray (extra ``gangplace[ray]``) with ``executor="ray"``
(``address=`` joins an existing Ray cluster; without it a local one is started). Results do
not depend on the executor: every task is deterministic in its inputs.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gangplace.sim.errors import SimError
from gangplace.sim.policies import POLICIES
from gangplace.sim.report import seconds_unit
from gangplace.sim.run import ARRIVAL_ONLY_LOAD, aggregate, run_policy
from gangplace.sim.settings import SimSettings
from gangplace.sim.stats import interval

__all__ = ["Sweep", "run_task", "sweep"]


@dataclass
class Sweep:
    """The aggregated report of a sweep and the files written."""

    report: dict[str, Any]
    files: list[Path] = field(default_factory=list)

    @property
    def failures(self) -> list[str]:
        """Every failed (trace, cluster, policy) with its errors, one line each."""
        return [
            f"{row['trace']} on {row['cluster']}, {row['policy']}: "
            + "; ".join(row["figures"]["errors"])
            for row in self.report["rows"]
            if row["figures"]["errors"]
        ]

    def table(self) -> str:
        """One line per (trace, cluster, policy): means over the seeds.

        With their 95% intervals as ``[low, high]`` (clipped to what each figure can be), in a
        unit chosen per column, and the seeds that ended in a standoff.
        """
        lines = [
            f"{'trace':26} {'cluster':16} {'policy':17} {'seeds':>5} {'wait mean':>22} "
            f"{'wait p95':>22} {'never started':>15} {'utilization':>20} {'standoffs':>9}"
        ]
        for row in self.report["rows"]:
            figures = row["figures"]
            hours = _unit(figures, ("wait_s.mean", "wait_s.p95"))
            lines.append(
                f"{Path(row['trace']).name[:26]:26} {Path(row['cluster']).name[:16]:16} "
                f"{row['policy']:17} {figures['seeds_run']:>5} "
                f"{_cell(figures, 'wait_s.mean', hours):>22} "
                f"{_cell(figures, 'wait_s.p95', hours):>22} "
                f"{_cell(figures, 'never_started', ('jobs', 1.0)):>15} "
                f"{_cell(figures, 'utilization', ('%', 0.01)):>20} "
                f"{figures.get('standoffs', 0):>9}"
                + (f"  FAILED: {figures['errors'][0]}" if figures["errors"] else "")
            )
        lines.append(
            f"means over seeds, 95% intervals as [low, high]; executor {self.report['executor']}; "
            f"{self.report['tasks']} tasks"
        )
        return "\n".join(lines)


def _unit(figures: dict[str, Any], names: tuple[str, ...]) -> tuple[str, float]:
    """The unit (s, min or h) that keeps the largest mean of ``names`` readable."""
    means = [figures[name]["mean"] for name in names if figures.get(name, {}).get("mean")]
    return seconds_unit(max(means, default=0.0))


def _cell(figures: dict[str, Any], name: str, unit: tuple[str, float]) -> str:
    """``mean [low, high] unit`` (``-`` when no seed gave a value)."""
    entry = figures.get(name) or {}
    if entry.get("mean") is None:
        return "-"
    label, scale = unit
    digits = 0 if label == "jobs" else 1

    def show(value: float) -> str:
        return f"{value / scale:.{digits}f}"

    text = show(entry["mean"])
    if entry.get("low") is not None and entry.get("high") is not None:
        text += f" [{show(entry['low'])}, {show(entry['high'])}]"
    return f"{text} {label}"


def run_task(task: dict[str, Any]) -> dict[str, Any]:
    """The replays of one (trace, cluster, seed) in a worker, one per policy.

    Every policy of the sweep runs in the same task so that they are measured over the same
    jobs (a job one rejects and another admits counts as never started: issue 49, as
    ``simulate`` does). Returns the task with each policy's figures (no raw records).
    """
    from gangplace.sim.clusters import parse_cluster
    from gangplace.sim.run import _same_jobs, _window
    from gangplace.sim.scenarios import apply_scenarios
    from gangplace.sim.traces import read_traces

    settings = SimSettings(**{**task["settings"], "ladder_s": tuple(task["settings"]["ladder_s"])})
    policies: list[str] = task["policies"]
    try:
        spec = parse_cluster(task["cluster"], seed=settings.policy_seed)
        trace = apply_scenarios(
            read_traces([task["trace"]], seed=task["seed"], gpus_per_node=spec.gpus_per_node),
            settings,
            task["seed"],
        )
    except SimError as error:
        return {**task, "by_policy": {policy: {"error": str(error)} for policy in policies}}
    arrival_only = any(job.duration_s is None for job in trace.jobs)
    stop = ARRIVAL_ONLY_LOAD * spec.healthy_gpus if arrival_only else None
    window = _window(trace.jobs, stop)
    by_policy: dict[str, dict[str, Any]] = {}
    results = {}
    for policy in policies:
        figures, result = run_policy(
            trace.jobs,
            spec,
            policy,
            settings,
            window=window,
            workload_seed=task["seed"],
            stop_after_gpus=stop,
        )
        by_policy[policy] = figures
        if result is not None:
            results[policy] = result
    _same_jobs(results, by_policy, spec, window, arrival_only)
    for figures in by_policy.values():
        figures.pop("load_curve", None)
    return {**task, "by_policy": by_policy}


def sweep(
    traces: list[str],
    clusters: list[str],
    *,
    policies: tuple[str, ...] = POLICIES,
    seeds: tuple[int, ...] = (0,),
    settings: SimSettings | None = None,
    executor: str = "process",
    workers: int | None = None,
    address: str | None = None,
    out: str | Path | None = None,
) -> Sweep:
    """Runs every (trace, cluster, policy, seed) and aggregates over the seeds.

    Raises:
        SimError: An unknown executor, no traces or clusters, or Ray missing.

    """
    if executor not in ("process", "ray"):
        raise SimError(f"executor must be process or ray, got {executor!r}")
    if not traces or not clusters:
        raise SimError("a sweep needs at least one trace and one cluster")
    if workers is not None and workers < 1:
        raise SimError(f"workers must be >= 1, got {workers}")
    settings = settings or SimSettings()
    plain = {**asdict(settings), "ladder_s": list(settings.ladder_s)}
    tasks = [
        {"trace": t, "cluster": c, "policies": list(policies), "seed": s, "settings": plain}
        for t in traces
        for c in clusters
        for s in seeds
    ]
    ran = _run_ray(tasks, address, workers) if executor == "ray" else _run_pool(tasks, workers)
    done = [  # one entry per replay
        {**_without(task, "by_policy"), "policy": policy, "figures": figures}
        for task in ran
        for policy, figures in task["by_policy"].items()
    ]
    rows: list[dict[str, Any]] = []
    for trace in traces:
        for cluster in clusters:
            runs: dict[str, dict[str, Any]] = {}
            for task in done:
                if task["trace"] == trace and task["cluster"] == cluster:
                    runs.setdefault(str(task["seed"]), {})[task["policy"]] = task["figures"]
            summary = aggregate(runs, policies)
            rows.extend(
                {"trace": trace, "cluster": cluster, "policy": p, "figures": summary[p]}
                for p in policies
            )
    report = {
        "executor": executor,
        "tasks": len(done),  # replays: every (trace, cluster, policy, seed)
        "seeds": list(seeds),
        "settings": plain,
        "rows": rows,
        "wall_s": interval([task["figures"].get("wall_s") for task in done]),
    }
    files: list[Path] = []
    if out is not None:
        directory = Path(out)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / "sweep.json"
        from gangplace.sim.report import write_json

        write_json(path, report)
        files.append(path)
    return Sweep(report, files)


def _without(entry: dict[str, Any], key: str) -> dict[str, Any]:
    return {name: value for name, value in entry.items() if name != key}


def _run_pool(tasks: list[dict[str, Any]], workers: int | None) -> list[dict[str, Any]]:
    workers = workers or min(len(tasks), os.cpu_count() or 1)
    if workers == 1:
        return [run_task(task) for task in tasks]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(run_task, tasks))


def _run_ray(
    tasks: list[dict[str, Any]], address: str | None, workers: int | None
) -> list[dict[str, Any]]:
    local = address is None
    if local:
        _loopback_only()
    try:
        import ray
    except ImportError:
        raise SimError("executor ray needs Ray: pip install 'gangplace[ray]'") from None
    started = not ray.is_initialized()
    temp: Path | None = None
    if started:
        options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if local:
            temp = Path(tempfile.mkdtemp(prefix="gangplace-ray-"))
            options.update(local_ray_options(workers, temp))
        ray.init(address=address, **options)
    try:
        remote = ray.remote(run_task)
        return list(ray.get([remote.remote(task) for task in tasks]))
    finally:
        if started:
            ray.shutdown()
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)


# Ray on Linux gives a node the address it would reach others from, and binds its servers to
# it; with clusters "disabled" (this variable, which Ray reads when it is imported and which
# every Ray process inherits) a local node is 127.0.0.1 and binds only there.
LOCAL_ONLY = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}


def _loopback_only() -> None:
    """Makes the next local Ray stay on 127.0.0.1 and send no usage statistics."""
    for key, value in LOCAL_ONLY.items():
        os.environ.setdefault(key, value)
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None and os.environ[next(iter(LOCAL_ONLY))] == "0":
        # Ray was imported before: its constant was read then (Ray's private module; the
        # documented variable above is the interface, this only keeps it in force).
        vars(constants)["ENABLE_RAY_CLUSTER"] = False


def local_ray_options(workers: int | None, temp: Path) -> dict[str, Any]:
    """``ray.init`` options of a local Ray that stays on this machine (docs/command-line.md).

    With :data:`LOCAL_ONLY` in force (the sweep sets it before importing Ray), every Ray
    process binds to 127.0.0.1; there is no dashboard; temporary files go to ``temp``, which
    the sweep removes afterwards.
    """
    _loopback_only()
    options: dict[str, Any] = {"dashboard_host": "127.0.0.1", "_temp_dir": str(temp)}
    if workers is not None:
        options["num_cpus"] = workers  # a local Ray with this many CPUs
    return options
