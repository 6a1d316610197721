"""The performance suite: the standard clusters of ``gangplace.synth``, engine and reference.

Run (release build; see ``scripts/bench.sh`` for the documented commands and the report):

    .venv/bin/python -m pytest benches/ --benchmark-only [--quick]

The README's test command runs every benchmark once on the ``tiny`` shape with
``--benchmark-disable``, as a smoke test of the answers (never of the times).
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from benches.clusters import Setup
from gangplace import Cluster, GangRequest, Placement, synth

# Gangs by total GPUs: small ones also as 1-GPU pods, the rest as whole-node pods.
GANGS: dict[str, tuple[int, int | None]] = {
    "1": (1, 1),
    "8x1": (8, 1),
    "8": (8, None),
    "64x1": (64, 1),
    "64": (64, None),
    "128": (128, None),  # 16 whole 8-GPU nodes (issue 50, item 2's selector case)
    "512": (512, None),
    "1024": (1024, None),
    "4096": (4096, None),
}
CONSTRAINTS = ("none", "rack", "spine")


def gang(setup: Setup, label: str, constraint: str = "none") -> GangRequest:
    """The gang `label` on this cluster: whole-node pods use the node's GPU count."""
    total, pod = GANGS[label]
    gpus_per_pod = pod or setup.shape.gpus_per_node
    level = {"none": None, "rack": setup.rack, "spine": setup.spine}[constraint]
    return GangRequest(max(1, total // gpus_per_pod), gpus_per_pod, required_level=level)


def unplaceable(setup: Setup) -> GangRequest:
    """A gang larger than any rack, required to stay in one rack."""
    nodes_per_rack = setup.shape.fanout[-1]
    return GangRequest(nodes_per_rack + 1, setup.shape.gpus_per_node, required_level=setup.rack)


def check_fits(placement: Placement | None, request: GangRequest) -> None:
    if placement is not None:
        assert len(placement) == request.pods
        assert placement.total_gpus == request.total_gpus


# ------------------------------------------------------------------ place_gang


@pytest.mark.parametrize("constraint", CONSTRAINTS)
@pytest.mark.parametrize("label", list(GANGS))
def bench_place(benchmark: Any, setup: Setup, label: str, constraint: str) -> None:
    request = gang(setup, label, constraint)
    benchmark.extra_info.update(op="place_gang", gang=label, constraint=constraint)
    check_fits(benchmark(setup.engine.place_gang, request), request)


@pytest.mark.parametrize("label", ["1", "64", "4096"])
def bench_place_reference(benchmark: Any, setup: Setup, label: str) -> None:
    request = gang(setup, label)
    oracle = setup.oracle
    benchmark.extra_info.update(op="place_gang", gang=label, constraint="none", impl="reference")
    rounds = 1 if setup.shape.total_gpus > 500_000 else 3
    got = benchmark.pedantic(oracle.place_gang, args=(request,), rounds=rounds, iterations=1)
    expected = setup.engine.place_gang(request)
    assert (got is None) == (expected is None)
    if got is not None and expected is not None:
        assert got.nodes == expected.nodes


@pytest.mark.parametrize("label", ["8", "64", "128"])
def bench_place_selector(benchmark: Any, setup: Setup, label: str) -> None:
    """A selector matching half the racks (``pool=a``): served by a kept pool (issue 50:
    within 1.5x of ``bench_place[<label>-none]``)."""
    plain = gang(setup, label)
    request = GangRequest(plain.pods, plain.gpus_per_pod, selector={"pool": "a"})
    benchmark.extra_info.update(op="place_gang", gang=label, constraint="selector pool=a")
    check_fits(benchmark(setup.engine.place_gang, request), request)


def bench_unplaceable(benchmark: Any, setup: Setup) -> None:
    request = unplaceable(setup)
    benchmark.extra_info.update(op="unplaceable")
    assert benchmark(setup.engine.place_gang, request) is None


def bench_unplaceable_reference(benchmark: Any, setup: Setup) -> None:
    request = unplaceable(setup)
    oracle = setup.oracle
    benchmark.extra_info.update(op="unplaceable", impl="reference")
    rounds = 1 if setup.shape.total_gpus > 500_000 else 3
    assert benchmark.pedantic(oracle.place_gang, args=(request,), rounds=rounds) is None


# ------------------------------------------------------------------ transactions


def cycle(cluster: Any, request: GangRequest) -> None:
    """reserve -> commit -> release (or nothing when the gang does not fit)."""
    try:
        reservation = cluster.reserve(request, ttl=60.0)
    except Exception:  # Unschedulable on a full cluster: the cycle is then just the search
        return
    cluster.release(cluster.commit(reservation))


@pytest.mark.parametrize("label", ["8x1", "8", "64"])
def bench_cycle(benchmark: Any, setup: Setup, label: str) -> None:
    request = gang(setup, label)
    benchmark.extra_info.update(op="reserve-commit-release", gang=label)
    before = setup.engine.stats()
    benchmark(cycle, setup.engine, request)
    assert setup.engine.stats() == before


def bench_cycle_reference(benchmark: Any, setup: Setup) -> None:
    request = gang(setup, "64")
    oracle = setup.oracle
    benchmark.extra_info.update(op="reserve-commit-release", gang="64", impl="reference")
    rounds = 1 if setup.shape.total_gpus > 500_000 else 3
    benchmark.pedantic(cycle, args=(oracle, request), rounds=rounds)


def bench_reserve_rollback(benchmark: Any, setup: Setup) -> None:
    request = gang(setup, "64")
    benchmark.extra_info.update(op="reserve-rollback", gang="64")

    def reserve_rollback() -> None:
        try:
            setup.engine.rollback(setup.engine.reserve(request))
        except Exception:
            return

    benchmark(reserve_rollback)
    assert setup.engine.stats().reserved == 0


def bench_reserve_many_1000(benchmark: Any, setup: Setup) -> None:
    rng = random.Random(5)
    gpus = setup.shape.gpus_per_node
    requests = [GangRequest(1, rng.choice((1, 2, 4, gpus))) for _ in range(1000)]
    held: list[Any] = []
    benchmark.extra_info.update(op="reserve_many", gangs=1000)

    def roll_back() -> None:
        for reservation in held:
            if reservation is not None:
                setup.engine.rollback(reservation)
        held.clear()

    def reserve_many() -> None:
        held.extend(setup.engine.reserve_many(requests, ttl=60.0))

    benchmark.pedantic(reserve_many, setup=roll_back, rounds=20)
    roll_back()
    assert setup.engine.stats().reserved == 0


def bench_health_flip(benchmark: Any, setup: Setup) -> None:
    name = setup.engine.nodes()[len(setup.engine) // 2]
    node = setup.engine.node(name)
    gpu = (node.free or node.allocated or (0,))[0]
    benchmark.extra_info.update(op="health flip (off and on)")

    def flip() -> None:
        setup.engine.set_gpu_health(name, gpu, False)
        setup.engine.set_gpu_health(name, gpu, True)

    benchmark(flip)
    setup.engine.check_invariants()


# ------------------------------------------------------------------ bulk and state


def bench_from_arrays(benchmark: Any, setup: Setup) -> None:
    if setup.fill != 0.5:
        pytest.skip("measured once per shape")
    data = synth.columns(setup.shape, seed=1)
    benchmark.extra_info.update(op="from_arrays")
    rounds = 3 if setup.shape.total_gpus > 500_000 else 10

    def build() -> Cluster:
        return Cluster.from_arrays(setup.shape.levels, **data)

    cluster = benchmark.pedantic(build, rounds=rounds)
    assert cluster.stats().total == setup.shape.total_gpus


def bench_snapshot(benchmark: Any, setup: Setup) -> None:
    benchmark.extra_info.update(op="snapshot")
    data = benchmark(setup.engine.snapshot)
    assert data.startswith(b"GANGPLCE")


def bench_restore(benchmark: Any, setup: Setup) -> None:
    data = setup.engine.snapshot()
    benchmark.extra_info.update(op="restore")
    rounds = 3 if setup.shape.total_gpus > 500_000 else 10
    restored = benchmark.pedantic(Cluster.restore, args=(data,), rounds=rounds)
    assert restored.stats().allocated == setup.engine.stats().allocated


def bench_boundary(benchmark: Any, setup: Setup) -> None:
    """The cost of crossing into Rust and taking the lock, with no work: ``len(cluster)``."""
    benchmark.extra_info.update(op="boundary: len(cluster)")
    assert benchmark(len, setup.engine) == setup.shape.nodes
