"""How ``place_gang`` grows with the cluster on random fills (issue 29, part 2).

The clusters of ``bench_ties.py`` (``spine`` x 16 racks x 8 nodes x 8 GPUs), all GPUs healthy,
10 spines (10,240 GPUs) and 98 (100,352), each filled to 70% by ``synth.fill`` with its
default gang mix (seed 0, the same draw on both sizes). Every gang of
``bench_clusters.GANGS`` is placed on the unchanged cluster again and again. The goal: no
gang's median grows more than 1.3x from 10k to 100k GPUs (docs/performance.md has the
ratios). The reference places the smallest gang once on the 10k cluster, with the same node.

Smoke mode (the test command) runs the 10k cluster only.
"""

from __future__ import annotations

from typing import Any

import pytest

from benches.bench_clusters import GANGS
from benches.bench_ties import SPINES, tied_cluster
from benches.conftest import _mode
from gangplace import Cluster, GangRequest, reference, synth

FILL = 0.7
SIZES = ("10k", "100k")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "filled" in metafunc.fixturenames:
        sizes = ["10k"] if _mode(metafunc.config) == "smoke" else list(SIZES)
        metafunc.parametrize("filled", sizes, indirect=True, scope="module")


def filled_cluster(spines: int) -> Cluster:
    """The cluster of ``spines`` spines, all healthy, 70% allocated (seed 0)."""
    cluster = tied_cluster(spines, unhealthy_mask=0)
    synth.fill(cluster, FILL, seed=0, gpus_per_node=8)
    return cluster


@pytest.fixture(scope="module")
def filled(request: pytest.FixtureRequest) -> tuple[str, Cluster]:
    return request.param, filled_cluster(SPINES[request.param])


def _request(label: str) -> GangRequest:
    total, pod = GANGS[label]
    gpus_per_pod = pod or 8
    return GangRequest(max(1, total // gpus_per_pod), gpus_per_pod)


@pytest.mark.parametrize("label", list(GANGS))
def bench_random_fill_place(benchmark: Any, filled: tuple[str, Cluster], label: str) -> None:
    size, cluster = filled
    request = _request(label)
    benchmark.extra_info.update(op="place_gang", gang=label, cluster=f"random70-{size}")
    placement = benchmark(cluster.place_gang, request)
    if placement is not None:
        assert placement.total_gpus == request.total_gpus


def bench_random_fill_place_reference(benchmark: Any) -> None:
    """The reference on the 10k cluster (one round), one 1-GPU pod: the same node."""
    engine = filled_cluster(SPINES["10k"])
    oracle = reference.Cluster(("spine", "rack"))
    for name in engine.nodes():
        node = engine.node(name)
        oracle.add_node(name, gpus=node.gpus, topology=dict(node.topology))
    for allocation in engine.allocations():
        oracle.commit(oracle.reserve(allocation.placement))
    request = _request("1")
    benchmark.extra_info.update(op="place_gang", gang="1", cluster="random70-10k", impl="reference")
    got = benchmark.pedantic(oracle.place_gang, args=(request,), rounds=1, iterations=1)
    expected = engine.place_gang(request)
    assert got is not None and expected is not None and got.nodes == expected.nodes
