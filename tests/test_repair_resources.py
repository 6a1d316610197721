"""Repair and spares of allocations whose pods ask resources besides GPUs (docs/repair.md "Repair
after failures", "Spares", "Node resources"; issue 28 item 1).

A replacement pod is counted on each node by its free GPUs *and* its free resources, less what
the repair's earlier classes took there; a repair reservation holds what its pods ask;
``commit_repair`` gives the lost pods' resources back; spares hold what a pod asks and give it
back when they are dropped or used. The engine agrees with ``gangplace.reference`` on random
clusters with CPUs and memory (plans, victims, the state after holding and merging); stale
plans raise ``Conflict`` and leave the snapshot byte-identical.
"""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import pytest
from helpers import FakeClock, as_tuple, reserve_both
from hypothesis import event, given, note
from test_repair import fail_one, repair_tuple
from test_repair_commit import fits_without
from test_resources import build
from test_roles_resources import resourced_nodes

import gangplace
from gangplace import (
    Conflict,
    GangRequest,
    MultiGangRequest,
    PodGroup,
    Unschedulable,
    reference,
)

LEVELS = ("rack",)
BOTH = [gangplace.Cluster, reference.Cluster]
CPU = {"cpu": 16_000}


def rack(kind: Any, *, cpus: bool = True) -> Any:
    """Rack r1: ``a`` and ``c`` (8 GPUs, 32 CPUs), ``b`` (4 GPUs, 8 CPUs: no 16-CPU pod) and
    ``e`` (8 GPUs, 64 CPUs); on a fake clock with sequential ids."""
    cluster = kind(LEVELS, clock=FakeClock())
    for name, gpus, cpu in (("a", 8, 32_000), ("b", 4, 8_000), ("c", 8, 32_000), ("e", 8, 64_000)):
        cluster.add_node(name, gpus=gpus, topology={"rack": "r1"}, resources={"cpu": cpu})
    cluster._use_sequential_ids(1)
    return cluster


@pytest.mark.parametrize("kind", BOTH)
def test_a_replacement_goes_where_its_cpus_fit(kind: Any) -> None:
    """Rank 0 of a 4 x 4-GPU gang asking 16 CPUs a pod loses a GPU. Counting GPUs alone, the
    best fit for the replacement is ``b`` (4 free GPUs); its 8 CPUs hold no such pod, so the
    repair goes to ``e``, holds 16 of its CPUs, and the merge gives back the lost pod's."""
    for asks, expected in ((None, "b"), (CPU, "e")):
        cluster = rack(kind)
        job = cluster.commit(cluster.reserve(GangRequest(4, 4, resources_per_pod=asks)))
        assert [pod.node for pod in job.placement.pods] == ["a", "a", "c", "c"]
        cluster.set_gpu_health("a", job.placement.pods[0].gpus[0], False)
        plan = cluster.plan_repair(job)
        assert plan is not None and [(r, p.node) for r, p in plan.replacements] == [(0, expected)]
    free = cluster.node("e").free_resources["cpu"]
    held = cluster.repair(plan)
    assert cluster.node("e").free_resources["cpu"] == free - 16_000
    assert cluster.node("a").free_resources["cpu"] == 0  # the lost pod's CPUs stay held
    merged = cluster.commit_repair(held)
    assert merged.lost == () and [pod.node for pod in merged.placement.pods] == list("eacc")
    assert cluster.node("a").free_resources["cpu"] == 16_000
    assert cluster.node("e").free_resources["cpu"] == free - 16_000
    cluster.check_invariants()


@pytest.mark.parametrize("kind", BOTH)
def test_no_room_for_the_cpus_means_no_repair_and_explain_counts_them(kind: Any) -> None:
    cluster = rack(kind)
    job = cluster.commit(cluster.reserve(GangRequest(4, 4, resources_per_pod=CPU)))
    cluster.commit(cluster.reserve(GangRequest(1, 0, resources_per_pod={"cpu": 60_000})))
    cluster.set_gpu_health("c", job.placement.pods[3].gpus[0], False)
    assert cluster.plan_repair(job, widen=True) is None  # e's CPUs are taken: nowhere
    assert cluster.explain_repair(job) == {"spares": 0, "slice": 0, "domain": 0, "widened": 0}


@pytest.mark.parametrize("kind", BOTH)
def test_a_repair_preempts_the_job_holding_the_cpus(kind: Any) -> None:
    """A low-priority CPU-only job holds e's CPUs: with ``preempt=True`` it is the victim
    (it holds no GPU at all, yet its removal is what makes the repair fit)."""
    cluster = rack(kind)
    job = cluster.commit(cluster.reserve(GangRequest(4, 4, priority=2, resources_per_pod=CPU)))
    hog = cluster.commit(cluster.reserve(GangRequest(1, 0, resources_per_pod={"cpu": 60_000})))
    assert hog.placement.pods[0].node == "e"
    cluster.set_gpu_health("a", job.placement.pods[0].gpus[0], False)
    assert cluster.plan_repair(job) is None
    plan = cluster.plan_repair(job, preempt=True)
    assert plan is not None and plan.victims == (hog.id,)
    assert [p.node for _, p in plan.replacements] == ["e"]
    cluster.commit_repair(cluster.repair(plan))
    assert cluster.hold_status(hog) == "preempted"
    assert cluster.node("e").free_resources["cpu"] == 48_000
    cluster.check_invariants()


@pytest.mark.parametrize("kind", BOTH)
def test_a_plan_whose_cpus_were_taken_is_stale_and_changes_nothing(kind: Any) -> None:
    cluster = rack(kind)
    job = cluster.commit(cluster.reserve(GangRequest(4, 4, resources_per_pod=CPU)))
    cluster.set_gpu_health("a", job.placement.pods[0].gpus[0], False)
    plan = cluster.plan_repair(job)
    assert plan is not None
    cluster.commit(cluster.reserve(GangRequest(1, 0, resources_per_pod={"cpu": 56_000})))
    before = cluster.snapshot()
    with pytest.raises(
        Conflict,
        match=r'node "e" would have \{cpu=8000\} free besides GPUs; its pods ask \{cpu=16000\}',
    ):
        cluster.repair(plan)
    assert cluster.snapshot() == before


@pytest.mark.parametrize("kind", BOTH)
def test_spares_hold_their_cpus_until_dropped_or_used(kind: Any) -> None:
    """A spare asks what a pod asks: a spare whose GPU fails gives its CPUs back at once,
    ``reserve_spares`` counts CPUs (``Unschedulable``, nothing changed, where only GPUs are
    free), and a spare that takes a lost rank keeps its CPUs as the rank's while the lost
    pod's come back."""
    cluster = rack(kind)
    job = cluster.commit(cluster.reserve(GangRequest(2, 8, spares=1, resources_per_pod=CPU)))
    assert [p.node for p in job.placement.pods] == ["a", "c"] and job.spares[0].node == "e"
    assert cluster.stats().free_resources["cpu"] == 136_000 - 48_000
    cluster.set_gpu_health("e", 0, False)  # the spare is dropped: its CPUs come back
    assert cluster.stats().free_resources["cpu"] == 136_000 - 32_000
    cluster.check_invariants()
    before = cluster.snapshot()
    with pytest.raises(Unschedulable):
        cluster.reserve_spares(job, 1)  # no node inside r1 has 8 free GPUs
    cluster.set_gpu_health("e", 0, True)
    hog = cluster.commit(cluster.reserve(GangRequest(1, 0, resources_per_pod={"cpu": 50_000})))
    assert hog.placement.pods[0].node == "e"
    before = cluster.snapshot()
    with pytest.raises(Unschedulable):
        cluster.reserve_spares(job, 1)  # e has the GPUs but 14 free CPUs
    assert cluster.snapshot() == before
    cluster.release(hog)
    refilled = cluster.reserve_spares(job, 1)
    assert [p.node for p in refilled.spares] == ["e"]
    assert cluster.stats().free_resources["cpu"] == 136_000 - 48_000
    cluster.set_gpu_health("a", 3, False)
    plan = cluster.plan_repair(job)
    assert plan is not None and plan.from_spares == (0,)
    merged = cluster.commit_repair(cluster.repair(plan))
    assert [p.node for p in merged.placement.pods] == ["e", "c"] and merged.spares == ()
    assert cluster.stats().free_resources["cpu"] == 136_000 - 32_000
    cluster.check_invariants()


@pytest.mark.parametrize("kind", BOTH)
def test_a_lost_launcher_is_placed_by_its_cpus(kind: Any) -> None:
    """An MPIJob's launcher (no GPU, 8 CPUs) is lost with its node; the repair puts it where
    8 CPUs are free (the workers' node has none left), and the merge holds them."""
    cluster = kind(LEVELS, clock=FakeClock())
    for name, cpu in (("w", 64_000), ("x", 4_000), ("y", 16_000)):
        cluster.add_node(name, gpus=8, topology={"rack": "r1"}, resources={"cpu": cpu})
    cluster._use_sequential_ids(1)
    unit = MultiGangRequest(
        (
            PodGroup("workers", 2, 4, resources_per_pod={"cpu": 32_000}),
            PodGroup("launcher", 1, 0, resources_per_pod={"cpu": 8_000}),
        ),
        required_level="rack",
    )
    job = cluster.commit(cluster.reserve(unit))
    assert [p.node for p in job.placement.pods] == ["w", "w", "y"]
    cluster.remove_node("y")
    cluster.add_node("z", gpus=8, topology={"rack": "r1"}, resources={"cpu": 8_000})
    (job,) = cluster.allocations()
    assert job.lost == (2,)
    plan = cluster.plan_repair(job)
    assert plan is not None and [(r, p.node, p.gpus) for r, p in plan.replacements] == [
        (2, "z", ())
    ]
    merged = cluster.commit_repair(cluster.repair(plan))
    assert merged.lost == () and cluster.node("z").free_resources == {"cpu": 0}
    cluster.check_invariants()


@st.composite
def resourced_jobs(draw: st.DrawFn) -> Any:
    """A gang or a multi-role unit asking CPUs and memory (some pods no GPU), maybe spares."""
    asks = draw(
        st.fixed_dictionaries({}, optional={"cpu": st.integers(1, 6), "memory": st.just(1)})
    )
    gpus = draw(st.sampled_from((0, 1, 2, 4) if asks else (1, 2, 4)))
    priority = draw(st.integers(0, 3))
    if draw(st.booleans()):
        return GangRequest(
            draw(st.integers(1, 4)),
            gpus,
            required_level=draw(st.sampled_from((None, "rack"))),
            spares=draw(st.sampled_from((0, 0, 1))) if gpus else 0,
            resources_per_pod=asks,
            priority=priority,
            preemptible=draw(st.booleans()),
        )
    return MultiGangRequest(
        (
            PodGroup("launcher", 1, 0 if asks else 1, resources_per_pod=asks),
            PodGroup("workers", draw(st.integers(1, 3)), gpus or 1, resources_per_pod=asks),
        ),
        required_level=draw(st.sampled_from((None, "rack"))),
        priority=priority,
        preemptible=draw(st.booleans()),
    )


@given(data=st.data(), nodes=resourced_nodes())
def test_repairs_with_resources_agree_with_the_reference(
    data: st.DataObject, nodes: list[tuple[str, int, str, dict[str, int]]]
) -> None:
    """Random jobs asking CPUs and memory, random failures (a node removed, or a GPU), then
    for every allocation: the same repair plan (or none), victims 1-minimal, the same
    tiers; holding and merging it (and refilling spares) leave both in the same state."""
    engine, oracle = build(gangplace.Cluster, nodes), build(reference.Cluster, nodes)
    for _ in range(data.draw(st.integers(1, 5), label="jobs")):
        request = data.draw(resourced_jobs())
        note(repr(request))
        both = reserve_both(engine, oracle, request)
        if both is not None:
            engine.commit(both[0])
            oracle.commit(both[1])
    for _ in range(data.draw(st.integers(1, 3), label="failures")):
        if not fail_one(data, engine, oracle, "node"):
            return
    repaired = 0
    for allocation in engine.allocations():
        if engine.hold_status(allocation) != "allocated":
            continue
        assert engine.explain_repair(allocation) == oracle.explain_repair(allocation.id)
        widen, preempt = data.draw(st.booleans(), label="widen"), data.draw(st.booleans())
        plan = engine.plan_repair(allocation, widen=widen, preempt=preempt)
        expected = oracle.plan_repair(allocation.id, widen=widen, preempt=preempt)
        note(f"{allocation!r}: {plan!r} / {expected!r}")
        assert repair_tuple(plan) == repair_tuple(expected)
        if plan is None or expected is None or not plan.replacements:
            continue
        assert plan.victims == expected.victims
        for victim in plan.victims:
            assert not fits_without(oracle, allocation.id, expected, victim)
        merged = engine.commit_repair(engine.repair(plan))
        assert as_tuple(merged.placement) == as_tuple(
            oracle.commit_repair(oracle.repair(expected)).placement
        )
        repaired += 1
        if isinstance(allocation.request, GangRequest) and data.draw(st.booleans(), label="refill"):
            got = outcome_of(engine.reserve_spares, allocation.id, 1)
            assert got == outcome_of(oracle.reserve_spares, allocation.id, 1)
    event(f"repairs merged: {min(repaired, 2)}")
    for name in engine.nodes():
        mine, theirs = engine.node(name), oracle.node(name)
        assert (mine.free, mine.free_resources) == (theirs.free, theirs.free_resources)
    engine.check_invariants()


def outcome_of(call: Any, *args: Any) -> Any:
    """The spares an allocation has after ``call``, or the error type."""
    try:
        return tuple((p.node, tuple(p.gpus)) for p in call(*args).spares)
    except gangplace.GangplaceError as error:
        return type(error).__name__


@pytest.mark.parametrize("kind", BOTH)
def test_pods_without_gpus_take_no_spares_and_the_refusal_changes_nothing(kind: Any) -> None:
    """``reserve_spares`` of an allocation whose pods hold no GPU raises ``InvalidRequest``
    (as ``GangRequest(n, 0, spares=1)`` does) and leaves the snapshot byte-identical."""
    cluster = rack(kind)
    job = cluster.commit(cluster.reserve(GangRequest(2, 0, resources_per_pod={"cpu": 4_000})))
    before = cluster.snapshot()
    with pytest.raises(gangplace.InvalidRequest, match="spares"):
        cluster.reserve_spares(job, 1)
    assert cluster.snapshot() == before
