"""``Cluster.release_pods`` benchmarks (docs/transactions.md "Ending some pods"; figures in
docs/performance.md).

``colossus100k@80``: the 102,400-GPU shape filled to 80% by ``synth.fill``. A 16 x 8 gang is
committed; each round ends one of its ranks (a fresh gang replaces it when one rank is left,
outside the timed call). The reference (``gangplace.reference``) ends one rank of the same
gang on a twin with the same nodes and holds (one round).
"""

from __future__ import annotations

from typing import Any

import pytest

from gangplace import Allocation, Cluster, GangRequest, reference, synth

SMALL = synth.Shape("small", ("block", "rack"), (2, 2, 4), 8, "smoke-test size")


@pytest.fixture(scope="module")
def loaded(request: pytest.FixtureRequest) -> tuple[Cluster, GangRequest]:
    """The cluster and the gang (4 x 1 at the smoke-test size, where 16 x 8 does not fit)."""
    smoke = request.config.getoption("benchmark_disable", default=False)
    cluster, _ = synth.build(SMALL if smoke else "colossus100k", fill=0.8, seed=1)
    return cluster, GangRequest(4, 1) if smoke else GangRequest(16, 8)


def bench_release_pods_one_rank(benchmark: Any, loaded: tuple[Cluster, GangRequest]) -> None:
    """One rank of a committed 16 x 8 gang ended per round."""
    cluster, gang = loaded
    live: list[Any] = []

    def next_rank() -> tuple[tuple[Any, ...], dict[str, Any]]:
        if not live or len(live[0].ended) == len(live[0].placement.pods) - 1:
            if live:
                cluster.release(live.pop())
            live.append(cluster.commit(cluster.reserve(gang)))
        job: Allocation = live[0]
        rank = len(job.ended)
        return (job.id, [rank]), {}

    def end(job_id: str, ranks: list[int]) -> None:
        live[0] = cluster.release_pods(job_id, ranks)

    benchmark.pedantic(end, setup=next_rank, rounds=300, iterations=1, warmup_rounds=2)
    cluster.release(live.pop())  # the fill alone again, for the reference's twin
    cluster.check_invariants()
    benchmark.extra_info.update(nodes=len(cluster.nodes()))


def bench_release_pods_reference(benchmark: Any, loaded: tuple[Cluster, GangRequest]) -> None:
    """The same by ``gangplace.reference`` on a twin with the same nodes and holds."""
    cluster, gang = loaded
    twin = reference.Cluster(cluster.levels)
    for name in cluster.nodes():
        info = cluster.node(name)
        twin.add_node(name, gpus=info.gpus, topology=info.topology, labels=info.labels)
    for held in cluster.allocations():
        twin.adopt(held.placement.pods)
    job = twin.commit(twin.reserve(gang))
    after = benchmark.pedantic(twin.release_pods, args=(job, [0]), rounds=1, iterations=1)
    assert after.ended == (0,)
