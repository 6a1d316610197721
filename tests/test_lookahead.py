"""docs/preemption.md "Looking ahead" (L1-L3): ``place_after`` and ``reserve(avoid=...)`` against
the reference, the minimal prefix by brute force on restored copies, and bad inputs. Every node
has CPUs and some gangs ask them: a released allocation gives its CPUs back too (docs/resources.md
"Node resources")."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import FakeClock, NodeSpec, as_tuple, full_state, twins
from hypothesis import event, given, settings
from hypothesis import strategies as st

import gangplace
from gangplace import (
    Cluster,
    GangRequest,
    InvalidRequest,
    MultiGangRequest,
    PodGroup,
    PodPlacement,
    UnknownNode,
    UnknownReservation,
    Unschedulable,
)

LEVELS = ("spine", "rack")
NODES = [
    NodeSpec(f"n{i}", 4, (f"s{i // 4}", f"r{i // 2}"), {"zone": "a" if i < 6 else "b"})
    for i in range(8)
]

gangs = st.builds(
    lambda pods, gpus, level, elastic, zone, cpu, milli: GangRequest(
        pods,
        1 if milli else gpus,
        required_level=level,
        min_pods=max(1, pods // 2) if elastic else None,
        selector={"zone": "b"} if zone else None,
        resources_per_pod={"cpu": cpu} if cpu else None,  # docs/resources.md "Node resources"
        gpu_milli=milli,  # docs/resources.md "Fractions of a GPU"
    ),
    st.integers(1, 6),
    st.sampled_from([1, 2, 4]),
    st.sampled_from([None, "rack", "spine", "node"]),
    st.booleans(),
    st.sampled_from([False, False, True]),
    st.sampled_from([0, 0, 1, 3]),
    st.sampled_from([None, None, None, 300, 600]),
)
CPUS = 8  # every node's CPUs: gangs asking 3 fit two per node by CPUs


@st.composite
def states(draw: Any) -> dict[str, Any]:
    """Holds to make, GPUs to fail, the request, how to group the allocations, avoid."""
    return {
        "holds": draw(st.lists(gangs, max_size=8)),
        "unhealthy": draw(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 3)), max_size=3)),
        "request": draw(gangs),
        "grouping": draw(st.lists(st.integers(0, 3), max_size=8)),
        "avoid": draw(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 3)), max_size=6)),
        "policy": draw(st.sampled_from(["best-fit", "first-fit"])),
    }


def _build(state: dict[str, Any]) -> tuple[Any, Any, list[list[str]], list[PodPlacement]]:
    engine, oracle = twins(LEVELS, NODES, state["policy"])
    for node in NODES:
        engine.update_node(node.name, resources={"cpu": CPUS})
        oracle.update_node(node.name, resources={"cpu": CPUS})
    ids: list[str] = []
    for request in state["holds"]:
        try:
            held = engine.commit(engine.reserve(request))
        except Unschedulable:
            continue
        other = oracle.commit(oracle.reserve(request))
        assert held.id == other.id
        ids.append(held.id)
    for node, gpu in state["unhealthy"]:
        engine.set_gpu_health(f"n{node}", gpu, False)
        oracle.set_gpu_health(f"n{node}", gpu, False)
    groups: list[list[str]] = [[] for _ in range(4)]
    for hold_id, group in zip(ids, state["grouping"], strict=False):
        groups[group].append(hold_id)
    avoid = [PodPlacement(f"n{node}", [gpu]) for node, gpu in state["avoid"]]
    return engine, oracle, groups, avoid


def _answer(found: Any) -> Any:
    return None if found is None else (found[0], as_tuple(found[1]))


@settings(max_examples=400)
@given(states())
def test_place_after_matches_the_reference(state: dict[str, Any]) -> None:
    engine, oracle, groups, avoid = _build(state)
    request = state["request"]
    before = engine.snapshot()
    got = engine.place_after(request, groups, avoid=avoid)
    assert _answer(got) == _answer(oracle.place_after(request, groups, avoid=avoid))
    assert engine.snapshot() == before  # a pure query
    engine.check_invariants()
    event("fits now" if got is not None and got[0] == 0 else "later" if got else "never")
    if request.gpu_milli is not None:
        event(f"shares: {'fits now' if got and got[0] == 0 else 'later' if got else 'never'}")


@settings(max_examples=300)
@given(states())
def test_reserve_avoiding_matches_the_reference(state: dict[str, Any]) -> None:
    engine, oracle, _, avoid = _build(state)
    request = state["request"]
    outcomes = []
    for cluster in (engine, oracle):
        try:
            outcomes.append(as_tuple(cluster.reserve(request, avoid=avoid).placement))
        except Unschedulable:
            outcomes.append(None)
    assert outcomes[0] == outcomes[1]
    if outcomes[0] is not None:
        taken = {(node, gpu) for node, gpus in outcomes[0][2] for gpu in gpus}
        assert not taken & {(pod.node, pod.gpus[0]) for pod in avoid}
        event("reserved")
    engine.check_invariants()
    assert full_state(engine) == full_state(oracle)


@settings(max_examples=200)
@given(states())
def test_the_prefix_is_the_first_that_fits_by_brute_force(state: dict[str, Any]) -> None:
    """Every shorter prefix, replayed on a restored copy with the avoided free GPUs adopted,
    leaves the gang without a placement; the answer's prefix gives the answer's."""
    engine, _, groups, avoid = _build(state)
    request = state["request"]
    found = engine.place_after(request, groups, avoid=avoid)
    limit = len(groups) + 1 if found is None else found[0] + 1
    for k in range(limit):
        copy = Cluster.restore(engine.snapshot())
        for group in groups[:k]:
            for hold_id in group:
                copy.release(hold_id)
        free = [
            PodPlacement(pod.node, [g for g in pod.gpus if g in copy.node(pod.node).free])
            for pod in avoid
        ]
        free = [pod for pod in free if pod.gpus]
        if free:
            try:
                copy.adopt(free)
            except gangplace.Conflict:  # one GPU named twice in avoid: adopt it once
                copy.adopt({(p.node, p.gpus[0]): p for p in free}.values())
        # An avoided shared GPU's room is taken by a share that fills it (docs/preemption.md L2).
        for node, gpu in {(pod.node, pod.gpus[0]) for pod in avoid}:
            info = copy.node(node)
            if gpu in info.shared and gpu not in info.unhealthy and info.shared[gpu] < 1000:
                copy.adopt([PodPlacement(node, [gpu])], gpu_milli=1000 - info.shared[gpu])
        placed = copy.place_gang(request)
        if found is not None and k == found[0]:
            assert as_tuple(placed) == as_tuple(found[1])
        else:
            assert placed is None, (k, found)


def _small() -> tuple[Cluster, Any, Any]:
    cluster = Cluster(("rack",), clock=lambda: 0.0)
    for n in range(4):
        cluster.add_node(f"a{n}", gpus=8, topology={"rack": "r0" if n < 2 else "r1"})
    first = cluster.commit(cluster.reserve(GangRequest(2, 8)))
    second = cluster.commit(cluster.reserve(GangRequest(1, 8)))
    return cluster, first, second


def test_a_gang_that_never_fits_gets_none_and_ended_ids_are_ignored() -> None:
    cluster, first, second = _small()
    assert cluster.place_after(GangRequest(5, 8), [[first], [second]]) is None
    cluster.release(second)
    k, placement = cluster.place_after(GangRequest(3, 8), [[second], [first]])  # type: ignore[misc]
    assert k == 2 and len(placement.nodes) == 3


def test_an_allocation_named_in_two_groups_stays_released_from_the_first() -> None:
    """Found by the state machine: the bisection undid the second mention of an allocation
    and took it back, although the first group (still in the prefix) released it. a3 is
    cordoned, so the free-GPU bound starts the search early and the galloping overshoots."""
    cluster, _, second = _small()
    cluster.cordon("a3")
    found = cluster.place_after(GangRequest(1, 8), [[], [], [second], [second]])
    assert found is not None and found[0] == 3 and found[1].nodes == ("a2",)
    assert cluster.node("a2").allocated == tuple(range(8))  # the overlay was undone


BAD: dict[str, tuple[Any, Any, dict[str, Any], type[Exception]]] = {
    "avoid-node": (GangRequest(1, 1), (), {"avoid": [PodPlacement("nope", [0])]}, UnknownNode),
    "avoid-gpu": (GangRequest(1, 1), (), {"avoid": [PodPlacement("a0", [9])]}, InvalidRequest),
    "avoid-type": (GangRequest(1, 1), (), {"avoid": [("a0", 1)]}, TypeError),
    "avoid-str": (GangRequest(1, 1), (), {"avoid": "a0"}, TypeError),
    "releases-str": (GangRequest(1, 1), "gp-1", {}, TypeError),
    "releases-flat": (GangRequest(1, 1), [7], {}, TypeError),
    "releases-id": (GangRequest(1, 1), [["not an id"]], {}, UnknownReservation),
    "level": (GangRequest(1, 1, required_level="pod"), (), {}, InvalidRequest),
    "roles": (MultiGangRequest((PodGroup("w", 1, 1),)), (), {}, TypeError),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_inputs_raise_typed_errors_and_change_nothing(case: str) -> None:
    cluster, _, _ = _small()
    request, releases, keywords, error = BAD[case]
    before = cluster.snapshot()
    with pytest.raises(error):
        cluster.place_after(request, releases, **keywords)
    assert cluster.snapshot() == before
    if "avoid" in keywords:
        with pytest.raises(error):
            cluster.reserve(request, avoid=keywords["avoid"])
        assert cluster.snapshot() == before


def test_avoid_with_a_multi_role_gang_or_a_placement_is_refused() -> None:
    cluster, _, _ = _small()
    before = cluster.snapshot()
    placement = cluster.place_gang(GangRequest(1, 1))
    assert placement is not None
    for request in (MultiGangRequest((PodGroup("w", 1, 1),)), placement):
        with pytest.raises(TypeError):
            cluster.reserve(request, avoid=[PodPlacement("a0", [0])])
    assert cluster.snapshot() == before


def test_a_placement_in_avoid_stands_for_its_pods() -> None:
    """docs/preemption.md L3: ``avoid=[placement]`` keeps the gang off every pod of the placement,
    as ``avoid=placement.pods`` does, on the engine and the reference alike."""
    specs = [NodeSpec(f"a{n}", 8, ("r0" if n < 2 else "r1",)) for n in range(4)]
    engine, oracle = twins(("rack",), specs, "best-fit")
    for cluster in (engine, oracle):
        shadow = cluster.place_gang(GangRequest(2, 8, required_level="rack"))
        assert shadow is not None
        whole = cluster.place_after(GangRequest(2, 8), avoid=[shadow])
        by_pods = cluster.place_after(GangRequest(2, 8), avoid=shadow.pods)
        assert whole is not None and by_pods is not None
        assert as_tuple(whole[1]) == as_tuple(by_pods[1])
        assert not set(whole[1].nodes) & set(shadow.nodes)
        held = cluster.reserve(GangRequest(1, 8), avoid=[shadow, PodPlacement("a2", [0])])
        assert held.placement.nodes == ("a3",)
    with pytest.raises(TypeError, match="PodPlacement or a Placement"):
        engine.reserve(GangRequest(1, 1), avoid=[("a0", 1)])


@pytest.mark.parametrize("kind", [Cluster, gangplace.reference.Cluster])
def test_a_release_gives_its_cpus_back_too(kind: Any) -> None:
    """docs/resources.md "Node resources": the node's GPUs are free now but its CPUs are held by a
    job without GPUs; the gang fits once that job ends (prefix 1), and nothing changed."""
    cluster = kind(("rack",), clock=FakeClock())
    cluster.add_node("a", gpus=4, topology={"rack": "r0"}, resources={"cpu": 8})
    service = cluster.commit(cluster.reserve(GangRequest(1, 0, resources_per_pod={"cpu": 6})))
    other = cluster.commit(cluster.reserve(GangRequest(1, 1)))
    gang = GangRequest(1, 2, resources_per_pod={"cpu": 4})
    before = cluster.snapshot()
    found = cluster.place_after(gang, [[other], [service, service]])
    assert found is not None and found[0] == 2
    assert found[1].pods[0].node == "a"
    assert cluster.place_after(gang, [[other]]) is None
    assert cluster.snapshot() == before
    assert cluster.node("a").free_resources == {"cpu": 2}


@pytest.mark.parametrize("kind", [Cluster, gangplace.reference.Cluster])
def test_shares_end_with_their_allocations_and_avoided_shared_gpus_stay_out(kind: Any) -> None:
    """docs/resources.md "Fractions of a GPU": a fractional gang waits for the allocations whose
    end makes room for it; a GPU is free for a whole pod once its last share ends; an avoided
    shared GPU takes no share, even once its own shares end; nothing changes."""
    cluster = kind(("rack",), clock=FakeClock())
    cluster.add_node("a", gpus=2, topology={"rack": "r0"})
    cluster._use_sequential_ids(1)
    whole = cluster.commit(cluster.reserve(GangRequest(1, 1)))  # GPU 0
    left = cluster.adopt([PodPlacement("a", [1])], gpu_milli=500)
    right = cluster.adopt([PodPlacement("a", [1])], gpu_milli=300)
    before = cluster.snapshot()
    shares = GangRequest(3, 1, gpu_milli=400)
    found = cluster.place_after(shares, [[left], [whole], [right]])
    assert found is not None and found[0] == 2  # GPU 1 (300 used) holds one, GPU 0 two
    assert [pod.gpus for pod in found[1].pods] == [(0,), (0,), (1,)]
    found = cluster.place_after(GangRequest(1, 2), [[left], [whole], [right]])
    assert found is not None and found[0] == 3  # GPU 1 is free once both shares end
    avoid = [PodPlacement("a", [1])]
    assert cluster.place_after(GangRequest(1, 1, gpu_milli=100), [[left]], avoid=avoid) is None
    found = cluster.place_after(GangRequest(1, 1, gpu_milli=100), [[whole]], avoid=avoid)
    assert found is not None and found[0] == 1 and found[1].pods[0].gpus == (0,)
    assert cluster.place_after(GangRequest(2, 1), [[left, right]], avoid=avoid) is None
    with pytest.raises(Unschedulable):
        cluster.reserve(GangRequest(1, 1, gpu_milli=100), avoid=avoid)
    assert cluster.snapshot() == before
    assert cluster.node("a").shared == {1: 800}


shared_gangs = st.builds(
    lambda pods, milli, level: GangRequest(
        pods, 1, gpu_milli=milli, required_level=level, priority=0
    ),
    st.integers(1, 8),
    st.sampled_from([None, 250, 300, 600, 700]),
    st.sampled_from([None, "rack", "node"]),
)


@settings(max_examples=300)
@given(
    st.lists(shared_gangs, min_size=4, max_size=14),
    shared_gangs,
    st.lists(st.integers(0, 3), max_size=14),
    st.lists(st.tuples(st.integers(0, 7), st.integers(0, 3)), max_size=4),
)
def test_place_after_with_shares_matches_the_reference(
    holds: list[GangRequest],
    request: GangRequest,
    grouping: list[int],
    avoid: list[tuple[int, int]],
) -> None:
    """Crowded clusters of whole and fractional allocations: the same prefix and placement as
    the reference's linear try, for whole and fractional gangs, and nothing changed."""
    state = {"holds": holds, "unhealthy": [], "request": request, "grouping": grouping}
    state.update(avoid=avoid, policy="best-fit")
    engine, oracle, groups, avoided = _build(state)
    before = engine.snapshot()
    got = engine.place_after(request, groups, avoid=avoided)
    assert _answer(got) == _answer(oracle.place_after(request, groups, avoid=avoided))
    assert engine.snapshot() == before
    engine.check_invariants()
    kind = "shares" if request.gpu_milli else "whole"
    event(f"{kind}: {'fits now' if got and got[0] == 0 else 'later' if got else 'never'}")
