"""The Scheduler's cost per queued job (issue 51; figures in docs/performance.md).

The cases of ``benches/per_start.py``: trees of 192 and 2,048 nodes x 8 GPUs at 60% fill,
500 queued jobs of one shape released into one EASY cycle. Each round builds the state anew
in its setup and times the cycle; ``extra_info`` gives the cost per queued job (the mean
over 500) and the jobs started. ``platform`` runs the same cycle with two queues in a
cohort, brakes, a history limit and Prometheus metrics, as a platform team runs it.

The guard against a regression is the table "The Scheduler's cost per queued job" in
docs/performance.md: the previous release's figures beside today's, measured by
``python -m benches.per_start`` on both builds in the same session.

The README's test command runs every case once with ``--benchmark-disable`` (answers only).
"""

from __future__ import annotations

from typing import Any

import pytest

from benches.per_start import CASES, JOBS, platform, queued, walk_prototype
from gangplace import Scheduler

# Jobs the cycle starts in each case (the fill is seeded): a change says the state changed.
STARTED = {
    (192, 1, 1): 500,
    (192, 1, 8): 76,
    (192, 4, 8): 19,
    (192, 16, 8): 4,
    (2048, 1, 1): 500,
    (2048, 16, 8): 51,
}


def _timed(benchmark: Any, make: Any, case: tuple[int, int, int]) -> None:
    made: list[Scheduler] = []

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        made[:] = [make(*case)]
        return (), {}

    def cycle() -> int:
        return len(made[0].cycle(0.0).started)

    started = benchmark.pedantic(cycle, setup=setup, rounds=7, iterations=1)
    stats = getattr(benchmark, "stats", None)
    if stats is not None:
        benchmark.extra_info["us_per_queued_job_mean"] = stats.stats.mean / JOBS * 1e6
        benchmark.extra_info["us_per_queued_job_min"] = stats.stats.min / JOBS * 1e6
    benchmark.extra_info["started"] = started
    assert started == STARTED[case]


@pytest.mark.parametrize("case", CASES, ids=[f"{n}n-{p}x{g}" for n, p, g in CASES])
def bench_scheduler_per_start(benchmark: Any, case: tuple[int, int, int]) -> None:
    """One EASY cycle over 500 queued jobs of one shape, plain scheduler."""
    _timed(benchmark, queued, case)


@pytest.mark.parametrize("case", CASES, ids=[f"{n}n-{p}x{g}" for n, p, g in CASES])
def bench_scheduler_per_start_platform(benchmark: Any, case: tuple[int, int, int]) -> None:
    """The same cycle with queues, brakes, histories and metrics on."""
    _timed(benchmark, platform, case)


def bench_walk_prototype(benchmark: Any) -> None:
    """Item 4's prototype (``per_start.walk_prototype``): a class of 500 1x1 jobs reserved
    by one ``reserve_many``, committed, and recorded; every part is timed per started job."""
    parts = benchmark.pedantic(walk_prototype, args=(192, 1), rounds=3, iterations=1)
    assert set(parts) == {"cycle", "reserve_many", "commit", "records"}
    assert all(value > 0 for value in parts.values())
    benchmark.extra_info.update(parts)
