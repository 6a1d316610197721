"""Rule S13 (running jobs that lose hardware), S12 (why a job did not start) and S14 (job
histories) of docs/scheduler.md, scenario by scenario."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from gangplace import Cluster, GangRequest, InvalidRequest, Scheduler, UnknownJob


def _cluster(now: list[float], racks: int = 2, nodes: int = 2) -> Cluster:
    cluster = Cluster(("rack",), clock=lambda: now[0])
    for rack in range(racks):
        for node in range(nodes):
            cluster.add_node(f"r{rack}-n{node}", gpus=8, topology={"rack": f"r{rack}"})
    return cluster


def _scheduler(now: list[float], **arguments: Any) -> tuple[Cluster, Scheduler]:
    cluster = _cluster(now)
    return cluster, Scheduler(cluster, clock=lambda: now[0], **arguments)


def test_a_lost_rank_is_repaired_in_place_and_running_shows_it() -> None:
    now = [0.0]
    cluster, scheduler = _scheduler(now)
    scheduler.submit("train", GangRequest(2, 4), walltime=3600, on_failure="repair")
    placed = scheduler.cycle().started[0].allocation
    node, gpu = placed.placement.pods[1].node, placed.placement.pods[1].gpus[0]
    cluster.set_gpu_health(node, gpu, False)
    assert scheduler.running()[0].allocation.lost == (1,)  # current, not the start's
    now[0] = 10.0
    decisions = scheduler.cycle()
    assert [r.job_id for r in decisions.repaired] == ["train"]
    repaired = decisions.repaired[0]
    assert [rank for rank, _ in repaired.plan.replacements] == [1]
    assert repaired.allocation.id == placed.id and repaired.allocation.lost == ()
    running = scheduler.running()[0].allocation
    assert running.placement == repaired.allocation.placement
    assert gpu not in running.placement.pods[1].gpus or running.placement.pods[1].node != node
    assert running.placement.pods[0] == placed.placement.pods[0]  # rank 0 untouched
    assert [e.kind for e in scheduler.history("train").events] == [
        "submitted",
        "started",
        "repaired",
    ]
    assert decisions.requeued == () and decisions.failed == ()


def test_requeue_is_the_default_and_the_job_starts_again_in_the_same_cycle() -> None:
    now = [0.0]
    cluster, scheduler = _scheduler(now)
    scheduler.submit("train", GangRequest(1, 8), walltime=3600)
    first = scheduler.cycle().started[0].allocation
    cluster.remove_node(first.placement.nodes[0])
    now[0] = 5.0
    decisions = scheduler.cycle()
    assert decisions.requeued == ("train",)
    assert [s.job_id for s in decisions.started] == ["train"]  # failures come first
    assert decisions.started[0].allocation.placement.nodes != first.placement.nodes
    history = scheduler.history("train")
    assert [e.kind for e in history.events] == ["submitted", "started", "requeued", "started"]
    assert history.starts == 2


def test_fail_ends_the_job_and_frees_its_healthy_gpus() -> None:
    now = [0.0]
    cluster, scheduler = _scheduler(now)
    scheduler.submit("train", GangRequest(2, 8), walltime=3600, on_failure="fail")
    placed = scheduler.cycle().started[0].allocation
    cluster.set_gpu_health(placed.placement.pods[0].node, 0, False)
    decisions = scheduler.cycle(1.0)
    assert decisions.failed == ("train",)
    with pytest.raises(UnknownJob):
        scheduler.status("train")
    assert cluster.allocations() == []
    assert cluster.stats().free == 31
    history = scheduler.history("train")
    assert history.state == "failed" and history.events[-1].detail == "lost ranks 0"


def test_a_repair_that_fits_nowhere_requeues() -> None:
    now = [0.0]
    cluster, scheduler = _scheduler(now)
    scheduler.submit("big", GangRequest(4, 8), walltime=3600, on_failure="repair")
    placed = scheduler.cycle().started[0].allocation
    cluster.set_gpu_health(placed.placement.pods[2].node, 3, False)
    decisions = scheduler.cycle(1.0)
    assert decisions.repaired == () and decisions.requeued == ("big",)
    assert scheduler.status("big") == "pending"  # 31 healthy GPUs: it waits


@pytest.mark.parametrize(("failed_at", "repaired"), [(50.0, False), (200.0, True)])
def test_a_repair_may_preempt_only_what_the_brakes_allow(failed_at: float, repaired: bool) -> None:
    """One 8-GPU node: "train" (priority 5) and "batch" (0) hold 4 GPUs each. A GPU of
    "train" fails: the only room is "batch"'s, which S11's min_runtime protects for 100 s."""
    now = [0.0]
    cluster = Cluster(("rack",), clock=lambda: now[0])
    cluster.add_node("n0", gpus=8, topology={"rack": "r0"})
    scheduler = Scheduler(
        cluster, order="priority", preemption=True, min_runtime=100.0, clock=lambda: now[0]
    )
    scheduler.submit("train", GangRequest(1, 4, priority=5), walltime=1e6, on_failure="repair")
    scheduler.submit("batch", GangRequest(1, 4, priority=0), walltime=1e6)
    started = {s.job_id: s.allocation for s in scheduler.cycle().started}
    cluster.set_gpu_health("n0", started["train"].placement.pods[0].gpus[0], False)
    now[0] = failed_at
    decisions = scheduler.cycle()
    if not repaired:
        assert decisions.repaired == () and decisions.requeued == ("train",)
        assert decisions.preempted == () and scheduler.status("batch") == "running"
        return
    assert [r.job_id for r in decisions.repaired] == ["train"]
    assert decisions.preempted == ("batch",) and decisions.requeued == ()
    assert scheduler.history("batch").events[-1].detail == "for repair of train"
    assert scheduler.status("batch") == "pending"


@pytest.mark.parametrize(
    ("value", "error"), [("explode", InvalidRequest), (3, TypeError), (None, TypeError)]
)
def test_a_bad_on_failure_is_refused_at_submit(value: Any, error: type) -> None:
    now = [0.0]
    cluster, scheduler = _scheduler(now)
    before = cluster.snapshot()
    with pytest.raises(error):
        scheduler.submit("j", GangRequest(1, 1), on_failure=value)
    assert scheduler.pending_ids() == [] and cluster.snapshot() == before
    with pytest.raises(UnknownJob):
        scheduler.history("j")


@pytest.mark.parametrize(("value", "error"), [(-1, InvalidRequest), (1.5, TypeError)])
def test_a_bad_history_limit_is_refused(value: Any, error: type) -> None:
    with pytest.raises(error):
        Scheduler(_cluster([0.0]), history_limit=value)


def test_every_wait_counts_and_finished_jobs_have_completion_and_slowdown() -> None:
    now = [0.0]
    _, scheduler = _scheduler(now, order="priority", preemption=True)
    scheduler.submit("low", GangRequest(4, 8, priority=0), walltime=1e6)
    scheduler.cycle()
    now[0] = 100.0
    scheduler.submit("high", GangRequest(4, 8, priority=5), walltime=50)
    assert scheduler.cycle().preempted == ("low",)
    now[0] = 150.0
    scheduler.finish("high")
    assert [s.job_id for s in scheduler.cycle().started] == ["low"]
    now[0] = 400.0
    scheduler.finish("low")
    low = scheduler.history("low")
    assert [e.kind for e in low.events] == [
        "submitted",
        "started",
        "preempted",
        "started",
        "finished",
    ]
    assert low.events[2].detail == "for high"
    assert low.waited == 50.0  # 0 s first, then 100 -> 150
    assert low.ran == 350.0 and low.completion == 400.0
    assert low.slowdown == pytest.approx(400.0 / 350.0)
    summary = scheduler.summary()
    assert summary.finished == 2 and summary.restarts == 1
    assert summary.wait_max == 50.0 and summary.pending == 0


def test_the_summary_keeps_never_started_jobs_next_to_the_means() -> None:
    now = [0.0]
    _, scheduler = _scheduler(now)
    scheduler.submit("fits", GangRequest(4, 8), walltime=10)
    scheduler.submit("waits", GangRequest(1, 8), walltime=10)
    scheduler.cycle()
    now[0] = 30.0
    summary = scheduler.summary()
    assert summary.finished == 0 and summary.wait_mean is None
    assert summary.pending == 1 and summary.running == 1
    assert summary.longest_pending_wait == 30.0


def test_the_history_limit_forgets_the_oldest_ended_jobs() -> None:
    now = [0.0]
    _, scheduler = _scheduler(now, history_limit=2)
    for job in ("a", "b", "c"):
        scheduler.submit(job, GangRequest(1, 1))
        scheduler.cancel(job)
    with pytest.raises(UnknownJob):
        scheduler.history("a")
    assert scheduler.history("c").state == "cancelled"
    assert scheduler.summary().cancelled == 2


def test_decisions_reasons_tell_that_cycle_even_after_the_queue_changes() -> None:
    now = [0.0]
    _, scheduler = _scheduler(now)
    scheduler.submit("big", GangRequest(4, 8), walltime=100)
    scheduler.cycle()
    scheduler.submit("next", GangRequest(1, 8), walltime=1000)
    decisions = scheduler.cycle()
    assert decisions.head == "next"
    scheduler.finish("big")  # the queue and the cluster change after the cycle
    scheduler.submit("later", GangRequest(1, 1))
    assert dict(decisions.reasons) == {
        "next": "the blocked head: it does not fit now (Scheduler.explain says why)"
    }
    assert decisions.reasons["next"].startswith("the blocked head")
    unread = scheduler.cycle()
    del unread
    gc.collect()
    scheduler.submit("more", GangRequest(1, 1))  # nobody holds the reasons: nothing made
