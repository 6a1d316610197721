"""Sweeps: traces x clusters x policies x seeds, in parallel, aggregated with intervals.

Each task is one (trace, cluster, policy, seed) replay, run by :func:`run_task` in a worker:
a local process pool by default, or Ray (extra ``gangplace[ray]``) with ``executor="ray"``
(``address=`` joins an existing Ray cluster; without it a local one is started). Results do
not depend on the executor: every task is deterministic in its inputs.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gangplace.sim.errors import SimError
from gangplace.sim.policies import POLICIES
from gangplace.sim.run import ARRIVAL_ONLY_LOAD, aggregate, run_policy
from gangplace.sim.settings import SimSettings
from gangplace.sim.stats import interval

__all__ = ["Sweep", "run_task", "sweep"]


@dataclass
class Sweep:
    """The aggregated report of a sweep and the files written."""

    report: dict[str, Any]
    files: list[Path] = field(default_factory=list)

    def table(self) -> str:
        """One line per (trace, cluster, policy): mean wait and utilization with intervals."""
        lines = [
            f"{'trace':28} {'cluster':16} {'policy':17} {'seeds':>5} {'wait mean h':>14} "
            f"{'wait p95 h':>14} {'never':>8} {'util':>12}"
        ]
        for row in self.report["rows"]:
            figures = row["figures"]

            def cell(
                name: str, scale: float = 1.0, share: bool = False, figures: Any = figures
            ) -> str:
                entry = figures[name]
                if entry["mean"] is None:
                    return "-"
                mean = entry["mean"] / scale
                half = (entry["high"] - entry["mean"]) / scale if entry["low"] is not None else None
                if share:
                    return f"{mean:.1%}" + (f"±{half * 100:.1f}" if half is not None else "")
                return f"{mean:.2f}" + (f"±{half:.2f}" if half is not None else "")

            lines.append(
                f"{Path(row['trace']).name[:28]:28} {Path(row['cluster']).name[:16]:16} "
                f"{row['policy']:17} {figures['seeds_run']:>5} "
                f"{cell('wait_s.mean', 3600):>14} {cell('wait_s.p95', 3600):>14} "
                f"{cell('never_started'):>8} {cell('utilization', share=True):>12}"
                + (f"  FAILED: {figures['errors'][0]}" if figures["errors"] else "")
            )
        lines.append(
            f"means over seeds with 95% intervals; executor {self.report['executor']}; "
            f"{self.report['tasks']} tasks"
        )
        return "\n".join(lines)


def run_task(task: dict[str, Any]) -> dict[str, Any]:
    """One replay in a worker: returns the task with its figures (no raw records)."""
    from gangplace.sim.clusters import parse_cluster
    from gangplace.sim.run import _window
    from gangplace.sim.scenarios import apply_scenarios
    from gangplace.sim.traces import read_traces

    settings = SimSettings(**{**task["settings"], "ladder_s": tuple(task["settings"]["ladder_s"])})
    try:
        spec = parse_cluster(task["cluster"], seed=settings.policy_seed)
        trace = apply_scenarios(
            read_traces([task["trace"]], seed=task["seed"], gpus_per_node=spec.gpus_per_node),
            settings,
            task["seed"],
        )
    except SimError as error:
        return {**task, "figures": {"error": str(error)}}
    arrival_only = any(job.duration_s is None for job in trace.jobs)
    stop = ARRIVAL_ONLY_LOAD * spec.healthy_gpus if arrival_only else None
    figures, _ = run_policy(
        trace.jobs,
        spec,
        task["policy"],
        settings,
        window=_window(trace.jobs, stop),
        workload_seed=task["seed"],
        stop_after_gpus=stop,
    )
    figures.pop("load_curve", None)
    return {**task, "figures": figures}


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
        {"trace": t, "cluster": c, "policy": p, "seed": s, "settings": plain}
        for t in traces
        for c in clusters
        for p in policies
        for s in seeds
    ]
    done = _run_ray(tasks, address, workers) if executor == "ray" else _run_pool(tasks, workers)
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
        "tasks": len(tasks),
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


def _run_pool(tasks: list[dict[str, Any]], workers: int | None) -> list[dict[str, Any]]:
    workers = workers or min(len(tasks), os.cpu_count() or 1)
    if workers == 1:
        return [run_task(task) for task in tasks]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(run_task, tasks))


def _run_ray(
    tasks: list[dict[str, Any]], address: str | None, workers: int | None
) -> list[dict[str, Any]]:
    try:
        import ray
    except ImportError:
        raise SimError("executor ray needs Ray: pip install 'gangplace[ray]'") from None
    started = not ray.is_initialized()
    if started:
        options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if address is None and workers is not None:
            options["num_cpus"] = workers  # a local Ray with this many CPUs
        ray.init(address=address, **options)
    try:
        remote = ray.remote(run_task)
        return list(ray.get([remote.remote(task) for task in tasks]))
    finally:
        if started:
            ray.shutdown()
