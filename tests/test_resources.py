"""Node resources beside GPUs (docs/resources.md "Node resources", issue 28 item 1).

A node holds ``min(free GPUs // g, free r // r per pod for every r)`` pods; holds keep what
their pods ask until they end; the engine agrees with ``gangplace.reference`` on random
clusters; pod counts match a brute force on tiny clusters; bad inputs raise typed errors and
leave the snapshot byte-identical; the operations that do not count resources yet refuse
such requests instead of planning wrongly.
"""

from __future__ import annotations

import pickle
from typing import Any

import hypothesis.strategies as st
import numpy as np
import pytest
from helpers import FakeClock, as_tuple
from hypothesis import given, note

import gangplace
from gangplace import (
    Conflict,
    GangRequest,
    InvalidRequest,
    Unschedulable,
    reference,
)

GIB = 2**30
LEVELS = ("rack",)


def small_cluster(cluster_class: Any = gangplace.Cluster, **kwargs: Any) -> Any:
    """Two racks of two 8-GPU nodes: r1-a has 10 CPUs, the others 96; all 512 GiB (a fake
    clock, so that snapshots compare byte for byte)."""
    cluster = cluster_class(LEVELS, **{"clock": FakeClock(), **kwargs})
    for rack in ("r1", "r2"):
        for name in ("a", "b"):
            cpu = 10_000 if (rack, name) == ("r1", "a") else 96_000
            cluster.add_node(
                f"{rack}-{name}",
                gpus=8,
                topology={"rack": rack},
                resources={"cpu": cpu, "memory": 512 * GIB},
            )
    return cluster


def test_a_gpu_only_count_would_be_wrong() -> None:
    """Two 4-GPU pods asking 8 CPUs each: r1-a has the GPUs for both but CPUs for one."""
    cluster = small_cluster()
    gpu_only = cluster.place_gang(GangRequest(2, 4, required_level="node"))
    assert gpu_only is not None and gpu_only.domain == ("r1", "r1-a")
    asking = GangRequest(2, 4, required_level="node", resources_per_pod={"cpu": 8_000})
    placement = cluster.place_gang(asking)
    assert placement is not None and placement.domain == ("r1", "r1-b")
    assert cluster.capacity_for(GangRequest(1, 4, resources_per_pod={"cpu": 8_000})) == 7
    assert cluster.capacity_for(GangRequest(1, 4)) == 8


def test_holds_keep_their_resources_until_they_end() -> None:
    cluster = small_cluster(clock=FakeClock())
    request = GangRequest(2, 2, resources_per_pod={"cpu": 4_000, "memory": 100 * GIB})
    held = cluster.reserve(request)
    node = held.placement.pods[0].node
    assert node == "r1-a"  # best fit: fewest free GPUs first, all tied; path order
    assert cluster.node(node).free_resources == {"cpu": 2_000, "memory": 312 * GIB}
    allocation = cluster.commit(held)
    assert cluster.node(node).free_resources == {"cpu": 2_000, "memory": 312 * GIB}
    cluster.release_pods(allocation, [0])
    assert cluster.node(node).free_resources == {"cpu": 6_000, "memory": 412 * GIB}
    stats = cluster.stats()
    assert stats.resources == {"cpu": 298_000, "memory": 2048 * GIB}
    assert stats.free_resources == {"cpu": 294_000, "memory": 1948 * GIB}
    state = cluster.gpu_state()
    assert list(state["node"]) == ["r1-a", "r1-b", "r2-a", "r2-b"]
    assert list(state["resources"]["cpu"]) == [10_000, 96_000, 96_000, 96_000]
    assert list(state["free_resources"]["cpu"]) == [6_000, 96_000, 96_000, 96_000]
    cluster.release(allocation)
    assert cluster.node(node).free_resources == {"cpu": 10_000, "memory": 512 * GIB}
    assert cluster.node(node).resources == {"cpu": 10_000, "memory": 512 * GIB}
    assert cluster.stats().free_resources == cluster.stats().resources
    cluster.check_invariants()


def test_spares_ask_what_the_gang_asks() -> None:
    cluster = small_cluster()
    held = cluster.reserve(GangRequest(1, 1, spares=1, resources_per_pod={"cpu": 5_000}))
    assert held.placement.pods[0].node == held.spares[0].node == "r1-a"
    assert cluster.node("r1-a").free_resources["cpu"] == 0


def test_adopt_takes_resources_and_refuses_more_than_is_free() -> None:
    cluster = small_cluster()
    adopted = cluster.adopt([("r1-a", 1), ("r1-a", 1)], resources={"cpu": 4_000})
    assert cluster.node("r1-a").free_resources["cpu"] == 2_000
    before = cluster.snapshot()
    with pytest.raises(Conflict, match=r'node "r1-a" has \{cpu=2000, memory=549755813888\}'):
        cluster.adopt([("r1-a", 1)], resources=[{"cpu": 3_000}])
    assert cluster.snapshot() == before
    grown = cluster.adopt([("r1-a", 1)], resources=[{"cpu": 2_000}], into=adopted)
    assert len(grown.placement.pods) == 3
    assert cluster.node("r1-a").free_resources["cpu"] == 0
    cluster.release(grown)
    assert cluster.node("r1-a").free_resources["cpu"] == 10_000


def test_explain_names_the_resource_that_binds() -> None:
    cluster = small_cluster()
    request = GangRequest(4, 2, required_level="node", resources_per_pod={"cpu": 40_000})
    explanation = cluster.explain(request)
    assert not explanation.fits
    node = explanation.levels[0]
    assert (node.level, node.capacity, node.limited_by) == ("node", 2, "cpu")
    assert "best node r1/r1-b holds 2 of 4, limited by cpu" in explanation.summary
    assert explanation.excluded["resources"] == 1  # r1-a: 10 CPUs, no pod of 40
    with pytest.raises(Unschedulable, match="limited by cpu"):
        cluster.reserve(request)


def test_snapshot_round_trip_and_pickle_keep_resources() -> None:
    clock = FakeClock()
    cluster = small_cluster(clock=clock)
    cluster.reserve(GangRequest(2, 2, resources_per_pod={"cpu": 1_000, "rdma/ib": 0}))
    cluster.adopt([("r2-b", 1)], resources={"memory": GIB})
    data = cluster.snapshot()
    restored = gangplace.Cluster.restore(data, clock=clock)
    assert restored.snapshot() == data
    assert restored.node("r2-b").free_resources == cluster.node("r2-b").free_resources
    restored.check_invariants()
    request = GangRequest(1, 1, resources_per_pod={"cpu": 500})
    assert pickle.loads(pickle.dumps(request)) == request
    assert request.resources_per_pod == {"cpu": 500}
    assert "resources_per_pod={'cpu': 500}" in repr(request)


def test_update_node_and_from_arrays_carry_resources() -> None:
    cluster = small_cluster()
    cluster.reserve(GangRequest(1, 1, resources_per_pod={"cpu": 8_000}))
    cluster.update_node("r1-a", resources={"cpu": 4_000})  # below what runs: full for cpu
    info = cluster.node("r1-a")
    assert info.resources == {"cpu": 4_000} and info.free_resources == {"cpu": 0}
    cluster.check_invariants()
    built = gangplace.Cluster.from_arrays(
        LEVELS,
        ["a", "b"],
        [["r1", "r1"]],
        np.array([8, 8]),
        np.array([0, 0], dtype=np.uint64),
        resources={"cpu": np.array([16_000, 0])},
    )
    assert built.node("a").resources == {"cpu": 16_000} and built.node("b").resources == {}
    assert built.capacity_for(GangRequest(1, 1, resources_per_pod={"cpu": 4_000})) == 4


@pytest.mark.parametrize("asks", [None, {"cpu": 1_000}])
def test_defragmentation_never_moves_a_hold_whose_pods_ask_resources(
    asks: dict[str, int] | None,
) -> None:
    """Node a holds a movable 4-GPU job, b a fixed 8-GPU one, c has 4 free GPUs: an 8-GPU
    pod fits only if the job moves to c, which it may only when it asks no resources."""
    cluster = gangplace.Cluster(LEVELS)
    for name in "abc":
        cluster.add_node(name, gpus=8, topology={"rack": "r"}, resources={"cpu": 64_000})
    mover = cluster.commit(cluster.reserve(GangRequest(1, 4, movable=True, resources_per_pod=asks)))
    assert mover.placement.pods[0].node == "a"
    cluster.adopt([("b", 8)], movable=False)
    cluster.adopt([("c", 4)], movable=False)
    plan = cluster.plan_defrag(GangRequest(1, 8, priority=1))
    if asks is None:
        assert plan is not None and [m.allocation for m in plan.moves] == [mover.id]
    else:
        assert plan is None


BAD_REQUESTS: list[tuple[dict[Any, Any], type[Exception]]] = [
    ({"cpu": -1}, InvalidRequest),
    ({"cpu": 2**50 + 1}, InvalidRequest),
    ({"cpu": 2**70}, InvalidRequest),
    ({"": 1}, InvalidRequest),
    ({"nvidia.com/gpu": 1}, InvalidRequest),
    ({"x" * 254: 1}, InvalidRequest),
    ({f"r{index}": 1 for index in range(33)}, InvalidRequest),
    ({"cpu": 1.5}, TypeError),
    ({"cpu": True}, TypeError),
    ({1: 1}, TypeError),
]


@pytest.mark.parametrize(("resources", "error"), BAD_REQUESTS)
def test_bad_resources_raise_typed_errors(resources: dict[Any, Any], error: type) -> None:
    cluster = small_cluster()
    before = cluster.snapshot()
    with pytest.raises(error):
        GangRequest(1, 1, resources_per_pod=resources)
    with pytest.raises(error):
        cluster.add_node("new", gpus=8, topology={"rack": "r9"}, resources=resources)
    with pytest.raises(error):
        cluster.update_node("r1-a", resources=resources)
    with pytest.raises(error):
        cluster.adopt([("r1-a", 1)], resources=resources)
    assert cluster.snapshot() == before


@pytest.mark.parametrize("call", ["place_gang", "reserve", "capacity_for", "explain"])
def test_unknown_resource_names_on_a_request_are_invalid(call: str) -> None:
    cluster = small_cluster()
    before = cluster.snapshot()
    with pytest.raises(InvalidRequest, match=r"'cpus'|\"cpus\""):
        getattr(cluster, call)(GangRequest(1, 1, resources_per_pod={"cpus": 1}))
    assert cluster.snapshot() == before
    with pytest.raises(TypeError):
        cluster.adopt([("r1-a", 1)], resources="cpu")
    with pytest.raises(InvalidRequest, match="resources for 2"):
        cluster.adopt([("r1-a", 1)], resources=[{"cpu": 1}, {"cpu": 1}])
    assert cluster.snapshot() == before


# ---------------------------------------------------------------- differential and brute force

NAMES = ("cpu", "memory", "rdma/ib")


@st.composite
def resourced_clusters(draw: st.DrawFn) -> list[tuple[str, int, str, dict[str, int]]]:
    nodes = []
    for index in range(draw(st.integers(1, 10))):
        gpus = draw(st.sampled_from((1, 2, 4, 8)))
        rack = draw(st.sampled_from(("r1", "r2", "r3")))
        resources = {name: draw(st.integers(0, 12)) for name in NAMES[:2] if draw(st.booleans())}
        if draw(st.integers(0, 3)) == 0:
            resources["rdma/ib"] = draw(st.integers(0, 4))
        nodes.append((f"n{index}", gpus, rack, resources))
    return nodes


def asks(draw: st.DrawFn, known: set[str]) -> dict[str, int]:
    return {name: draw(st.integers(1, 5)) for name in sorted(known) if draw(st.booleans())}


def build(cluster_class: Any, nodes: list[tuple[str, int, str, dict[str, int]]]) -> Any:
    cluster = cluster_class(LEVELS, clock=FakeClock())
    for name, gpus, rack, resources in nodes:
        cluster.add_node(name, gpus=gpus, topology={"rack": rack}, resources=resources)
    cluster._use_sequential_ids(1)
    return cluster


@given(data=st.data(), nodes=resourced_clusters())
def test_engine_agrees_with_reference_on_resources(
    data: st.DataObject, nodes: list[tuple[str, int, str, dict[str, int]]]
) -> None:
    engine, oracle = build(gangplace.Cluster, nodes), build(reference.Cluster, nodes)
    known = {name for *_, resources in nodes for name in resources}
    optional = {name: st.integers(1, 5) for name in sorted(known)}
    for _ in range(data.draw(st.integers(1, 6), label="steps")):
        resources = data.draw(st.fixed_dictionaries({}, optional=optional), label="resources")
        # Pods without GPUs (gpus_per_pod=0) must ask resources.
        sizes = (0, 1, 1, 2, 4) if resources else (1, 1, 2, 4)
        request = GangRequest(
            data.draw(st.integers(1, 6), label="pods"),
            data.draw(st.sampled_from(sizes), label="gpus_per_pod"),
            min_pods=data.draw(st.none() | st.just(1), label="min_pods"),
            required_level=data.draw(st.sampled_from((None, "node", "rack")), label="level"),
            spares=data.draw(st.sampled_from((0, 0, 1)), label="spares") if sizes[0] else 0,
            resources_per_pod=resources,
        )
        note(repr(request))
        assert as_tuple(engine.place_gang(request)) == as_tuple(oracle.place_gang(request))
        assert engine.capacity_for(request) == oracle.capacity_for(request)
        try:
            held = engine.reserve(request)
        except Unschedulable as error:
            with pytest.raises(Unschedulable) as expected:
                oracle.reserve(request)
            assert error.reason == expected.value.reason
            continue
        other = oracle.reserve(request)
        assert as_tuple(held.placement) == as_tuple(other.placement)
        if data.draw(st.booleans(), label="commit"):
            engine.commit(held)
            oracle.commit(other)
        for name, *_ in nodes:
            assert engine.node(name).free_resources == oracle.node(name).free_resources
        engine.check_invariants()


def brute_force_pods(gpus: int, resources: dict[str, int], g: int, need: dict[str, int]) -> int:
    """The most pods of ``g`` GPUs asking ``need`` one empty node holds, by trying every
    count (a pod never spans nodes; every pod takes its own GPUs and resources)."""
    best = 0
    for pods in range(0, 200):
        fits = pods * g <= gpus and all(
            pods * quantity <= resources.get(name, 0) for name, quantity in need.items()
        )
        if fits:
            best = pods
    return best


@given(data=st.data(), nodes=resourced_clusters())
def test_pod_counts_match_a_brute_force(
    data: st.DataObject, nodes: list[tuple[str, int, str, dict[str, int]]]
) -> None:
    """On empty tiny clusters, the largest node, rack and cluster capacities that ``explain``
    reports for a gang too big to fit equal the brute-force counts."""
    engine = build(gangplace.Cluster, nodes)
    known = {name for *_, resources in nodes for name in resources}
    need = {name: data.draw(st.integers(1, 6), label=name) for name in sorted(known)}
    need = {name: quantity for name, quantity in need.items() if data.draw(st.booleans())}
    g = data.draw(st.sampled_from((0, 1, 2, 4) if need else (1, 2, 4)), label="gpus_per_pod")
    per_node = {
        name: brute_force_pods(gpus, resources, g, need) for name, gpus, rack, resources in nodes
    }
    racks: dict[str, int] = {}
    for name, _, rack, _ in nodes:
        racks[rack] = racks.get(rack, 0) + per_node[name]
    explanation = engine.explain(GangRequest(10_000, g, resources_per_pod=need or None))
    levels = {level.level: level.capacity for level in explanation.levels}
    assert levels["node"] == max(per_node.values())
    assert levels["rack"] == max(racks.values())
    assert levels["cluster"] == sum(per_node.values())


@pytest.mark.parametrize("kind", [gangplace.Cluster, reference.Cluster])
def test_pods_without_gpus_hold_only_resources_and_are_lost_with_their_node(kind: Any) -> None:
    """docs/resources.md "Node resources": ``(node, 0)`` adopts a pod without GPUs that asks
    resources; it ranks as GPU 0 of its node, is lost when the node goes, and survives snapshots."""
    cluster = small_cluster(kind)
    with pytest.raises(InvalidRequest, match="takes no GPUs and asks no resources"):
        cluster.adopt([("r1-b", 0)])
    allocation = cluster.adopt(
        [("r1-b", 1), ("r1-b", 0), ("r2-a", 0)],
        resources=[{"cpu": 1_000}, {"cpu": 2_000, "memory": GIB}, {"cpu": 3_000}],
    )
    assert [(p.node, tuple(p.gpus)) for p in allocation.placement.pods] == [
        ("r1-b", ()),
        ("r1-b", (0,)),
        ("r2-a", ()),
    ]
    assert cluster.node("r1-b").free_resources == {"cpu": 93_000, "memory": 511 * GIB}
    assert cluster.node("r2-a").allocated == ()
    assert cluster.remove_node("r2-a") == [allocation.id]
    (after,) = cluster.allocations()
    assert after.lost == (2,)
    if kind is gangplace.Cluster:
        restored = gangplace.Cluster.restore(cluster.snapshot())
        assert restored.allocations()[0].lost == (2,)
        assert restored.node("r1-b").free_resources == cluster.node("r1-b").free_resources
        restored.check_invariants()
    cluster.release_pods(after, [0])
    assert cluster.node("r1-b").free_resources == {"cpu": 95_000, "memory": 512 * GIB}
    cluster.release(after)
    assert cluster.node("r1-b").free_resources == {"cpu": 96_000, "memory": 512 * GIB}


@pytest.mark.parametrize("kind", [gangplace.Cluster, reference.Cluster])
def test_pods_without_gpus_are_placed_by_their_resources(kind: Any) -> None:
    """docs/resources.md "Node resources": ``gpus_per_pod=0`` places pods by their resources alone
    (a MIG profile, a launcher's CPUs); it needs resources and takes no spares nor NUMA rule."""
    mig = "nvidia.com/mig-1g.10gb"
    cluster = kind(LEVELS, clock=FakeClock())
    cluster.add_node("a", gpus=8, topology={"rack": "r1"}, resources={mig: 7, "cpu": 8_000})
    cluster.add_node("b", gpus=8, topology={"rack": "r1"}, resources={"cpu": 64_000})
    slices = GangRequest(8, 0, resources_per_pod={mig: 1})
    assert cluster.place_gang(slices) is None  # 7 slices only
    held = cluster.reserve(GangRequest(7, 0, required_level="node", resources_per_pod={mig: 1}))
    assert {(p.node, tuple(p.gpus)) for p in held.placement.pods} == {("a", ())}
    assert cluster.node("a").free == tuple(range(8))  # its GPUs stay free
    assert cluster.node("a").free_resources[mig] == 0
    assert cluster.capacity_for(GangRequest(1, 0, resources_per_pod={"cpu": 4_000})) == 18
    with pytest.raises(Unschedulable, match="gang of 1 pod x 0 GPUs does not fit"):
        cluster.reserve(GangRequest(1, 0, resources_per_pod={mig: 1}))
    cluster.commit(held)
    cluster.check_invariants()


def test_gpu_less_requests_need_resources_and_no_spares_or_numa() -> None:
    for bad in (
        {},
        {"resources_per_pod": {"cpu": 1}, "spares": 1},
        {"resources_per_pod": {"cpu": 1}, "numa": "single"},
    ):
        with pytest.raises(InvalidRequest, match=r"gpus_per_pod|without GPUs"):
            GangRequest(1, 0, **bad)
    with pytest.raises(InvalidRequest):
        gangplace.PodGroup("w", 1, 0)


def test_the_scheduler_keeps_a_jobs_resources_in_every_form() -> None:
    """docs/resources.md "Node resources": a queued gang keeps ``resources_per_pod`` (the Scheduler
    used to rebuild its forms without them); its backfill reservation counts GPUs only, and
    it never makes room by preemption; pods without GPUs are refused at submit."""
    from gangplace import Scheduler

    cluster = small_cluster(clock=lambda: 0.0)
    scheduler = Scheduler(cluster, clock=lambda: 0.0, backfill="conservative", preemption=True)
    asking = GangRequest(2, 4, required_level="node", resources_per_pod={"cpu": 8_000})
    scheduler.submit("a", asking, walltime=10)
    decisions = scheduler.cycle(0.0)
    (started,) = decisions.started
    assert started.allocation.placement.domain == ("r1", "r1-b")  # r1-a: 10 CPUs, not 16
    assert isinstance(started.allocation.request, GangRequest)
    assert started.allocation.request.resources_per_pod == {"cpu": 8_000}
    assert cluster.node("r1-b").free_resources["cpu"] == 80_000
    for index in range(3):
        scheduler.submit(f"x{index}", asking, walltime=10)
    decisions = scheduler.cycle(0.0)
    assert len(decisions.started) == 2 and decisions.head == "x2"  # r2-a, r2-b; none left
    with pytest.raises(InvalidRequest, match="gangs with GPUs"):
        scheduler.submit("cpu-only", GangRequest(1, 0, resources_per_pod={"cpu": 1}))
    cluster.check_invariants()


def test_a_job_short_of_cpus_does_not_block_one_asking_fewer() -> None:
    """The Scheduler's walk skips the rest of a class once one job of it failed; jobs of the
    same shape asking different resources are different classes (they were not)."""
    from gangplace import Scheduler

    cluster = gangplace.Cluster(LEVELS)
    cluster.add_node("n", gpus=8, topology={"rack": "r1"}, resources={"cpu": 20_000})
    cluster.adopt([("n", 1)], resources={"cpu": 12_000})  # 8 cores left
    scheduler = Scheduler(cluster, clock=lambda: 0.0, order="fifo", backfill="any")
    scheduler.submit("greedy", GangRequest(1, 1, resources_per_pod={"cpu": 10_000}))
    scheduler.submit("modest", GangRequest(1, 1, resources_per_pod={"cpu": 2_000}))
    decisions = scheduler.cycle(0.0)
    assert [started.job_id for started in decisions.started] == ["modest"]


@pytest.mark.parametrize("kind", [gangplace.Cluster, reference.Cluster])
def test_a_node_of_mig_slices_only_has_zero_gpus(kind: Any) -> None:
    """docs/resources.md "Node resources", MIG: a node whose every GPU is partitioned is added with
    0 GPUs and its profiles as resources; MIG pods go there, whole-GPU pods never; 0 GPUs
    without resources is still refused (a node offering nothing is a mistake)."""
    mig = "nvidia.com/mig-1g.10gb"
    cluster = kind(LEVELS, clock=FakeClock())
    cluster.add_node("sliced", gpus=0, topology={"rack": "r1"}, resources={mig: 7})
    cluster.add_node("whole", gpus=2, topology={"rack": "r1"})
    before = cluster.snapshot()
    with pytest.raises(InvalidRequest):
        cluster.add_node("empty", gpus=0, topology={"rack": "r1"})
    with pytest.raises(InvalidRequest):
        cluster.add_node("zeros", gpus=0, topology={"rack": "r1"}, resources={mig: 0})
    assert cluster.snapshot() == before
    assert cluster.node("sliced").gpus == 0 and cluster.stats().total == 2
    held = cluster.reserve(GangRequest(7, 0, resources_per_pod={mig: 1}))
    assert {pod.node for pod in held.placement.pods} == {"sliced"}
    assert cluster.place_gang(GangRequest(1, 1, required_level="node")).nodes == ("whole",)
    assert cluster.place_gang(GangRequest(3, 1)) is None
    if kind is gangplace.Cluster:
        cluster.check_invariants()
        restored = gangplace.Cluster.restore(cluster.snapshot(), clock=FakeClock())
        assert restored.node("sliced").free_resources == {mig: 0}
