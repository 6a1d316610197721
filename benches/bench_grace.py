"""Eviction grace benchmarks (docs/scheduler.md rule S17; figures in docs/performance.md).

``superpod`` (16,384 GPUs, 2,048 nodes) filled node by node with 2,048 one-node jobs of
priority 0; 64 one-node jobs of priority 5 then preempt one each in a cycle at t=10 with
``eviction_grace=30``, so 64 jobs hold GPUs while their victims' pods end, and 64 victims
wait out of the queue.

- ``grace_due_cycle``: the cycle at t=40 that reports the 64 starts and queues the 64
  victims again (which then fit nowhere: their walk is part of it). Each round builds the
  state anew in its setup.
- ``grace_due_cycle_reference``: the same by ``gangplace.reference.scheduler`` (the smoke
  size: ``tiny``, 32 nodes, 8 preemptors), with the same decisions.

The README's test command runs them once on ``tiny`` with ``--benchmark-disable``.
"""

from __future__ import annotations

from typing import Any

import pytest

from gangplace import Cluster, GangRequest, Scheduler, synth
from gangplace.reference.scheduler import ReferenceScheduler

GRACE = 30.0


def _size(benchmark: Any) -> tuple[synth.Shape, int]:
    smoke = benchmark.disabled
    return (synth.SHAPES["tiny"], 8) if smoke else (synth.SHAPES["superpod"], 64)


def _cluster(shape: synth.Shape) -> Cluster:
    data = synth.columns(shape, unhealthy=0.0, seed=1)
    cluster = Cluster.from_arrays(
        shape.levels, data["names"], data["domains"], data["gpus"], data["unhealthy_mask"]
    )
    cluster._use_sequential_ids(1)  # type: ignore[attr-defined]
    return cluster


def _preempted(shape: synth.Shape, urgent: int, reference: bool = False) -> Any:
    """The scheduler right after the cycle at t=10 that preempted for ``urgent`` jobs."""
    cluster = _cluster(shape)
    node = GangRequest(1, shape.gpus_per_node)
    hot = GangRequest(1, shape.gpus_per_node, priority=5)
    nodes = len(cluster)
    if reference:
        scheduler: Any = ReferenceScheduler(
            cluster, preemption=True, eviction_grace=GRACE, order="priority"
        )
        submit = scheduler.submit
    else:
        scheduler = Scheduler(
            cluster, preemption=True, eviction_grace=GRACE, clock=lambda: 0.0, order="priority"
        )
        submit = scheduler.submit
    for index in range(nodes):
        submit(f"fill{index:05d}", node, now=0.0)
    scheduler.cycle(0.0)
    for index in range(urgent):
        submit(f"hot{index:03d}", hot, now=10.0)
    decisions = scheduler.cycle(10.0)
    assert len(decisions.preempted) == urgent and not decisions.started
    return scheduler


def _summary(decisions: Any) -> tuple[Any, ...]:
    return (
        tuple((s.job_id, s.allocation.placement, s.preempted) for s in decisions.started),
        decisions.pending,
    )


def bench_grace_due_cycle(benchmark: Any) -> None:
    shape, urgent = _size(benchmark)

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (_preempted(shape, urgent), 40.0), {}

    decisions = benchmark.pedantic(
        Scheduler.cycle, setup=setup, rounds=10, iterations=1, warmup_rounds=0
    )
    assert len(decisions.started) == urgent and decisions.pending == urgent
    benchmark.extra_info.update(nodes=len(_cluster(shape)), preemptors=urgent)


def bench_grace_due_cycle_reference(benchmark: Any) -> None:
    shape, urgent = synth.SHAPES["tiny"], 8
    fast = _preempted(shape, urgent)

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (_preempted(shape, urgent, reference=True), 40.0), {}

    got = benchmark.pedantic(
        ReferenceScheduler.cycle, setup=setup, rounds=1, iterations=1, warmup_rounds=0
    )
    assert _summary(got) == _summary(fast.cycle(40.0))
    benchmark.extra_info.update(nodes=len(fast.cluster), preemptors=urgent)


@pytest.mark.parametrize("grace", [0.0, GRACE])
def bench_grace_idle_cycle(benchmark: Any, grace: float) -> None:
    """A cycle while the 64 wait (nothing due): what holding them costs, against no grace."""
    shape, urgent = _size(benchmark)
    scheduler = _preempted(shape, urgent) if grace else None
    if scheduler is None:  # the same jobs, their starts already done
        scheduler = _preempted_without_grace(shape, urgent)
    benchmark.pedantic(scheduler.cycle, args=(20.0,), rounds=200, iterations=1, warmup_rounds=5)


def _preempted_without_grace(shape: synth.Shape, urgent: int) -> Scheduler:
    cluster = _cluster(shape)
    scheduler = Scheduler(cluster, preemption=True, clock=lambda: 0.0, order="priority")
    for index in range(len(cluster)):
        scheduler.submit(f"fill{index:05d}", GangRequest(1, shape.gpus_per_node), now=0.0)
    scheduler.cycle(0.0)
    hot = GangRequest(1, shape.gpus_per_node, priority=5)
    for index in range(urgent):
        scheduler.submit(f"hot{index:03d}", hot, now=10.0)
    assert len(scheduler.cycle(10.0).started) == urgent
    return scheduler
