"""Bulk paths: from_arrays, gpu_state, place_many, reserve_many, and gangplace.synth."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from helpers import FakeClock, as_tuple, regular_nodes, tree

from gangplace import Cluster, GangRequest, InvalidRequest, synth

LEVELS = ("spine", "rack")


def arrays_of(nodes: list[Any]) -> dict[str, Any]:
    return {
        "names": [node.name for node in nodes],
        "domains": [[node.path[0] for node in nodes], [node.path[1] for node in nodes]],
        "gpus": np.array([node.gpus for node in nodes]),
        "unhealthy_mask": np.zeros(len(nodes), dtype=np.uint64),
    }


def test_from_arrays_equals_adding_nodes_one_by_one() -> None:
    nodes = regular_nodes(LEVELS, (2, 2, 3), 8)
    clock = FakeClock()
    one_by_one = tree(LEVELS, (2, 2, 3), clock=clock)
    one_by_one.set_gpu_health("s1-r0-n2", 7, False)
    data = arrays_of(nodes)
    data["unhealthy_mask"][nodes.index(next(n for n in nodes if n.name == "s1-r0-n2"))] = 1 << 7
    bulk = Cluster.from_arrays(LEVELS, **data, clock=clock)
    assert bulk.snapshot() == one_by_one.snapshot()


def test_from_arrays_with_codes_and_labels() -> None:
    bulk = Cluster.from_arrays(
        ("rack",),
        np.array(["a", "b", "c"]),
        [(np.array([1, 0, 1], dtype=np.int16), ["r0", "r1"])],
        np.array([8, 4, 8], dtype=np.uint8),
        np.array([0, 0, 3], dtype=np.uint64),
        labels={"gpu": ["h100", None, "a100"]},
    )
    assert bulk.node("a").topology == {"rack": "r1"}
    assert bulk.node("b").labels == {}
    assert bulk.node("c").labels == {"gpu": "a100"}
    assert bulk.node("c").unhealthy == (0, 1)
    assert bulk.stats().total == 20


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"names": ["a", "b"]}, InvalidRequest),
        ({"gpus": np.array([8.0, 8.0, 8.0])}, TypeError),
        ({"gpus": np.array([8, 0, 8])}, InvalidRequest),
        ({"unhealthy_mask": np.array([0, -1, 0])}, InvalidRequest),
        ({"unhealthy_mask": np.array([0, 1 << 9, 0], dtype=np.uint64)}, InvalidRequest),
        ({"domains": [(np.array([0, 5, 0]), ["r0"])]}, InvalidRequest),
        ({"domains": [["r0", "r0", "r0"], ["x", "x", "x"]]}, InvalidRequest),
        ({"names": ["a", "a", "b"]}, InvalidRequest),
        ({"names": [1, 2, 3]}, TypeError),
    ],
)
def test_from_arrays_refuses_bad_columns(change: dict[str, Any], error: type[Exception]) -> None:
    data: dict[str, Any] = {
        "names": ["a", "b", "c"],
        "domains": [["r0", "r0", "r1"]],
        "gpus": np.array([8, 8, 8]),
        "unhealthy_mask": np.zeros(3, dtype=np.uint64),
        **change,
    }
    with pytest.raises(error):
        Cluster.from_arrays(("rack",), **data)


def test_gpu_state_matches_node_by_node() -> None:
    cluster = tree(LEVELS, (2, 2, 2))
    cluster.commit(cluster.reserve(GangRequest(3, 4)))
    cluster.reserve(GangRequest(1, 2))
    cluster.set_gpu_health("s1-r1-n1", 0, False)
    cluster.cordon("s1-r1-n0")
    state = cluster.gpu_state()
    assert list(state["node"]) == cluster.nodes()
    for index, name in enumerate(cluster.nodes()):
        node = cluster.node(name)
        assert state["free"][index] == len(node.free)
        assert state["reserved"][index] == len(node.reserved)
        assert state["allocated"][index] == len(node.allocated)
        assert state["unhealthy"][index] == len(node.unhealthy)
        assert state["cordoned"][index] == node.cordoned
    assert int(state["free"].sum()) == cluster.stats().free


def test_place_many_answers_like_place_gang_one_by_one() -> None:
    cluster, _ = synth.build("tiny", fill=0.5, seed=3)
    requests = [GangRequest(p, g) for p in (1, 2, 5, 40) for g in (1, 4, 8)]
    many = cluster.place_many(requests)
    assert [as_tuple(p) for p in many] == [as_tuple(cluster.place_gang(r)) for r in requests]
    assert cluster.stats().reserved == 0


def test_reserve_many_is_greedy_in_order() -> None:
    clock = FakeClock()
    cluster = tree(LEVELS, (2, 2, 2), clock=clock)  # 64 GPUs
    twin = tree(LEVELS, (2, 2, 2), clock=clock)
    requests = [GangRequest(4, 8), GangRequest(4, 8), GangRequest(1, 8), GangRequest(1, 1)]
    held = cluster.reserve_many(requests, ttl=10, owner="batch")
    assert [r is not None for r in held] == [True, True, False, False]
    for request, reservation in zip(requests[:2], held, strict=False):
        assert reservation is not None and reservation.owner == "batch"
        assert reservation.placement == twin.reserve(request).placement
    assert cluster.stats().reserved == 64


def test_batches_validate_everything_before_holding() -> None:
    cluster = tree(LEVELS, (1, 1, 2))
    batch = [GangRequest(1), GangRequest(1, required_level="row")]
    with pytest.raises(InvalidRequest):
        cluster.reserve_many(batch)
    with pytest.raises(InvalidRequest):
        cluster.place_many(batch)
    with pytest.raises(TypeError):
        cluster.place_many([GangRequest(1), "not a request"])  # type: ignore[list-item]
    assert cluster.stats().reserved == 0


@pytest.mark.parametrize("name", ["superpod", "meta24k", "nvl72", "colossus100k", "tiny"])
def test_synth_shapes_have_their_documented_size(name: str) -> None:
    shape = synth.SHAPES[name]
    data = synth.columns(shape, seed=1)
    assert len(data["names"]) == shape.nodes == len(set(data["names"]))
    assert len(data["domains"]) == len(shape.levels)
    bad = sum(bin(int(mask)).count("1") for mask in data["unhealthy_mask"])
    assert bad == round(shape.total_gpus * 0.002)
    expected = {
        "superpod": 16_384,
        "meta24k": 24_576,
        "nvl72": 9_216,
        "colossus100k": 102_400,
        "tiny": 256,
    }
    assert shape.total_gpus == expected[name]


def test_synth_fill_is_seeded_and_reaches_its_target() -> None:
    first, report = synth.build("nvl72", fill=0.8, seed=7)
    again, _ = synth.build("nvl72", fill=0.8, seed=7)
    assert first.gpu_state()["allocated"].tolist() == again.gpu_state()["allocated"].tolist()
    assert report.fill == pytest.approx(0.8, abs=0.005)
    assert first.stats().unhealthy == round(9216 * 0.002)
    with pytest.raises(ValueError, match="unknown shape"):
        synth.build("nope")


def test_more_selectors_than_the_pool_cache_keeps() -> None:
    """40 distinct selectors (the cache keeps 32): every answer still matches the reference."""
    from gangplace import reference

    engine = Cluster(("rack",), clock=FakeClock())
    oracle = reference.Cluster(("rack",), clock=FakeClock())
    for index in range(40):
        for cluster in (engine, oracle):
            cluster.add_node(
                f"n{index:02d}",
                gpus=8,
                topology={"rack": f"r{index % 4}"},
                labels={"team": f"t{index % 40}", "zone": f"z{index % 2}"},
            )
    for round_ in range(3):
        for index in range(40):
            request = GangRequest(1, 1 + round_, selector={"team": f"t{index}"})
            assert as_tuple(engine.place_gang(request)) == as_tuple(oracle.place_gang(request))
            engine.reserve(request)
            oracle.reserve(request)
            engine.check_invariants()  # rebuilds every kept pool and compares
    zone = GangRequest(3, 8, selector={"zone": "z1"})
    assert as_tuple(engine.place_gang(zone)) == as_tuple(oracle.place_gang(zone))
