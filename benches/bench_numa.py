"""GPU groups inside nodes (docs/shapes.md "Inside a node") against the same cluster without them.

1,024 nodes (128 racks x 8) of 8 GPUs, half of every node's GPUs taken at seeded random; with
groups, every node is the PCIe board of ``tests/fixtures/nvidia-smi-topo-pcie.txt`` (two
sockets, four GPU pairs behind switches). The goal of issue 13: placements on grouped nodes
within 20% of the time on plain ones; ``numa="single"`` gangs walk the nodes (and may not
fit where GPUs are split over sockets). The smoke run (``--benchmark-disable``) checks answers.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from gangplace import Cluster, GangRequest, NodeTopology, PodPlacement

PCIE_BOARD = NodeTopology(("numa", "pcie"), tuple((gpu // 4, gpu // 2) for gpu in range(8)))
GANGS = {"1x2": (1, 2), "1x4": (1, 4), "8x4": (8, 4), "64x2": (64, 2)}


def build(grouped: bool, racks: int = 128, seed: int = 7) -> Cluster:
    rng = random.Random(seed)
    cluster = Cluster(("rack",))
    for rack in range(racks):
        for node in range(8):
            name = f"r{rack}-n{node}"
            groups = PCIE_BOARD if grouped else None
            cluster.add_node(name, gpus=8, topology={"rack": f"r{rack}"}, gpu_topology=groups)
            cluster.adopt([PodPlacement(name, sorted(rng.sample(range(8), 4)))])
    return cluster


@pytest.fixture(scope="module")
def clusters(request: pytest.FixtureRequest) -> dict[bool, Cluster]:
    smoke = request.config.getoption("benchmark_disable", default=False)
    racks = 4 if smoke else 128
    return {grouped: build(grouped, racks) for grouped in (False, True)}


@pytest.mark.parametrize(
    ("grouped", "numa"),
    [(False, "none"), (True, "none"), (True, "single")],
    ids=["plain", "grouped", "grouped-numa-single"],
)
@pytest.mark.parametrize("label", list(GANGS))
def bench_place_on_grouped_nodes(
    benchmark: Any, clusters: dict[bool, Cluster], label: str, grouped: bool, numa: str
) -> None:
    pods, size = GANGS[label]
    request = GangRequest(pods, size, numa=numa)  # type: ignore[arg-type]
    benchmark.extra_info.update(op="place_gang", gang=label, grouped=grouped, numa=numa)
    placement = benchmark(clusters[grouped].place_gang, request)
    if placement is None:
        assert numa == "single"  # free GPUs split over sockets
    else:
        assert len(placement) == pods
