"""Preemption for multi-role gangs (docs/preemption.md and
"Multi-role gangs", 7): rules P1-P6 over the whole unit.

Scenarios, the differential test against ``gangplace.reference`` (plans, then ``preempt`` on
both), 1-minimality checked through the reference's own placement of the unit, and bad input
(typed errors, byte-identical snapshots).
"""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import pytest
from helpers import FakeClock, as_tuple, fill, twins
from hypothesis import assume, event, given, note
from test_roles import LEVELS, check_unit, labelled_clusters, multi_requests, roles_tuple

import gangplace
from gangplace import (
    Conflict,
    GangRequest,
    InvalidRequest,
    MultiGangRequest,
    PodGroup,
    reference,
)
from gangplace.reference import preemption, roles


def racks_with_small_jobs(cluster: Any, priorities: tuple[int, ...]) -> dict[int, Any]:
    """Three racks of three 8-GPU nodes; one 2-GPU job of each priority on each rack's n0."""
    for rack in range(3):
        for node in range(3):
            name = f"r{rack}-n{node}"
            cluster.add_node(name, gpus=8, topology={"rack": f"r{rack}"}, labels={"host": name})
    jobs = {}
    for rack, priority in enumerate(priorities):
        job = GangRequest(1, 2, selector={"host": f"r{rack}-n0"}, priority=priority)
        jobs[rack] = cluster.commit(cluster.reserve(job))
    return jobs


def leader_and_workers(priority: int = 10, **kwargs: Any) -> MultiGangRequest:
    return MultiGangRequest(
        (PodGroup("leader", 1, 8), PodGroup("workers", 2, 8)),
        colocate=(("leader", "workers", "rack"),),
        priority=priority,
        required_level="rack",
        **kwargs,
    )


def test_the_unit_preempts_in_the_rack_whose_job_matters_least() -> None:
    for make in (lambda: gangplace.Cluster(("rack",)), lambda: reference.Cluster(("rack",))):
        cluster: Any = make()
        jobs = racks_with_small_jobs(cluster, (1, -5, 1))
        unit = leader_and_workers()
        assert cluster.place_gang(unit) is None  # every rack has a job in the way
        plan = cluster.plan_preemption(unit)
        assert plan is not None and plan.victims == (jobs[1].id,)
        assert plan.placement.domain == ("r1",) and plan.max_victim_priority == -5
        assert plan.request == unit and plan.victim_gpus == 2
        assert [pod.node for pod in plan.placement.groups["workers"]] == ["r1-n0", "r1-n1"]
        held = cluster.preempt(plan, owner="training")
        assert held.request == unit and held.priority == 10
        assert cluster.hold_status(jobs[1].id) == "preempted"
        allocation = cluster.commit(held, owner="training")
        assert allocation.placement.groups["leader"][0].node == "r1-n2"


def test_a_unit_that_fits_plans_no_victims_and_equal_priorities_never_preempt() -> None:
    cluster = gangplace.Cluster(("rack",), clock=FakeClock())
    racks_with_small_jobs(cluster, (1, 1, 1))
    small = MultiGangRequest((PodGroup("a", 1, 8), PodGroup("b", 1, 4)), priority=5)
    plan = cluster.plan_preemption(small)
    assert plan is not None and plan.victims == () and plan.max_victim_priority is None
    assert as_tuple(plan.placement) == as_tuple(cluster.place_gang(small))
    assert cluster.plan_preemption(leader_and_workers(priority=1)) is None
    assert cluster.plan_preemption(leader_and_workers(), max_victims=0) is None


def test_elastic_groups_shrink_when_even_preemption_cannot_make_room_for_all() -> None:
    # Every rack holds a 2-GPU job; the workers want 3 whole nodes: no rack ever holds 1 + 3
    # nodes, so the unit is planned at the workers' min_pods (2).
    for make in (lambda: gangplace.Cluster(("rack",)), lambda: reference.Cluster(("rack",))):
        cluster: Any = make()
        racks_with_small_jobs(cluster, (0, 0, 0))
        unit = MultiGangRequest(
            (PodGroup("leader", 1, 8), PodGroup("workers", 3, 8, min_pods=2)),
            colocate=(("leader", "workers", "rack"),),
            required_level="rack",
            priority=3,
        )
        plan = cluster.plan_preemption(unit)
        assert plan is not None and len(plan.victims) == 1
        assert len(plan.placement.groups["workers"]) == 2
        assert plan.placement.domain == ("r0",)  # ties broken by path


def test_stale_plans_conflict_and_bad_requests_change_nothing() -> None:
    cluster = gangplace.Cluster(("rack",), clock=FakeClock())
    jobs = racks_with_small_jobs(cluster, (1, -5, 1))
    plan = cluster.plan_preemption(leader_and_workers())
    assert plan is not None
    cluster.release(jobs[1])  # the victim ended: the plan is stale
    before = cluster.snapshot()
    with pytest.raises(Conflict, match="the plan is stale"):
        cluster.preempt(plan)
    assert cluster.snapshot() == before
    bad = MultiGangRequest((PodGroup("a", 1, 8),), required_level="row")
    with pytest.raises(InvalidRequest, match='unknown required_level "row"'):
        cluster.plan_preemption(bad)
    colocated = MultiGangRequest(
        (PodGroup("a", 1, 1), PodGroup("b", 1, 1)), colocate=(("a", "b", "row"),)
    )
    with pytest.raises(InvalidRequest, match='unknown colocate level "row"'):
        cluster.plan_preemption(colocated)
    with pytest.raises(InvalidRequest, match="max_victims"):
        cluster.plan_preemption(leader_and_workers(), max_victims=-1)
    assert cluster.snapshot() == before


def test_a_unit_is_defragmented_like_a_gang() -> None:
    # Two small movable jobs share r0-n0; the other nodes hold pinned jobs. The unit (a leader
    # node and a worker node in one rack) fits no rack and preempts nothing (the small jobs
    # are not preemptible): defragmentation moves both small jobs to the fullest nodes.
    for make in (lambda: gangplace.Cluster(("rack",)), lambda: reference.Cluster(("rack",))):
        cluster: Any = make()
        for rack in ("r0", "r1", "r2"):
            for node in range(2):
                name = f"{rack}-n{node}"
                cluster.add_node(name, gpus=8, topology={"rack": rack}, labels={"host": name})
        small = GangRequest(1, 2, required_level="node", movable=True, preemptible=False)
        movers = [cluster.commit(cluster.reserve(small)) for _ in range(2)]
        for host, gpus in (("r1-n0", 8), ("r1-n1", 4), ("r2-n0", 6), ("r2-n1", 2)):
            pinned = GangRequest(1, gpus, selector={"host": host}, preemptible=False)
            cluster.commit(cluster.reserve(pinned))
        unit = MultiGangRequest(
            (PodGroup("leader", 1, 8), PodGroup("workers", 1, 8)),
            colocate=(("leader", "workers", "rack"),),
            required_level="rack",
            priority=1,
        )
        assert cluster.place_gang(unit) is None and cluster.plan_preemption(unit) is None
        plan = cluster.plan_defrag(unit)
        assert plan is not None and plan.request == unit
        assert plan.placement.domain == ("r0",)
        assert sorted(move.target.nodes[0] for move in plan.moves) == ["r1-n1", "r2-n0"]
        reservation, moved = cluster.apply_defrag(plan)
        assert reservation.request == unit and len(moved) == 2
        assert all(cluster.hold_status(m.id) == "migrated" for m in movers)


# --- the reference, on random clusters -------------------------------------------------------


def unit_fits(oracle: Any, request: MultiGangRequest, plan: Any, removed: set[str]) -> bool:
    """Whether the reference places the unit in the plan's domain, by the plan's sizes, with
    the reference allocations ``removed`` ended."""
    by_id = {allocation.id: allocation for allocation in oracle.allocations()}
    freed = []
    for hid in removed:
        if by_id[hid].placement.gpu_milli is not None:  # its shares, given back (P8)
            shares = oracle._shares_back(oracle._holds[hid])[0]
            freed.append(preemption.Candidate(hid, 0, 0.0, 0, {}, {}, shares))
            continue
        per_node: dict[str, set[int]] = {}
        for pod in by_id[hid].placement.pods:
            unhealthy = set(oracle.node(pod.node).unhealthy)
            per_node.setdefault(pod.node, set()).update(set(pod.gpus) - unhealthy)
        gpus = {node: tuple(sorted(g)) for node, g in per_node.items()}
        freed.append(preemption.Candidate(hid, 0, 0.0, 0, gpus))
    unit = oracle._roles(request)
    coarsest = reference.rules.depth_of(LEVELS, unit.required_level)
    nodes = preemption.with_removed(oracle._views(), freed)
    planner = roles.Planner(nodes, LEVELS, unit, coarsest)
    placed = sum(len(pods) for pods in plan.placement.groups.values())
    elastic = placed < sum(group.pods for group in request.groups)
    outcome = planner.in_candidate(len(plan.placement.domain), plan.placement.domain, elastic)
    return not isinstance(outcome, roles.Failure)


def with_priority(request: MultiGangRequest, priority: int) -> MultiGangRequest:
    """The same unit at another priority."""
    return MultiGangRequest(
        request.groups,
        required_level=request.required_level,
        colocate=request.colocate,
        spread=request.spread,
        priority=priority,
    )


def fits_when_empty(nodes: list[Any], policy: str, request: MultiGangRequest) -> bool:
    """Whether the unit fits the cluster with nothing held (so that room can be made)."""
    empty = reference.Cluster(LEVELS, policy=policy)
    fill(empty, LEVELS, nodes)
    return empty.place_gang(request) is not None


@given(
    data=st.data(),
    nodes=labelled_clusters(),
    policy=st.sampled_from(("best-fit", "first-fit", "best-fit-path")),
)
def test_multi_role_preemption_agrees_with_the_reference_and_is_1_minimal(
    data: st.DataObject, nodes: list[Any], policy: str
) -> None:
    engine, oracle = twins(LEVELS, nodes, policy)
    ids: dict[str, str] = {}
    for _ in range(data.draw(st.integers(1, 12), label="jobs")):
        milli = data.draw(st.sampled_from((None, None, 300, 500)), label="milli")  # P8
        gang = GangRequest(
            data.draw(st.integers(1, 3)),
            1 if milli else data.draw(st.sampled_from((1, 2, 4))),
            priority=data.draw(st.integers(-2, 1)),
            preemptible=data.draw(st.sampled_from((True, True, False))),
            gpu_milli=milli,
        )
        placement = engine.place_gang(gang)
        if placement is None:
            continue
        job = engine.commit(engine.reserve(gang))
        ids[job.id] = oracle.commit(oracle.reserve(gang)).id
    priority = data.draw(st.integers(0, 3), label="priority")
    request = with_priority(data.draw(multi_requests()), priority)
    assume(fits_when_empty(nodes, policy, request))
    max_victims = data.draw(st.none() | st.integers(0, 2), label="max_victims")
    got = engine.plan_preemption(request, max_victims=max_victims)
    expected = oracle.plan_preemption(request, max_victims=max_victims)
    note(f"{request!r}: engine {got!r}, reference {expected!r}")
    assert (got is None) == (expected is None)
    event("no plan" if got is None else f"{min(len(got.victims), 3)} victims")
    if got is None or expected is None:
        return
    assert roles_tuple(got.placement) == roles_tuple(expected.placement)
    assert tuple(sorted(ids[v] for v in got.victims)) == expected.victims
    shares = {a.id for a in engine.allocations() if a.placement.gpu_milli is not None}
    if shares & set(got.victims):
        event("fractional victims")
    assert (got.victim_gpus, got.max_victim_priority) == (
        expected.victim_gpus,
        expected.max_victim_priority,
    )
    victims = set(expected.victims)
    assert unit_fits(oracle, request, expected, victims)
    for victim in victims:  # 1-minimal: restoring any one victim breaks the fit
        assert not unit_fits(oracle, request, expected, victims - {victim})
    engine.preempt(got)
    oracle.preempt(expected)
    check_unit(engine, request, got.placement)
    for name in engine.nodes():
        a, b = engine.node(name), oracle.node(name)
        assert (a.free, a.reserved, a.allocated) == (b.free, b.reserved, b.allocated), name
    engine.check_invariants()


@given(
    data=st.data(),
    nodes=labelled_clusters(),
    policy=st.sampled_from(("best-fit", "first-fit")),
)
def test_multi_role_defragmentation_agrees_with_the_reference(
    data: st.DataObject, nodes: list[Any], policy: str
) -> None:
    engine, oracle = twins(LEVELS, nodes, policy)
    ids: dict[str, str] = {}
    for _ in range(data.draw(st.integers(1, 10), label="jobs")):
        milli = data.draw(st.sampled_from((None, None, 300, 500)), label="milli")  # D5
        gang = GangRequest(
            data.draw(st.integers(1, 2)),
            1 if milli else data.draw(st.sampled_from((1, 2, 4))),
            gpu_milli=milli,
            required_level=data.draw(st.sampled_from((None, "node", "rack"))),
            priority=data.draw(st.integers(-1, 1)),
            movable=data.draw(st.sampled_from((True, True, False)), label="movable"),
            preemptible=data.draw(st.booleans(), label="preemptible"),
        )
        if engine.place_gang(gang) is None:
            continue
        job = engine.commit(engine.reserve(gang))
        ids[job.id] = oracle.commit(oracle.reserve(gang)).id
    priority = data.draw(st.integers(0, 2), label="priority")
    request = with_priority(data.draw(multi_requests()), priority)
    assume(fits_when_empty(nodes, policy, request))
    options = {
        "evict_unplaceable": data.draw(st.booleans(), label="evict"),
        "allow_downgrade": data.draw(st.booleans(), label="downgrade"),
    }
    got = engine.plan_defrag(request, **options)
    expected = oracle.plan_defrag(request, **options)
    note(f"{request!r}: engine {got!r}, reference {expected!r}")
    assert (got is None) == (expected is None)
    event("no plan" if got is None else f"{min(len(got.moves), 2)} moves")
    if got is None or expected is None:
        return
    assert roles_tuple(got.placement) == roles_tuple(expected.placement)
    assert [(ids[m.allocation], as_tuple(m.target)) for m in got.moves] == [
        (m.allocation, as_tuple(m.target)) for m in expected.moves
    ]
    assert [ids[e] for e in got.evictions] == list(expected.evictions)
    if any(m.target.gpu_milli is not None for m in got.moves):
        event("fractional moves")
    engine.apply_defrag(got)
    oracle.apply_defrag(expected)
    for name in engine.nodes():
        a, b = engine.node(name), oracle.node(name)
        assert (a.free, a.reserved, a.allocated) == (b.free, b.reserved, b.allocated), name
    engine.check_invariants()
