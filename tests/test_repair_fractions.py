"""Repair of fractional allocations (docs/repair.md "Repair after failures", R7; docs/resources.md
"Fractions of a GPU"; issue 47 item 4).

A fractional allocation's lost ranks are replaced by pods of its share, placed by rules F1-F2
inside the placement's domain (or the widened one), each class seeing the shares the earlier
ones took; ``repair`` re-checks every GPU's room; ``commit_repair`` moves the ranks and gives
the lost pods' shares back; R6 may end fractional victims (and whole ones) for it and for
whole-GPU allocations (docs/preemption.md P8); spares are refused. The engine agrees
with ``gangplace.reference``, a plan exists exactly when a brute force finds room on tiny
clusters, and bad or stale inputs raise typed errors with the snapshot unchanged.
"""

from __future__ import annotations

import itertools
from typing import Any

import hypothesis.strategies as st
import pytest
from helpers import FakeClock, NodeSpec, twins
from hypothesis import assume, event, given, note
from test_repair import fail_one

import gangplace
from gangplace import Conflict, GangRequest, InvalidRequest, PodPlacement, reference

LEVELS = ("rack",)


def cluster_of(kind: Any, gpus: tuple[int, ...] = (2, 2, 2)) -> Any:
    """Nodes n0, n1, ... of ``gpus`` GPUs in rack r0, a fake clock and sequential ids."""
    cluster = kind(LEVELS, clock=FakeClock())
    for index, count in enumerate(gpus):
        cluster.add_node(f"n{index}", gpus=count, topology={"rack": "r0"})
    cluster._use_sequential_ids(1)
    return cluster


def shares(cluster: Any) -> dict[str, dict[int, int]]:
    return {name: dict(cluster.node(name).shared) for name in cluster.nodes()}


def current(cluster: Any, allocation: Any) -> Any:
    """The allocation as it is now (its lost ranks current)."""
    return next(held for held in cluster.allocations() if held.id == allocation.id)


@pytest.mark.parametrize("kind", [gangplace.Cluster, reference.Cluster])
def test_lost_shares_are_placed_again_by_best_fit_and_their_shares_move(kind: Any) -> None:
    """n0's GPU 0 fails under two pods of 400: n0 has room for one (GPU 1: 600 left), so the
    repair needs the rack (widen); both go to one free GPU of n1 (F2); until the commit the
    lost pods' shares stay held, after it only the new ones count."""
    cluster = cluster_of(kind)
    gang = cluster.commit(cluster.reserve(GangRequest(3, 1, gpu_milli=400)))
    assert [pod.gpus for pod in gang.placement.pods] == [(0,), (0,), (1,)]
    cluster.set_gpu_health("n0", 0, False)
    gang = current(cluster, gang)
    assert gang.lost == (0, 1)
    assert cluster.plan_repair(gang) is None  # n0 alone holds one pod of 400
    assert cluster.explain_repair(gang) == {"spares": 0, "slice": 0, "domain": 1, "widened": 2}
    plan = cluster.plan_repair(gang, widen=True)
    assert plan is not None and plan.level == "rack"
    assert [(rank, pod.node, pod.gpus) for rank, pod in plan.replacements] == [
        (0, "n1", (0,)),
        (1, "n1", (0,)),
    ]
    held = cluster.repair(plan)
    assert shares(cluster) == {"n0": {0: 800, 1: 400}, "n1": {0: 800}, "n2": {}}
    repaired = cluster.commit_repair(held)
    assert repaired.id == gang.id and repaired.lost == () and repaired.placement.gpu_milli == 400
    assert shares(cluster) == {"n0": {1: 400}, "n1": {0: 800}, "n2": {}}
    assert cluster.stats().allocated == 0  # shares hold no whole GPU
    if kind is gangplace.Cluster:
        cluster.check_invariants()
    assert cluster.release(repaired)
    assert shares(cluster) == {"n0": {}, "n1": {}, "n2": {}}


@pytest.mark.parametrize("kind", [gangplace.Cluster, reference.Cluster])
def test_classes_see_the_shares_earlier_classes_took(kind: Any) -> None:
    """Adopted pods of 600 asking different CPUs are two classes: the first takes b's GPU (b
    and c tie; b first), so the second, seeing that share, goes to c (b's GPU has 400 left)."""
    cluster = kind(LEVELS, clock=FakeClock())
    cluster.add_node("a", gpus=2, topology={"rack": "r0"}, resources={"cpu": 8_000})
    for name in ("b", "c"):
        cluster.add_node(name, gpus=1, topology={"rack": "r0"}, resources={"cpu": 8_000})
    cluster._use_sequential_ids(1)
    pods = [PodPlacement("a", [0]), PodPlacement("a", [1])]
    gang = cluster.adopt(pods, gpu_milli=600, resources=[{"cpu": 1_000}, {"cpu": 2_000}])
    cluster.set_gpu_health("a", 0, False)
    cluster.set_gpu_health("a", 1, False)
    plan = cluster.plan_repair(current(cluster, gang), widen=True)
    assert plan is not None
    assert [(rank, pod.node) for rank, pod in plan.replacements] == [(0, "b"), (1, "c")]
    cluster.commit_repair(cluster.repair(plan))
    assert (cluster.node("b").shared, cluster.node("c").shared) == ({0: 600}, {0: 600})
    assert cluster.node("b").free_resources == {"cpu": 7_000}
    assert cluster.node("c").free_resources == {"cpu": 6_000}


@pytest.mark.parametrize("kind", [gangplace.Cluster, reference.Cluster])
def test_fractions_take_no_spares(kind: Any) -> None:
    """R6 stays inside the placement's domain (its one node here, whose only GPU failed: no
    plan, even with a victim beside it); ``reserve_spares`` refuses a fractional allocation
    (``InvalidRequest``); nothing changes."""
    cluster = cluster_of(kind, gpus=(1, 1))
    gang = cluster.commit(cluster.reserve(GangRequest(1, 1, gpu_milli=500, priority=5)))
    cluster.commit(cluster.reserve(GangRequest(1, 1, priority=0)))  # n1, whole, preemptible
    cluster.set_gpu_health(gang.placement.pods[0].node, 0, False)
    before = cluster.snapshot()
    assert cluster.plan_repair(current(cluster, gang), widen=True, preempt=True) is None
    with pytest.raises(InvalidRequest, match="reserve_spares does not take fractions"):
        cluster.reserve_spares(gang, 1)
    assert cluster.snapshot() == before


@pytest.mark.parametrize("kind", [gangplace.Cluster, reference.Cluster])
def test_a_stale_fractional_repair_is_a_conflict_and_changes_nothing(kind: Any) -> None:
    """The plan's GPU lost its room to another share since: ``Conflict`` naming the GPU and the
    thousandths, snapshot unchanged; a fresh plan goes elsewhere."""
    cluster = cluster_of(kind)
    gang = cluster.commit(cluster.reserve(GangRequest(2, 1, gpu_milli=600)))
    broken = gang.placement.pods[0]
    cluster.set_gpu_health(broken.node, broken.gpus[0], False)
    plan = cluster.plan_repair(current(cluster, gang), widen=True)
    assert plan is not None
    (_, target), *_ = plan.replacements
    cluster.adopt([PodPlacement(target.node, target.gpus)], gpu_milli=700)
    before = cluster.snapshot()
    with pytest.raises(Conflict, match=rf'GPU {target.gpus[0]} of node "{target.node}" has 300'):
        cluster.repair(plan)
    assert cluster.snapshot() == before
    fresh = cluster.plan_repair(current(cluster, gang), widen=True)
    assert fresh is not None and fresh.replacements[0][1] != target


# ---------------------------------------------------------------- differential and brute force


@st.composite
def tiny_clusters(draw: st.DrawFn) -> list[NodeSpec]:
    nodes = []
    for index in range(draw(st.integers(1, 5))):
        gpus = draw(st.sampled_from((1, 2, 4)))
        rack = draw(st.sampled_from(("r0", "r1")))
        nodes.append(NodeSpec(f"n{index}", gpus, (rack,)))
    return nodes


def _plan_tuple(plan: Any) -> Any:
    if plan is None:
        return None
    pods = tuple((rank, pod.node, tuple(pod.gpus)) for rank, pod in plan.replacements)
    return plan.lost, pods, plan.level, tuple(plan.domain), tuple(plan.victims)


def _fill(data: st.DataObject, engine: Any, oracle: Any) -> list[tuple[Any, Any]]:
    """Whole and fractional gangs of priorities 0-2 committed on both twins where they fit
    (so that R6 has victims, fractional ones among them: docs/preemption.md P8)."""
    held = []
    for _ in range(data.draw(st.integers(1, 6), label="gangs")):
        milli = data.draw(st.sampled_from((None, 250, 400, 600, 700)), label="milli")
        request = GangRequest(
            data.draw(st.integers(1, 4), label="pods"),
            1 if milli else data.draw(st.sampled_from((1, 2))),
            required_level=data.draw(st.sampled_from((None, "rack", "node"))),
            gpu_milli=milli,
            priority=data.draw(st.integers(0, 2), label="priority"),
        )
        if engine.place_gang(request) is None:
            continue
        held.append(
            (engine.commit(engine.reserve(request)), oracle.commit(oracle.reserve(request)))
        )
    return held


@given(data=st.data(), nodes=tiny_clusters())
def test_fractional_repairs_agree_with_the_reference(
    data: st.DataObject, nodes: list[NodeSpec]
) -> None:
    """Plans (both widths, with R6), explanations, repairs and commits agree with the
    reference; every replacement's GPU had room; the shares agree after every commit."""
    engine, oracle = twins(LEVELS, nodes, "best-fit")
    held = _fill(data, engine, oracle)
    assume(any(mine.placement.gpu_milli for mine, _ in held))
    for _ in range(data.draw(st.integers(1, 3), label="failures")):
        if not fail_one(data, engine, oracle, "node"):
            return
    twin_of = {mine.id: theirs.id for mine, theirs in held}
    for allocation in engine.allocations():
        if engine.hold_status(allocation) != "allocated":
            continue  # ended by an earlier repair's preemption (R6)
        allocation = current(engine, allocation)
        twin = twin_of[allocation.id]
        assert engine.explain_repair(allocation) == oracle.explain_repair(twin)
        for widen, preempt in ((False, False), (True, False), (True, True)):
            got = engine.plan_repair(allocation, widen=widen, preempt=preempt)
            expected = oracle.plan_repair(twin, widen=widen, preempt=preempt)
            note(f"{allocation!r} widen={widen}: {got!r} / {expected!r}")
            assert _plan_tuple(got) == _plan_tuple(expected)
        plan = engine.plan_repair(allocation, widen=True, preempt=True)
        if plan is None or not plan.replacements:
            continue
        if plan.victims:
            shared = {a.id for a in engine.allocations() if a.placement.gpu_milli}
            event("R6: fractional victims" if shared & set(plan.victims) else "R6: victims")
        mine = engine.commit_repair(engine.repair(plan))
        twin_plan = oracle.plan_repair(twin, widen=True, preempt=True)
        theirs = oracle.commit_repair(oracle.repair(twin_plan))
        assert [(p.node, p.gpus) for p in mine.placement.pods] == [
            (p.node, tuple(p.gpus)) for p in theirs.placement.pods
        ]
        assert mine.lost == theirs.lost == ()
        for name in engine.nodes():
            assert engine.node(name).shared == oracle.node(name).shared
        engine.check_invariants()
        event(f"repaired {'shares' if allocation.placement.gpu_milli else 'whole GPUs'}")


@pytest.mark.parametrize("kind", [gangplace.Cluster, reference.Cluster])
def test_a_repair_preempts_shares(kind: Any) -> None:
    """docs/repair.md R6 with docs/preemption.md P8: a rack-level gang of two pods of 600
    (priority 5) loses n0's GPU; n1's GPU is free, n2's is shared by two jobs of 300
    (priority 0 and 1). The repair inside the rack ends the priority-0 share only (600 + 300
    fit one GPU); the repair's victims' shares count free when it is held."""
    cluster = cluster_of(kind, gpus=(1, 1, 1))
    gang = GangRequest(2, 1, gpu_milli=600, priority=5, required_level="rack")
    placed = cluster.commit(cluster.reserve(gang))
    assert sorted(p.node for p in placed.placement.pods) == ["n0", "n1"]
    low = []
    for name in ("n0", "n1"):  # the two low jobs land on n2
        cluster.cordon(name)
    for priority in (0, 1):
        job = GangRequest(1, 1, gpu_milli=300, priority=priority)
        low.append(cluster.commit(cluster.reserve(job)))
    for name in ("n0", "n1"):
        cluster.uncordon(name)
    cluster.set_gpu_health("n0", 0, False)
    broken = current(cluster, placed)
    assert cluster.plan_repair(broken) is None  # n1 has 400 left, n2 has 400 left
    plan = cluster.plan_repair(broken, preempt=True)
    assert plan is not None and plan.victims == (low[0].id,)
    assert [(pod.node, tuple(pod.gpus)) for _, pod in plan.replacements] == [("n2", (0,))]
    cluster.commit_repair(cluster.repair(plan))
    assert cluster.hold_status(low[0]) == "preempted"
    assert cluster.node("n2").shared == {0: 900}
    if kind is gangplace.Cluster:
        cluster.check_invariants()


def _brute_force_fits(cluster: Any, allocation: Any) -> bool:
    """Whether the lost pods of a fractional allocation fit inside its placement's domain, by
    trying every assignment of them to the domain's usable GPUs (healthy, uncordoned, held by no
    whole pod), counting the shares in use and the pods before them."""
    milli = allocation.placement.gpu_milli
    domain = tuple(allocation.placement.domain)
    room: dict[tuple[str, int], int] = {}
    for name in cluster.nodes():
        info = cluster.node(name)
        path = (*(info.topology[level] for level in LEVELS), name)
        if path[: len(domain)] != domain or info.cordoned:
            continue
        for gpu in range(info.gpus):
            if gpu in info.unhealthy or (gpu not in info.free and gpu not in info.shared):
                continue
            room[name, gpu] = 1000 - info.shared.get(gpu, 0)
    slots = sorted(room)
    for assignment in itertools.product(slots, repeat=len(allocation.lost)):
        used: dict[tuple[str, int], int] = {}
        for slot in assignment:
            used[slot] = used.get(slot, 0) + milli
        if all(used[slot] <= room[slot] for slot in used):
            return True
    return False


@given(data=st.data(), nodes=tiny_clusters())
def test_a_plan_exists_exactly_when_a_brute_force_finds_room(
    data: st.DataObject, nodes: list[NodeSpec]
) -> None:
    """R1 for shares (no widen): ``plan_repair`` answers a plan exactly when some assignment
    of the lost pods to GPUs of the placement's domain fits every GPU's room."""
    engine, oracle = twins(LEVELS, nodes, "best-fit")
    held = _fill(data, engine, oracle)
    fractional = [mine for mine, _ in held if mine.placement.gpu_milli]
    assume(fractional)
    broken = fractional[0].placement.pods[0]
    engine.set_gpu_health(broken.node, broken.gpus[0], False)
    allocation = current(engine, fractional[0])
    assume(len(allocation.lost) <= 4)
    plan = engine.plan_repair(allocation)
    assert (plan is not None) == _brute_force_fits(engine, allocation)
    event("plan" if plan is not None else "no plan")


def test_the_scheduler_repairs_a_fractional_job_in_place() -> None:
    """docs/scheduler.md S13 with docs/repair.md R7: a job of shares that loses its GPU keeps its
    allocation id; its lost ranks restart on shares elsewhere (they were requeued before R7)."""
    from gangplace import Scheduler

    clock = FakeClock()
    cluster = cluster_of(gangplace.Cluster)
    scheduler = Scheduler(cluster, clock=clock)
    scheduler.submit("serve", GangRequest(2, 1, gpu_milli=400), walltime=3600, on_failure="repair")
    placed = scheduler.cycle(clock()).started[0].allocation
    broken = placed.placement.pods[0]
    cluster.set_gpu_health(broken.node, broken.gpus[0], False)
    clock.advance(10)
    decisions = scheduler.cycle(clock())
    assert [r.job_id for r in decisions.repaired] == ["serve"] and decisions.requeued == ()
    repaired = decisions.repaired[0].allocation
    assert repaired.id == placed.id and repaired.lost == () and repaired.placement.gpu_milli == 400
    assert all(
        pod.gpus != broken.gpus or pod.node != broken.node for pod in repaired.placement.pods
    )
    cluster.check_invariants()
