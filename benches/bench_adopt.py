"""``Cluster.adopt`` benchmarks (docs/transactions.md "Adopting running work"; figures in
docs/performance.md).

``colossus100k@80``: the 102,400-GPU shape filled to 80% by ``synth.fill``. Adopted: a job of
64 pods, one per node, each naming the free GPUs of one of the 64 first nodes with any
(``PodPlacement``), the same job given as ``(node, count)`` pairs, and 64 pods of 500
thousandths of one GPU (``gpu_milli``, docs/resources.md "Fractions of a GPU") on the same nodes,
each GPU chosen by rule F2 (``(node, 1)`` pairs); and one pod joining the first 63 of the
gang (``adopt(into=...)``), of whole GPUs or of shares. Each round's setup
releases the previous round's allocation. The reference (``gangplace.reference``) adopts the
same pods on a twin with the same nodes and holds (one round).
"""

from __future__ import annotations

from typing import Any

import pytest

from gangplace import Cluster, PodPlacement, reference, synth

SMALL = synth.Shape("small", ("block", "rack"), (2, 2, 4), 8, "smoke-test size")


@pytest.fixture(scope="module")
def loaded(request: pytest.FixtureRequest) -> tuple[Cluster, list[PodPlacement]]:
    smoke = request.config.getoption("benchmark_disable", default=False)
    cluster, _ = synth.build(SMALL if smoke else "colossus100k", fill=0.8, seed=1)
    pods = []
    for name in cluster.nodes():
        free = cluster.node(name).free
        if free:
            pods.append(PodPlacement(name, free))
        if len(pods) == (8 if smoke else 64):
            break
    return cluster, pods


def _adopt_rounds(benchmark: Any, cluster: Any, pods: list[Any], **options: Any) -> Any:
    adopted: list[Any] = []

    def setup() -> None:
        for allocation in adopted:
            cluster.release(allocation)
        adopted.clear()

    def adopt() -> Any:
        allocation = cluster.adopt(pods, **options)
        adopted.append(allocation)
        return allocation

    benchmark.pedantic(adopt, setup=setup, rounds=200, iterations=1, warmup_rounds=2)
    setup()


@pytest.mark.parametrize("form", ["placements", "counts", "shares"])
def bench_adopt_64_pods(
    benchmark: Any, loaded: tuple[Cluster, list[PodPlacement]], form: str
) -> None:
    """64 running pods on 64 nodes, as explicit GPUs, as counts, or as shares of one GPU."""
    cluster, pods = loaded
    if form == "shares":
        _adopt_rounds(benchmark, cluster, [(p.node, 1) for p in pods], gpu_milli=500)
        benchmark.extra_info.update(pods=len(pods), gpu_milli=500)
        return
    entries: list[Any] = pods if form == "placements" else [(p.node, len(p.gpus)) for p in pods]
    _adopt_rounds(benchmark, cluster, entries)
    benchmark.extra_info.update(pods=len(pods), gpus=sum(len(p.gpus) for p in pods))


@pytest.mark.parametrize("form", ["placements", "shares"])
def bench_adopt_64_pods_reference(
    benchmark: Any, loaded: tuple[Cluster, list[PodPlacement]], form: str
) -> None:
    """The same adoption by ``gangplace.reference`` on a twin (one round)."""
    cluster, given = loaded
    pods: list[Any] = given
    options: dict[str, Any] = {}
    if form == "shares":
        pods, options = [(p.node, 1) for p in given], {"gpu_milli": 500}
    twin = reference.Cluster(cluster.levels)
    for name in cluster.nodes():
        info = cluster.node(name)
        twin.add_node(
            name, gpus=info.gpus, topology=info.topology, labels=info.labels,
            unhealthy=info.unhealthy,
        )  # fmt: skip
    for allocation in cluster.allocations():
        twin.adopt(allocation.placement.pods)
    got = benchmark.pedantic(twin.adopt, args=(pods,), kwargs=options, rounds=1, iterations=1)
    want = cluster.adopt(pods, **options)
    assert got.placement.pods == tuple(
        reference.PodPlacement(p.node, tuple(p.gpus)) for p in want.placement.pods
    )
    cluster.release(want)


def _grown_forms(pods: list[PodPlacement], form: str) -> tuple[list[Any], dict[str, Any]]:
    """The gang's entries and options: whole GPUs as named, or a share of 500 per pod
    (``(node, 1)`` pairs, docs/resources.md "Fractions of a GPU")."""
    if form == "shares":
        return [(p.node, 1) for p in pods], {"gpu_milli": 500}
    return list(pods), {}


@pytest.mark.parametrize("form", ["placements", "shares"])
def bench_adopt_into_one_pod(
    benchmark: Any, loaded: tuple[Cluster, list[PodPlacement]], form: str
) -> None:
    """One running pod joins an adopted 63-pod gang (``adopt(into=...)``), of whole GPUs or
    of shares."""
    cluster, given = loaded
    pods, options = _grown_forms(given, form)
    state: list[Any] = []

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        for allocation in state:
            cluster.release(allocation)
        state.clear()
        state.append(cluster.adopt(pods[:-1], **options))
        return ([pods[-1]],), {"into": state[0], **options}

    def grow(entries: list[Any], into: Any, **more: Any) -> None:
        state[0] = cluster.adopt(entries, into=into, **more)

    benchmark.pedantic(grow, setup=setup, rounds=200, iterations=1, warmup_rounds=2)
    for allocation in state:
        cluster.release(allocation)
    benchmark.extra_info.update(pods=len(pods), **options)


@pytest.mark.parametrize("form", ["placements", "shares"])
def bench_adopt_into_reference(
    benchmark: Any, loaded: tuple[Cluster, list[PodPlacement]], form: str
) -> None:
    """The same growth by ``gangplace.reference`` on a twin (one round); the same ranks as
    the engine's."""
    cluster, given = loaded
    pods, options = _grown_forms(given, form)
    twin = reference.Cluster(cluster.levels)
    for name in cluster.nodes():
        info = cluster.node(name)
        twin.add_node(name, gpus=info.gpus, topology=info.topology, labels=info.labels)
    for allocation in cluster.allocations():
        twin.adopt(allocation.placement.pods)
    gang = twin.adopt(pods[:-1], **options)
    grown = benchmark.pedantic(
        twin.adopt, args=([pods[-1]],), kwargs={"into": gang, **options}, rounds=1, iterations=1
    )
    mine = cluster.adopt(pods[:-1], **options)
    want = cluster.adopt([pods[-1]], into=mine, **options)
    assert grown.placement.pods == tuple(
        reference.PodPlacement(p.node, tuple(p.gpus)) for p in want.placement.pods
    )
    cluster.release(want)
