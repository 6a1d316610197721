"""Placing gangs with spares (README "Spares"; figures in docs/performance.md).

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


def bench_reserve_spares(benchmark: Any, case: dict[str, Any]) -> None:
    """``reserve_spares`` of 8 spares (2 per slice for the slice gang, 1 for the smoke run) for
    a freshly committed gang without spares; the gang is released and placed again before each
    round, outside the timing."""
    cluster = case["cluster"]
    plain = with_no_spares(case["spared"])
    count = case["spared"].spares
    held: list[Any] = []

    def fresh() -> tuple[tuple[Any, int], dict[str, Any]]:
        for old in held:
            cluster.release(old)
        held[:] = [cluster.commit(cluster.reserve(plain))]
        return (held[0], count), {}

    merged = benchmark.pedantic(
        cluster.reserve_spares, setup=fresh, rounds=3 if benchmark.disabled else 200
    )
    assert len(merged.spares) == count * max(len(merged.placement.slices), 1)
    benchmark.extra_info.update(op="reserve_spares", spares=len(merged.spares))
    for old in held:
        cluster.release(old)


def bench_reserve_spares_reference(benchmark: Any, case: dict[str, Any]) -> None:
    """The same by ``gangplace.reference`` (one round)."""
    oracle = twin(case["cluster"], case["shape"])
    job = oracle.commit(oracle.reserve(with_no_spares(case["spared"])))
    merged = benchmark.pedantic(
        oracle.reserve_spares, args=(job, case["spared"].spares), rounds=1, iterations=1
    )
    assert merged.spares


def with_no_spares(request: GangRequest) -> GangRequest:
    return GangRequest(request.pods, request.gpus_per_pod, slices=request.slices)
