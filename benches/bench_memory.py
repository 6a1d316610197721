"""No growth over a simulated day of submits and finishes (issue 50, item 5).

The leak test of ``benches/memory_scheduler.py``'s day, run by the README's test command
(smoke mode: 8 simulated hours, about 1,500 jobs, under two seconds) and with
``--benchmark-only`` (24 hours). Python's allocated bytes (tracemalloc) are fitted against
the jobs finished after two hours of warming up: with ``history_limit=100`` the scheduler
keeps only the last 100 ended jobs' histories, so the slope must be about zero; with the
default limit (100,000) it keeps every history, and the same fit must see them (so the
measurement can see a leak of that size).
"""

from __future__ import annotations

import pytest

from benches.memory_scheduler import day, growth_per_finished_job


def _hours(config: pytest.Config) -> int:
    return 8 if config.getoption("benchmark_disable", default=False) else 24


def bench_scheduler_day_does_not_grow(request: pytest.FixtureRequest) -> None:
    hours = _hours(request.config)
    bounded = day(hours, history_limit=100)["hours"]
    assert bounded[-1]["finished"] > 1000
    assert abs(growth_per_finished_job(bounded)) < 64.0  # bytes per finished job
    kept = day(hours, history_limit=100_000)["hours"]
    assert growth_per_finished_job(kept) > 300.0  # every history kept: it shows
