"""Slices (docs/shapes.md "Slices"): the rule on every placement, the reference, brute force, bad
input.

Every placement a test makes is checked against the rule itself: ranks ``j*k`` to
``(j+1)*k - 1`` of every layer lie in one domain of the layer's level. The differential test
compares the core with ``gangplace.reference`` on random clusters; the brute-force test
enumerates every way of counting pods onto the nodes of tiny clusters and asks whether any
of them satisfies the layers, which must agree with whether the core finds a placement.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from typing import Any

import hypothesis.strategies as st
import pytest
from helpers import FakeClock, NodeSpec, as_tuple, fill, tree
from hypothesis import given, note

import gangplace
from gangplace import Cluster, GangRequest, InvalidRequest, Unschedulable, reference

LEVELS = ("spine", "rack")


def slices_hold(
    cluster: Any, placement: Any, slices: Sequence[tuple[str, int]], levels: Sequence[str]
) -> bool:
    """Whether every layer's rank blocks lie in one domain of its level."""
    for level, size in slices:
        depth = len(levels) + 1 if level == "node" else list(levels).index(level) + 1
        for start in range(0, len(placement.pods), size):
            block = placement.pods[start : start + size]
            domains = {path_of(cluster, pod.node, levels)[:depth] for pod in block}
            if len(domains) != 1:
                return False
    return True


def path_of(cluster: Any, node: str, levels: Sequence[str]) -> tuple[str, ...]:
    info = cluster.node(node)
    return (*(info.topology[level] for level in levels), node)


def nvl72(racks: int = 4) -> Cluster:
    """GB200 NVL72-like racks: 18 trays of 4 GPUs per rack, two racks per spine (a fake
    clock, so that snapshots of equal states are equal bytes)."""
    shape = (max(racks // 2, 1), min(racks, 2), 18)
    return tree(("spine", "rack"), shape, gpus=4, clock=FakeClock())


# --- scenarios -------------------------------------------------------------------------------


def test_nvl72_gang_lands_one_slice_per_rack_and_keeps_two_trays_free() -> None:
    cluster = nvl72(4)
    request = GangRequest(64, 4, slices=(("rack", 16),))
    placement = cluster.place_gang(request)
    assert placement is not None
    assert slices_hold(cluster, placement, request.slices, LEVELS)
    assert len(set(placement.slices)) == 4  # one 16-pod slice in each of the 4 racks
    cluster.reserve(placement)
    for rack in {path[:2] for path in placement.slices}:
        free = [
            info.free
            for name in cluster.nodes()
            if (info := cluster.node(name)).topology["rack"] == rack[1]
        ]
        assert sum(1 for count in free if len(count) == 4) == 2  # two whole trays left per rack


def test_slices_break_a_gang_that_would_fit_unsliced() -> None:
    # Two racks of 3 nodes x 4 GPUs: 6 pods of 4 GPUs fit across both racks, but slices of 4
    # pods per rack do not (each rack holds only 3).
    cluster = tree(LEVELS, (1, 2, 3), gpus=4)
    assert cluster.place_gang(GangRequest(6, 4)) is not None
    with pytest.raises(Unschedulable, match="in slices of 4 pods per rack"):
        cluster.reserve(GangRequest(8, 4, slices=(("rack", 4),)))
    placement = cluster.place_gang(GangRequest(6, 4, slices=(("rack", 3),)))
    assert placement is not None and placement.slices == (("s0", "s0-r0"), ("s0", "s0-r1"))


def test_three_layers_and_node_as_the_innermost_level() -> None:
    cluster = tree(LEVELS, (2, 2, 4), gpus=8)
    request = GangRequest(32, 2, slices=(("spine", 16), ("rack", 8), ("node", 4)))
    placement = cluster.place_gang(request)
    assert placement is not None
    assert slices_hold(cluster, placement, request.slices, LEVELS)
    assert len(placement.slices) == 8 and all(len(path) == 3 for path in placement.slices)


def test_elastic_slice_gangs_shrink_in_whole_outer_slices() -> None:
    cluster = tree(LEVELS, (1, 3, 2), gpus=4)  # 3 racks x 2 nodes x 4 GPUs: 2 pods of 4/rack
    request = GangRequest(8, 4, min_pods=4, slices=(("rack", 2),))
    placement = cluster.place_gang(request)
    assert placement is not None and len(placement) == 6  # 3 whole slices, not 8 pods


def test_reason_counts_whole_slices() -> None:
    cluster = tree(LEVELS, (1, 2, 3), gpus=4)
    with pytest.raises(Unschedulable) as raised:
        cluster.reserve(GangRequest(8, 4, slices=(("rack", 4),), name="train"))
    assert raised.value.reason == reference_reason(
        LEVELS, (1, 2, 3), 4, GangRequest(8, 4, slices=(("rack", 4),), name="train")
    )
    assert "in slices of 4 pods per rack" in raised.value.reason
    assert "no rack holds a slice" in raised.value.reason


def reference_reason(
    levels: Sequence[str], shape: Sequence[int], gpus: int, request: GangRequest
) -> str:
    from helpers import regular_nodes

    oracle = reference.Cluster(levels)
    fill(oracle, levels, regular_nodes(levels, shape, gpus))
    with pytest.raises(Unschedulable) as raised:
        oracle.reserve(request)
    return raised.value.reason


def test_slice_gangs_survive_reserve_commit_snapshot_and_pickle() -> None:
    cluster = nvl72(4)
    request = GangRequest(32, 4, slices=(("rack", 16),), name="sliced")
    allocation = cluster.commit(cluster.reserve(request))
    assert allocation.request == request
    restored = Cluster.restore(cluster.snapshot())
    (kept,) = restored.allocations()
    assert kept.placement.slices == allocation.placement.slices
    assert isinstance(kept.request, GangRequest) and kept.request.slices == (("rack", 16),)
    assert pickle.loads(pickle.dumps(request)) == request
    placement = cluster.place_gang(GangRequest(16, 4, slices=(("rack", 8),)))
    assert placement is not None
    assert pickle.loads(pickle.dumps(placement)).slices == placement.slices


def test_preemption_and_defragmentation_refuse_slice_gangs() -> None:
    cluster = nvl72(2)
    before = cluster.snapshot()
    request = GangRequest(16, 4, slices=(("rack", 16),))
    with pytest.raises(InvalidRequest, match="plan_preemption does not take slice gangs"):
        cluster.plan_preemption(request)
    with pytest.raises(InvalidRequest, match="plan_defrag does not take slice gangs"):
        cluster.plan_defrag(request)
    assert cluster.snapshot() == before


# --- bad input -------------------------------------------------------------------------------

BAD_SLICES: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"slices": (("rack", 3),)}, InvalidRequest, "must divide pods"),
    ({"slices": (("rack", 0),)}, InvalidRequest, "at least 1"),
    ({"slices": (("rack", -4),)}, InvalidRequest, "at least 1"),
    ({"slices": (("rack", 2**70),)}, InvalidRequest, "out of range|between|must"),
    ({"slices": (("spine", 4), ("rack", 8))}, InvalidRequest, "must divide the outer"),
    ({"slices": (("a", 8), ("b", 4), ("c", 2), ("d", 1))}, InvalidRequest, "at most 3"),
    ({"slices": (("rack", 8),), "min_pods": 4}, InvalidRequest, "multiple of the outermost"),
    ({"slices": (("", 8),)}, InvalidRequest, "not a level name"),
    ({"slices": "rack"}, TypeError, "not a str"),
    ({"slices": (("rack",),)}, TypeError, "pairs"),
    ({"slices": (("rack", "8"),)}, TypeError, "int"),
    ({"slices": ((8, "rack"),)}, TypeError, "str"),
    ({"slices": 8}, TypeError, "not int"),
]


@pytest.mark.parametrize(("kwargs", "error", "text"), BAD_SLICES)
def test_bad_slices_are_refused_when_built(
    kwargs: dict[str, Any], error: type[Exception], text: str
) -> None:
    with pytest.raises(error, match=text):
        GangRequest(16, 4, **kwargs)


BAD_LEVELS: list[tuple[tuple[tuple[str, int], ...], str | None, str]] = [
    ((("pod", 4),), None, 'unknown slice level "pod"'),
    ((("rack", 8), ("spine", 4)), None, "not finer than the layer outside it"),
    ((("rack", 8), ("rack", 4)), None, "not finer than the layer outside it"),
    ((("spine", 8),), "rack", "coarser than the required level"),
]


@pytest.mark.parametrize(("slices", "required", "text"), BAD_LEVELS)
def test_bad_slice_levels_are_refused_when_placed_and_change_nothing(
    slices: tuple[tuple[str, int], ...], required: str | None, text: str
) -> None:
    cluster = nvl72(2)
    oracle = reference.Cluster(LEVELS)
    request = GangRequest(16, 4, required_level=required, slices=slices)
    before = cluster.snapshot()
    for call in (cluster.place_gang, cluster.reserve, cluster.explain, oracle.place_gang):
        with pytest.raises(InvalidRequest, match=text):
            call(request)
    assert cluster.snapshot() == before


# --- the reference, on random clusters -------------------------------------------------------


@st.composite
def sliced_requests(draw: st.DrawFn, levels: tuple[str, ...]) -> GangRequest:
    """Valid slice requests: sizes dividing each other and pods, levels nested."""
    choices = [*levels, "node"]
    depths = sorted(draw(st.sets(st.integers(0, len(choices) - 1), min_size=1, max_size=3)))
    sizes = [draw(st.sampled_from((1, 2, 3, 4)))]
    for _ in depths[1:]:
        sizes.append(
            sizes[-1] // draw(st.sampled_from([d for d in (1, 2, 3) if sizes[-1] % d == 0]))
        )
    pods = sizes[0] * draw(st.integers(1, 4))
    min_pods = draw(st.none() | st.sampled_from(range(sizes[0], pods + 1, sizes[0])))
    required = draw(st.sampled_from((None, *levels[: depths[0] + 1])))
    return GangRequest(
        pods,
        draw(st.sampled_from((1, 2, 4))),
        min_pods=min_pods,
        required_level=required,
        slices=tuple(zip([choices[d] for d in depths], sizes, strict=True)),
    )


@st.composite
def small_clusters(draw: st.DrawFn) -> list[NodeSpec]:
    count = draw(st.integers(1, 14))
    nodes = []
    for index in range(count):
        gpus = draw(st.sampled_from((2, 4, 8)))
        path = (draw(st.sampled_from(("a", "b"))), draw(st.sampled_from(("x", "y", "z"))))
        unhealthy = draw(st.sets(st.integers(0, gpus - 1), max_size=2))
        nodes.append(NodeSpec(f"n{index:02d}", gpus, path, {}, tuple(sorted(unhealthy))))
    return nodes


@given(data=st.data(), nodes=small_clusters(), policy=st.sampled_from(("best-fit", "first-fit")))
def test_slices_agree_with_the_reference(
    data: st.DataObject, nodes: list[NodeSpec], policy: str
) -> None:
    engine = gangplace.Cluster(LEVELS, policy=policy)  # type: ignore[arg-type]
    oracle = reference.Cluster(LEVELS, policy=policy)
    fill(engine, LEVELS, data.draw(st.permutations(nodes), label="insertion order"))
    fill(oracle, LEVELS, nodes)
    for _ in range(3):
        request = data.draw(sliced_requests(LEVELS))
        got, expected = engine.place_gang(request), oracle.place_gang(request)
        note(f"{request!r}: engine {got!r}, reference {expected!r}")
        assert as_tuple(got) == as_tuple(expected)
        if got is None:
            with pytest.raises(Unschedulable) as raised:
                engine.reserve(request)
            with pytest.raises(Unschedulable) as expected_raised:
                oracle.reserve(request)
            assert raised.value.reason == expected_raised.value.reason
            continue
        assert expected is not None and got.slices == expected.slices
        assert slices_hold(engine, got, request.slices, LEVELS)
        innermost = request.slices[-1][1]
        assert len(got.slices) == len(got) // innermost
        engine.reserve(request)
        oracle.reserve(request)
    engine.check_invariants()


# --- brute force -----------------------------------------------------------------------------


def brute_force_fits(cluster: Cluster, request: GangRequest, levels: Sequence[str]) -> bool:
    """Whether some count of pods per node (ranks in path order) satisfies every layer,
    inside one domain of the coarsest allowed level. Tries every count vector, depth-first."""
    names = sorted(cluster.nodes(), key=lambda name: path_of(cluster, name, levels))
    paths = [path_of(cluster, name, levels) for name in names]
    caps = [len(cluster.node(name).free) // request.gpus_per_pod for name in names]
    depth_of = {level: i + 1 for i, level in enumerate(levels)} | {"node": len(levels) + 1}
    layers = [(depth_of[level], size) for level, size in request.slices]
    coarsest = (
        0 if request.required_level in (None, "cluster") else depth_of[request.required_level]
    )

    def search(index: int, ranks: list[tuple[str, ...]]) -> bool:
        if len(ranks) == request.pods:
            return True
        if index == len(names):
            return False
        for count in range(min(caps[index], request.pods - len(ranks)), -1, -1):
            extended = ranks + [paths[index]] * count
            if count and not consistent(extended, len(ranks)):
                continue
            if search(index + 1, extended):
                return True
        return False

    def consistent(ranks: list[tuple[str, ...]], first_new: int) -> bool:
        if {path[:coarsest] for path in ranks} != {ranks[0][:coarsest]}:
            return False
        for depth, size in layers:
            for rank in range(first_new, len(ranks)):
                head = ranks[rank - rank % size]
                if ranks[rank][:depth] != head[:depth]:
                    return False
        return True

    return search(0, [])


@given(data=st.data(), nodes=small_clusters().filter(lambda nodes: len(nodes) <= 8))
def test_a_slice_gang_is_placeable_exactly_when_brute_force_says_so(
    data: st.DataObject, nodes: list[NodeSpec]
) -> None:
    cluster = gangplace.Cluster(LEVELS)
    fill(cluster, LEVELS, nodes)
    request = data.draw(sliced_requests(LEVELS))
    rigid = GangRequest(
        request.pods,
        request.gpus_per_pod,
        required_level=request.required_level,
        slices=request.slices,
    )
    placement = cluster.place_gang(rigid)
    note(f"{rigid!r}: {placement!r}")
    assert (placement is not None) == brute_force_fits(cluster, rigid, LEVELS)
    if placement is None:
        return
    # More free capacity never turns a fit into a no-fit.
    bigger = gangplace.Cluster(LEVELS)
    fill(bigger, LEVELS, [NodeSpec(n.name, n.gpus, n.path) for n in nodes])
    assert bigger.place_gang(rigid) is not None


@pytest.mark.parametrize("version", [3, 4, 5, 6, 7, 8, 9, 10])
def test_older_snapshots_still_restore(version: int) -> None:
    """Each version appends a section to the one before: 11 every node's taints and every
    hold's affinity and tolerations (docs/placement.md, rule 1); 10 each multi-role group's
    resources (docs/roles.md); 9 every hold's fraction of a GPU (docs/resources.md "Fractions
    of a GPU"); 8 the resource names, node resources and hold asks (docs/resources.md "Node
    resources"); 7 the ended ranks (one entry per hold); 6 the repair links; 5 the roles; 4
    the shapes. Without the newer sections, and with the header's version, length and CRC-32
    rewritten, the bytes are what an older build wrote, and they must restore to the same
    cluster."""
    import struct
    import zlib

    cluster = nvl72(2)
    cluster.commit(cluster.reserve(GangRequest(4, 4)))
    current = cluster.snapshot()
    assert struct.unpack_from("<H", current, 8) == (11,)
    filters = b"\x00\x01\x00\x00\x00"  # no tainted node; a hold: no affinity, tolerations, groups
    groups = b"\x01\x00"  # a hold: no groups' resources
    shares = b"\x01\x00"  # a hold: whole GPUs
    resources = b"\x00\x00\x01\x00\x00\x00"  # no names, no node resources; a hold asking none
    endings = b"\x01\x00"  # a hold: no ended ranks
    repairs = b"\x01\x00\x00\x00\x00"  # a hold: no spares, no repair link, no group spares
    roles = b"\x01\x00\x00"  # a hold: no groups, no multi-role request
    shapes = b"\x01\x00\x00\x04pack\x04none\x00"  # a hold: no slices, pack, no NUMA; no groups
    assert current.endswith(
        shapes + roles + repairs + endings + resources + shares + groups + filters
    )
    sections = [
        (10, filters),
        (9, groups),
        (8, shares),
        (7, resources),
        (6, endings),
        (5, repairs),
        (4, roles),
        (3, shapes),
    ]
    cut = sum(len(bytes_) for newest, bytes_ in sections if version <= newest)
    body = current[24:-cut]
    header = current[:8] + struct.pack("<HHQI", version, 0, len(body), zlib.crc32(body))
    restored = Cluster.restore(header + body, clock=FakeClock())
    assert restored.snapshot() == current
