"""Eviction grace (docs/scheduler.md, rule S17): victims' pods take time to end.

The job that preempted holds its GPUs and its queue's quota from the eviction and is reported
started only once the grace has passed; its victims queue again only then.
"""

from __future__ import annotations

import math

import pytest

from gangplace import (
    Cluster,
    Cohort,
    DuplicateJob,
    GangRequest,
    InvalidRequest,
    Queue,
    Scheduler,
    UnknownJob,
)


def _cluster(nodes: int = 1) -> Cluster:
    cluster = Cluster(("rack",), clock=lambda: 0.0)
    for index in range(nodes):
        cluster.add_node(f"n{index}", gpus=8, topology={"rack": "r0"})
    return cluster


def _preempting(grace: float = 30.0) -> Scheduler:
    """``urgent`` preempted ``batch`` at t=10 under ``grace``."""
    scheduler = Scheduler(_cluster(), preemption=True, eviction_grace=grace, clock=lambda: 0.0)
    scheduler.submit("batch", GangRequest(1, 8, priority=0), walltime=100.0, now=0.0)
    assert [s.job_id for s in scheduler.cycle(now=0.0).started] == ["batch"]
    scheduler.submit("urgent", GangRequest(1, 8, priority=5), walltime=50.0, now=10.0)
    return scheduler


def test_without_grace_the_preemptor_starts_at_once() -> None:
    scheduler = _preempting(grace=0.0)
    decisions = scheduler.cycle(now=10.0)
    assert [s.job_id for s in decisions.started] == ["urgent"]
    assert scheduler.status("batch") == "pending" and scheduler.pending_ids() == ["batch"]


def test_the_preemptor_starts_when_the_grace_has_passed() -> None:
    scheduler = _preempting()
    decisions = scheduler.cycle(now=10.0)
    assert decisions.preempted == ("batch",) and decisions.started == ()
    assert decisions.pending == 2 and scheduler.queue_length == 2 and len(scheduler) == 2
    assert scheduler.running() == [] and scheduler.status("urgent") == "pending"
    assert scheduler.cluster.stats().free == 0, "the GPUs stay held for the preemptor"
    assert scheduler.next_wakeup() == 40.0
    assert scheduler.cycle(now=39.0).started == ()
    later = scheduler.cycle(now=41.0)
    (started,) = later.started
    assert started.job_id == "urgent" and started.preempted == ("batch",)
    assert started.waited == 31.0  # submitted at 10, reported at 41
    assert [job.job_id for job in scheduler.running()] == ["urgent"]
    assert scheduler.running()[0].started_at == 41.0
    history = scheduler.history("urgent", now=41.0)
    assert [(e.time, e.kind) for e in history.events] == [(10.0, "submitted"), (41.0, "started")]
    batch = scheduler.history("batch", now=41.0)
    assert [(e.time, e.kind) for e in batch.events][-1] == (10.0, "preempted")
    assert scheduler.pending(now=41.0)[0].waited == 31.0, "its wait began at its eviction"


def test_the_walltime_counts_from_the_start() -> None:
    scheduler = _preempting()
    scheduler.cycle(now=10.0)
    scheduler.cycle(now=40.0)
    assert scheduler.cycle(now=89.0).walltime_ended == ()
    assert scheduler.cycle(now=90.0).walltime_ended == ("urgent",)  # 40 + 50


def test_no_other_job_takes_the_held_gpus_or_the_victims_place() -> None:
    scheduler = _preempting()
    scheduler.cycle(now=10.0)
    scheduler.submit("small", GangRequest(1, 1, priority=9), now=11.0)
    decisions = scheduler.cycle(now=11.0)
    assert decisions.started == () and decisions.preempted == (), "starting jobs are no victims"
    with pytest.raises(UnknownJob, match="starts at 40 s"):
        scheduler.finish("urgent", now=12.0)
    with pytest.raises(UnknownJob):
        scheduler.requeue("urgent", now=12.0)
    with pytest.raises(DuplicateJob):
        scheduler.submit("batch", GangRequest(1, 1), now=12.0)


def test_cancel_during_the_grace() -> None:
    scheduler = _preempting()
    scheduler.cycle(now=10.0)
    assert scheduler.cancel("batch", now=12.0) is False  # evicted, its pods ending
    assert scheduler.cancel("urgent", now=12.0) is True  # held GPUs released
    assert scheduler.cluster.stats().free == 8
    assert scheduler.queue_length == 0 and scheduler.next_wakeup() is None
    assert scheduler.cycle(now=50.0).started == ()
    with pytest.raises(UnknownJob):
        scheduler.status("batch")


def test_a_reclaim_keeps_the_quota_for_the_preemptor() -> None:
    """Kueue's rule: the quota a reclaim frees stays the preemptor's while victims end.

    The cluster has 8 GPUs more than the queues' 16: a third queue that may borrow finds free
    GPUs, but no quota: the preemptor holds what the reclaim gave back.
    """
    scheduler = Scheduler(
        _cluster(3),
        queues=[
            Queue("a", cohort="lab", nominal=8, reclaim_within_cohort="any"),
            Queue("b", cohort="lab", nominal=8),
            Queue("c", cohort="lab", nominal=0),
        ],
        cohorts=[Cohort("lab")],
        eviction_grace=20.0,
        clock=lambda: 0.0,
    )
    for index in range(2):
        scheduler.submit(f"b{index}", GangRequest(1, 8), queue="b", now=0.0)
    assert len(scheduler.cycle(now=0.0).started) == 2  # b borrows a's 8 GPUs
    scheduler.submit("a0", GangRequest(1, 8), queue="a", now=5.0)
    scheduler.submit("c0", GangRequest(1, 8), queue="c", now=5.0)
    decisions = scheduler.cycle(now=5.0)
    assert len(decisions.preempted) == 1 and decisions.started == ()
    assert scheduler.cluster.stats().free == 8, "a free node, but no quota left for c"
    reasons = {job.job_id: job.reason for job in scheduler.pending(now=5.0)}
    assert reasons["a0"].startswith("its GPUs are held; it starts at 25 s")
    assert reasons["c0"] == "queue 'c' lets it take 0 GPUs now, it needs 8 (nominal 0, in use 0)"
    assert scheduler.cycle(now=6.0).started == ()
    assert [s.job_id for s in scheduler.cycle(now=25.0).started] == ["a0"]


@pytest.mark.parametrize("grace", [-1.0, math.nan, math.inf])
def test_a_bad_grace_is_refused(grace: float) -> None:
    with pytest.raises(InvalidRequest, match="eviction_grace"):
        Scheduler(_cluster(), eviction_grace=grace)


def test_a_grace_of_the_wrong_type_is_refused() -> None:
    with pytest.raises(TypeError, match="eviction_grace"):
        Scheduler(_cluster(), eviction_grace="30")  # type: ignore[arg-type]
