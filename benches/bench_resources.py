"""Placement with CPU and memory requests (docs/resources.md "Node resources") against GPU-only
placement.

The benchmark cluster (``colossus100k@80`` with ``--quick``: 102,400 GPUs, 80% allocated by
``synth.build``) copied through a snapshot, then every node given CPUs and memory: 96 or 192
cores (seeded, half each) and 2 TiB. The allocations ask no resources, so a node's free
resources are its capacity. Requests: GPU-only; ``loose`` (3 cores and 64 GiB per GPU: never
binds); ``tight`` (16 cores per GPU: an 8-GPU pod needs 128 cores, so the 96-core nodes hold
none, and smaller pods fewer). The issue's goal: a gang with CPU and memory requests within
1.5x of the GPU-only placement. The reference places one gang with resources on a twin with
the same nodes, resources and allocated GPUs (one round). Multi-role units (docs/roles.md
"Multi-role gangs", rule 9): an MPIJob, its launcher colocated with 16 workers of 8 GPUs in
the rack of worker rank 0, GPU-only (a 1-GPU launcher) against a launcher of 8 cores and no
GPU beside workers asking the loose amounts. Figures in docs/performance.md.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from benches.clusters import Setup, assert_same_pods, twin
from gangplace import Cluster, GangRequest, MultiGangRequest, PodGroup, reference

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


@pytest.fixture(scope="module")
def resourced_twin(setup: Setup, resourced: Cluster) -> reference.Cluster:
    """The reference in the state of ``resourced``, its nodes carrying the same resources."""
    oracle: reference.Cluster = twin(resourced, setup.shape)
    for name, resources in node_resources(resourced.nodes()).items():
        oracle._nodes[name].resources = resources
        oracle._resource_names.update(resources)
    return oracle


def bench_reference_place_with_resources(
    benchmark: Any, resourced_twin: reference.Cluster, resourced: Cluster
) -> None:
    """The reference's placement of the tight 8x8 rack gang (one round)."""
    request = request_for("8x8-rack", "tight", resourced.levels)
    benchmark.extra_info.update(op="reference place_gang", gang="8x8-rack", asks="tight")
    placement = benchmark.pedantic(resourced_twin.place_gang, (request,), rounds=1, iterations=1)
    assert_same_pods(placement, resourced.place_gang(request))


def mpijob(asks: str) -> MultiGangRequest:
    """A launcher colocated with 16 workers of 8 GPUs in the rack of worker rank 0."""
    per_gpu = ASKS[asks]
    if per_gpu is None:
        launcher = PodGroup("launcher", 1, 1)
        workers = PodGroup("workers", 16, 8)
    else:
        launcher = PodGroup("launcher", 1, 0, resources_per_pod={"cpu": 8_000, "memory": 32 * GIB})
        worker = {"cpu": per_gpu[0] * 8, "memory": per_gpu[1] * 8}
        workers = PodGroup("workers", 16, 8, resources_per_pod=worker)
    return MultiGangRequest((launcher, workers), colocate=(("launcher", "workers", "rack"),))


@pytest.mark.parametrize("asks", ["gpu-only", "loose", "tight"])
def bench_place_roles_with_resources(benchmark: Any, resourced: Cluster, asks: str) -> None:
    request = mpijob(asks)
    benchmark.extra_info.update(op="place_gang", gang="mpijob 1+16x8", asks=asks)
    placement = benchmark(resourced.place_gang, request)
    if placement is not None:
        assert len(placement.groups["workers"]) == 16


def bench_reference_place_roles_with_resources(
    benchmark: Any, resourced_twin: reference.Cluster, resourced: Cluster
) -> None:
    """The reference's placement of the loose MPIJob (one round)."""
    request = mpijob("loose")
    benchmark.extra_info.update(op="reference place_gang", gang="mpijob 1+16x8", asks="loose")
    placement = benchmark.pedantic(resourced_twin.place_gang, (request,), rounds=1, iterations=1)
    assert_same_pods(placement, resourced.place_gang(request))


@pytest.mark.parametrize("asks", ["gpu-only", "tight"])
def bench_reserve_rollback_with_resources(benchmark: Any, resourced: Cluster, asks: str) -> None:
    """The 8 x 8 rack gang reserved and rolled back, round after round: with resources, each
    reservation's changed nodes are recounted in the kept counts (docs/resources.md "Node
    resources") before the next search, so this is what keeping them costs under churn."""
    label = "8x8-rack"
    if resourced.place_gang(request_for(label, asks, resourced.levels)) is None:
        label = "1x8"  # the smoke run's tiny cluster
    request = request_for(label, asks, resourced.levels)
    benchmark.extra_info.update(op="reserve+rollback", gang=label, asks=asks)

    def cycle() -> None:
        resourced.rollback(resourced.reserve(request))

    benchmark(cycle)
    resourced.check_invariants()
