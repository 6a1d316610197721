"""``ClusterSync.apply`` benchmarks (docs/kubernetes.md "Staying current: watch events"; figures in
docs/performance.md).

A cluster of the ``colossus100k`` size built from node events (12,800 nodes of 8 GPUs, 32
nodes per rack), then pod events, one per round: a pod of a new gang adopted (``ADDED``), a
second pod of that gang joining its allocation (``ADDED``), and a pod deleted (``DELETED``:
its rank ends). The reference: the same events applied to a sync whose cluster is a
``gangplace.reference.Cluster`` with the same nodes (one round each).
"""

from __future__ import annotations

from itertools import count
from typing import Any

import pytest

from gangplace import reference
from gangplace.k8s import ClusterSync

LEVELS = {"rack": "example.com/rack"}


def _node(index: int) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": f"n{index}", "labels": {"example.com/rack": f"r{index // 32}"}},
        "status": {"capacity": {"nvidia.com/gpu": "8"}},
    }


def _pod(gang: int, member: int, where: int) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {
            "name": f"g{gang}-{member}",
            "namespace": "ml",
            "labels": {"scheduling.x-k8s.io/pod-group": f"g{gang}"},
        },
        "spec": {
            "nodeName": f"n{where}",
            "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        },
        "status": {"phase": "Running"},
    }


@pytest.fixture(scope="module")
def nodes(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    smoke = request.config.getoption("benchmark_disable", default=False)
    return [_node(i) for i in range(64 if smoke else 12_800)]


def _sync(nodes: list[dict[str, Any]], kind: Any = None) -> ClusterSync:
    sync = ClusterSync(LEVELS)
    if kind is not None:  # the same sync over another cluster type, before any event
        sync.cluster = kind(tuple(LEVELS))
    sync.resync(nodes)
    return sync


@pytest.mark.parametrize("event", ["adopt", "join", "delete"])
def bench_apply_pod_event(benchmark: Any, nodes: list[dict[str, Any]], event: str) -> None:
    """One pod event: a new gang's first pod, a second pod joining, a pod deleted."""
    sync = _sync(nodes)
    gangs = count()
    size = len(nodes)

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        gang = next(gangs)
        first, second = _pod(gang, 0, gang % size), _pod(gang, 1, (gang + 1) % size)
        if event == "adopt":
            return ("ADDED", first), {}
        sync.apply("ADDED", first)
        if event == "join":
            return ("ADDED", second), {}
        return ("DELETED", first), {}

    results: list[str] = []

    def apply(kind: str, obj: Any) -> None:
        results.append(sync.apply(kind, obj).action)

    benchmark.pedantic(apply, setup=setup, rounds=300, iterations=1, warmup_rounds=2)
    expected = {"adopt": "pod adopted", "join": "pod joined", "delete": "allocation ended"}
    assert set(results) == {expected[event]}
    benchmark.extra_info.update(nodes=len(nodes))


@pytest.mark.parametrize("event", ["adopt", "join", "delete"])
def bench_apply_pod_event_reference(
    benchmark: Any, nodes: list[dict[str, Any]], event: str
) -> None:
    """The same event, the sync over ``gangplace.reference`` (one round)."""
    sync = _sync(nodes, reference.Cluster)
    first, second = _pod(0, 0, 0), _pod(0, 1, 1)
    if event != "adopt":
        sync.apply("ADDED", first)
    kind, obj = {"adopt": ("ADDED", first), "join": ("ADDED", second)}.get(
        event, ("DELETED", first)
    )
    result = benchmark.pedantic(sync.apply, args=(kind, obj), rounds=1, iterations=1)
    assert not result.warnings
