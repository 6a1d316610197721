"""Holding and applying repairs (docs/repair.md "Repair after failures", rules R4-R5).

``repair(plan)`` re-validates a plan and reserves its replacement GPUs as a repair
reservation tied to the allocation; ``commit_repair`` merges it: the allocation keeps its id,
its lost ranks point at the new pods, the lost pods' healthy GPUs go back to the pool. Rolling
back or expiring a repair reservation leaves the allocation as it was; an allocation that ends
rolls its repair reservations back. The state machine (``test_stateful.py``) repairs too.
"""

from __future__ import annotations

import pickle
from typing import Any

import hypothesis.strategies as st
import pytest
from helpers import FakeClock, NodeSpec, as_tuple, node_state, twins
from hypothesis import assume, event, given, note
from test_repair import LEVELS, committed_gangs, fail_one, racks_of, repair_tuple
from test_slices import nvl72, small_clusters

from gangplace import (
    Cluster,
    Conflict,
    GangplaceError,
    GangRequest,
    InvalidRequest,
    LimitExceeded,
    ReservationError,
    ReservationExpired,
    UnknownReservation,
)


def repaired(cluster: Cluster, allocation: Any, *, widen: bool = False) -> Any:
    """Plans, holds and commits the repair of `allocation`; returns the merged allocation."""
    plan = cluster.plan_repair(allocation, widen=widen)
    assert plan is not None
    return cluster.commit_repair(cluster.repair(plan))


def test_three_failed_nodes_are_repaired_in_place_and_keep_their_ranks() -> None:
    cluster = racks_of(2, 2, 36)
    job = cluster.commit(cluster.reserve(GangRequest(32, 8, required_level="rack")))
    old = job.placement.pods
    for rank in (3, 17, 30):
        cluster.remove_node(old[rank].node)
    plan = cluster.plan_repair(job)
    assert plan is not None
    repair = cluster.repair(plan)
    assert repair.repairs == job.id and repair.repaired_ranks == (3, 17, 30)
    assert [pod for pod in repair.placement.pods] == [pod for _, pod in plan.replacements]
    assert cluster.stats().reserved == 24
    merged = cluster.commit_repair(repair)
    assert merged.id == job.id and merged.lost == ()
    for rank, pod in enumerate(merged.placement.pods):
        expected = dict(plan.replacements).get(rank, old[rank])
        assert pod == expected, rank
    assert merged.placement.domain == job.placement.domain
    assert cluster.stats().reserved == 0 and cluster.stats().allocated == 32 * 8
    assert cluster.hold_status(repair) == "merged"
    assert cluster.allocations() == [merged]
    again = cluster.plan_repair(merged)
    assert again is not None and again.replacements == ()  # nothing lost now
    cluster.check_invariants()


def test_a_slice_gang_keeps_its_slices_and_frees_the_broken_trays_healthy_gpus() -> None:
    cluster = nvl72(4)
    job = cluster.commit(cluster.reserve(GangRequest(64, 4, slices=(("rack", 16),))))
    broken = job.placement.pods[20]
    cluster.set_gpu_health(broken.node, broken.gpus[1], False)
    merged = repaired(cluster, job)
    assert merged.lost == () and merged.placement.slices == job.placement.slices
    new = merged.placement.pods[20]
    assert cluster.node(new.node).topology["rack"] == job.placement.slices[1][-1]
    tray = cluster.node(broken.node)
    assert tray.free == (0, 2, 3) and tray.unhealthy == (1,) and tray.allocated == ()
    cluster.check_invariants()


def test_a_widened_repair_widens_the_allocations_domain() -> None:
    cluster = racks_of(2, 2, 4)
    job = cluster.commit(cluster.reserve(GangRequest(3, 8, required_level="spine")))
    cluster.commit(cluster.reserve(GangRequest(1, 8)))  # the rack's last node
    cluster.remove_node(job.placement.pods[1].node)
    merged = repaired(cluster, job, widen=True)
    assert merged.placement.level == "spine" and merged.placement.domain == ("s0",)
    assert merged.placement.pods[0] == job.placement.pods[0]
    assert merged.placement.nodes == tuple(dict.fromkeys(p.node for p in merged.placement.pods))


def test_rollback_and_expiry_leave_the_allocation_as_it_was() -> None:
    clock = FakeClock()
    cluster = Cluster(LEVELS, clock=clock)
    for node in range(4):
        cluster.add_node(f"n{node}", gpus=8, topology={"spine": "s0", "rack": "r0"})
    job = cluster.commit(cluster.reserve(GangRequest(2, 8)))
    cluster.set_gpu_health(job.placement.pods[0].node, 0, False)
    (before,) = cluster.allocations()
    stats = cluster.stats()
    plan = cluster.plan_repair(job)
    assert plan is not None
    assert cluster.rollback(cluster.repair(plan)) is True
    assert cluster.allocations() == [before] and cluster.stats() == stats
    repair = cluster.repair(plan, ttl=5.0)
    clock.advance(5.0)
    with pytest.raises(ReservationExpired):
        cluster.commit_repair(repair)
    assert cluster.allocations() == [before] and cluster.stats() == stats
    assert cluster.hold_status(repair) == "expired"


def test_lost_ranks_that_change_after_repair_roll_it_back_with_a_conflict() -> None:
    cluster = racks_of(1, 1, 4)
    job = cluster.commit(cluster.reserve(GangRequest(2, 8)))
    first, second = (pod.node for pod in job.placement.pods)
    cluster.set_gpu_health(first, 0, False)
    plan = cluster.plan_repair(job)
    assert plan is not None
    repair = cluster.repair(plan)
    cluster.set_gpu_health(second, 0, False)  # a second rank is lost meanwhile
    (before,) = cluster.allocations()
    with pytest.raises(Conflict, match="rolled back"):
        cluster.commit_repair(repair)
    assert cluster.hold_status(repair) == "rolled-back"
    assert cluster.allocations() == [before] and cluster.stats().reserved == 0
    with pytest.raises(Conflict, match="lost ranks"):
        cluster.repair(plan)  # the plan is stale too
    cluster.set_gpu_health(second, 0, True)
    cluster.set_gpu_health(first, 0, True)  # healthy again: nothing lost
    again = cluster.plan_repair(job)
    assert again is not None and again.replacements == ()
    with pytest.raises(InvalidRequest, match="repairs nothing"):
        cluster.repair(again)


def test_an_allocation_that_ends_rolls_its_repair_reservation_back() -> None:
    cluster = racks_of(1, 1, 4)
    job = cluster.commit(cluster.reserve(GangRequest(2, 8)))
    cluster.remove_node(job.placement.pods[1].node)
    plan = cluster.plan_repair(job)
    assert plan is not None
    repair = cluster.repair(plan)
    assert cluster.release(job) is True
    assert cluster.hold_status(repair) == "rolled-back"
    assert cluster.stats().free == cluster.stats().total
    with pytest.raises(ReservationError, match="rolled back"):
        cluster.commit_repair(repair)
    cluster.check_invariants()


def test_repair_reservations_survive_snapshots_and_pickles() -> None:
    cluster = racks_of(1, 1, 4)
    job = cluster.commit(cluster.reserve(GangRequest(3, 8)))
    cluster.remove_node(job.placement.pods[2].node)
    plan = cluster.plan_repair(job)
    assert plan is not None
    repair = cluster.repair(plan)
    assert pickle.loads(pickle.dumps(repair)) == repair
    assert pickle.loads(pickle.dumps(repair)).repaired_ranks == (2,)
    data = cluster.snapshot()
    copy = Cluster.restore(data, clock=FakeClock())
    assert copy.snapshot() == data
    assert copy.reservations() == cluster.reservations()
    assert copy.commit_repair(repair).placement == cluster.commit_repair(repair).placement


def test_commit_and_commit_repair_refuse_each_others_holds() -> None:
    cluster = racks_of(1, 1, 4)
    job = cluster.commit(cluster.reserve(GangRequest(2, 8)))
    other = cluster.reserve(GangRequest(1, 8))
    cluster.set_gpu_health(job.placement.pods[0].node, 0, False)
    plan = cluster.plan_repair(job)
    assert plan is not None
    repair = cluster.repair(plan)
    before = cluster.snapshot()
    with pytest.raises(ReservationError, match="use commit_repair"):
        cluster.commit(repair)
    with pytest.raises(ReservationError, match="not a repair reservation"):
        cluster.commit_repair(other)
    with pytest.raises(ReservationError, match="not a repair reservation"):
        cluster.commit_repair(job)
    with pytest.raises(ReservationError, match="roll it back"):
        cluster.release(repair)
    assert cluster.snapshot() == before
    cluster.commit_repair(repair)
    with pytest.raises(ReservationError, match="it was merged"):
        cluster.commit_repair(repair)
    with pytest.raises(ReservationError, match="committed"):
        cluster.rollback(repair)


def stale_by_a_taken_gpu(cluster: Cluster) -> Any:
    job = cluster.commit(cluster.reserve(GangRequest(2, 8)))
    cluster.set_gpu_health(job.placement.pods[0].node, 0, False)
    plan = cluster.plan_repair(job)
    cluster.reserve(GangRequest(2, 8))  # takes the planned node
    return plan


def plan_of_a_released_allocation(cluster: Cluster) -> Any:
    job = cluster.commit(cluster.reserve(GangRequest(1, 8)))
    cluster.set_gpu_health(job.placement.pods[0].node, 0, False)
    plan = cluster.plan_repair(job, widen=True)  # a one-node gang's domain is its node
    cluster.release(job)
    return plan


def plan_of(cluster: Cluster, owner: str | None = None) -> Any:
    job = cluster.commit(cluster.reserve(GangRequest(1, 8), owner=owner), owner=owner)
    cluster.set_gpu_health(job.placement.pods[0].node, 0, False)
    return cluster.plan_repair(job, widen=True, owner=owner)


@pytest.mark.parametrize(
    ("make", "kwargs", "error", "text"),
    [
        (stale_by_a_taken_gpu, {}, Conflict, "held by another"),
        (plan_of_a_released_allocation, {}, ReservationError, "it was released"),
        (lambda c: plan_of(c, "a"), {"owner": "b"}, UnknownReservation, None),
        (plan_of, {"ttl": -1.0}, InvalidRequest, "ttl"),
        (plan_of, {"ttl": float("nan")}, InvalidRequest, "ttl"),
        (plan_of, {"owner": ""}, InvalidRequest, "owner"),
        (lambda c: plan_of(c, "a"), {"owner": "a", "cap": True}, LimitExceeded, "cap"),
        (lambda c: "not a plan", {}, TypeError, "RepairPlan"),
    ],
    ids=["stale", "released", "foreign", "ttl", "nan-ttl", "owner", "cap", "wrong-type"],
)
def test_bad_repairs_raise_typed_errors_and_change_nothing(
    make: Any, kwargs: dict[str, Any], error: type[Exception], text: str | None
) -> None:
    kwargs = dict(kwargs)
    capped = kwargs.pop("cap", False)
    cluster = Cluster(LEVELS, clock=FakeClock(), max_held_gpus_per_owner=12 if capped else None)
    for node in range(4):
        cluster.add_node(f"n{node}", gpus=8, topology={"spine": "s0", "rack": "r0"})
    plan = make(cluster)
    before = cluster.snapshot()
    with pytest.raises(error, match=text):
        cluster.repair(plan, **kwargs)
    assert cluster.snapshot() == before


@pytest.mark.parametrize(
    ("target", "error"),
    [("gp-" + "0" * 32, UnknownReservation), ("gp-x", UnknownReservation), (7, TypeError)],
    ids=["unknown", "malformed", "wrong-type"],
)
def test_bad_commit_repairs_raise_typed_errors_and_change_nothing(
    target: Any, error: type[Exception]
) -> None:
    cluster = racks_of(1, 1, 2)
    cluster.commit(cluster.reserve(GangRequest(1, 8)))
    before = cluster.snapshot()
    with pytest.raises(error):
        cluster.commit_repair(target)
    assert cluster.snapshot() == before


def outcome(call: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return "ok", call(*args, **kwargs)
    except GangplaceError as error:
        return "error", type(error).__name__


def merged_tuple(allocation: Any) -> Any:
    return allocation.lost, as_tuple(allocation.placement), tuple(allocation.placement.slices)


@given(
    data=st.data(),
    nodes=small_clusters(),
    policy=st.sampled_from(("best-fit", "first-fit")),
)
def test_repairs_agree_with_the_reference(
    data: st.DataObject, nodes: list[NodeSpec], policy: str
) -> None:
    """Fail nodes and GPUs, repair every allocation that can be (sometimes failing more in
    between, sometimes rolling back), and compare every hold and node with the reference."""
    engine, oracle = twins(LEVELS, nodes, policy)
    ids = committed_gangs(data, engine, oracle)
    assume(ids)
    for _ in range(data.draw(st.integers(1, 3), label="failures")):
        if not fail_one(data, engine, oracle, "node"):
            return
    merged = 0
    for allocation in engine.allocations():
        twin = ids[allocation.id]
        widen = data.draw(st.booleans(), label="widen")
        plan, oracle_plan = engine.plan_repair(allocation, widen=widen), None
        oracle_plan = oracle.plan_repair(twin, widen=widen)
        if plan is None or not plan.replacements:
            continue
        assert oracle_plan is not None
        got, expected = outcome(engine.repair, plan), outcome(oracle.repair, oracle_plan)
        note(f"repair {allocation.id}: {got!r} / {expected!r}")
        assert got[0] == expected[0] and (got[0] == "ok" or got == expected)
        if got[0] != "ok":
            continue
        assert (got[1].repaired_ranks, as_tuple(got[1].placement)) == (
            expected[1].repaired_ranks,
            as_tuple(expected[1].placement),
        )
        ids[got[1].id] = expected[1].id
        step = data.draw(st.sampled_from(("commit", "fail-then-commit", "rollback")))
        if step == "rollback":
            assert engine.rollback(got[1]) == oracle.rollback(expected[1])
            continue
        if step == "fail-then-commit" and not fail_one(data, engine, oracle, "meanwhile"):
            return
        done = outcome(engine.commit_repair, got[1])
        assert done[0] == outcome(oracle.commit_repair, expected[1])[0]
        merged += done[0] == "ok"
    event(f"repairs merged: {min(merged, 2)}")
    for live, twin_live in zip(engine.allocations(), oracle.allocations(), strict=True):
        assert ids[live.id] == twin_live.id
        assert merged_tuple(live) == merged_tuple(twin_live)
    for name in engine.nodes():
        assert node_state(engine, name) == node_state(oracle, name)
    assert [ids[r.id] for r in engine.reservations()] == [r.id for r in oracle.reservations()]
    engine.check_invariants()


def test_a_repair_that_preempts_ends_the_lowest_priority_job_in_the_domain() -> None:
    cluster = racks_of(1, 2, 4)  # racks s0-r0 and s0-r1 of 4 nodes
    job = cluster.commit(cluster.reserve(GangRequest(2, 8, priority=5, required_level="rack")))
    rack = job.placement.domain
    fillers = {
        priority: cluster.commit(cluster.reserve(GangRequest(1, 8, priority=priority)))
        for priority in (1, 0)
    }
    assert all(f.placement.domain[:2] == rack for f in fillers.values())  # best-fit: same rack
    cluster.commit(cluster.reserve(GangRequest(4, 8, priority=9)))  # the other rack, full
    cluster.remove_node(job.placement.pods[1].node)
    assert cluster.plan_repair(job) is None and cluster.plan_repair(job, widen=True) is None
    before = cluster.snapshot()
    plan = cluster.plan_repair(job, preempt=True)
    assert cluster.snapshot() == before  # a pure query
    assert plan is not None and plan.victims == (fillers[0].id,)
    ((rank, pod),) = plan.replacements
    assert rank == 1 and pod == fillers[0].placement.pods[0]  # the victim's node
    merged = cluster.commit_repair(cluster.repair(plan))
    assert merged.lost == () and cluster.hold_status(fillers[0]) == "preempted"
    assert cluster.hold_status(fillers[1]) == "allocated"
    cluster.check_invariants()


def test_a_preempting_plan_is_stale_once_its_victim_ends() -> None:
    cluster = racks_of(1, 1, 3)
    job = cluster.commit(cluster.reserve(GangRequest(2, 8, priority=2)))
    low = cluster.commit(cluster.reserve(GangRequest(1, 8)))
    cluster.set_gpu_health(job.placement.pods[0].node, 0, False)
    plan = cluster.plan_repair(job, preempt=True)
    assert plan is not None and plan.victims == (low.id,)
    cluster.set_priority(low, 3)  # no longer below the job
    before = cluster.snapshot()
    with pytest.raises(Conflict, match="victim"):
        cluster.repair(plan)
    assert cluster.snapshot() == before
    assert cluster.plan_repair(job, preempt=True) is None  # nothing may be preempted now


def fits_without(oracle: Any, twin: str, plan: Any, victim: str) -> bool:
    """Whether the reference's repair still fits with ``victim`` left running (R6's
    1-minimality, checked through the reference's own placement)."""
    from gangplace.reference import repair as repairs
    from gangplace.reference import repair_place

    hold = oracle._holds[twin]
    lost = hold.lost(oracle._nodes)
    served = {rank for rank, _ in oracle._spare_matches(hold, lost)}
    classes = oracle._classes(hold, [rank for rank in lost if rank not in served])
    spread, numa = oracle._knobs(hold)
    depth, path, _ = oracle._resolve(tuple(hold.placement.domain))
    rest = [
        c
        for c in oracle._candidates(
            repairs._Priority(hold.priority, next((c.asks for c in classes if c.asks), {})),
            "preempt",
            0.0,
            (),
            oracle._now(),
        )
        if c.id in plan.victims and c.id != victim
    ]
    found = oracle._place(classes, (depth, path), spread, numa, repair_place.freed_by(rest))
    return found is not None


@given(
    data=st.data(),
    nodes=small_clusters(),
    policy=st.sampled_from(("best-fit", "first-fit")),
)
def test_preempting_repairs_agree_with_the_reference_and_are_1_minimal(
    data: st.DataObject, nodes: list[NodeSpec], policy: str
) -> None:
    """Gangs of random priorities fill a cluster, nodes and GPUs fail, and every allocation's
    repair may preempt (rule R6): plans, victims and the state after ``repair`` agree; no
    victim could have been spared."""
    engine, oracle = twins(LEVELS, nodes, policy)
    for _ in range(data.draw(st.integers(2, 6), label="gangs")):
        request = GangRequest(
            data.draw(st.integers(1, 4)),
            data.draw(st.sampled_from((1, 2, 4))),
            required_level=data.draw(st.sampled_from((None, "spine", "rack"))),
            priority=data.draw(st.integers(0, 3)),
            preemptible=data.draw(st.booleans()),
        )
        if engine.place_gang(request) is None:
            continue
        assert (
            engine.commit(engine.reserve(request)).id == oracle.commit(oracle.reserve(request)).id
        )
    assume(engine.allocations())
    for _ in range(data.draw(st.integers(1, 3), label="failures")):
        if not fail_one(data, engine, oracle, "node"):
            return
    preempted = 0
    for allocation in engine.allocations():
        if engine.hold_status(allocation) != "allocated":
            continue
        widen = data.draw(st.booleans(), label="widen")
        plan = engine.plan_repair(allocation, widen=widen, preempt=True)
        twin_plan = oracle.plan_repair(allocation.id, widen=widen, preempt=True)
        note(f"{allocation!r}: {plan!r} / {twin_plan!r}")
        assert (plan is None) == (twin_plan is None)
        if plan is None or twin_plan is None or not plan.replacements:
            continue
        assert plan.victims == twin_plan.victims
        assert repair_tuple(plan) == repair_tuple(twin_plan)
        for victim in plan.victims:
            assert not fits_without(oracle, allocation.id, twin_plan, victim)
            assert engine.hold_status(victim) == "allocated"
        preempted += bool(plan.victims)
        engine.commit_repair(engine.repair(plan))
        oracle.commit_repair(oracle.repair(twin_plan))
        for victim in plan.victims:
            assert engine.hold_status(victim) == oracle.hold_status(victim) == "preempted"
    event(f"repairs that preempt: {min(preempted, 2)}")
    for name in engine.nodes():
        assert node_state(engine, name) == node_state(oracle, name)
    engine.check_invariants()
