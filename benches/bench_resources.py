"""Placement with CPU and memory requests (README "Node resources") against GPU-only placement.

The benchmark cluster (``colossus100k@80`` with ``--quick``: 102,400 GPUs, 80% allocated by
``synth.build``) copied through a snapshot, then every node given CPUs and memory: 96 or 192
cores (seeded, half each) and 2 TiB. The allocations ask no resources, so a node's free
resources are its capacity. Requests: GPU-only; ``loose`` (3 cores and 64 GiB per GPU: never
binds); ``tight`` (16 cores per GPU: an 8-GPU pod needs 128 cores, so the 96-core nodes hold
none, and smaller pods fewer). The issue's goal: a gang with CPU and memory requests within
1.5x of the GPU-only placement. The reference places one gang with resources on a twin with
the same nodes, resources and allocated GPUs (one round). Figures in docs/performance.md.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from benches.clusters import Setup, twin
from gangplace import Cluster, GangRequest, reference

GIB = 2**30
GANGS = {
    "1x8": (1, 8, None),
    "8x8-rack": (8, 8, "rack"),
    "64x8": (64, 8, None),
    "16x2": (16, 2, None),
}
# Per GPU of a pod: millicores and bytes (None: GPU-only).
ASKS: dict[str, tuple[int, int] | None] = {
    "gpu-only": None,
    "loose": (3_000, 64 * GIB),
    "tight": (16_000, 64 * GIB),
}


def node_resources(names: list[str], seed: int = 5) -> dict[str, dict[str, int]]:
    rng = random.Random(seed)
    return {name: {"cpu": rng.choice((96_000, 192_000)), "memory": 2048 * GIB} for name in names}


@pytest.fixture(scope="module")
def resourced(setup: Setup) -> Cluster:
    """A copy of the benchmark cluster whose nodes carry CPUs and memory."""
    copy = Cluster.restore(setup.engine.snapshot())
    for name, resources in node_resources(copy.nodes()).items():
        copy.update_node(name, resources=resources)
    return copy


def request_for(label: str, asks: str, levels: tuple[str, ...]) -> GangRequest:
    pods, gpus, level = GANGS[label]
    level = level if level in (None, *levels) else levels[-1]
    per_gpu = ASKS[asks]
    resources = None if per_gpu is None else {"cpu": per_gpu[0] * gpus, "memory": per_gpu[1] * gpus}
    return GangRequest(pods, gpus, required_level=level, resources_per_pod=resources)


def bench_place_pods_without_gpus(benchmark: Any, resourced: Cluster) -> None:
    """16 pods without GPUs asking 4 cores and 16 GiB each (launchers, CPU workers), counted
    by their resources alone: every node is visited until the gang fits."""
    request = GangRequest(16, 0, resources_per_pod={"cpu": 4_000, "memory": 16 * GIB})
    benchmark.extra_info.update(op="place_gang", gang="16x0", asks="cpu+memory")
    placement = benchmark(resourced.place_gang, request)
    assert placement is not None and len(placement) == 16


@pytest.mark.parametrize("asks", list(ASKS))
@pytest.mark.parametrize("label", list(GANGS))
def bench_place_with_resources(benchmark: Any, resourced: Cluster, label: str, asks: str) -> None:
    request = request_for(label, asks, resourced.levels)
    benchmark.extra_info.update(op="place_gang", gang=label, asks=asks)
    placement = benchmark(resourced.place_gang, request)
    if placement is not None:
        assert len(placement) == request.pods


def bench_reference_place_with_resources(benchmark: Any, setup: Setup, resourced: Cluster) -> None:
    """The reference's placement of the tight 8x8 rack gang (one round)."""
    oracle: reference.Cluster = twin(resourced, setup.shape)
    for name, resources in node_resources(resourced.nodes()).items():
        oracle._nodes[name].resources = resources
        oracle._resource_names.update(resources)
    request = request_for("8x8-rack", "tight", resourced.levels)
    benchmark.extra_info.update(op="reference place_gang", gang="8x8-rack", asks="tight")
    placement = benchmark.pedantic(oracle.place_gang, (request,), rounds=1, iterations=1)
    engine = resourced.place_gang(request)
    assert (placement is None) == (engine is None)
    if placement is not None and engine is not None:
        assert [(p.node, tuple(p.gpus)) for p in placement.pods] == [
            (p.node, tuple(p.gpus)) for p in engine.pods
        ]
