"""Best-fit's ancestor tie-break when every node is equally free (issue 29, part 2).

Clusters of ``spine`` x 16 racks x 8 nodes x 8 GPUs where GPUs 1-7 of every node are
unhealthy, so every node has exactly one free healthy GPU (the issue built the same state by
adopting 7 GPUs per node; only the free healthy counts matter to the search): 10 spines
(10,240 GPUs), 98 (100,352) and 980 (1,003,520). A one-GPU gang's best node is rule 3's pick
among all nodes: the tie-break compares racks by their spines' free GPUs and then by path.

- ``place``: ``place_gang(GangRequest(1, 1))`` again and again on an unchanged cluster (each
  domain's remembered pick is current);
- ``after-change``: ``reserve`` then ``rollback`` of the same gang, so every search follows a
  change to one node (its rack's and spine's picks are found again);
- ``four-pods``: ``place_gang(GangRequest(4, 1))``, placed at the rack level, where runs of
  equally free racks are still walked (not yet logarithmic);
- the reference on the smallest cluster, with the same answer checked.

Smoke mode (the test command) runs the smallest cluster only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from benches.conftest import _mode
from gangplace import Cluster, GangRequest, reference

RACKS_PER_SPINE, NODES_PER_RACK, GPUS = 16, 8, 8
SPINES = {"10k": 10, "100k": 98, "1m": 980}
SEVEN_UNHEALTHY = 0b1111_1110


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "tied" in metafunc.fixturenames:
        sizes = ["10k"] if _mode(metafunc.config) == "smoke" else list(SPINES)
        metafunc.parametrize("tied", sizes, indirect=True, scope="module")


def tied_cluster(spines: int, *, unhealthy_mask: int = SEVEN_UNHEALTHY) -> Cluster:
    """The all-tied cluster of ``spines`` spines (see the module docstring); with
    ``unhealthy_mask=0``, the same shape with every GPU healthy."""
    count = spines * RACKS_PER_SPINE * NODES_PER_RACK
    index = np.arange(count)
    spine_codes = index // (RACKS_PER_SPINE * NODES_PER_RACK)
    rack_codes = (index // NODES_PER_RACK) % RACKS_PER_SPINE
    return Cluster.from_arrays(
        ("spine", "rack"),
        names=[f"n{i:07d}" for i in range(count)],
        domains=[
            (spine_codes, [f"s{s:04d}" for s in range(spines)]),
            (rack_codes, [f"r{r:02d}" for r in range(RACKS_PER_SPINE)]),
        ],
        gpus=np.full(count, GPUS),
        unhealthy_mask=np.full(count, unhealthy_mask, dtype=np.uint64),
    )


@pytest.fixture(scope="module")
def tied(request: pytest.FixtureRequest) -> tuple[str, Cluster]:
    return request.param, tied_cluster(SPINES[request.param])


def bench_tied_place(benchmark: Any, tied: tuple[str, Cluster]) -> None:
    label, cluster = tied
    benchmark.extra_info.update(op="place_gang", gang="1x1", cluster=f"tied-{label}")
    placement = benchmark(cluster.place_gang, GangRequest(1, 1))
    assert placement is not None and placement.nodes == ("n0000000",)


def bench_tied_after_change(benchmark: Any, tied: tuple[str, Cluster]) -> None:
    label, cluster = tied
    benchmark.extra_info.update(op="reserve+rollback", gang="1x1", cluster=f"tied-{label}")
    request = GangRequest(1, 1)

    def reserve_and_rollback() -> str:
        reservation = cluster.reserve(request)
        cluster.rollback(reservation)
        return reservation.placement.nodes[0]

    assert benchmark(reserve_and_rollback) == "n0000000"


def bench_tied_four_pods(benchmark: Any, tied: tuple[str, Cluster]) -> None:
    label, cluster = tied
    benchmark.extra_info.update(op="place_gang", gang="4x1", cluster=f"tied-{label}")
    placement = benchmark(cluster.place_gang, GangRequest(4, 1))
    assert placement is not None and placement.level == "rack"


def bench_tied_place_reference(benchmark: Any) -> None:
    """The reference on the 10,240-GPU cluster (one round): the same node."""
    engine = tied_cluster(SPINES["10k"])
    oracle = reference.Cluster(("spine", "rack"))
    for name in engine.nodes():
        node = engine.node(name)
        oracle.add_node(name, gpus=GPUS, topology=dict(node.topology), unhealthy=range(1, GPUS))
    benchmark.extra_info.update(op="place_gang", gang="1x1", cluster="tied-10k", impl="reference")
    got = benchmark.pedantic(oracle.place_gang, args=(GangRequest(1, 1),), rounds=1, iterations=1)
    expected = engine.place_gang(GangRequest(1, 1))
    assert got is not None and expected is not None and got.nodes == expected.nodes
