"""The plan found from the kept index is the plan over every candidate (docs/preemption.md
"How a plan finds its set"): clusters where every candidate has the same priority, so that
P5's later keys (victims, GPUs held, free GPUs after, path) decide between domains and the
descent's bounds on them prune or not. Test builds also plan each request both ways inside
the engine and fail on any difference; here the answers are compared with the reference,
after changes of holds that the kept index must follow."""

from __future__ import annotations

import contextlib
from typing import Any

import hypothesis.strategies as st
from helpers import FakeClock, as_tuple, fill, regular_nodes
from hypothesis import given

from gangplace import Cluster, GangplaceError, GangRequest, reference

LEVELS = ("block", "rack")

holds = st.lists(
    st.tuples(st.integers(1, 3), st.sampled_from((1, 2, 4)), st.sampled_from((None, "rack"))),
    min_size=4,
    max_size=24,
)
gangs = st.lists(
    st.tuples(st.integers(1, 6), st.sampled_from((1, 2, 4)), st.sampled_from((None, "rack"))),
    min_size=1,
    max_size=4,
)


def _pair() -> tuple[Any, Any]:
    clock = FakeClock()
    engine = Cluster(LEVELS, clock=clock)
    oracle = reference.Cluster(LEVELS, clock=clock)
    nodes = regular_nodes(LEVELS, (2, 2, 3), 4)
    for cluster in (engine, oracle):
        fill(cluster, LEVELS, nodes)
        cluster._use_sequential_ids(1)  # type: ignore[union-attr]
    return engine, oracle


def _same(engine: Any, oracle: Any, gang: GangRequest) -> None:
    got, expected = engine.plan_preemption(gang), oracle.plan_preemption(gang)
    assert (got is None) == (expected is None)
    if got is not None:
        assert got.victims == expected.victims
        assert as_tuple(got.placement) == as_tuple(expected.placement)


@given(holds, gangs, st.integers(0, 3))
def test_equal_priorities_plan_as_the_reference_after_changes(
    specs: list[tuple[int, int, str | None]], asks: list[tuple[int, int, str | None]], ends: int
) -> None:
    engine, oracle = _pair()
    held: list[tuple[Any, Any]] = []
    for pods, size, level in specs:
        request = GangRequest(pods, size, required_level=level, priority=0)
        with_engine: Any = None
        with contextlib.suppress(GangplaceError):  # no room: the reference has none either
            with_engine = engine.commit(engine.reserve(request))
        with_oracle = None if with_engine is None else oracle.commit(oracle.reserve(request))
        if with_engine is not None:
            held.append((with_engine, with_oracle))
    for pods, size, level in asks:
        gang = GangRequest(pods, size, required_level=level, priority=1)
        _same(engine, oracle, gang)
        for allocation, twin in held[:ends]:  # the index follows ends and new priorities
            engine.set_priority(allocation, -1)
            oracle.set_priority(twin, -1)
        del held[: ends // 2]
        if held:
            engine.release(held[-1][0])
            oracle.release(held[-1][1])
            held.pop()
        _same(engine, oracle, gang)


def test_a_domain_with_free_gpus_elsewhere_still_wins_on_its_path() -> None:
    """Two nodes tie on every key but the path; the first one's block has free GPUs on
    other nodes. The bound of a block must not count those as free after: the node of the
    smaller path wins, as P5 says (a bound that did was found by the A/B of
    benches/preemption_answers.py, and this test failed with it)."""
    engine, oracle = Cluster(LEVELS), reference.Cluster(LEVELS)
    clusters: tuple[Any, Any] = (engine, oracle)
    for cluster in clusters:
        cluster._use_sequential_ids(1)
        for block, nodes in (("b0", 3), ("b1", 1)):
            for n in range(nodes):
                name = f"{block}n{n}"
                topology = {"block": block, "rack": f"{block}r"}
                cluster.add_node(name, gpus=8, topology=topology, labels={"host": name})
        for name in ("b0n0", "b1n0"):  # the two tied victims
            request = GangRequest(1, 8, priority=-2, selector={"host": name})
            cluster.commit(cluster.reserve(request))
        for name in ("b0n1", "b0n2"):  # 7 free GPUs each: 14 free in block b0
            request = GangRequest(1, 1, priority=5, selector={"host": name})
            cluster.commit(cluster.reserve(request))
    gang = GangRequest(1, 8, priority=3)
    plan = engine.plan_preemption(gang)
    assert plan is not None and [pod.node for pod in plan.placement.pods] == ["b0n0"]
    _same(engine, oracle, gang)
