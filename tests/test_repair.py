"""Repair after failures (docs/repair.md "Repair after failures"): lost ranks and repair plans.

A rank is lost when its pod's node was removed or one of its GPUs is unhealthy; healthy again
un-loses it; a node that comes back under the same name does not bring the rank back (the
allocation holds nothing there any more). The state machine (``test_stateful.py``) compares
every allocation's lost ranks with the reference after every step.
"""

from __future__ import annotations

import pickle
from typing import Any

import hypothesis.strategies as st
import pytest
from helpers import FakeClock, NodeSpec, tree, twins
from hypothesis import assume, event, given, note
from test_slices import nvl72, sliced_requests, small_clusters

from gangplace import (
    Cluster,
    GangRequest,
    MultiGangRequest,
    PodGroup,
    PodPlacement,
    ReservationError,
    UnknownReservation,
    reference,
)

LEVELS = ("spine", "rack")


def test_lost_ranks_follow_removals_and_health() -> None:
    cluster = tree(LEVELS, (1, 2, 4), gpus=8, clock=FakeClock())
    allocation = cluster.commit(cluster.reserve(GangRequest(8, 4)))  # 2 pods per node, 4 nodes
    assert allocation.lost == ()
    nodes = [pod.node for pod in allocation.placement.pods]
    cluster.set_gpu_health(nodes[2], allocation.placement.pods[2].gpus[1], False)
    (current,) = cluster.allocations()
    assert current.lost == (2,)
    assert allocation.lost == ()  # a value: as of when it was made
    cluster.remove_node(nodes[4])  # ranks 4 and 5 lived there
    (current,) = cluster.allocations()
    assert current.lost == (2, 4, 5)
    cluster.set_gpu_health(nodes[2], allocation.placement.pods[2].gpus[1], True)
    assert cluster.allocations()[0].lost == (4, 5)
    cluster.add_node(nodes[4], gpus=8, topology={"spine": "s0", "rack": "s0-r1"})
    assert cluster.allocations()[0].lost == (4, 5)  # it came back empty: still lost
    restored = Cluster.restore(cluster.snapshot(), clock=FakeClock())
    assert restored.allocations()[0].lost == (4, 5)
    assert pickle.loads(pickle.dumps(cluster.allocations()[0])).lost == (4, 5)
    assert cluster.commit(current.id).lost == (4, 5)  # commit again reports it current


def test_lost_ranks_of_adopted_and_multi_role_allocations_agree_with_the_reference() -> None:
    engine = tree(LEVELS, (1, 2, 5), gpus=8, clock=FakeClock())
    oracle = reference.Cluster(LEVELS)
    for name in engine.nodes():
        info = engine.node(name)
        oracle.add_node(name, gpus=8, topology=info.topology)
    unit = MultiGangRequest(
        (PodGroup("leader", 1, 1), PodGroup("workers", 4, 8)),
        colocate=(("leader", "workers", "rack"),),
    )
    adopted = [PodPlacement("s0-r1-n0", [0, 1])]
    engine.commit(engine.reserve(unit))
    oracle.commit(oracle.reserve(unit))
    for cluster in (engine, oracle):
        cluster.adopt(adopted)
        cluster.set_gpu_health("s0-r0-n4", 0, False)  # the leader's GPU
        cluster.set_gpu_health("s0-r1-n0", 1, False)
        cluster.remove_node("s0-r0-n1")  # worker rank 1, group rank 2
    got = [(a.placement.pods[0].node, a.lost) for a in engine.allocations()]
    expected = [(a.placement.pods[0].node, a.lost) for a in oracle.allocations()]
    assert sorted(got) == sorted(expected)
    assert sorted(lost for _, lost in got) == [(0,), (0, 2)]


# --- plan_repair and explain_repair ----------------------------------------------------------


def racks_of(spines: int, racks: int, nodes: int, gpus: int = 8) -> Any:
    return tree(LEVELS, (spines, racks, nodes), gpus=gpus, clock=FakeClock())


def test_three_failed_nodes_of_a_32_node_gang_are_repaired_inside_its_rack() -> None:
    cluster = racks_of(2, 2, 36)
    job = cluster.commit(cluster.reserve(GangRequest(32, 8, required_level="rack")))
    rack = job.placement.domain
    nodes = [pod.node for pod in job.placement.pods]
    for node in (nodes[3], nodes[17], nodes[30]):
        cluster.remove_node(node)
    (allocation,) = cluster.allocations()
    assert allocation.lost == (3, 17, 30)
    before = cluster.snapshot()
    plan = cluster.plan_repair(allocation)
    assert cluster.snapshot() == before  # a pure query
    assert plan is not None and plan.allocation == job.id and plan.lost == (3, 17, 30)
    assert [rank for rank, _ in plan.replacements] == [3, 17, 30]
    assert plan.domain == rack and plan.level == "rack"
    new_nodes = [pod.node for _, pod in plan.replacements]
    assert all(cluster.node(node).topology["rack"] == rack[1] for node in new_nodes)
    assert set(new_nodes).isdisjoint(nodes) and len(set(new_nodes)) == 3
    assert plan.from_spares == () and plan.victims == ()
    assert cluster.explain_repair(allocation) == {
        "spares": 0,
        "slice": 0,
        "domain": 3,
        "widened": 3,
    }
    assert pickle.loads(pickle.dumps(plan)) == plan


def test_a_slice_gang_on_nvl72_is_repaired_inside_the_broken_slices_rack() -> None:
    cluster = nvl72(4)
    request = GangRequest(64, 4, slices=(("rack", 16),))
    job = cluster.commit(cluster.reserve(request))
    broken = job.placement.pods[20].node  # a tray of slice 1
    cluster.set_gpu_health(broken, job.placement.pods[20].gpus[0], False)
    (allocation,) = cluster.allocations()
    assert allocation.lost == (20,)
    plan = cluster.plan_repair(allocation)
    assert plan is not None and [rank for rank, _ in plan.replacements] == [20]
    ((_, pod),) = plan.replacements
    slice_rack = job.placement.slices[1]
    assert cluster.node(pod.node).topology["rack"] == slice_rack[-1]
    assert pod.node not in {p.node for p in job.placement.pods}  # a free tray of that rack
    assert cluster.explain_repair(allocation)["slice"] == 1


def test_a_repair_that_needs_more_room_widens_only_when_asked() -> None:
    cluster = racks_of(2, 2, 4)
    job = cluster.commit(cluster.reserve(GangRequest(3, 8, required_level="spine")))
    nodes = [pod.node for pod in job.placement.pods]
    cluster.commit(cluster.reserve(GangRequest(1, 8)))  # the rack's last node
    cluster.remove_node(nodes[1])
    cluster.set_gpu_health(nodes[2], 0, False)
    (allocation, _) = sorted(cluster.allocations(), key=lambda a: -len(a.placement.pods))
    assert allocation.lost == (1, 2)
    assert cluster.plan_repair(allocation) is None  # the rack has no free node left
    plan = cluster.plan_repair(allocation, widen=True)
    assert plan is not None and plan.level == "spine" and plan.domain == ("s0",)
    assert [rank for rank, _ in plan.replacements] == [1, 2]
    tiers = cluster.explain_repair(allocation)
    assert tiers["domain"] == 0 and tiers["widened"] == 2
    rack_only = cluster.commit(cluster.reserve(GangRequest(2, 8, required_level="rack")))
    cluster.set_gpu_health(rack_only.placement.pods[0].node, 0, False)
    assert cluster.plan_repair(rack_only, widen=True) is not None  # inside its own rack


def test_no_lost_ranks_plan_no_replacements() -> None:
    cluster = racks_of(1, 1, 2)
    job = cluster.commit(cluster.reserve(GangRequest(2, 4)))
    plan = cluster.plan_repair(job.id)
    assert plan is not None and plan.replacements == () and plan.lost == ()
    assert plan.domain == job.placement.domain
    assert cluster.explain_repair(job) == {"spares": 0, "slice": 0, "domain": 0, "widened": 0}


@pytest.mark.parametrize(
    ("make", "error", "text"),
    [
        (lambda c: "gp-" + "0" * 32, UnknownReservation, None),
        (lambda c: c.reserve(GangRequest(1, 1)), ReservationError, "commit it first"),
        (
            lambda c: (a := c.commit(c.reserve(GangRequest(1, 1))), c.release(a))[0],
            ReservationError,
            "it was released",
        ),
        (lambda c: c.commit(c.reserve(GangRequest(1, 1))).id + "x", UnknownReservation, None),
        (lambda c: 42, TypeError, "allocation must be"),
    ],
    ids=["unknown", "reservation", "released", "malformed", "wrong-type"],
)
def test_bad_repair_inputs_raise_typed_errors_and_change_nothing(
    make: Any, error: type[Exception], text: str | None
) -> None:
    cluster = racks_of(1, 1, 2)
    target = make(cluster)
    before = cluster.snapshot()
    for call in (cluster.plan_repair, cluster.explain_repair):
        with pytest.raises(error, match=text):
            call(target)
    assert cluster.snapshot() == before


def test_another_owners_allocation_is_unknown() -> None:
    cluster = racks_of(1, 1, 2)
    job = cluster.commit(cluster.reserve(GangRequest(1, 8), owner="a"), owner="a")
    before = cluster.snapshot()
    with pytest.raises(UnknownReservation):
        cluster.plan_repair(job, owner="b")
    assert cluster.plan_repair(job, owner="a") is not None
    assert cluster.snapshot() == before


def repair_tuple(plan: Any) -> Any:
    if plan is None:
        return None
    pods = tuple((rank, pod.node, tuple(pod.gpus)) for rank, pod in plan.replacements)
    return plan.lost, pods, plan.level, tuple(plan.domain), tuple(plan.from_spares)


def committed_gangs(data: st.DataObject, engine: Any, oracle: Any) -> dict[str, str]:
    """Commits 1-4 random gangs (plain or sliced) on both twins where they fit; returns the
    engine's allocation ids mapped to the reference's."""
    ids: dict[str, str] = {}
    for _ in range(data.draw(st.integers(1, 4), label="gangs")):
        if data.draw(st.booleans(), label="sliced"):
            request = data.draw(sliced_requests(LEVELS))
        else:
            request = GangRequest(
                data.draw(st.integers(1, 5)),
                data.draw(st.sampled_from((1, 2, 4))),
                required_level=data.draw(st.sampled_from((None, "spine", "rack"))),
                spread=data.draw(st.sampled_from(("pack", "balanced"))),
            )
        if engine.place_gang(request) is None:
            continue
        ids[engine.commit(engine.reserve(request)).id] = oracle.commit(oracle.reserve(request)).id
    return ids


def fail_one(data: st.DataObject, engine: Any, oracle: Any, label: str) -> bool:
    """Removes a node or fails one of its GPUs on both twins; ``False`` once no node is left."""
    node = data.draw(st.sampled_from(sorted(engine.nodes())), label=label)
    if data.draw(st.booleans(), label="remove"):
        engine.remove_node(node)
        oracle.remove_node(node)
    else:
        gpu = data.draw(st.integers(0, engine.node(node).gpus - 1), label="gpu")
        engine.set_gpu_health(node, gpu, False)
        oracle.set_gpu_health(node, gpu, False)
    return bool(engine.nodes())


@given(
    data=st.data(),
    nodes=small_clusters(),
    policy=st.sampled_from(("best-fit", "first-fit")),
)
def test_repair_plans_agree_with_the_reference(
    data: st.DataObject, nodes: list[NodeSpec], policy: str
) -> None:
    engine, oracle = twins(LEVELS, nodes, policy)
    ids = committed_gangs(data, engine, oracle)
    assume(ids)
    for _ in range(data.draw(st.integers(1, 4), label="failures")):
        if not fail_one(data, engine, oracle, "node"):
            return
    for allocation in engine.allocations():
        twin = ids[allocation.id]
        for widen in (False, True):
            got = engine.plan_repair(allocation, widen=widen)
            expected = oracle.plan_repair(twin, widen=widen)
            note(f"{allocation!r} widen={widen}: engine {got!r}, reference {expected!r}")
            assert repair_tuple(got) == repair_tuple(expected)
            if got is not None:
                taken = set()
                for rank, pod in got.replacements:
                    assert rank in got.lost and len(pod.gpus) == len(
                        allocation.placement.pods[rank].gpus
                    )
                    for gpu in pod.gpus:
                        assert gpu in engine.node(pod.node).free and (pod.node, gpu) not in taken
                        taken.add((pod.node, gpu))
        assert engine.explain_repair(allocation) == oracle.explain_repair(twin)
    event(
        "some plan repairs ranks"
        if any(
            (p := engine.plan_repair(a, widen=True)) and p.replacements
            for a in engine.allocations()
        )
        else "nothing repaired"
    )
    engine.check_invariants()


def test_a_sliced_group_of_a_unit_is_repaired_inside_its_slice() -> None:
    cluster = nvl72(4)
    unit = MultiGangRequest(
        (PodGroup("leader", 1, 4), PodGroup("workers", 32, 4, slices=(("rack", 16),)))
    )
    job = cluster.commit(cluster.reserve(unit))
    broken = job.placement.groups["workers"][20]  # rank 21, in the workers' second slice
    cluster.remove_node(broken.node)
    plan = cluster.plan_repair(job)
    assert plan is not None and [rank for rank, _ in plan.replacements] == [21]
    ((_, pod),) = plan.replacements
    assert cluster.node(pod.node).topology["rack"] == job.placement.slices[1][-1]
    assert cluster.explain_repair(job)["slice"] == 1
    merged = cluster.commit_repair(cluster.repair(plan))
    assert merged.lost == () and merged.placement.groups["workers"][20] == pod
