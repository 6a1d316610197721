"""place_gang and a reserve/commit/release cycle: the Rust engine against gangplace.reference.

Run: ``.venv/bin/python -m pytest benches/ --benchmark-only``. The README's test command runs
these once with ``--benchmark-disable`` as a smoke test (it checks answers, not times).
"""

from __future__ import annotations

from typing import Any

import pytest

import gangplace
from gangplace import GangRequest, reference

LEVELS = ("spine", "rack")
SHAPE = (4, 8, 8)  # 4 spines x 8 racks x 8 nodes x 8 GPUs = 2,048 GPUs


def build(kind: Any) -> Any:
    cluster = kind.Cluster(LEVELS)
    for spine in range(SHAPE[0]):
        for rack in range(SHAPE[1]):
            for node in range(SHAPE[2]):
                cluster.add_node(
                    f"s{spine}-r{rack}-n{node}",
                    gpus=8,
                    topology={"spine": f"s{spine}", "rack": f"s{spine}-r{rack}"},
                    unhealthy=[node % 8] if (spine + rack + node) % 7 == 0 else [],
                )
    # Fill about half the cluster with a deterministic mix of committed gangs.
    for index in range(60):
        request = GangRequest(1 + index % 6, (1, 2, 4, 8)[index % 4])
        cluster.commit(cluster.reserve(request, ttl=3600))
    return cluster


@pytest.fixture(scope="module", params=["engine", "reference"])
def cluster(request: pytest.FixtureRequest) -> Any:
    return build(gangplace if request.param == "engine" else reference)


@pytest.mark.parametrize(
    "gang",
    [GangRequest(1, 8), GangRequest(8, 8), GangRequest(4, 8, required_level="rack")],
    ids=["8gpu", "64gpu", "32gpu-rack"],
)
def bench_place_gang(benchmark: Any, cluster: Any, gang: GangRequest) -> None:
    placement = benchmark(cluster.place_gang, gang)
    assert placement is not None and len(placement) == gang.pods


def bench_reserve_commit_release(benchmark: Any, cluster: Any) -> None:
    def cycle() -> None:
        allocation = cluster.commit(cluster.reserve(GangRequest(2, 4)))
        assert cluster.release(allocation) is True

    benchmark(cycle)
