"""``Cluster.update_node`` benchmarks (README, "Node updates"; figures in docs/performance.md).

``colossus100k@80``: the 102,400-GPU shape filled to 80% by ``synth.fill``. Labels: one
node's labels toggled between two values (the node holds GPUs). Structure: an empty node
moved between two racks and back (it is removed and added again). The reference
(``gangplace.reference``) makes the same label change on a twin with the same nodes (one
round).
"""

from __future__ import annotations

from itertools import count
from typing import Any

import pytest

from gangplace import Cluster, reference, synth

SMALL = synth.Shape("small", ("block", "rack"), (2, 2, 4), 8, "smoke-test size")


@pytest.fixture(scope="module")
def loaded(request: pytest.FixtureRequest) -> Cluster:
    smoke = request.config.getoption("benchmark_disable", default=False)
    cluster, _ = synth.build(SMALL if smoke else "colossus100k", fill=0.8, seed=1)
    return cluster


def _busy_and_idle(cluster: Cluster) -> tuple[str, str]:
    names = cluster.nodes()
    busy = next(n for n in names if cluster.node(n).allocated)
    idle = next(n for n in names if len(cluster.node(n).free) == cluster.node(n).gpus)
    return busy, idle


def bench_update_node_labels(benchmark: Any, loaded: Cluster) -> None:
    """A busy node's labels, toggled."""
    busy, _ = _busy_and_idle(loaded)
    turn = count()

    def relabel() -> None:
        loaded.update_node(busy, labels={"pool": "a" if next(turn) % 2 else "b"})

    benchmark.pedantic(relabel, rounds=500, iterations=1, warmup_rounds=5)
    benchmark.extra_info.update(nodes=len(loaded.nodes()))


def bench_update_node_move(benchmark: Any, loaded: Cluster) -> None:
    """An empty node moved to another rack and back (two updates per round)."""
    _, idle = _busy_and_idle(loaded)
    home = loaded.node(idle).topology
    away = {**home, loaded.levels[-1]: "bench-rack"}

    def move() -> None:
        loaded.update_node(idle, topology=away)
        loaded.update_node(idle, topology=home)

    benchmark.pedantic(move, rounds=200, iterations=1, warmup_rounds=2)
    loaded.check_invariants()


def bench_update_node_labels_reference(benchmark: Any, loaded: Cluster) -> None:
    """The same label change by ``gangplace.reference`` on a twin (one round)."""
    busy, _ = _busy_and_idle(loaded)
    twin = reference.Cluster(loaded.levels)
    for name in loaded.nodes():
        info = loaded.node(name)
        twin.add_node(name, gpus=info.gpus, topology=info.topology, labels=info.labels)
    benchmark.pedantic(
        twin.update_node, args=(busy,), kwargs={"labels": {"pool": "b"}}, rounds=1, iterations=1
    )
    assert dict(twin.node(busy).labels) == {"pool": "b"}
