"""Balanced spread (docs/shapes.md "Balanced spread"): scenarios, the reference, the evenness
rule."""

from __future__ import annotations

from collections import Counter
from typing import Any

import hypothesis.strategies as st
import pytest
from helpers import FakeClock, NodeSpec, as_tuple, fill, tree
from hypothesis import given, note
from test_slices import LEVELS, sliced_requests, small_clusters

import gangplace
from gangplace import GangRequest, InvalidRequest


def rack_shares(cluster: Any, placement: Any) -> list[int]:
    """Pods per rack of a placement, racks in path order."""
    racks = Counter(
        (cluster.node(pod.node).topology["spine"], cluster.node(pod.node).topology["rack"])
        for pod in placement.pods
    )
    return [racks[rack] for rack in sorted(racks)]


def test_balanced_splits_evenly_where_pack_fills_the_largest_first() -> None:
    cluster = tree(LEVELS, (1, 3, 8), gpus=8)  # three racks of 8 whole-node pods
    packed = cluster.place_gang(GangRequest(12, 8))
    even = cluster.place_gang(GangRequest(12, 8, spread="balanced"))
    assert packed is not None and even is not None
    assert rack_shares(cluster, packed) == [8, 4]
    assert rack_shares(cluster, even) == [6, 6]  # as many racks as pack, split evenly
    leftover = cluster.place_gang(GangRequest(17, 8, spread="balanced"))
    assert leftover is not None and rack_shares(cluster, leftover) == [6, 6, 5]


def test_balanced_respects_capacities_and_slices() -> None:
    cluster = tree(LEVELS, (1, 3, 8), gpus=8)
    for node in ("s0-r0-n0", "s0-r0-n1", "s0-r0-n2", "s0-r0-n3", "s0-r0-n4", "s0-r0-n5"):
        cluster.adopt([(node, 8)])  # rack r0 keeps 2 free nodes
    even = cluster.place_gang(GangRequest(17, 8, spread="balanced"))
    assert even is not None and rack_shares(cluster, even) == [2, 8, 7]
    sliced = GangRequest(12, 8, slices=(("rack", 2),), spread="balanced")
    placement = cluster.place_gang(sliced)
    assert placement is not None and rack_shares(cluster, placement) == [6, 6]
    assert GangRequest(4, spread="balanced").spread == "balanced"
    assert repr(GangRequest(4, spread="balanced")) == "GangRequest(4, 1, spread='balanced')"


@pytest.mark.parametrize(("spread", "error"), [("even", InvalidRequest), (1, TypeError)])
def test_bad_spreads_are_refused_when_built(spread: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="spread"):
        GangRequest(4, spread=spread)  # type: ignore[arg-type]


def test_a_balanced_hold_survives_snapshots() -> None:
    cluster = tree(LEVELS, (1, 3, 8), gpus=8, clock=FakeClock())
    allocation = cluster.commit(cluster.reserve(GangRequest(12, 8, spread="balanced")))
    restored = gangplace.Cluster.restore(cluster.snapshot(), clock=FakeClock())
    (kept,) = restored.allocations()
    assert kept.request is not None and kept.request.spread == "balanced"
    assert kept.placement == allocation.placement
    assert restored.snapshot() == cluster.snapshot()


def evenness_holds(cluster: Any, placement: Any, levels: tuple[str, ...]) -> bool:
    """Shares of the children of the placement's domain differ by at most one, except where a
    smaller share is its child's whole capacity."""
    depth = len(placement.domain) + 1
    if depth > len(levels) + 1:
        return True
    size = len(placement.pods[0].gpus)

    def child_of(node: str) -> tuple[str, ...]:
        info = cluster.node(node)
        return (*(info.topology[level] for level in levels), node)[:depth]

    shares = Counter(child_of(pod.node) for pod in placement.pods)
    capacity: Counter[tuple[str, ...]] = Counter()
    for name in cluster.nodes():
        info = cluster.node(name)
        if not info.cordoned:
            capacity[child_of(name)] += len(info.free) // size
    largest = max(shares.values())
    return all(share + 1 >= largest or share == capacity[child] for child, share in shares.items())


@given(data=st.data(), nodes=small_clusters())
def test_balanced_agrees_with_the_reference_and_is_even(
    data: st.DataObject, nodes: list[NodeSpec]
) -> None:
    engine = gangplace.Cluster(LEVELS)
    oracle = gangplace.reference.Cluster(LEVELS)
    fill(engine, LEVELS, data.draw(st.permutations(nodes), label="insertion order"))
    fill(oracle, LEVELS, nodes)
    for _ in range(3):
        base = data.draw(
            st.one_of(
                sliced_requests(LEVELS),
                st.builds(GangRequest, st.integers(1, 12), st.sampled_from((1, 2, 4))),
            )
        )
        request = GangRequest(
            base.pods,
            base.gpus_per_pod,
            min_pods=base.min_pods,
            required_level=base.required_level,
            slices=base.slices,
            spread="balanced",
        )
        got, expected = engine.place_gang(request), oracle.place_gang(request)
        note(f"{request!r}: engine {got!r}, reference {expected!r}")
        assert as_tuple(got) == as_tuple(expected)
        if got is None:
            continue
        if not request.slices:
            assert evenness_holds(engine, got, LEVELS)
        engine.reserve(got)
        oracle.reserve(got)
    engine.check_invariants()
