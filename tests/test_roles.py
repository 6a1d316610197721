"""Multi-role gangs (docs/roles.md): scenarios, the reference, invariants, bad input.

Every placement a test makes is checked against the rule itself: all groups inside the
placement's domain, each group's pods in rank order, every colocation held, every slice layer
held, nothing held twice. The differential test compares the core with ``gangplace.reference``
on random clusters with selectors, slices, colocations and elastic groups.
"""

from __future__ import annotations

import pickle
from types import SimpleNamespace
from typing import Any

import hypothesis.strategies as st
import pytest
from helpers import FakeClock, NodeSpec, as_tuple, fill, tree
from hypothesis import given, note
from test_slices import path_of, slices_hold, small_clusters

import gangplace
from gangplace import (
    Cluster,
    GangRequest,
    InvalidRequest,
    LimitExceeded,
    MultiGangRequest,
    PodGroup,
    Unschedulable,
    reference,
)

LEVELS = ("spine", "rack")


def leader_workers(workers: int = 4, gpus: int = 8, level: str = "rack") -> MultiGangRequest:
    return MultiGangRequest(
        (PodGroup("leader", 1, 1), PodGroup("workers", workers, gpus)),
        colocate=(("leader", "workers", level),),
        name="job",
    )


def check_unit(cluster: Any, request: MultiGangRequest, placement: Any) -> None:
    """The rule on one placement: groups, domain, colocations, slices, no GPU twice."""
    groups = placement.groups
    assert list(groups) == [group.name for group in request.groups]
    assert tuple(pod for pods in groups.values() for pod in pods) == placement.pods
    depth = len(placement.domain)
    taken = set()
    for group in request.groups:
        pods = groups[group.name]
        assert all(len(pod.gpus) == group.gpus_per_pod for pod in pods)
        paths = [path_of(cluster, pod.node, LEVELS) for pod in pods]
        assert all(path[:depth] == tuple(placement.domain) for path in paths)
        assert paths == sorted(paths)  # rank order inside the group (one pod per path prefix)
        assert slices_hold(cluster, SimpleNamespace(pods=pods), group.slices, LEVELS)
        for pod in pods:
            for gpu in pod.gpus:
                assert (pod.node, gpu) not in taken
                taken.add((pod.node, gpu))
    for member, anchor, level in request.colocate:
        at = {"cluster": 0, **{name: i + 1 for i, name in enumerate(LEVELS)}}.get(
            level, len(LEVELS) + 1
        )  # "node" is the deepest
        home = path_of(cluster, groups[anchor][0].node, LEVELS)[:at]
        assert all(path_of(cluster, pod.node, LEVELS)[:at] == home for pod in groups[member])


# --- scenarios -------------------------------------------------------------------------------


def test_leader_goes_into_the_rack_of_worker_rank_0() -> None:
    cluster = tree(LEVELS, (2, 2, 5), gpus=8)
    request = leader_workers()
    placement = cluster.place_gang(request)
    assert placement is not None
    assert placement.level == "rack" and placement.domain == ("s0", "s0-r0")
    assert [pod.node for pod in placement.groups["workers"]] == [
        "s0-r0-n0",
        "s0-r0-n1",
        "s0-r0-n2",
        "s0-r0-n3",
    ]
    assert placement.groups["leader"] == (gangplace.PodPlacement("s0-r0-n4", (0,)),)
    check_unit(cluster, request, placement)


def test_room_for_the_follower_in_the_anchors_rank_0_domain() -> None:
    # Racks of 4 nodes x 8 GPUs: the workers fill a rack (placed first: more GPUs) and the
    # leader has no room left in it. The spine is tried once more with the leader placed first
    # in that rack, and the workers filling what it left there before the next rack.
    cluster = tree(LEVELS, (1, 2, 4), gpus=8)
    request = leader_workers()
    placement = cluster.place_gang(request)
    assert placement is not None and placement.level == "spine"
    assert placement.groups["leader"] == (gangplace.PodPlacement("s0-r0-n0", (0,)),)
    workers = [pod.node for pod in placement.groups["workers"]]
    assert workers == ["s0-r0-n1", "s0-r0-n2", "s0-r0-n3", "s0-r1-n0"]
    check_unit(cluster, request, placement)


def test_a_colocation_that_cannot_hold_names_the_follower() -> None:
    # One rack of 4 nodes x 8 GPUs and another of 4 nodes with 1 GPU each: the workers need
    # the big rack whole, so the leader finds no room beside worker rank 0, even on the retry.
    cluster = Cluster(LEVELS, clock=FakeClock())
    for index in range(4):
        cluster.add_node(f"a{index}", gpus=8, topology={"spine": "s", "rack": "ra"})
        cluster.add_node(f"b{index}", gpus=1, topology={"spine": "s", "rack": "rb"})
    request = leader_workers()
    assert cluster.place_gang(request) is None
    explanation = cluster.explain(request)
    assert explanation.failed_group is not None
    group, why = explanation.failed_group
    assert group == "leader"
    assert "(its colocation)" in why
    with pytest.raises(Unschedulable, match='group "leader" has room for 0 of its 1 pods'):
        cluster.reserve(request)


def test_groups_are_placed_largest_first_and_listed_in_request_order() -> None:
    cluster = tree(LEVELS, (1, 2, 4), gpus=8)
    small, big = PodGroup("a-small", 2, 2), PodGroup("z-big", 3, 8)
    placement = cluster.place_gang(MultiGangRequest((small, big)))
    assert placement is not None
    assert list(placement.groups) == ["a-small", "z-big"]
    # z-big (24 GPUs) went first and took whole nodes; a-small packs on the next node.
    assert [pod.node for pod in placement.groups["z-big"]] == ["s0-r0-n0", "s0-r0-n1", "s0-r0-n2"]
    assert {pod.node for pod in placement.groups["a-small"]} == {"s0-r0-n3"}


def test_selectors_per_group() -> None:
    cluster = Cluster(LEVELS, clock=FakeClock())
    for rack in ("r0", "r1"):
        for index in range(3):
            kind = "cpu" if index == 0 else "gpu"
            cluster.add_node(
                f"{rack}-n{index}",
                gpus=8,
                topology={"spine": "s", "rack": rack},
                labels={"kind": kind},
            )
    request = MultiGangRequest(
        (
            PodGroup("ps", 1, 2, selector={"kind": "cpu"}),
            PodGroup("w", 2, 8, selector={"kind": "gpu"}),
        ),
        colocate=(("ps", "w", "rack"),),
    )
    placement = cluster.place_gang(request)
    assert placement is not None and placement.level == "rack"
    assert placement.groups["ps"][0].node.endswith("-n0")
    assert all(not pod.node.endswith("-n0") for pod in placement.groups["w"])


def test_slices_inside_a_group() -> None:
    cluster = tree(LEVELS, (1, 4, 18), gpus=4, clock=FakeClock())  # NVL72-like racks
    request = MultiGangRequest(
        (PodGroup("leader", 1, 4), PodGroup("workers", 32, 4, slices=(("rack", 16),))),
        colocate=(("leader", "workers", "rack"),),
    )
    placement = cluster.place_gang(request)
    assert placement is not None
    assert len(placement.slices) == 2 and len(set(placement.slices)) == 2
    check_unit(cluster, request, placement)


def test_elastic_groups_shrink_only_when_the_full_unit_fits_nowhere() -> None:
    cluster = tree(LEVELS, (1, 2, 2), gpus=8)  # 32 GPUs
    request = MultiGangRequest((PodGroup("w", 5, 8, min_pods=2), PodGroup("l", 1, 4)))
    placement = cluster.place_gang(request)
    assert placement is not None
    assert len(placement.groups["w"]) == 2 and len(placement.groups["l"]) == 1  # at min_pods
    assert cluster.place_gang(MultiGangRequest((PodGroup("w", 3, 8, min_pods=2),))) is not None


def test_all_or_nothing_transactions_snapshot_and_pickle() -> None:
    clock = FakeClock()
    cluster = tree(LEVELS, (2, 2, 5), gpus=8, clock=clock)
    request = leader_workers()
    reservation = cluster.reserve(request, owner="a")
    assert reservation.request == request
    assert cluster.stats().reserved == 33
    assert cluster.rollback(reservation, owner="a")
    assert cluster.stats().reserved == 0
    allocation = cluster.commit(cluster.reserve(request, owner="a"), owner="a")
    assert allocation.placement.groups.keys() == {"leader", "workers"}
    data = cluster.snapshot()
    restored = Cluster.restore(data, clock=clock)
    assert restored.snapshot() == data
    (kept,) = restored.allocations()
    assert kept.request == request and kept.placement == allocation.placement
    assert kept.placement.groups == allocation.placement.groups
    assert cluster.release(allocation, owner="a")
    assert cluster.stats().allocated == 0
    assert pickle.loads(pickle.dumps(request)) == request
    assert pickle.loads(pickle.dumps(request.groups[0])) == request.groups[0]
    assert pickle.loads(pickle.dumps(allocation.placement)).groups == allocation.placement.groups


def test_batches_mix_both_kinds() -> None:
    cluster = tree(LEVELS, (1, 2, 5), gpus=8)
    mixed: list[GangRequest | MultiGangRequest] = [
        leader_workers(),
        GangRequest(4, 8),
        leader_workers(),
    ]
    placed = cluster.place_many(mixed)
    assert [p is not None for p in placed] == [True, True, True]
    held = cluster.reserve_many(mixed)
    assert [h is not None for h in held] == [True, True, False]  # 80 GPUs: 33 + 32 + 33 > 80
    cluster.check_invariants()


def test_owner_cap_counts_every_group() -> None:
    cluster = Cluster(LEVELS, max_held_gpus_per_owner=32)
    fill(cluster, LEVELS, [NodeSpec(f"n{i}", 8, ("s", "r")) for i in range(5)])
    with pytest.raises(LimitExceeded):
        cluster.reserve(leader_workers(), owner="a")


def test_capacity_for_counts_whole_units() -> None:
    cluster = tree(LEVELS, (1, 2, 5), gpus=8, clock=FakeClock())
    before = cluster.snapshot()
    assert cluster.capacity_for(leader_workers()) == 2  # one per rack: 33 of 40 GPUs each
    assert cluster.capacity_for(MultiGangRequest((PodGroup("a", 1, 8),))) == 10
    assert cluster.snapshot() == before  # a pure query
    assert len([h for h in cluster.reserve_many([leader_workers()] * 3) if h is not None]) == 2


def test_explain_names_the_first_failing_group() -> None:
    cluster = tree(LEVELS, (1, 2, 6), gpus=8)
    request = MultiGangRequest(
        (PodGroup("big", 5, 8), PodGroup("sel", 2, 1, selector={"x": "y"})),
        required_level="rack",
    )
    explanation = cluster.explain(request)
    assert explanation.placement is None
    assert explanation.failed_group == (
        "sel",
        'in rack s0/s0-r0, group "sel" holds 0 of its 2 pods',
    )
    assert explanation.levels[-1].capacity == 0 and explanation.levels[-1].needed == 2
    assert explanation.levels[0].domain is None  # no node has the unit's 42 GPUs
    assert explanation.summary.startswith("multi-role gang of 2 groups (42 GPUs) does not fit")
    assert 'group "sel" holds 0 of its 2 pods' in explanation.summary
    # and, since no rack holds the selector's two pods even alone, the reason ends with it
    assert explanation.summary.endswith(
        'group "sel" cannot fit even alone: the best rack holds 0 of its 2 pods'
    )
    fits = cluster.explain(leader_workers())
    assert fits.placement is not None and fits.failed_group is None
    assert "fits: 5 pods at level rack" in fits.summary


COLOSSUS_GOLDEN = [
    # (workers of 8 GPUs, colocation level) -> (level, domain, leader, first and last worker)
    ((63, "array"), ("array", ("h3", "a06"), "h3-a06-r7-n7", "h3-a06-r0-n0", "h3-a06-r7-n6")),
    ((7, "rack"), ("rack", ("h3", "a02", "r4"), "h3-a02-r4-n7", "h3-a02-r4-n0", "h3-a02-r4-n6")),
]


@pytest.mark.parametrize(("shape", "golden"), COLOSSUS_GOLDEN)
def test_colossus100k_leader_and_workers_golden(
    shape: tuple[int, str], golden: tuple[Any, ...]
) -> None:
    """A leader (1 GPU) next to its workers on colossus100k filled to 80% (``synth.build``,
    seed 1): the fixture. 63 workers and the leader fill an empty array (505 of its 512 GPUs,
    the leader in the last rack holding room after the workers); 7 workers and the leader
    share one rack."""
    from gangplace import synth

    cluster, _ = synth.build("colossus100k", fill=0.8, seed=1)
    workers, level = shape
    request = MultiGangRequest(
        (PodGroup("leader", 1, 1), PodGroup("workers", workers, 8)),
        colocate=(("leader", "workers", level),),
        name="train",
    )
    placement = cluster.place_gang(request)
    assert placement is not None
    leader, team = placement.groups["leader"], placement.groups["workers"]
    found = (placement.level, placement.domain, leader[0].node, team[0].node, team[-1].node)
    assert found == golden
    assert len(team) == workers and all(len(pod.gpus) == 8 for pod in team)
    depth = cluster.levels.index(level) + 1
    home = tuple(cluster.node(team[0].node).topology.values())[:depth]
    assert tuple(cluster.node(leader[0].node).topology.values())[:depth] == home
    plain = cluster.place_gang(GangRequest(workers, 8))
    assert plain is not None and plain.domain == placement.domain  # the workers' own domain


# --- bad input -------------------------------------------------------------------------------

BAD_BUILDS: list[tuple[Any, type[Exception], str]] = [
    (lambda: MultiGangRequest(()), InvalidRequest, "1 to 16 groups"),
    (
        lambda: MultiGangRequest([PodGroup(f"g{i}", 1) for i in range(17)]),
        InvalidRequest,
        "1 to 16",
    ),
    (lambda: MultiGangRequest((PodGroup("a", 1), PodGroup("a", 2))), InvalidRequest, "used twice"),
    (lambda: PodGroup("", 1), InvalidRequest, "group name"),
    (lambda: PodGroup("x" * 254, 1), InvalidRequest, "group name"),
    (lambda: PodGroup("a", 0), InvalidRequest, "pods must be"),
    (lambda: PodGroup("a", 4, 65), InvalidRequest, "gpus_per_pod"),
    (lambda: PodGroup("a", 4, min_pods=5), InvalidRequest, "min_pods"),
    (lambda: PodGroup("a", 4, slices=(("rack", 3),)), InvalidRequest, "must divide"),
    (lambda: PodGroup(1, 4), TypeError, "str"),  # type: ignore[arg-type]
    (
        lambda: MultiGangRequest((PodGroup("a", 2**27, 2), PodGroup("b", 2**27, 2))),
        InvalidRequest,
        "limit",
    ),
    (
        lambda: MultiGangRequest((PodGroup("a", 1),), colocate=(("a", "b", "rack"),)),
        InvalidRequest,
        "unknown group",
    ),
    (
        lambda: MultiGangRequest((PodGroup("a", 1),), colocate=(("a", "a", "rack"),)),
        InvalidRequest,
        "with itself",
    ),
    (
        lambda: MultiGangRequest((PodGroup("a", 1), PodGroup("b", 1)), colocate=(("a", "b", ""),)),
        InvalidRequest,
        "not a level name",
    ),
    (
        lambda: MultiGangRequest((PodGroup("a", 1),), colocate=(("a", "b"),)),  # type: ignore[arg-type]
        TypeError,
        "triples",
    ),
    (lambda: MultiGangRequest((GangRequest(1),)), TypeError, "PodGroup"),  # type: ignore[arg-type]
    (
        lambda: MultiGangRequest((PodGroup("a", 1),), spread="wide"),  # type: ignore[arg-type]
        InvalidRequest,
        "spread",
    ),
    (lambda: MultiGangRequest((PodGroup("a", 1),), priority=2**40), InvalidRequest, "priority"),
]


@pytest.mark.parametrize(("build", "error", "text"), BAD_BUILDS)
def test_bad_requests_are_refused_when_built(build: Any, error: type[Exception], text: str) -> None:
    with pytest.raises(error, match=text):
        build()


BAD_LEVELS: list[tuple[MultiGangRequest, str]] = [
    (MultiGangRequest((PodGroup("a", 1),), required_level="row"), "unknown required_level"),
    (
        MultiGangRequest((PodGroup("a", 1), PodGroup("b", 1)), colocate=(("a", "b", "row"),)),
        "unknown colocate level",
    ),
    (
        MultiGangRequest((PodGroup("a", 2, slices=(("pod", 1),)),)),
        'unknown slice level "pod"',
    ),
    (
        MultiGangRequest((PodGroup("a", 2, slices=(("spine", 1),)),), required_level="rack"),
        "coarser than the required level",
    ),
]


@pytest.mark.parametrize(("request_", "text"), BAD_LEVELS)
def test_bad_levels_are_refused_when_placed_and_change_nothing(
    request_: MultiGangRequest, text: str
) -> None:
    cluster = tree(LEVELS, (1, 2, 2), gpus=8, clock=FakeClock())
    cluster.commit(cluster.reserve(GangRequest(1, 1)))
    oracle = reference.Cluster(LEVELS)
    before = cluster.snapshot()
    calls = (
        cluster.place_gang,
        cluster.reserve,
        cluster.explain,
        lambda r: cluster.place_many([GangRequest(1), r]),
        lambda r: cluster.reserve_many([GangRequest(1), r]),
        oracle.place_gang,
    )
    for call in calls:
        with pytest.raises(InvalidRequest, match=text):
            call(request_)
    assert cluster.snapshot() == before


def test_wrong_request_types() -> None:
    cluster = tree(LEVELS, (1, 1, 1), gpus=8)
    with pytest.raises(TypeError, match="GangRequest or a MultiGangRequest"):
        cluster.place_gang(PodGroup("a", 1))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="MultiGangRequest"):
        cluster.place_many([PodGroup("a", 1)])  # type: ignore[list-item]


# --- the reference, on random clusters -------------------------------------------------------


@st.composite
def groups(draw: st.DrawFn) -> PodGroup:
    pods = draw(st.integers(1, 6))
    layers: tuple[tuple[str, int], ...] = ()
    if draw(st.booleans()):
        size = draw(st.sampled_from([d for d in (1, 2, 3) if pods % d == 0]))
        layers = ((draw(st.sampled_from(("rack", "node"))), size),)
    elastic = draw(st.booleans())
    outer = layers[0][1] if layers else 1
    min_pods = draw(st.sampled_from(range(outer, pods + 1, outer))) if elastic else None
    selector = draw(st.sampled_from(({}, {}, {"kind": "a"}, {"kind": "b"})))
    return PodGroup(
        draw(st.sampled_from(("alpha", "beta", "gamma", "delta"))),
        pods,
        draw(st.sampled_from((1, 2, 4))),
        min_pods=min_pods,
        selector=selector,
        slices=layers,
    )


@st.composite
def multi_requests(draw: st.DrawFn) -> MultiGangRequest:
    members = draw(st.lists(groups(), min_size=1, max_size=3, unique_by=lambda g: g.name))
    names = [group.name for group in members]
    colocate: list[tuple[str, str, str]] = []
    if len(names) > 1 and draw(st.booleans()):
        pair = draw(st.permutations(names))[:2]
        colocate.append((pair[0], pair[1], draw(st.sampled_from(("node", "rack", "spine")))))
    required = draw(st.sampled_from((None, None, "spine", "rack")))
    if required == "rack" and any(g.slices and g.slices[0][0] == "spine" for g in members):
        required = None
    return MultiGangRequest(
        members,
        required_level=required,
        colocate=tuple(colocate),
        spread=draw(st.sampled_from(("pack", "balanced"))),
    )


@st.composite
def labelled_clusters(draw: st.DrawFn) -> list[NodeSpec]:
    """``test_slices``'s small clusters, each node labelled ``kind=a`` or ``kind=b``."""
    nodes = draw(small_clusters().filter(lambda nodes: len(nodes) <= 12))
    kinds = st.sampled_from(("a", "b"))
    return [
        NodeSpec(node.name, node.gpus, node.path, {"kind": draw(kinds)}, node.unhealthy)
        for node in nodes
    ]


def roles_tuple(placement: Any) -> Any:
    if placement is None:
        return None
    groups = {
        name: tuple((p.node, tuple(p.gpus)) for p in pods)
        for name, pods in placement.groups.items()
    }
    return as_tuple(placement), tuple(map(tuple, placement.slices)), groups


@given(
    data=st.data(),
    nodes=labelled_clusters(),
    policy=st.sampled_from(("best-fit", "first-fit", "best-fit-path")),
)
def test_multi_role_gangs_agree_with_the_reference(
    data: st.DataObject, nodes: list[NodeSpec], policy: str
) -> None:
    engine = gangplace.Cluster(LEVELS, policy=policy)  # type: ignore[arg-type]
    oracle = reference.Cluster(LEVELS, policy=policy)
    fill(engine, LEVELS, data.draw(st.permutations(nodes), label="insertion order"))
    fill(oracle, LEVELS, nodes)
    for _ in range(3):
        request = data.draw(multi_requests())
        got, expected = engine.place_gang(request), oracle.place_gang(request)
        note(f"{request!r}: engine {got!r}, reference {expected!r}")
        assert roles_tuple(got) == roles_tuple(expected)
        if got is None:
            with pytest.raises(Unschedulable) as raised:
                engine.reserve(request)
            with pytest.raises(Unschedulable) as expected_raised:
                oracle.reserve(request)
            assert raised.value.reason == expected_raised.value.reason
            continue
        check_unit(engine, request, got)
        assert engine.capacity_for(request) == oracle.capacity_for(request)
        engine.reserve(request)
        oracle.reserve(request)
        if data.draw(st.booleans(), label="a plain gang too"):
            gang = GangRequest(data.draw(st.integers(1, 4)), data.draw(st.sampled_from((1, 2))))
            assert as_tuple(engine.place_gang(gang)) == as_tuple(oracle.place_gang(gang))
    engine.check_invariants()
