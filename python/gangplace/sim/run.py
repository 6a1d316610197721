"""One simulation: a trace, a cluster, the policies side by side on identical job streams."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gangplace.sim.clusters import ClusterSpec, parse_cluster
from gangplace.sim.metrics import summarize
from gangplace.sim.replay import POLICIES, Replay, RunResult
from gangplace.sim.report import table, write_json, write_plots
from gangplace.sim.traces import Job, read_trace

__all__ = ["Simulation", "simulate"]

# Arrival-only traces (no durations) are replayed until this share of capacity has arrived,
# as the FGD paper replays the Alibaba multigpu lists.
ARRIVAL_ONLY_LOAD = 1.3


@dataclass
class Simulation:
    """The outcome: per-policy figures (``report``) and raw results (``results``)."""

    report: dict[str, Any]
    results: dict[str, RunResult]
    files: list[Path]

    def table(self) -> str:
        """The terminal table."""
        return table(self.report["policies"])


def simulate(
    trace: str | Path,
    *,
    trace_format: str | None = None,
    cluster: str = "tiny",
    policies: tuple[str, ...] = POLICIES,
    seed: int = 0,
    out: str | Path | None = None,
    ladder: tuple[float, float] = (300.0, 1800.0),
    pod_timeout_s: float | None = 600.0,
    backfill: bool = False,
    progress: bool = False,
) -> Simulation:
    """Replays ``trace`` on ``cluster`` under each policy; writes outputs to ``out`` if given.

    Args:
        trace: A trace file (see :mod:`gangplace.sim.traces`).
        trace_format: ``philly``, ``alibaba`` or ``csv``; from the file when ``None``.
        cluster: A ``gangplace.synth`` shape, ``tree:S,R,N,G`` or a node-list CSV.
        policies: Names from :data:`gangplace.sim.replay.POLICIES`.
        seed: Seeds Philly durations and the blind policy's node order.
        out: Directory for ``report.json`` and the PNG plots.
        ladder: ``(T1, T2)`` seconds of the ladder policy.
        pod_timeout_s: Pod-by-pod partial gangs release after this long (``None``: never).
        backfill: EASY backfilling (in GPUs) behind a blocked queue head.
        progress: Show a progress bar (tqdm) on stderr.

    """
    spec = parse_cluster(cluster, seed=seed)
    jobs = read_trace(trace, format=trace_format, seed=seed, gpus_per_node=spec.gpus_per_node)
    arrival_only = any(job.duration_s is None for job in jobs)
    stop = ARRIVAL_ONLY_LOAD * spec.healthy_gpus if arrival_only else None
    results: dict[str, RunResult] = {}
    figures: dict[str, Any] = {}
    for policy in policies:
        replay = Replay(
            jobs,
            spec,
            policy,
            ladder=ladder,
            pod_timeout_s=pod_timeout_s,
            backfill=backfill,
            seed=seed,
            stop_after_gpus=stop,
        )
        started = time.perf_counter()
        results[policy] = _run(replay, len(jobs), policy, progress)
        figures[policy] = summarize(results[policy], spec)
        figures[policy]["wall_s"] = round(time.perf_counter() - started, 3)
    report = {
        "trace": str(trace),
        "cluster": _describe(spec),
        "seed": seed,
        "settings": {
            "ladder_s": list(ladder),
            "pod_timeout_s": pod_timeout_s,
            "backfill": backfill,
            "arrival_only_until_load": ARRIVAL_ONLY_LOAD if arrival_only else None,
        },
        "jobs": _describe_jobs(jobs),
        "policies": figures,
    }
    files: list[Path] = []
    if out is not None:
        directory = Path(out)
        directory.mkdir(parents=True, exist_ok=True)
        write_json(directory / "report.json", report)
        files = [directory / "report.json", *write_plots(directory, results, figures)]
    return Simulation(report, results, files)


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


def _describe_jobs(jobs: list[Job]) -> dict[str, Any]:
    return {
        "count": len(jobs),
        "gpus": sum(job.gpus for job in jobs),
        "multi_pod": sum(1 for job in jobs if job.pods > 1),
        "first_arrival_s": jobs[0].arrival_s if jobs else None,
        "last_arrival_s": jobs[-1].arrival_s if jobs else None,
    }
