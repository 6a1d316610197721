"""pickle and copy (docs/transactions.md "Pickling, copying and repeatable ids"): clusters through
their snapshots, value types through their parts."""

from __future__ import annotations

import copy
import pickle

import pytest

from gangplace import Cluster, GangRequest, Placement, PodPlacement


def _cluster() -> Cluster:
    clock = [10.0]
    cluster = Cluster(("rack",), clock=lambda: clock[0], max_held_gpus_per_owner=64)
    for index in range(4):
        cluster.add_node(f"n{index}", gpus=8, topology={"rack": f"r{index // 2}"})
    cluster.set_gpu_health("n1", 3, False)
    held = cluster.reserve(GangRequest(2, 4, name="a", priority=2), owner="team")
    cluster.commit(held, owner="team")
    cluster.reserve(GangRequest(1, 8), ttl=60.0)
    cluster.cordon("n3")
    return cluster


@pytest.mark.parametrize(
    "request_",
    [
        GangRequest(3, 2),
        GangRequest(
            4, 8, min_pods=2, required_level="rack", selector={"gpu": "h100", "zone": "a"},
            name="train", priority=-7, preemptible=False, movable=True,
        ),
    ],
)  # fmt: skip
def test_requests_pickle_and_copy(request_: GangRequest) -> None:
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        again = pickle.loads(pickle.dumps(request_, protocol))
        assert again == request_ and repr(again) == repr(request_)
        assert again.selector == request_.selector and again.movable == request_.movable
    assert copy.copy(request_) == request_ == copy.deepcopy(request_)


def test_placements_pickle_and_still_reserve() -> None:
    cluster = _cluster()
    placement = cluster.place_gang(GangRequest(2, 2))
    assert placement is not None
    again = pickle.loads(pickle.dumps(placement))
    assert isinstance(again, Placement) and again == placement
    assert (again.level, again.domain, again.nodes) == (
        placement.level,
        placement.domain,
        placement.nodes,
    )
    pod = placement.pods[0]
    assert pickle.loads(pickle.dumps(pod)) == pod == copy.deepcopy(pod)
    assert isinstance(pickle.loads(pickle.dumps(PodPlacement("x", [1, 2]))), PodPlacement)
    assert cluster.reserve(again).placement == placement


def test_clusters_pickle_through_their_snapshots() -> None:
    cluster = _cluster()
    again = pickle.loads(pickle.dumps(cluster))
    assert isinstance(again, Cluster)
    assert [again.node(n) for n in again.nodes()] == [cluster.node(n) for n in cluster.nodes()]
    assert again.stats() == cluster.stats()
    assert again.max_held_gpus_per_owner == 64 and again.levels == ("rack",)
    assert [a.id for a in again.allocations(owner="team")] == [
        a.id for a in cluster.allocations(owner="team")
    ]
    # A copy keeps the clock, so it is the same state byte for byte.
    for copied in (copy.copy(cluster), copy.deepcopy(cluster)):
        assert copied.snapshot() == cluster.snapshot()
        copied.release(copied.allocations(owner="team")[0], owner="team")
        assert cluster.stats().allocated == 8  # the original is untouched


def test_seeded_ids_repeat_and_match_the_reference() -> None:
    from gangplace import reference

    def ids(kind: type, seed: int | None) -> list[str]:
        cluster = kind(())
        cluster.add_node("n", gpus=8, topology={})
        cluster.seed_ids(seed)
        return [cluster.reserve(GangRequest(1, 1)).id for _ in range(4)]

    assert ids(Cluster, 7) == ids(Cluster, 7) == ids(reference.Cluster, 7)
    assert ids(Cluster, 7) != ids(Cluster, 8)
    assert ids(Cluster, None) != ids(Cluster, None)  # back to random ids
    with pytest.raises(TypeError):
        Cluster(()).seed_ids("7")  # type: ignore[arg-type]


def test_every_value_type_pickles_and_copies() -> None:
    """Holds, reports, plans and explanations round-trip equal, with the same repr."""
    cluster = Cluster(("rack",), clock=lambda: 10.0)
    for index in range(4):
        cluster.add_node(f"n{index}", gpus=8, topology={"rack": f"r{index // 2}"})
    held = cluster.reserve(GangRequest(1, 4, movable=True, name="low"), owner="team")
    allocation = cluster.commit(held, owner="team")
    reservation = cluster.reserve(GangRequest(1, 2), ttl=60.0)
    preemption = cluster.plan_preemption(GangRequest(2, 8, required_level="rack", priority=5))
    defrag = cluster.plan_defrag(GangRequest(1, 8))
    explanation = cluster.explain(GangRequest(9, 8, required_level="rack"))
    values: list[object] = [
        allocation,
        reservation,
        cluster.node("n1"),
        cluster.stats(),
        explanation,
        explanation.levels[0],
    ]
    values += [plan for plan in (preemption, defrag) if plan is not None]
    assert preemption is not None and defrag is not None
    for value in values:
        for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
            again = pickle.loads(pickle.dumps(value, protocol))
            assert type(again) is type(value) and repr(again) == repr(value)
        assert repr(copy.deepcopy(value)) == repr(value)
    again = pickle.loads(pickle.dumps(allocation))
    assert again == allocation and again.placement == allocation.placement
    assert again.request == allocation.request and again.since == allocation.since
    assert str(pickle.loads(pickle.dumps(explanation))) == str(explanation)
    fragmented = Cluster(("rack",), clock=lambda: 10.0)  # docs/preemption.md's example
    for rack in ("r0", "r1", "r2"):
        for n in range(2):
            name = f"{rack}-n{n}"
            fragmented.add_node(name, gpus=8, topology={"rack": rack}, labels={"host": name})
    small = GangRequest(1, 2, required_level="node", movable=True, preemptible=False)
    for _ in range(2):
        fragmented.commit(fragmented.reserve(small))
    for node, gpus in (("r1-n0", 8), ("r1-n1", 4), ("r2-n0", 6), ("r2-n1", 2)):
        pinned = GangRequest(1, gpus, selector={"host": node}, preemptible=False)
        fragmented.commit(fragmented.reserve(pinned))
    moving = fragmented.plan_defrag(GangRequest(2, 8, required_level="rack", priority=1))
    assert moving is not None and moving.moves
    for value in (moving, moving.moves[0]):
        assert repr(pickle.loads(pickle.dumps(value))) == repr(value)
    assert cluster.release(again, owner="team")  # a hold given back is found by its id


def test_unpickling_garbage_is_a_value_error() -> None:
    from gangplace._gangplace import _unpickle

    with pytest.raises(ValueError, match="invalid pickled Allocation"):
        _unpickle("Allocation", b"\xff\xff")
    with pytest.raises(ValueError, match="unknown pickled kind"):
        _unpickle("Cluster", b"")
