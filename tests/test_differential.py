"""The Rust engine and gangplace.reference give identical answers on random clusters.

Clusters have 0-3 levels, few domain names (so the same rack name recurs under different
spines), mixed GPU counts, unhealthy GPUs, labels and cordons; requests cover every field.
The Rust cluster gets its nodes in a shuffled order, the reference in the drawn one.
"""

from __future__ import annotations

import hypothesis.strategies as st
from helpers import NodeSpec, as_tuple, fill, reserve_both
from hypothesis import given, note

import gangplace
from gangplace import GangRequest, reference

LEVEL_NAMES = ("zone", "spine", "rack")
LABELS = {"gpu": ("h100", "a100"), "pool": ("p1", "p2", "p3")}


@st.composite
def clusters(draw: st.DrawFn) -> tuple[tuple[str, ...], list[NodeSpec]]:
    levels = LEVEL_NAMES[3 - draw(st.integers(0, 3)) :]
    count = draw(st.integers(0, 24))
    nodes = []
    for index in range(count):
        gpus = draw(st.sampled_from((1, 2, 4, 8, 8, 8, 16)) | st.integers(1, 64))
        path = tuple(draw(st.sampled_from(("a", "b", "c"))) for _ in levels)
        labels = {
            key: draw(st.sampled_from(values))
            for key, values in LABELS.items()
            if draw(st.booleans())
        }
        unhealthy = draw(st.sets(st.integers(0, gpus - 1), max_size=3))
        nodes.append(NodeSpec(f"n{index:02d}", gpus, path, labels, tuple(sorted(unhealthy))))
    return levels, nodes


@st.composite
def requests(draw: st.DrawFn, levels: tuple[str, ...]) -> GangRequest:
    pods = draw(st.integers(1, 40))
    gpus_per_pod = draw(st.sampled_from((1, 1, 2, 4, 8)) | st.integers(1, 16))
    min_pods = draw(st.none() | st.integers(1, pods))
    required_level = draw(st.sampled_from((None, "node", "cluster", *levels)))
    selector = {
        key: draw(st.sampled_from(values)) for key, values in LABELS.items() if draw(st.booleans())
    }
    return GangRequest(
        pods, gpus_per_pod, min_pods=min_pods, required_level=required_level, selector=selector
    )


POLICIES = ("best-fit", "first-fit", "best-fit-path")


@given(data=st.data(), cluster=clusters(), policy=st.sampled_from(POLICIES))
def test_engine_agrees_with_reference(
    data: st.DataObject, cluster: tuple[tuple[str, ...], list[NodeSpec]], policy: str
) -> None:
    levels, nodes = cluster
    shuffled = data.draw(st.permutations(nodes), label="insertion order")
    engine = gangplace.Cluster(levels, policy=policy)  # type: ignore[arg-type]
    oracle = reference.Cluster(levels, policy=policy)
    fill(engine, levels, shuffled)
    fill(oracle, levels, nodes)
    for node in nodes:
        if data.draw(st.integers(0, 9), label=f"cordon {node.name}?") == 0:
            engine.cordon(node.name)
            oracle.cordon(node.name)
    # Some holds first, so that placements run on partly used clusters.
    for _ in range(data.draw(st.integers(0, 3), label="holds")):
        reserve_both(engine, oracle, data.draw(requests(levels)))
    for _ in range(4):
        request = data.draw(requests(levels))
        got, expected = engine.place_gang(request), oracle.place_gang(request)
        note(f"{request!r}: engine {got!r}, reference {expected!r}")
        assert as_tuple(got) == as_tuple(expected)
        if got is not None:
            assert got.nodes == expected.nodes  # type: ignore[union-attr]
            assert len(got) >= (request.min_pods or request.pods)
            assert all(len(pod.gpus) == request.gpus_per_pod for pod in got.pods)
        reserve_both(engine, oracle, request)
    for node in nodes:
        assert engine.node(node.name).free == oracle.node(node.name).free
    assert engine.stats().free == oracle.stats().free
    engine.check_invariants()
