"""gangplace.Scheduler: docs/scheduler.md's rules S1-S9 on hand-made cases, bad inputs, metrics."""

from __future__ import annotations

import pydoc
from typing import Any

import pytest

from gangplace import (
    Cluster,
    DuplicateJob,
    GangRequest,
    InvalidRequest,
    Scheduler,
    UnknownJob,
    Unschedulable,
)


def _cluster(racks: int = 2, nodes: int = 2, gpus: int = 8) -> Cluster:
    cluster = Cluster(("rack",), clock=lambda: 0.0)
    for rack in range(racks):
        for node in range(nodes):
            cluster.add_node(f"r{rack}n{node}", gpus=gpus, topology={"rack": f"r{rack}"})
    return cluster


def _started(decisions: Any) -> list[str]:
    return [started.job_id for started in decisions.started]


def test_fifo_blocks_behind_the_head_without_backfill() -> None:
    scheduler = Scheduler(_cluster(), backfill="none", clock=lambda: 0.0)
    scheduler.submit("big", GangRequest(3, 8), walltime=100)
    scheduler.submit("next", GangRequest(2, 8), walltime=100)
    scheduler.submit("small", GangRequest(1, 8), walltime=10)
    assert _started(scheduler.cycle(0.0)) == ["big"]
    assert [job.job_id for job in scheduler.pending()] == ["next", "small"]


def test_easy_backfill_starts_a_long_job_beside_the_heads_shadow_placement() -> None:
    """docs/scheduler.md S5: the head's reservation is r0 from t=100 (when "big" ends); "long" runs
    past it but fits on the fourth node, off the reserved GPUs; "short" would end in time
    but nothing is free any more."""
    scheduler = Scheduler(_cluster(), clock=lambda: 0.0)
    scheduler.submit("big", GangRequest(3, 8), walltime=100)
    scheduler.submit("head", GangRequest(2, 8), walltime=100)  # blocked until t=100
    scheduler.submit("long", GangRequest(1, 8), walltime=500)
    scheduler.submit("short", GangRequest(1, 8), walltime=100)
    decisions = scheduler.cycle(0.0)
    assert _started(decisions) == ["big", "long"]
    assert [s.backfilled for s in decisions.started] == [False, True]
    head = scheduler.pending()[0]
    assert head.shadow is not None and head.shadow.time == 100.0
    assert head.shadow.placement is not None
    long_nodes = set(decisions.started[1].allocation.placement.nodes)
    assert not long_nodes & set(head.shadow.placement.nodes)


def test_easy_backfill_a_job_that_ends_in_time_may_use_the_reserved_gpus() -> None:
    scheduler = Scheduler(_cluster(), clock=lambda: 0.0)
    scheduler.submit("big", GangRequest(2, 8), walltime=100)
    scheduler.submit("head", GangRequest(3, 8), walltime=100)  # every node but one at t=100
    scheduler.submit("long", GangRequest(2, 8), walltime=500)  # needs reserved GPUs: waits
    scheduler.submit("short", GangRequest(2, 8), walltime=100)  # ends in time: starts
    assert _started(scheduler.cycle(0.0)) == ["big", "short"]


def test_any_backfill_starts_whatever_fits() -> None:
    scheduler = Scheduler(_cluster(), backfill="any", clock=lambda: 0.0)
    scheduler.submit("big", GangRequest(3, 8), walltime=100)
    scheduler.submit("head", GangRequest(2, 8), walltime=100)
    scheduler.submit("untimed", GangRequest(1, 8))
    assert _started(scheduler.cycle(0.0)) == ["big", "untimed"]


def test_easy_backfill_when_fragmentation_blocks_the_head() -> None:
    # 16 GPUs free in total, but 8 in each rack: the head is reserved rack r0 from t=50.
    cluster = Cluster(("rack",), clock=lambda: 0.0)
    for name in ("r0n0", "r0n1", "r1n0", "r1n1"):
        cluster.add_node(name, gpus=8, topology={"rack": name[:2]}, labels={"name": name})
    scheduler = Scheduler(cluster, clock=lambda: 0.0)
    scheduler.submit("left", GangRequest(1, 8, selector={"name": "r0n0"}), walltime=50)
    scheduler.submit("right", GangRequest(1, 8, selector={"name": "r1n0"}), walltime=80)
    scheduler.cycle(0.0)
    assert cluster.stats().free == 16
    scheduler.submit("head", GangRequest(2, 8, required_level="rack"), walltime=10)
    scheduler.submit("beside", GangRequest(1, 8), walltime=60)  # on r1n1, off the reservation
    scheduler.submit("too-long", GangRequest(1, 4), walltime=60)  # only r0n1 is left: waits
    scheduler.submit("passes", GangRequest(1, 4), walltime=50)  # ends by t=50: takes r0n1
    assert _started(scheduler.cycle(0.0)) == ["beside", "passes"]
    shadow = scheduler.pending()[0].shadow
    assert shadow is not None and shadow.time == 50.0 and shadow.placement is not None
    assert shadow.placement.nodes == ("r0n0", "r0n1")


def test_priority_order() -> None:
    scheduler = Scheduler(_cluster(racks=1, nodes=1), order="priority", clock=lambda: 0.0)
    scheduler.submit("low", GangRequest(1, 8, priority=1), walltime=10)
    scheduler.submit("high", GangRequest(1, 8, priority=5), walltime=10)
    assert _started(scheduler.cycle(0.0)) == ["high"]


def test_refused_at_submit_when_it_cannot_fit_even_empty() -> None:
    cluster = _cluster()
    cluster.set_gpu_health("r0n0", 0, False)
    cluster.cordon("r1n1")
    scheduler = Scheduler(cluster, clock=lambda: 0.0)
    # Fits the cluster as built (unhealthy GPUs and cordons are temporary): queued.
    scheduler.submit("whole", GangRequest(4, 8), walltime=10)
    with pytest.raises(Unschedulable, match="can never start") as error:
        scheduler.submit("too-big", GangRequest(5, 8))
    assert "best cluster holds 4 of 5" in error.value.reason
    with pytest.raises(Unschedulable, match="can never start"):
        scheduler.submit("rack-bound", GangRequest(3, 8, required_level="rack"))
    # A ladder that reaches the cluster level makes it admissible.
    scheduler.submit("laddered", GangRequest(3, 8, required_level="rack"), ladder=[(60.0, None)])
    assert [job.job_id for job in scheduler.pending()] == ["whole", "laddered"]


def test_timeout_lets_an_elastic_gang_start_smaller() -> None:
    scheduler = Scheduler(_cluster(), clock=lambda: 0.0)
    scheduler.submit("blocker", GangRequest(2, 8), walltime=1000)
    scheduler.submit("elastic", GangRequest(4, 8, min_pods=2), timeout=30.0)
    assert _started(scheduler.cycle(0.0)) == ["blocker"]
    assert scheduler.next_wakeup() == 30.0
    assert _started(scheduler.cycle(29.0)) == []
    decisions = scheduler.cycle(30.0)
    assert decisions.timed_out == ("elastic",)
    assert _started(decisions) == ["elastic"]
    assert len(decisions.started[0].allocation.placement) == 2


def test_ladder_degrades_the_required_level() -> None:
    scheduler = Scheduler(_cluster(), clock=lambda: 0.0)
    scheduler.submit("a", GangRequest(1, 8), walltime=1000)
    scheduler.submit("b", GangRequest(1, 8, required_level="node"), walltime=1000)
    scheduler.cycle(0.0)  # best-fit: both in rack r0? then r1 is empty
    scheduler.submit(
        "gang", GangRequest(3, 8, required_level="rack"), ladder=[(100.0, None)], walltime=5
    )
    assert _started(scheduler.cycle(10.0)) == []
    decisions = scheduler.cycle(100.0)
    assert decisions.degraded == (("gang", None),)
    assert decisions.started == ()  # 3 x 8 does not fit 16 free GPUs either way


def test_preemption_requeues_the_victim() -> None:
    scheduler = Scheduler(
        _cluster(racks=1, nodes=2), order="priority", preemption=True, clock=lambda: 0.0
    )
    scheduler.submit("low", GangRequest(2, 8, priority=0), walltime=1000)
    scheduler.cycle(0.0)
    scheduler.submit("high", GangRequest(1, 8, priority=9), walltime=10)
    decisions = scheduler.cycle(1.0)
    assert decisions.preempted == ("low",)
    assert _started(decisions) == ["high"]
    assert decisions.started[0].preempted == ("low",)
    assert scheduler.status("low") == "pending"
    scheduler.finish("high", now=1.0)  # rule S16: after the cycle at 1.0
    assert _started(scheduler.cycle(20.0)) == ["low"]


def test_quota_caps_an_owner_without_blocking_others() -> None:
    scheduler = Scheduler(_cluster(), quotas={"team-a": 16}, backfill="none", clock=lambda: 0.0)
    scheduler.submit("a1", GangRequest(2, 8), owner="team-a", walltime=10)
    scheduler.submit("a2", GangRequest(1, 8), owner="team-a", walltime=10)
    scheduler.submit("b1", GangRequest(1, 8), owner="team-b", walltime=10)
    assert _started(scheduler.cycle(0.0)) == ["a1", "b1"]
    reason = scheduler.pending()[0].reason
    assert reason == "owner 'team-a' has 0 of its 16 GPUs of quota left"
    with pytest.raises(Unschedulable, match="quota of 16"):
        scheduler.submit("a3", GangRequest(3, 8), owner="team-a")


def test_cancel_finish_requeue_and_status() -> None:
    cluster = _cluster()
    scheduler = Scheduler(cluster, clock=lambda: 0.0)
    scheduler.submit("run", GangRequest(1, 8), walltime=10)
    scheduler.submit("wait", GangRequest(4, 8), walltime=10)
    scheduler.cycle(0.0)
    assert scheduler.status("run") == "running"
    assert scheduler.cancel("wait") is False
    scheduler.requeue("run", 5.0)
    assert scheduler.status("run") == "pending"
    assert cluster.stats().allocated == 0
    scheduler.cycle(5.0)
    assert scheduler.cancel("run", now=5.0) is True
    assert cluster.stats().free == 32
    with pytest.raises(UnknownJob):
        scheduler.status("run")
    assert len(scheduler) == 0


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda s: s.submit("x", GangRequest(1, 1), walltime=0), InvalidRequest),
        (lambda s: s.submit("x", GangRequest(1, 1), walltime=float("nan")), InvalidRequest),
        (lambda s: s.submit("x", GangRequest(1, 1), timeout=-1), InvalidRequest),
        (
            lambda s: s.submit("x", GangRequest(1, 1), ladder=[(10, "rack"), (5, None)]),
            InvalidRequest,
        ),
        (lambda s: s.submit("x", GangRequest(1, 1), ladder=[(10, "row")]), InvalidRequest),
        (lambda s: s.submit("x", GangRequest(1, 1, required_level="row")), InvalidRequest),
        (lambda s: s.submit("x", GangRequest(1, 1), ladder=[10]), TypeError),
        (lambda s: s.submit("", GangRequest(1, 1)), InvalidRequest),
        (lambda s: s.submit("j" * 254, GangRequest(1, 1)), InvalidRequest),
        (lambda s: s.submit("x", GangRequest(1, 1), owner=""), InvalidRequest),
        (lambda s: s.submit("x", GangRequest(1, 1), owner="o" * 254), InvalidRequest),
        (lambda s: s.submit(7, GangRequest(1, 1)), TypeError),
        (lambda s: s.submit("x", (1, 1)), TypeError),
        (lambda s: s.submit("x", GangRequest(1, 1), walltime="1"), TypeError),
        (lambda s: s.submit("busy", GangRequest(1, 1)), DuplicateJob),
        (lambda s: s.submit("queued", GangRequest(1, 1)), DuplicateJob),
        (lambda s: s.finish("queued"), UnknownJob),
        (lambda s: s.finish("nobody"), UnknownJob),
        (lambda s: s.cancel("nobody"), UnknownJob),
        (lambda s: s.requeue("queued"), UnknownJob),
        (lambda s: s.cycle(float("inf")), InvalidRequest),
        (lambda s: s.cycle(-5.0), InvalidRequest),
    ],
)
def test_bad_input_raises_a_typed_error_and_changes_nothing(call: Any, error: Any) -> None:
    cluster = _cluster()
    scheduler = Scheduler(cluster, clock=lambda: 0.0)
    scheduler.submit("busy", GangRequest(1, 8), walltime=10)
    scheduler.submit("queued", GangRequest(4, 8), walltime=10)
    scheduler.cycle(0.0)
    before = (cluster.snapshot(), repr(scheduler), scheduler.pending(), scheduler.running())
    with pytest.raises(error):
        call(scheduler)
    assert (cluster.snapshot(), repr(scheduler), scheduler.pending(), scheduler.running()) == before


@pytest.mark.parametrize(
    "kwargs",
    [{"order": "lifo"}, {"backfill": "slurm"}, {"quotas": {"a": -1}}, {"reservation_depth": 0}],
)
def test_bad_constructor_arguments(kwargs: Any) -> None:
    with pytest.raises(InvalidRequest):
        Scheduler(_cluster(), **kwargs)
    with pytest.raises(TypeError):
        Scheduler("cluster")  # type: ignore[arg-type]


def test_metrics_are_published_in_the_registry() -> None:
    prometheus_client = pytest.importorskip("prometheus_client")
    registry = prometheus_client.CollectorRegistry()
    clock = [0.0]
    scheduler = Scheduler(_cluster(), metrics=registry, clock=lambda: clock[0])
    scheduler.submit("a", GangRequest(3, 8), walltime=100)
    scheduler.submit("b", GangRequest(2, 8), walltime=100)
    with pytest.raises(Unschedulable):
        scheduler.submit("c", GangRequest(9, 8))
    scheduler.cycle(0.0)
    scheduler.finish("a")
    clock[0] = 100.0
    scheduler.cycle(100.0)

    def value(name: str, labels: dict[str, str] | None = None) -> float:
        sample = registry.get_sample_value(name, labels or {})
        assert sample is not None, name
        return float(sample)

    assert value("gangplace_schedule_attempts_total", {"result": "started"}) == 2
    assert value("gangplace_schedule_attempts_total", {"result": "waiting"}) == 1
    assert value("gangplace_schedule_attempts_total", {"result": "rejected"}) == 1
    assert value("gangplace_rejections_total") == 1
    assert value("gangplace_placements_total") == 2
    assert value("gangplace_pending_duration_seconds_count") == 2
    assert value("gangplace_pending_duration_seconds_sum") == 100.0
    assert value("gangplace_pending_duration_seconds_bucket", {"le": "60.0"}) == 1
    assert value("gangplace_cycle_duration_seconds_count") == 2
    assert value("gangplace_pending_jobs") == 0
    text = prometheus_client.generate_latest(registry).decode()
    assert "# HELP gangplace_pending_duration_seconds" in text
    # Per owner (no owner: ""), the GPU-state gauges, backfills and requeues.
    assert value("gangplace_owner_started_total", {"owner": ""}) == 2
    assert value("gangplace_owner_pending_jobs", {"owner": ""}) == 0
    assert value("gangplace_owner_pending_duration_seconds_sum", {"owner": ""}) == 100.0
    stats = scheduler.cluster.stats()
    for state in ("free", "reserved", "allocated", "unhealthy"):
        assert value("gangplace_gpus", {"state": state}) == getattr(stats, state)
    assert value("gangplace_backfills_total") == 0 and value("gangplace_requeues_total") == 0
    scheduler.requeue("b", now=100.0)
    assert value("gangplace_requeues_total") == 1
    assert value("gangplace_owner_pending_jobs", {"owner": ""}) == 1


def test_metrics_per_owner() -> None:
    prometheus_client = pytest.importorskip("prometheus_client")
    registry = prometheus_client.CollectorRegistry()
    scheduler = Scheduler(_cluster(), metrics=registry, clock=lambda: 0.0)
    scheduler.submit("a", GangRequest(4, 8), owner="team-a", walltime=100)
    scheduler.submit("b", GangRequest(4, 8), owner="team-b", walltime=100)
    scheduler.cycle(0.0)

    def value(name: str, labels: dict[str, str]) -> float | None:
        sample = registry.get_sample_value(name, labels)
        return None if sample is None else float(sample)

    assert value("gangplace_owner_started_total", {"owner": "team-a"}) == 1
    assert value("gangplace_owner_pending_jobs", {"owner": "team-b"}) == 1
    scheduler.cancel("b")
    assert value("gangplace_owner_pending_jobs", {"owner": "team-b"}) == 0


def test_help_shows_the_docs() -> None:
    text = pydoc.plain(pydoc.render_doc(Scheduler))
    for phrase in ("EASY", "walltime", "ladder", "Unschedulable", "quotas"):
        assert phrase in text


def test_slice_jobs_start_whole_slices_and_bad_forms_are_refused_at_submit() -> None:
    from gangplace import InvalidRequest

    cluster = Cluster(("spine", "rack"), clock=lambda: 0.0)
    for rack in range(2):
        for node in range(3):
            cluster.add_node(f"r{rack}n{node}", gpus=4, topology={"spine": "s", "rack": f"r{rack}"})
    scheduler = Scheduler(cluster, clock=lambda: 0.0)
    sliced = GangRequest(4, 4, slices=(("rack", 2),))
    scheduler.submit("sliced", sliced)
    (started,) = scheduler.cycle(0.0).started
    placement = started.allocation.placement
    assert len(placement.slices) == 2
    for index, path in enumerate(placement.slices):
        for pod in placement.pods[2 * index : 2 * index + 2]:
            assert cluster.node(pod.node).topology["rack"] == path[1]
    before = cluster.snapshot()
    with pytest.raises(InvalidRequest, match="coarser than the required level"):
        scheduler.submit("bad", GangRequest(2, 1, required_level="node", slices=(("rack", 2),)))
    assert cluster.snapshot() == before
    assert [job.job_id for job in scheduler.pending()] == []


def test_a_job_submitted_to_a_cluster_with_no_node_left_is_unschedulable() -> None:
    """S2 on a cluster whose every node was removed: a typed ``Unschedulable``, not a
    ``TypeError`` from building the admission twin (found by the differential test)."""
    cluster = Cluster(("rack",))
    cluster.add_node("a", gpus=8, topology={"rack": "r1"})
    scheduler = Scheduler(cluster, clock=lambda: 0.0)
    cluster.remove_node("a")
    with pytest.raises(Unschedulable, match="can never start"):
        scheduler.submit("j", GangRequest(1, 1))
