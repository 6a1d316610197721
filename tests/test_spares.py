"""Spares (docs/repair.md "Spares"): extra pods held next to a gang, and repairs that use them.

A gang with ``spares`` is placed as one of ``pods + spares`` pods (with slices, every
innermost slice domain holds its slice plus ``spares``); the last pods are the spares. They
count as held, never free; a spare that loses a GPU stops being one; ``plan_repair`` gives
lost ranks to spares first. The state machine (``test_stateful.py``) reserves gangs with
spares and repairs them.
"""

from __future__ import annotations

import pickle
from typing import Any

import hypothesis.strategies as st
import pytest
from helpers import FakeClock, NodeSpec, as_tuple, node_state, twins
from hypothesis import assume, event, given, note
from test_repair import LEVELS, fail_one, racks_of, repair_tuple
from test_slices import nvl72, sliced_requests, small_clusters

from gangplace import (
    Cluster,
    GangplaceError,
    GangRequest,
    InvalidRequest,
    LimitExceeded,
    MultiGangRequest,
    PodGroup,
    ReservationError,
    UnknownReservation,
    Unschedulable,
)


def pods_of(pods: Any) -> list[tuple[str, tuple[int, ...]]]:
    return [(pod.node, tuple(pod.gpus)) for pod in pods]


def test_the_last_pods_of_the_gang_become_its_spares() -> None:
    cluster = racks_of(1, 2, 8)
    request = GangRequest(4, 8, spares=2)
    assert request.spares == 2 and request.total_gpus == 48
    placement = cluster.place_gang(request)
    assert placement is not None and len(placement) == 4
    plain = cluster.place_gang(GangRequest(6, 8))
    assert plain is not None
    assert pods_of(placement.pods) + pods_of(placement.spares) == pods_of(plain.pods)
    assert placement.domain == plain.domain
    held = cluster.reserve(request)
    assert cluster.stats().reserved == 48 and held.spares == placement.spares
    job = cluster.commit(held)
    assert cluster.stats().allocated == 48 and cluster.stats().free == 128 - 48
    for spare in job.spares:
        assert set(spare.gpus) <= set(cluster.node(spare.node).allocated)
    assert pickle.loads(pickle.dumps(request)) == request
    assert pickle.loads(pickle.dumps(placement)) == placement
    assert "spares=2" in repr(request)


def test_a_sliced_gang_on_nvl72_fills_each_rack_with_its_spares() -> None:
    cluster = nvl72(4)
    request = GangRequest(64, 4, slices=(("rack", 16),), spares=2)
    job = cluster.commit(cluster.reserve(request))
    assert len(job.placement.pods) == 64 and len(job.spares) == 8
    assert cluster.stats().free == 0  # 4 racks x 18 trays: every tray held
    for index, path in enumerate(job.placement.slices):
        rack = path[-1]
        ranks = job.placement.pods[index * 16 : (index + 1) * 16]
        assert {cluster.node(pod.node).topology["rack"] for pod in ranks} == {rack}
        spares = [s for s in job.spares if cluster.node(s.node).topology["rack"] == rack]
        assert len(spares) == 2


def test_no_room_for_the_spares_means_no_placement() -> None:
    cluster = racks_of(1, 2, 4)
    request = GangRequest(4, 8, required_level="rack", spares=1)
    assert cluster.place_gang(GangRequest(4, 8, required_level="rack")) is not None
    assert cluster.place_gang(request) is None
    before = cluster.snapshot()
    with pytest.raises(Unschedulable):
        cluster.reserve(request)
    assert cluster.snapshot() == before


def test_spares_count_against_the_owners_cap() -> None:
    cluster = Cluster(LEVELS, clock=FakeClock(), max_held_gpus_per_owner=40)
    for node in range(8):
        cluster.add_node(f"n{node}", gpus=8, topology={"spine": "s0", "rack": "r0"})
    cluster.reserve(GangRequest(4, 8, spares=1), owner="a")  # 40 GPUs: at the cap
    before = cluster.snapshot()
    with pytest.raises(LimitExceeded):
        cluster.reserve(GangRequest(1, 1), owner="a")
    with pytest.raises(LimitExceeded):
        cluster.reserve(GangRequest(4, 8, spares=2), owner="b")  # 48 > 40
    assert cluster.snapshot() == before


def test_a_spare_that_loses_a_gpu_stops_being_one() -> None:
    cluster = racks_of(1, 1, 6)
    job = cluster.commit(cluster.reserve(GangRequest(2, 8, spares=3)))
    first, second, third = job.spares
    cluster.set_gpu_health(first.node, 5, False)
    (now,) = cluster.allocations()
    assert now.spares == (second, third) and now.lost == ()
    info = cluster.node(first.node)
    assert info.allocated == () and info.free == (0, 1, 2, 3, 4, 6, 7)
    cluster.set_gpu_health(first.node, 5, True)  # healthy again: the spare does not return
    assert cluster.allocations()[0].spares == (second, third)
    cluster.remove_node(second.node)
    assert cluster.allocations()[0].spares == (third,)
    assert cluster.stats().allocated == 3 * 8
    cluster.check_invariants()


def test_three_failed_nodes_of_a_32_node_gang_are_repaired_from_its_spares() -> None:
    cluster = racks_of(2, 2, 36)
    job = cluster.commit(cluster.reserve(GangRequest(32, 8, required_level="rack", spares=3)))
    old = job.placement.pods
    for rank in (3, 17, 30):
        cluster.remove_node(old[rank].node)
    (broken,) = cluster.allocations()
    assert cluster.explain_repair(broken)["spares"] == 3
    plan = cluster.plan_repair(broken)
    assert plan is not None and plan.from_spares == (3, 17, 30)
    assert [pod for _, pod in plan.replacements] == list(job.spares)
    repair = cluster.repair(plan)
    assert repair.placement.pods == () and cluster.stats().reserved == 0
    merged = cluster.commit_repair(repair)
    assert merged.lost == () and merged.spares == ()
    assert [merged.placement.pods[rank] for rank in (3, 17, 30)] == list(job.spares)
    assert merged.placement.domain == job.placement.domain
    assert cluster.stats().allocated == 32 * 8
    cluster.check_invariants()


def test_spares_first_then_free_gpus() -> None:
    cluster = racks_of(1, 1, 6)
    job = cluster.commit(cluster.reserve(GangRequest(3, 8, spares=1)))
    for rank in (0, 2):
        cluster.set_gpu_health(job.placement.pods[rank].node, 0, False)
    plan = cluster.plan_repair(job)
    assert plan is not None and plan.from_spares == (0,)
    assert dict(plan.replacements)[0] == job.spares[0]
    merged = cluster.commit_repair(cluster.repair(plan))
    assert merged.lost == () and merged.spares == ()
    assert cluster.stats().reserved == 0


def test_a_slice_gangs_rank_takes_a_spare_of_its_own_slice() -> None:
    cluster = nvl72(4)
    job = cluster.commit(cluster.reserve(GangRequest(64, 4, slices=(("rack", 16),), spares=2)))
    broken = job.placement.pods[40]  # slice 2
    cluster.remove_node(broken.node)
    plan = cluster.plan_repair(job)
    assert plan is not None and plan.from_spares == (40,)
    ((_, spare),) = plan.replacements
    assert cluster.node(spare.node).topology["rack"] == job.placement.slices[2][-1]
    merged = cluster.commit_repair(cluster.repair(plan))
    assert len(merged.spares) == 7 and merged.placement.slices == job.placement.slices


def test_a_spare_gone_between_repair_and_commit_makes_a_conflict() -> None:
    cluster = racks_of(1, 1, 6)
    job = cluster.commit(cluster.reserve(GangRequest(2, 8, spares=1)))
    cluster.set_gpu_health(job.placement.pods[0].node, 0, False)
    plan = cluster.plan_repair(job)
    assert plan is not None
    repair = cluster.repair(plan)
    cluster.set_gpu_health(job.spares[0].node, 1, False)  # the spare fails
    with pytest.raises(Exception, match="no longer a spare"):
        cluster.commit_repair(repair)
    assert cluster.hold_status(repair) == "rolled-back"


def test_reserving_a_placement_holds_its_spares() -> None:
    cluster = racks_of(1, 1, 6)
    placement = cluster.place_gang(GangRequest(2, 8, spares=2))
    assert placement is not None
    held = cluster.reserve(placement)
    assert held.spares == placement.spares and cluster.stats().reserved == 32


def test_snapshots_keep_spares() -> None:
    cluster = racks_of(1, 2, 4)
    cluster.commit(cluster.reserve(GangRequest(3, 8, spares=1)))
    cluster.reserve(GangRequest(2, 4, spares=2))
    data = cluster.snapshot()
    copy = Cluster.restore(data, clock=FakeClock())
    assert copy.snapshot() == data
    assert copy.allocations() == cluster.allocations()
    assert copy.reservations() == cluster.reservations()
    assert copy.allocations()[0].request == GangRequest(3, 8, spares=1)


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({"spares": -1}, "spares"),
        ({"spares": 2**29}, "spares"),
        ({"pods": 2**28, "gpus_per_pod": 1, "spares": 1}, "limit"),
        ({"spares": "2"}, None),
    ],
    ids=["negative", "huge", "past-the-limit", "not-an-int"],
)
def test_bad_spares_are_refused_when_the_request_is_built(
    kwargs: dict[str, Any], text: str | None
) -> None:
    fields = {"pods": 2, "gpus_per_pod": 8, **kwargs}
    with pytest.raises((InvalidRequest, TypeError), match=text):
        GangRequest(fields.pop("pods"), fields.pop("gpus_per_pod"), **fields)


def test_preemption_and_defrag_refuse_gangs_with_spares_and_change_nothing() -> None:
    cluster = racks_of(1, 1, 4)
    cluster.commit(cluster.reserve(GangRequest(2, 8, priority=-1, movable=True)))
    before = cluster.snapshot()
    for call in (cluster.plan_preemption, cluster.plan_defrag):
        with pytest.raises(InvalidRequest, match="spares"):
            call(GangRequest(3, 8, priority=5, spares=1))
    assert cluster.snapshot() == before


def outcome(call: Any, *args: Any) -> Any:
    try:
        return "ok", call(*args)
    except GangplaceError as error:
        return "error", type(error).__name__


def with_spares(request: GangRequest, spares: int) -> GangRequest:
    return GangRequest(
        request.pods,
        request.gpus_per_pod,
        min_pods=request.min_pods,
        required_level=request.required_level,
        slices=request.slices,
        spread=request.spread,
        spares=spares,
    )


@given(
    data=st.data(),
    nodes=small_clusters(),
    policy=st.sampled_from(("best-fit", "first-fit")),
)
def test_spares_agree_with_the_reference(
    data: st.DataObject, nodes: list[NodeSpec], policy: str
) -> None:
    """Gangs with spares (plain, elastic or sliced) placed, reserved and committed, nodes and
    GPUs failed, repairs planned and merged: the engine and the reference agree at every step."""
    engine, oracle = twins(LEVELS, nodes, policy)
    ids: dict[str, str] = {}
    for _ in range(data.draw(st.integers(1, 3), label="gangs")):
        if data.draw(st.booleans(), label="sliced"):
            request = data.draw(sliced_requests(LEVELS))
        else:
            pods = data.draw(st.integers(1, 5))
            request = GangRequest(
                pods,
                data.draw(st.sampled_from((1, 2, 4))),
                min_pods=data.draw(st.none() | st.integers(1, pods)),
                required_level=data.draw(st.sampled_from((None, "spine", "rack"))),
            )
        request = with_spares(request, data.draw(st.integers(0, 2), label="spares"))
        got, expected = engine.place_gang(request), oracle.place_gang(request)
        note(f"{request!r}: {got!r} / {expected!r}")
        assert as_tuple(got) == as_tuple(expected)
        if got is None or expected is None:
            continue
        assert pods_of(got.spares) == pods_of(expected.spares)
        ids[engine.commit(engine.reserve(request)).id] = oracle.commit(oracle.reserve(request)).id
    assume(ids)
    for _ in range(data.draw(st.integers(1, 3), label="failures")):
        if not fail_one(data, engine, oracle, "node"):
            return
    served = 0
    for allocation in engine.allocations():
        twin = ids[allocation.id]
        assert engine.explain_repair(allocation) == oracle.explain_repair(twin)
        plan, twin_plan = engine.plan_repair(allocation), oracle.plan_repair(twin)
        assert (plan is None) == (twin_plan is None)
        if plan is None or twin_plan is None or not plan.replacements:
            continue
        assert repair_tuple(plan) == repair_tuple(twin_plan)  # from_spares included
        served += bool(plan.from_spares)
        merged = engine.commit_repair(engine.repair(plan))
        twin_merged = oracle.commit_repair(oracle.repair(twin_plan))
        assert as_tuple(merged.placement) == as_tuple(twin_merged.placement)
        assert pods_of(merged.spares) == pods_of(twin_merged.spares)
    for allocation in engine.allocations():
        count = data.draw(st.integers(0, 2), label="refill")
        if not count:
            continue
        got = outcome(engine.reserve_spares, allocation, count)
        expected = outcome(oracle.reserve_spares, ids[allocation.id], count)
        assert got[0] == expected[0] and (got[0] == "ok" or got == expected)
        if got[0] == "ok":
            assert pods_of(got[1].spares) == pods_of(expected[1].spares)
            event("refilled")
    event(f"repairs from spares: {min(served, 2)}")
    for name in engine.nodes():
        assert node_state(engine, name) == node_state(oracle, name)
    engine.check_invariants()


def test_reserve_spares_refills_after_a_repair() -> None:
    cluster = racks_of(1, 2, 8)
    job = cluster.commit(cluster.reserve(GangRequest(4, 8, required_level="rack", spares=1)))
    cluster.remove_node(job.placement.pods[0].node)
    plan = cluster.plan_repair(job)
    assert plan is not None and plan.from_spares == (0,)
    merged = cluster.commit_repair(cluster.repair(plan))
    assert merged.spares == ()
    refilled = cluster.reserve_spares(job, 1)
    assert refilled.id == job.id and len(refilled.spares) == 1
    spare = refilled.spares[0]
    assert cluster.node(spare.node).topology["rack"] == job.placement.domain[-1]
    assert set(spare.gpus) <= set(cluster.node(spare.node).allocated)
    before = cluster.snapshot()
    with pytest.raises(Unschedulable):
        cluster.reserve_spares(job, 3)  # the rack has two free nodes left
    assert cluster.snapshot() == before
    assert len(cluster.reserve_spares(job, 2).spares) == 3
    cluster.check_invariants()


def test_reserve_spares_puts_them_in_every_slice_domain() -> None:
    cluster = nvl72(4)
    job = cluster.commit(cluster.reserve(GangRequest(64, 4, slices=(("rack", 16),))))
    refilled = cluster.reserve_spares(job, 2)
    racks = [cluster.node(s.node).topology["rack"] for s in refilled.spares]
    assert sorted(racks) == sorted(path[-1] for path in job.placement.slices for _ in range(2))
    assert cluster.stats().free == 0


@pytest.mark.parametrize(
    ("make", "count", "error"),
    [
        (lambda c: c.commit(c.reserve(GangRequest(1, 8))), 0, InvalidRequest),
        (lambda c: c.commit(c.reserve(GangRequest(1, 8))), -3, InvalidRequest),
        (lambda c: c.commit(c.reserve(GangRequest(1, 8))), 2**40, InvalidRequest),
        (lambda c: c.reserve(GangRequest(1, 8)), 1, ReservationError),
        (lambda c: "gp-" + "0" * 32, 1, UnknownReservation),
        (
            lambda c: (a := c.commit(c.reserve(GangRequest(1, 8))), c.release(a))[0],
            1,
            ReservationError,
        ),
        (lambda c: c.commit(c.reserve(c.place_gang(GangRequest(1, 8)))), 1, InvalidRequest),
    ],
    ids=["zero", "negative", "huge", "reservation", "unknown", "released", "no-request"],
)
def test_bad_reserve_spares_raise_typed_errors_and_change_nothing(
    make: Any, count: int, error: type[Exception]
) -> None:
    cluster = racks_of(1, 1, 4)
    target = make(cluster)
    before = cluster.snapshot()
    with pytest.raises(error):
        cluster.reserve_spares(target, count)
    assert cluster.snapshot() == before


def test_a_multi_role_gangs_groups_hold_their_own_spares() -> None:
    cluster = racks_of(1, 1, 6)
    unit = MultiGangRequest((PodGroup("leader", 1, 4), PodGroup("workers", 3, 8, spares=1)))
    assert unit.groups[1].spares == 1 and unit.groups[1].total_gpus == 32
    assert "spares=1" in repr(unit.groups[1])
    assert pickle.loads(pickle.dumps(unit)) == unit
    job = cluster.commit(cluster.reserve(unit))
    assert {name: len(pods) for name, pods in job.placement.groups.items()} == {
        "leader": 1,
        "workers": 3,
    }
    (spare,) = job.spares
    assert len(spare.gpus) == 8 and cluster.stats().allocated == 4 + 4 * 8
    cluster.set_gpu_health(job.placement.groups["leader"][0].node, 0, False)
    plan = cluster.plan_repair(job)
    assert plan is not None and plan.from_spares == ()  # an 8-GPU spare is no 4-GPU leader
    cluster.remove_node(job.placement.groups["workers"][2].node)
    plan = cluster.plan_repair(job)
    assert plan is not None and plan.from_spares == (3,)  # worker rank 3 takes the spare
    merged = cluster.commit_repair(cluster.repair(plan))
    assert merged.lost == () and merged.spares == ()
    data = cluster.snapshot()
    assert Cluster.restore(data, clock=FakeClock()).snapshot() == data
    before = cluster.snapshot()
    with pytest.raises(InvalidRequest, match="spares"):
        cluster.plan_preemption(unit)
    assert cluster.snapshot() == before


@given(
    data=st.data(),
    nodes=small_clusters(),
    policy=st.sampled_from(("best-fit", "first-fit")),
)
def test_multi_role_spares_agree_with_the_reference(
    data: st.DataObject, nodes: list[NodeSpec], policy: str
) -> None:
    """Leaders and workers with spares per group, the workers sometimes in rack slices:
    placements (ranks and spares), repairs after failures and the state agree with the
    reference."""
    engine, oracle = twins(LEVELS, nodes, policy)
    for _ in range(data.draw(st.integers(1, 3), label="units")):
        sliced = data.draw(st.booleans(), label="sliced workers")
        leader = PodGroup(
            "leader", 1, data.draw(st.sampled_from((1, 2, 4))), spares=data.draw(st.integers(0, 1))
        )
        workers = PodGroup(
            "workers",
            2 * data.draw(st.integers(1, 2)) if sliced else data.draw(st.integers(1, 4)),
            data.draw(st.sampled_from((1, 2, 4))),
            slices=(("rack", 2),) if sliced else (),
            spares=data.draw(st.integers(0, 2)),
        )
        unit = MultiGangRequest(
            (leader, workers),
            required_level=data.draw(st.sampled_from((None, "spine", "rack"))),
        )
        got, expected = engine.place_gang(unit), oracle.place_gang(unit)
        assert as_tuple(got) == as_tuple(expected)
        if got is None or expected is None:
            continue
        assert pods_of(got.spares) == pods_of(expected.spares)
        assert engine.commit(engine.reserve(unit)).id == oracle.commit(oracle.reserve(unit)).id
    assume(engine.allocations())
    for _ in range(data.draw(st.integers(1, 3), label="failures")):
        if not fail_one(data, engine, oracle, "node"):
            return
    for allocation in engine.allocations():
        plan, twin_plan = engine.plan_repair(allocation), oracle.plan_repair(allocation.id)
        assert (plan is None) == (twin_plan is None)
        if plan is None or twin_plan is None or not plan.replacements:
            continue
        assert plan.from_spares == twin_plan.from_spares
        event("multi-role repair" + (" from spares" if plan.from_spares else ""))
        merged = engine.commit_repair(engine.repair(plan))
        twin_merged = oracle.commit_repair(oracle.repair(twin_plan))
        assert as_tuple(merged.placement) == as_tuple(twin_merged.placement)
        assert pods_of(merged.spares) == pods_of(twin_merged.spares)
        if merged.placement.slices:  # the workers' slice rule still holds after the repair
            for index, pod in enumerate(merged.placement.groups["workers"]):
                where = merged.placement.slices[index // 2]
                node = engine.node(pod.node)
                assert tuple(node.topology[level] for level in LEVELS)[: len(where)] == where
    for name in engine.nodes():
        assert node_state(engine, name) == node_state(oracle, name)
    engine.check_invariants()
