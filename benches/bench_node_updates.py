"""``Cluster.update_node`` and ``Cluster.holds_on`` benchmarks (docs/transactions.md "Node updates"
and "Transactions"; figures in docs/performance.md).

``colossus100k@80``: the 102,400-GPU shape filled to 80% by ``synth.fill``. Labels: one
node's labels toggled between two values (the node holds GPUs). Structure: an empty node
moved between two racks and back (it is removed and added again). The reference
(``gangplace.reference``) makes the same label change on a twin with the same nodes (one
round). ``holds_on``: the holds on a busy node; the reference answers it on a twin with the
same nodes and holds (one round). ``holds_on`` with shares: the last idle node given 16
fractional allocations of one 250-thousandth pod each (four per GPU of its first four), the
holds sharing its GPUs (docs/resources.md "Fractions of a GPU").
"""

from __future__ import annotations

from itertools import count
from typing import Any

import pytest

from gangplace import Cluster, PodPlacement, reference, synth

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


def _twin(cluster: Cluster) -> reference.Cluster:
    """A reference cluster with the same nodes (and labels), holding nothing."""
    twin = reference.Cluster(cluster.levels)
    for name in cluster.nodes():
        info = cluster.node(name)
        twin.add_node(name, gpus=info.gpus, topology=info.topology, labels=info.labels)
    return twin


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
    twin = _twin(loaded)
    benchmark.pedantic(
        twin.update_node, args=(busy,), kwargs={"labels": {"pool": "b"}}, rounds=1, iterations=1
    )
    assert dict(twin.node(busy).labels) == {"pool": "b"}


def bench_holds_on(benchmark: Any, loaded: Cluster) -> None:
    """The holds on a busy node (a pure query)."""
    busy, _ = _busy_and_idle(loaded)
    holds = benchmark.pedantic(loaded.holds_on, args=(busy,), rounds=500, iterations=1)
    assert holds and {gpu for _, gpus in holds for gpu in gpus} == set(loaded.node(busy).allocated)
    benchmark.extra_info.update(holds=len(holds), allocations=len(loaded.allocations()))


def bench_holds_on_reference(benchmark: Any, loaded: Cluster) -> None:
    """The same by ``gangplace.reference`` on a twin with the same nodes and holds."""
    busy, _ = _busy_and_idle(loaded)
    twin = _twin(loaded)
    for held in loaded.allocations():
        twin.adopt(held.placement.pods, gpu_milli=held.placement.gpu_milli)
    holds = benchmark.pedantic(twin.holds_on, args=(busy,), rounds=1, iterations=1)
    assert sorted(gpus for _, gpus in holds) == sorted(gpus for _, gpus in loaded.holds_on(busy))


SHARERS = 16


def _shared_node(cluster: Cluster) -> str:
    """The last idle node, with ``SHARERS`` fractional allocations on it (made once)."""
    names = cluster.nodes()
    shared = [n for n in names if cluster.node(n).shared]
    if shared:
        return shared[-1]
    node = [n for n in names if len(cluster.node(n).free) == cluster.node(n).gpus][-1]
    for index in range(SHARERS):
        cluster.adopt([PodPlacement(node, [index // 4])], gpu_milli=250)
    return node


def bench_holds_on_shares(benchmark: Any, loaded: Cluster) -> None:
    """The holds sharing GPUs of a node (a pure query)."""
    node = _shared_node(loaded)
    holds = benchmark.pedantic(loaded.holds_on, args=(node,), rounds=500, iterations=1)
    assert len(holds) == SHARERS and {gpus for _, gpus in holds} == {(0,), (1,), (2,), (3,)}
    benchmark.extra_info.update(holds=len(holds))


def bench_holds_on_shares_reference(benchmark: Any, loaded: Cluster) -> None:
    """The same by ``gangplace.reference`` on a twin with the same nodes and holds."""
    node = _shared_node(loaded)
    twin = _twin(loaded)
    for held in loaded.allocations():
        twin.adopt(held.placement.pods, gpu_milli=held.placement.gpu_milli)
    holds = benchmark.pedantic(twin.holds_on, args=(node,), rounds=1, iterations=1)
    assert sorted(gpus for _, gpus in holds) == sorted(gpus for _, gpus in loaded.holds_on(node))
