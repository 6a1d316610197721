"""The pending queue's classes (docs/scheduler.md rule S5): blocks with their shortest walltime give
the same answers as reading every job in order."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gangplace import GangRequest
from gangplace.scheduler.queue import BLOCK, JobClass, QueuedJob


def _job(sequence: int, priority: int, walltime: float | None) -> QueuedJob:
    return QueuedJob(
        f"j{sequence}", GangRequest(1, 1), None, walltime, None, (), (-priority, 0.0, sequence), 0.0
    )


def _naive(jobs: list[QueuedJob], now: float, shadow: float, after: Any) -> QueuedJob | None:
    for job in sorted(jobs, key=lambda job: job.order):
        if after is not None and job.order <= after:
            continue
        if job.walltime is not None and now + job.walltime <= shadow:
            return job
    return None


@settings(max_examples=60)
@given(
    st.lists(
        st.tuples(
            st.booleans(),
            st.integers(0, 2),
            st.none() | st.floats(0.0, 1000.0, allow_nan=False),
        ),
        min_size=1,
        max_size=6 * BLOCK,
    ),
    st.floats(0.0, 100.0, allow_nan=False),
    st.floats(0.0, 1500.0, allow_nan=False),
)
def test_blocks_answer_like_a_walk_in_order(
    steps: list[tuple[bool, int, float | None]], now: float, shadow: float
) -> None:
    group, live = JobClass(), list[QueuedJob]()
    for sequence, (remove, priority, walltime) in enumerate(steps):
        if remove and live:
            job = live.pop(sequence % len(live))
            group.remove(job)
        else:
            job = _job(sequence, priority, walltime)
            group.add(job)
            live.append(job)
        assert len(group) == len(live)
        first = min(live, key=lambda job: job.order) if live else None
        assert group.first() is first
        assert all(len(block) <= 2 * BLOCK for block in group.blocks)
        for block, shortest in zip(group.blocks, group.shortest, strict=True):
            walltimes = [group.jobs[order].walltime for order in block]
            known = min((w for w in walltimes if w is not None), default=float("inf"))
            assert shortest <= known  # a bound that never skips a job that ends in time
    orders = [None, *(job.order for job in live[:: max(1, len(live) // 5)])]
    for after in orders:
        assert group.first_ending_by(now, shadow, after) is _naive(live, now, shadow, after)
