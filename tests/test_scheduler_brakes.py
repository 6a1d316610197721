"""docs/scheduler.md rule S11: preemption's brakes (minimum run time, victims per cycle, GPUs
evicted per hour, per-owner disruption budgets)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from gangplace import Cluster, GangRequest, InvalidRequest, Scheduler


def _setup(**brakes: Any) -> tuple[Scheduler, list[float]]:
    """Two nodes of 8 GPUs, two low-priority jobs of 8 running since t=0 (owners a and b)."""
    now = [0.0]
    cluster = Cluster(("rack",), clock=lambda: now[0])
    for node in ("n0", "n1"):
        cluster.add_node(node, gpus=8, topology={"rack": "r0"})
    scheduler = Scheduler(
        cluster, order="priority", preemption=True, clock=lambda: now[0], **brakes
    )
    scheduler.submit("low-a", GangRequest(1, 8, priority=0), owner="a", walltime=9999)
    scheduler.submit("low-b", GangRequest(1, 8, priority=0), owner="b", walltime=9999)
    assert len(scheduler.cycle(0.0).started) == 2
    return scheduler, now


def test_a_young_victim_is_not_taken_before_min_runtime() -> None:
    scheduler, now = _setup(min_runtime=60.0)
    scheduler.submit("urgent", GangRequest(1, 8, priority=5))
    now[0] = 10.0
    assert scheduler.cycle(10.0).preempted == ()
    now[0] = 60.0
    decisions = scheduler.cycle(60.0)
    assert len(decisions.preempted) == 1 and decisions.started[0].job_id == "urgent"


def test_victims_per_cycle_stop_making_room() -> None:
    scheduler, _ = _setup(max_victims_per_cycle=1)
    scheduler.submit("wide", GangRequest(2, 8, priority=5))  # needs both victims
    assert scheduler.cycle(1.0).preempted == ()
    scheduler.submit("one", GangRequest(1, 8, priority=6), now=1.0)  # the head now
    decisions = scheduler.cycle(2.0)
    assert [s.job_id for s in decisions.started] == ["one"] and len(decisions.preempted) == 1
    assert decisions.head == "wide"  # the walk went on: "wide" waits behind


def test_evicted_gpus_per_hour_is_a_sliding_window() -> None:
    scheduler, now = _setup(max_evicted_gpus_per_hour=8)
    scheduler.submit("first", GangRequest(1, 8, priority=5), walltime=10_000)  # runs on
    assert len(scheduler.cycle(1.0).preempted) == 1
    scheduler.submit("second", GangRequest(1, 8, priority=5), walltime=10_000, now=1.0)
    assert scheduler.cycle(2.0).preempted == ()  # 8 more would be 16 in the hour
    now[0] = 3602.0
    assert len(scheduler.cycle(3602.0).preempted) == 1  # the first eviction left the window


def test_an_owner_out_of_budget_is_spared_and_another_victim_taken() -> None:
    scheduler, _ = _setup(budgets={"a": 0})
    scheduler.submit("urgent", GangRequest(1, 8, priority=5))
    decisions = scheduler.cycle(1.0)
    assert decisions.preempted == ("low-b",)  # a's job is spared: its budget is 0
    scheduler.submit("more", GangRequest(1, 8, priority=5), now=1.0)
    assert scheduler.cycle(2.0).preempted == ()  # only a's job is left, and a may lose none


def test_a_job_just_preempted_is_no_victim_during_its_cool_down() -> None:
    scheduler, now = _setup(preemption_cooldown=100.0)
    scheduler.submit("urgent", GangRequest(1, 8, priority=5), walltime=10)
    (victim,) = scheduler.cycle(1.0).preempted  # the first of the two low jobs
    scheduler.finish("urgent", now=1.0)
    assert victim in [s.job_id for s in scheduler.cycle(2.0).started]  # back on its GPUs
    scheduler.submit("again", GangRequest(2, 8, priority=5), now=2.0)  # needs both nodes
    now[0] = 50.0
    assert scheduler.cycle(50.0).preempted == ()  # the victim is cooling down
    now[0] = 101.0
    assert len(scheduler.cycle(101.0).preempted) == 2


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"min_runtime": -1.0}, InvalidRequest),
        ({"min_runtime": float("nan")}, InvalidRequest),
        ({"min_runtime": "1"}, TypeError),
        ({"preemption_cooldown": -5.0}, InvalidRequest),
        ({"max_victims_per_cycle": -1}, InvalidRequest),
        ({"max_victims_per_cycle": 1.5}, TypeError),
        ({"max_evicted_gpus_per_hour": True}, TypeError),
        ({"budgets": {"a": -8}}, InvalidRequest),
        ({"budgets": {3: 8}}, TypeError),
        ({"budgets": {"": 8}}, InvalidRequest),  # it used to fail in a later cycle
        ({"budgets": {"o" * 254: 8}}, InvalidRequest),
        ({"quotas": {"": 8}}, InvalidRequest),
    ],
)
def test_bad_brakes_are_refused(kwargs: dict[str, Any], error: type) -> None:
    cluster = Cluster(("rack",))
    with pytest.raises(error):
        Scheduler(cluster, **kwargs)


def test_each_brake_that_holds_is_counted() -> None:
    prometheus_client = pytest.importorskip("prometheus_client")
    registry = prometheus_client.CollectorRegistry()
    now = [0.0]
    cluster = Cluster(("rack",), clock=lambda: now[0])
    for node in ("n0", "n1"):
        cluster.add_node(node, gpus=8, topology={"rack": "r0"})
    scheduler = Scheduler(
        cluster,
        order="priority",
        preemption=True,
        clock=lambda: now[0],
        budgets={"a": 4},
        max_evicted_gpus_per_hour=8,
        metrics=registry,
    )

    def held(brake: str) -> float:
        value = registry.get_sample_value("gangplace_brake_refusals_total", {"brake": brake})
        return value or 0.0

    scheduler.submit("low-a", GangRequest(1, 8), owner="a", walltime=9999)
    scheduler.cycle(0.0)  # on n0, which P5's path order tries first
    scheduler.submit("low-b", GangRequest(1, 8), owner="b", walltime=9999)
    scheduler.cycle(1.0)
    scheduler.submit("urgent", GangRequest(1, 8, priority=5), now=1.0)
    assert scheduler.cycle(2.0).preempted == ("low-b",)  # 8 GPUs of a would pass its 4
    assert held("budget") == 1 and held("evicted_gpus_per_hour") == 0
    scheduler.submit("more", GangRequest(1, 8, priority=6), now=2.0)  # 8 more in the hour: no
    assert scheduler.cycle(3.0).preempted == ()
    assert held("evicted_gpus_per_hour") == 1


@settings(max_examples=300)
@given(
    jobs=st.lists(
        st.tuples(
            st.integers(1, 2),  # pods
            st.sampled_from([1, 2, 4]),  # GPUs per pod
            st.integers(0, 2),  # priority
            st.sampled_from(["a", "b"]),  # owner
            st.sampled_from([0.0, 50.0, 90.0]),  # start
        ),
        min_size=2,
        max_size=6,
    ),
    head=st.tuples(st.integers(1, 3), st.sampled_from([2, 4])),
    brakes=st.fixed_dictionaries(
        {
            "min_runtime": st.sampled_from([0.0, 30.0, 60.0]),
            "max_victims_per_cycle": st.none() | st.integers(1, 2),
            "max_evicted_gpus_per_hour": st.none() | st.sampled_from([4, 8]),
            "budgets": st.sampled_from([{}, {"a": 4}, {"a": 0, "b": 8}]),
        }
    ),
)
def test_victims_are_eligible_and_one_minimal_by_brute_force(
    jobs: list[tuple[int, int, int, str, float]], head: tuple[int, int], brakes: dict[str, Any]
) -> None:
    """docs/scheduler.md S11 on tiny clusters: every victim a cycle takes passes every brake, and
    the set is 1-minimal among the eligible ones: with any one victim restored, on a copy of the
    cluster as it was, the head does not fit in the domain it got."""
    now = [0.0]
    cluster = Cluster(("rack",), clock=lambda: now[0])
    for rack in range(2):
        for node in range(2):
            name = f"r{rack}n{node}"
            labels = {"name": name, "rack": f"r{rack}"}
            cluster.add_node(name, gpus=4, topology={"rack": f"r{rack}"}, labels=labels)
    scheduler = Scheduler(
        cluster, order="priority", preemption=True, clock=lambda: now[0], **brakes
    )
    started_at: dict[str, float] = {}
    for index, (pods, gpus, priority, owner, start) in enumerate(sorted(jobs, key=lambda j: j[4])):
        now[0] = start
        scheduler.submit(f"j{index}", GangRequest(pods, gpus, priority=priority), owner=owner)
        for started in scheduler.cycle().started:
            started_at[started.job_id] = now[0]
    for job_id in scheduler.pending_ids():
        scheduler.cancel(job_id)
    now[0] = 100.0
    before = cluster.snapshot()
    running = {job.job_id: job for job in scheduler.running()}
    request = GangRequest(head[0], head[1], priority=5)
    scheduler.submit("head", request, owner="c")
    decisions = scheduler.cycle()
    victims = list(decisions.preempted)  # the head's, then those of jobs it evicted (requeued)
    if not victims:
        return
    event(f"{len(victims)} victim(s)")
    limit = brakes["max_victims_per_cycle"]
    assert limit is None or len(victims) <= limit
    evicted = {owner: 0 for owner in ("a", "b")}
    for victim in victims:
        job = running[victim]
        assert 100.0 - started_at[victim] >= brakes["min_runtime"]
        evicted[job.owner or ""] = (
            evicted.get(job.owner or "", 0) + job.allocation.placement.total_gpus
        )
    for owner, budget in brakes["budgets"].items():
        assert evicted.get(owner, 0) <= budget
    hourly = brakes["max_evicted_gpus_per_hour"]
    assert hourly is None or sum(evicted.values()) <= hourly
    (started,) = [s for s in decisions.started if s.job_id == "head"]
    mine = started.preempted  # the head's own victims, from the state before the cycle
    assert all(running[victim].allocation.priority < 5 for victim in mine)
    placement = started.allocation.placement
    selector = _domain_selector(placement)
    level = None if placement.level == "cluster" else placement.level
    within = GangRequest(head[0], head[1], selector=selector, required_level=level)
    for kept in mine:
        copy = Cluster.restore(before, clock=lambda: now[0])
        for victim in mine:
            if victim != kept:
                job = running[victim]
                copy.release(job.allocation.id, owner=job.owner)
        assert copy.place_gang(within) is None, (kept, mine)


def _domain_selector(placement: Any) -> dict[str, str] | None:
    """A selector of the nodes of the placement's domain (a node's name, or its rack)."""
    if placement.level == "node":
        return {"name": placement.domain[-1]}
    if placement.level == "rack":
        return {"rack": placement.domain[-1]}
    return None


@pytest.mark.parametrize(
    ("brakes", "moved"),
    [
        ({}, True),
        ({"max_victims_per_cycle": 0}, False),
        ({"budgets": {"t": 0}}, False),
        ({"budgets": {"t": 4}}, True),
        ({"min_runtime": 200.0}, False),
        ({"max_evicted_gpus_per_hour": 3}, False),
    ],
)
def test_defragmentation_is_braked_like_preemption(brakes: dict[str, Any], moved: bool) -> None:
    """docs/scheduler.md S11: a moved job counts as a victim for every brake. "m" (4 GPUs, owner t)
    must move from r0n0 to r1n1 for the 8-GPU head to fit."""
    now = [0.0]
    cluster = Cluster(("rack",), clock=lambda: now[0])
    for name in ("r0n0", "r0n1", "r1n0", "r1n1"):
        cluster.add_node(name, gpus=8, topology={"rack": name[:2]}, labels={"name": name})
    scheduler = Scheduler(cluster, defrag=True, clock=lambda: now[0], **brakes)
    scheduler.submit("m", GangRequest(1, 4, movable=True), owner="t", walltime=1e6)
    scheduler.submit("b", GangRequest(1, 8), walltime=1e6)
    scheduler.submit("c", GangRequest(1, 8), walltime=1e6)
    scheduler.submit("e", GangRequest(1, 4, selector={"name": "r1n1"}), walltime=1e6)
    assert len(scheduler.cycle().started) == 4
    now[0] = 100.0
    scheduler.submit("head", GangRequest(1, 8), walltime=10)
    decisions = scheduler.cycle()
    assert [m.job_id for m in decisions.moved] == (["m"] if moved else [])
    assert [s.job_id for s in decisions.started] == (["head"] if moved else [])
    if moved:
        assert scheduler.history("m").events[-1].kind == "moved"
