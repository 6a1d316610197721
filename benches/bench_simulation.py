"""Simulator benchmarks: whole replays, one round each (figures in docs/simulation.md).

- ``replay_20k[policy]``: 20,000 jobs on 1,024 GPUs (2 spines x 8 racks x 8 nodes x 8 GPUs)
  offering 1.2x the cluster's GPUs, FIFO with EASY backfill (pod-by-pod: kube order).
- ``replay_200k``: 200,000 jobs on ``colossus100k`` (102,400 GPUs) at 1.2x, best-fit.
- ``replay_20k_placement_model[none|cited]``: ``replay_20k[best-fit]`` without and with the
  placement-speed model (the CSV workload names no job types: the cited model's GUESSED
  default applies to every job), to show what the model costs a replay.

Workloads come from :mod:`benches.workloads` (real Philly GPU counts, GUESSED durations).
The README's test command runs small versions once with ``--benchmark-disable``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benches.workloads import write_workload
from gangplace.sim.run import simulate
from gangplace.sim.settings import SimSettings

POLICIES = ("best-fit", "first-fit", "blind", "ladder", "pod-by-pod")


def _smoke(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("benchmark_disable", default=False))


@pytest.mark.parametrize("policy", POLICIES)
def bench_replay_20k(
    benchmark: Any, policy: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """20,000 jobs on 1,024 GPUs at 1.2x offered load."""
    smoke = _smoke(request)
    jobs, cluster = (400, "tree:1,2,2,8") if smoke else (20_000, "tree:2,8,8,8")
    gpus = 32 if smoke else 1024
    trace = write_workload(tmp_path / "w.csv", jobs, gpus, load=1.2)
    result = benchmark.pedantic(
        simulate, args=(trace,), kwargs={"cluster": cluster, "policies": (policy,)}, rounds=1
    )
    figures = result.report["runs"]["0"][policy]
    benchmark.extra_info.update(
        jobs=figures["jobs_total"],
        utilization=round(figures["utilization"], 4),
        mean_wait_h=round(figures["wait_s"]["mean"] / 3600, 2),
        never_started=figures["never_started"],
    )
    assert figures["jobs_finished"] + figures["jobs_rejected"] + figures["never_started"] == jobs


def bench_replay_200k(benchmark: Any, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """200,000 jobs on colossus100k at 1.2x offered load, best-fit with EASY backfill."""
    smoke = _smoke(request)
    jobs, cluster, gpus = (500, "tiny", 256) if smoke else (200_000, "colossus100k", 102_400)
    trace = write_workload(tmp_path / "w.csv", jobs, gpus, load=1.2)
    result = benchmark.pedantic(
        simulate, args=(trace,), kwargs={"cluster": cluster, "policies": ("best-fit",)}, rounds=1
    )
    figures = result.report["runs"]["0"]["best-fit"]
    benchmark.extra_info.update(
        jobs=figures["jobs_total"], utilization=round(figures["utilization"], 4)
    )
    assert figures["jobs_total"] == jobs


@pytest.mark.parametrize("model", ("none", "cited"))
def bench_replay_20k_placement_model(
    benchmark: Any, model: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """``replay_20k[best-fit]`` with the placement model off and on."""
    smoke = _smoke(request)
    jobs, cluster = (400, "tree:1,2,2,8") if smoke else (20_000, "tree:2,8,8,8")
    trace = write_workload(tmp_path / "w.csv", jobs, 32 if smoke else 1024, load=1.2)
    settings = SimSettings(placement_model=model)
    kwargs = {"cluster": cluster, "policies": ("best-fit",), "settings": settings}
    result = benchmark.pedantic(simulate, args=(trace,), kwargs=kwargs, rounds=1)
    figures = result.report["runs"]["0"]["best-fit"]
    benchmark.extra_info.update(
        jobs=figures["jobs_total"],
        spread_gpu_hours=round(figures["spread_gpu_hours"], 1),
        mean_wait_h=round(figures["wait_s"]["mean"] / 3600, 2),
    )
    assert figures["jobs_finished"] + figures["jobs_rejected"] + figures["never_started"] == jobs
    if model == "none":
        assert figures["spread_gpu_hours"] == 0


@pytest.mark.parametrize("backfill", ["easy", "conservative"])
def bench_replay_200k_1024(
    benchmark: Any, tmp_path: Path, request: pytest.FixtureRequest, backfill: str
) -> None:
    """Issue 25's replay: 200,000 jobs at 1.2x offered load on 1,024 GPUs (``tree:2,8,8,8``),
    best-fit, with EASY or conservative backfill (reservations, docs/scheduler.md S5). Goal: <= 60
    s."""
    smoke = _smoke(request)
    jobs, cluster, gpus = (500, "tiny", 256) if smoke else (200_000, "tree:2,8,8,8", 1024)
    trace = write_workload(tmp_path / "w.csv", jobs, gpus, load=1.2)
    settings = SimSettings(backfill=backfill)
    result = benchmark.pedantic(
        simulate,
        args=(trace,),
        kwargs={"cluster": cluster, "policies": ("best-fit",), "settings": settings},
        rounds=1,
    )
    figures = result.report["runs"]["0"]["best-fit"]
    benchmark.extra_info.update(
        jobs=figures["jobs_total"],
        finished=figures["jobs_finished"],
        never_started=figures["never_started"],
        utilization=round(figures["utilization"], 4),
        mean_wait_h=round(figures["total_wait_s"]["mean"] / 3600.0, 3),
    )
    assert figures["jobs_total"] == jobs
