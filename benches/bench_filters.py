"""Node filters (docs/placement.md "Node filters"): taints, tolerations, required affinity.

``colossus100k@80``: the 102,400-GPU shape filled to 80% by ``synth.fill``, then every eighth
node tainted ``team=llm:NoSchedule`` and every other node labelled ``gen=h100`` (the others
``gen=a100``). Measured: a plain 8 x 8 gang (the cluster's own view, tainted nodes left
out); the same gang tolerating the taint, and a 4 x 8 gang asking ``gen In (h100)`` by
affinity (each served by a kept pool once built); a retaint of one busy node followed by the
tolerating gang (the retaint drops the pools, so this round pays the pool's rebuild: what
grows with the cluster); the reference placing the tolerating gang on a twin with the same
nodes and holds (one round).
"""

from __future__ import annotations

from itertools import count
from typing import Any

import pytest

from gangplace import Cluster, GangRequest, reference, synth

SMALL = synth.Shape("small", ("block", "rack"), (2, 2, 4), 8, "smoke-test size")
TAINT = ("team", "llm", "NoSchedule")
TOLERATE = GangRequest(8, 8, tolerations=[("team", "Equal", "llm", "NoSchedule")])
AFFINITY = GangRequest(4, 8, affinity=[[("gen", "In", ["h100"])]])
PLAIN = GangRequest(8, 8)
SMOKE_FILL = 0.3  # the smoke size's 16 nodes hold an 8 x 8 gang only when little is held


@pytest.fixture(scope="module")
def tainted(request: pytest.FixtureRequest) -> Cluster:
    smoke = request.config.getoption("benchmark_disable", default=False)
    fill = SMOKE_FILL if smoke else 0.8
    cluster, _ = synth.build(SMALL if smoke else "colossus100k", fill=fill, seed=1)
    for index, name in enumerate(cluster.nodes()):
        taints = [TAINT] if index % 8 == 0 else []
        cluster.update_node(name, labels={"gen": "h100" if index % 2 else "a100"}, taints=taints)
    return cluster


def _placed(cluster: Any, request: GangRequest) -> tuple[str, ...]:
    placement = cluster.place_gang(request)
    assert placement is not None
    return tuple(placement.nodes)


def bench_place_plain_with_tainted_nodes(benchmark: Any, tainted: Cluster) -> None:
    """A gang without a filter: the cluster's own view, which leaves tainted nodes out."""
    nodes = benchmark(_placed, tainted, PLAIN)
    assert not any(tainted.node(name).taints for name in nodes)


def bench_place_tolerating(benchmark: Any, tainted: Cluster) -> None:
    """A gang tolerating the taint: a kept pool over every node."""
    benchmark(_placed, tainted, TOLERATE)


def bench_place_affinity(benchmark: Any, tainted: Cluster) -> None:
    """A gang asking ``gen In (h100)``: a kept pool over half the nodes."""
    nodes = benchmark(_placed, tainted, AFFINITY)
    assert all(tainted.node(name).labels["gen"] == "h100" for name in nodes)


def bench_retaint_then_place_tolerating(benchmark: Any, tainted: Cluster) -> None:
    """One busy node's taint toggled, then the tolerating gang (the pool is rebuilt)."""
    busy = next(name for name in tainted.nodes() if tainted.node(name).allocated)
    turn = count()

    def retaint_and_place() -> tuple[str, ...]:
        tainted.update_node(busy, taints=[TAINT] if next(turn) % 2 else [])
        return _placed(tainted, TOLERATE)

    benchmark.pedantic(retaint_and_place, rounds=50, iterations=1, warmup_rounds=1)
    tainted.check_invariants()


def bench_place_tolerating_reference(benchmark: Any, tainted: Cluster) -> None:
    """The tolerating gang placed by ``gangplace.reference`` on a twin (one round)."""
    twin = reference.Cluster(tainted.levels)
    for name in tainted.nodes():
        info = tainted.node(name)
        twin.add_node(
            name, gpus=info.gpus, topology=info.topology, labels=info.labels, taints=info.taints
        )
        for gpu in info.unhealthy:
            twin.set_gpu_health(name, gpu, healthy=False)
    for held in tainted.allocations():
        twin.adopt(held.placement.pods)
    got = benchmark.pedantic(_placed, args=(twin, TOLERATE), rounds=1, iterations=1)
    assert got == _placed(tainted, TOLERATE)
