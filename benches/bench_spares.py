"""Placing gangs with spares (docs/repair.md "Spares"; figures in docs/performance.md).

A gang with spares is searched as the gang it folds into, then split; the cost over the same
search without spares is the fold and the split. Cases, on seeded ``synth`` builds (guessed
gang mixes, not traces): a 64 x 8 gang with 8 spares against a plain 72 x 8 gang on
``colossus100k`` at 80% fill, and a 64 x 4 gang in 16-pod rack slices with 2 spares per
slice against the plain 72 x 4 gang in 18-pod slices on ``nvl72`` (empty, so that whole
racks exist). The reference places each once, checked against the engine. The smoke run
(``--benchmark-disable``) uses ``tiny`` and checks answers.
"""

from __future__ import annotations

from typing import Any

import pytest

from benches.clusters import twin
from gangplace import GangRequest, synth

CASES = {
    "colossus-64x8+8": ("colossus100k", 0.8, GangRequest(64, 8, spares=8), GangRequest(72, 8)),
    "nvl72-slices-64x4+2": (
        "nvl72",
        0.0,
        GangRequest(64, 4, slices=(("rack", 16),), spares=2),
        GangRequest(72, 4, slices=(("rack", 18),)),
    ),
}
SMOKE = ("tiny", 0.5, GangRequest(2, 8, spares=1), GangRequest(3, 8))


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request: pytest.FixtureRequest) -> dict[str, Any]:
    smoke = request.config.getoption("benchmark_disable", default=False)
    name, fill, spared, plain = SMOKE if smoke else CASES[request.param]
    shape = synth.SHAPES[name]
    cluster, _ = synth.build(shape, fill=fill, seed=1)
    return {"cluster": cluster, "shape": shape, "spared": spared, "plain": plain}


@pytest.mark.parametrize("kind", ["spared", "plain"])
def bench_place_with_spares(benchmark: Any, case: dict[str, Any], kind: str) -> None:
    """``place_gang`` of the gang with spares, and of the plain gang it folds into."""
    placement = benchmark(case["cluster"].place_gang, case[kind])
    assert placement is not None
    other = case["cluster"].place_gang(case["plain" if kind == "spared" else "spared"])
    assert other is not None
    together = [*placement.pods, *placement.spares]
    assert sorted(together, key=repr) == sorted([*other.pods, *other.spares], key=repr)
    benchmark.extra_info.update(op="place_gang", spares=len(placement.spares))


def bench_place_with_spares_reference(benchmark: Any, case: dict[str, Any]) -> None:
    """The same placement with spares by ``gangplace.reference`` (one round)."""
    oracle = twin(case["cluster"], case["shape"])
    got = benchmark.pedantic(oracle.place_gang, args=(case["spared"],), rounds=1, iterations=1)
    expected = case["cluster"].place_gang(case["spared"])
    assert got is not None and expected is not None
    assert [(p.node, tuple(p.gpus)) for p in got.spares] == [
        (p.node, tuple(p.gpus)) for p in expected.spares
    ]


def use_the_spares(cluster: Any, job_id: str, request: GangRequest) -> None:
    """Fails one GPU on as many ranks of the gang as it has spares (the first ranks of every
    innermost slice for a slice gang, evenly spread ranks otherwise), repairs them from the
    spares, then heals the GPUs: the lost pods' room is free again for a refill."""
    (job,) = [a for a in cluster.allocations() if a.id == job_id]
    pods, count = job.placement.pods, len(job.spares)
    if request.slices:
        inner = request.slices[-1][1]
        ranks = [j * inner + i for j in range(len(pods) // inner) for i in range(request.spares)]
    else:
        ranks = list(range(len(pods)))[:: max(len(pods) // count, 1)][:count]
    failed = [(pods[rank].node, pods[rank].gpus[0]) for rank in ranks]
    for node, gpu in failed:
        cluster.set_gpu_health(node, gpu, False)
    plan = cluster.plan_repair(job_id)
    assert plan is not None and len(plan.from_spares) == count
    cluster.commit_repair(cluster.repair(plan))
    for node, gpu in failed:
        cluster.set_gpu_health(node, gpu, True)


def bench_reserve_spares(benchmark: Any, case: dict[str, Any]) -> None:
    """``reserve_spares`` refilling what a repair used: the gang is committed with its spares
    once; before each round, outside the timing, a repair uses them all (``use_the_spares``),
    so every round refills as many spares into the room the lost pods left."""
    cluster, request = case["cluster"], case["spared"]
    job = cluster.commit(cluster.reserve(request))
    count = len(job.spares)

    def repaired() -> tuple[tuple[Any, int], dict[str, Any]]:
        use_the_spares(cluster, job.id, request)
        return (job, request.spares), {}

    merged = benchmark.pedantic(
        cluster.reserve_spares, setup=repaired, rounds=3 if benchmark.disabled else 200
    )
    assert len(merged.spares) == count
    benchmark.extra_info.update(op="reserve_spares", spares=count)
    cluster.release(job)


def bench_reserve_spares_reference(benchmark: Any, case: dict[str, Any]) -> None:
    """The same refill by ``gangplace.reference`` (one round), after one repair."""
    oracle, request = twin(case["cluster"], case["shape"]), case["spared"]
    job = oracle.commit(oracle.reserve(request))
    use_the_spares(oracle, job.id, request)
    merged = benchmark.pedantic(
        oracle.reserve_spares, args=(job, request.spares), rounds=1, iterations=1
    )
    assert len(merged.spares) == len(job.spares)
