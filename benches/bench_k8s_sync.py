"""``ClusterSync`` benchmarks (docs/kubernetes.md K1-K9; figures in docs/performance.md).

Objects as an API server returns them (``benches/k8s_objects.py``: labels, annotations,
managed fields, conditions, containers with env, mounts and requests, an init container, a
sidecar), as dicts and as the ``kubernetes`` client's model objects. Issue 44's goals, at
10,000 nodes of 8 GPUs and 80,000 running pods: a relist of unchanged objects <= 2 s, a
node ``DELETED`` <= 0.5 ms, a pod event <= 40 us median for dicts and <= 100 us for model
objects. The reference: the same pod events applied to a sync whose cluster is a
``gangplace.reference.Cluster`` with the same nodes (one round each).
"""

from __future__ import annotations

from itertools import count
from typing import Any

import pytest

from benches.k8s_objects import node, pod
from gangplace import reference
from gangplace.k8s import ClusterSync

LEVELS = {"rack": "example.com/rack"}


def _size(request: pytest.FixtureRequest) -> tuple[int, int]:
    """(nodes, gangs of 8 one-GPU pods): 10,000 and 10,000 (80,000 pods), or a smoke size."""
    smoke = request.config.getoption("benchmark_disable", default=False)
    return (64, 32) if smoke else (10_000, 10_000)


def _model(obj: dict[str, Any]) -> Any:
    from kubernetes import client

    kind = obj["kind"]
    return client.ApiClient()._ApiClient__deserialize(obj, f"V1{kind}")  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def listed(request: pytest.FixtureRequest) -> tuple[list[Any], list[Any]]:
    nodes, gangs = _size(request)
    pods = [pod(g, m, (g * 8 + m) % nodes) for g in range(gangs) for m in range(8)]
    return [node(i) for i in range(nodes)], pods


@pytest.mark.parametrize("form", ["dicts", "models"])
def bench_relist_unchanged(benchmark: Any, listed: tuple[list[Any], list[Any]], form: str) -> None:
    """K4: a relist of the same objects at the same versions (nothing is read again)."""
    nodes, pods = listed
    if form == "models":
        nodes, pods = [_model(n) for n in nodes], [_model(p) for p in pods]
    sync = ClusterSync(LEVELS)
    sync.resync(nodes, pods)
    held = sync.cluster.stats().allocated
    results = benchmark.pedantic(sync.resync, args=(nodes, pods), rounds=3, iterations=1)
    assert [r for r in results if r.action != "ignored"] == []
    assert sync.cluster.stats().allocated == held == len(pods)
    benchmark.extra_info.update(nodes=len(nodes), pods=len(pods))


def bench_node_deleted(benchmark: Any, listed: tuple[list[Any], list[Any]]) -> None:
    """K2: a node ``DELETED`` with 8 running pods on it (they wait for it)."""
    nodes, pods = listed
    sync = ClusterSync(LEVELS)
    sync.resync(nodes, pods)
    names = iter(range(len(nodes)))

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        return ("DELETED", node(next(names), version=2)), {}

    actions: list[str] = []

    def apply(kind: str, obj: Any) -> None:
        actions.append(sync.apply(kind, obj).action)

    benchmark.pedantic(apply, setup=setup, rounds=min(200, len(nodes) - 1), iterations=1)
    assert set(actions) == {"node removed"}


@pytest.fixture(scope="module")
def half_full(request: pytest.FixtureRequest) -> ClusterSync:
    """The nodes with 4 of their 8 GPUs used (room for the events' pods)."""
    nodes, gangs = _size(request)
    sync = ClusterSync(LEVELS)
    sync.resync(
        [node(i) for i in range(nodes)],
        [pod(g, m, (g * 4 + m) % nodes) for g in range(gangs) for m in range(4)],
    )
    return sync


_gangs = count(1_000_000)


@pytest.mark.parametrize("form", ["dicts", "models"])
@pytest.mark.parametrize("event", ["adopt", "join", "delete"])
def bench_apply_pod_event(benchmark: Any, half_full: ClusterSync, event: str, form: str) -> None:
    """One pod event: a new gang's first pod, a second pod joining, a pod deleted."""
    sync = half_full
    nodes = len(sync.cluster)
    convert = _model if form == "models" else (lambda obj: obj)

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        gang = next(_gangs)
        first, second = pod(gang, 0, gang % nodes, 3), pod(gang, 1, (gang + 1) % nodes, 3)
        if event == "adopt":
            return ("ADDED", convert(first)), {}
        sync.apply("ADDED", first)
        if event == "join":
            return ("ADDED", convert(second)), {}
        return ("DELETED", convert(pod(gang, 0, gang % nodes, 4))), {}

    results: list[str] = []

    def apply(kind: str, obj: Any) -> None:
        results.append(sync.apply(kind, obj).action)

    benchmark.pedantic(apply, setup=setup, rounds=300, iterations=1, warmup_rounds=2)
    expected = {"adopt": "pod adopted", "join": "pod joined", "delete": "allocation ended"}
    assert set(results) == {expected[event]}
    benchmark.extra_info.update(nodes=nodes)


@pytest.mark.parametrize("event", ["adopt", "join", "delete"])
def bench_apply_pod_event_reference(benchmark: Any, event: str) -> None:
    """The same event, the sync over ``gangplace.reference`` (one round, 64 nodes)."""
    sync = ClusterSync(LEVELS)
    sync.cluster = reference.Cluster(tuple(LEVELS))
    sync.resync([node(i) for i in range(64)])
    first, second = pod(0, 0, 0, 3), pod(0, 1, 1, 3)
    if event != "adopt":
        sync.apply("ADDED", first)
    kind, obj = {"adopt": ("ADDED", first), "join": ("ADDED", second)}.get(
        event, ("DELETED", pod(0, 0, 0, 4))
    )
    result = benchmark.pedantic(sync.apply, args=(kind, obj), rounds=1, iterations=1)
    assert not result.warnings
