"""Looking ahead (docs/preemption.md "Looking ahead", L1-L3; figures in docs/performance.md).

``colossus100k`` at 90% fill (a seeded ``synth`` build: guessed gang mix, not a trace). Its
5,682 allocations, sorted by their pods' GPUs (ids are random), are split into 64
release groups (as a scheduler passes its
running jobs grouped by predicted end, as ``Allocation`` objects). The request is a very
large job, 2,048 pods x 8 GPUs inside one hall (16,384 of its 25,600 GPUs), which does not
fit now but does once enough has ended.

- ``place_after``: the engine (a lower bound, galloping, bisection).
- ``place_after_reference``: the readable counterpart, the prefixes tried in order on a
  restored copy each (``gangplace.reference.backfill``'s method), one round.
- ``reserve_avoiding``: a 1 x 2 reservation kept off the GPUs of the answer's first half
  (1,024 pods, 8,192 GPUs; the whole answer leaves no free GPU outside it: every free GPU of
  this build lies in the answer's nodes), rolled back each round; against a plain
  ``reserve``.
- ``place_after_shares``: the same cluster copied with 4,000 one-pod allocations of 700
  thousandths of a GPU added (docs/resources.md "Fractions of a GPU"), dealt round-robin into
  the 64 groups; the requests: the whole gang above, and a fractional gang of 600
  thousandths per pod inside one hall that does not fit now (the smallest of 4,096, 8,192
  and 16,384 pods that waits), against the prefixes replayed on restored copies.

The smoke run (``--benchmark-disable``) uses the ``tiny`` shape and checks the answers.
"""

from __future__ import annotations

from typing import Any

import pytest

from gangplace import Cluster, GangRequest, synth


@pytest.fixture(scope="module")
def ahead(request: pytest.FixtureRequest) -> dict[str, Any]:
    smoke = request.config.getoption("benchmark_disable", default=False)
    shape = synth.SHAPES["tiny" if smoke else "colossus100k"]
    cluster, _ = synth.build(shape, fill=0.9, seed=1)
    held = sorted(cluster.allocations(), key=lambda a: [(p.node, p.gpus) for p in a.placement.pods])
    size = max(1, len(held) // 64)
    groups = [held[at : at + size] for at in range(0, len(held), size)]
    level = shape.levels[0]
    gang = None
    for pods in (2, 4, 8) if smoke else (2048,):
        candidate = GangRequest(pods, shape.gpus_per_node, required_level=level)
        if cluster.place_gang(candidate) is None and cluster.place_after(candidate, groups):
            gang = candidate
            break
    assert gang is not None, "no gang of the sizes tried waits for releases"
    return {"cluster": cluster, "groups": groups, "gang": gang}


def bench_place_after(benchmark: Any, ahead: dict[str, Any]) -> None:
    cluster: Cluster = ahead["cluster"]
    held = cluster.stats()
    found = benchmark(cluster.place_after, ahead["gang"], ahead["groups"])
    assert found is not None and found[0] >= 1
    assert cluster.stats() == held  # a pure query
    benchmark.extra_info.update(
        groups=len(ahead["groups"]), released=found[0], pods=ahead["gang"].pods
    )


def _replayed(cluster: Cluster, gang: GangRequest, groups: list[list[Any]]) -> Any:
    """The first prefix after which the gang fits, tried in order on restored copies."""
    data = cluster.snapshot()
    for k in range(len(groups) + 1):
        copy = Cluster.restore(data)
        for group in groups[:k]:
            for hold in group:
                copy.release(hold.id)
        placement = copy.place_gang(gang)
        if placement is not None:
            return k, placement
    return None


def bench_place_after_reference(benchmark: Any, ahead: dict[str, Any]) -> None:
    cluster: Cluster = ahead["cluster"]
    want = cluster.place_after(ahead["gang"], ahead["groups"])
    got = benchmark.pedantic(
        _replayed, args=(cluster, ahead["gang"], ahead["groups"]), rounds=1, iterations=1
    )
    assert got == want


@pytest.mark.parametrize("avoiding", [True, False], ids=["avoid", "plain"])
def bench_reserve_avoiding(benchmark: Any, ahead: dict[str, Any], avoiding: bool) -> None:
    cluster: Cluster = ahead["cluster"]
    found = cluster.place_after(ahead["gang"], ahead["groups"])
    assert found is not None
    avoid = found[1].pods[: len(found[1].pods) // 2] if avoiding else ()
    small = GangRequest(1, 2)

    def reserve() -> Any:
        reservation = cluster.reserve(small, avoid=avoid)
        cluster.rollback(reservation)
        return reservation

    reservation = benchmark(reserve)
    taken = {(pod.node, gpu) for pod in reservation.placement.pods for gpu in pod.gpus}
    assert not taken & {(pod.node, gpu) for pod in avoid for gpu in pod.gpus}
    benchmark.extra_info.update(avoided_gpus=sum(len(pod.gpus) for pod in avoid))


@pytest.fixture(scope="module")
def ahead_with_cpus(ahead: dict[str, Any]) -> Cluster:
    """The same cluster copied, every node with 96 cores (its holds ask none)."""
    copy = Cluster.restore(ahead["cluster"].snapshot())
    for name in copy.nodes():
        copy.update_node(name, resources={"cpu": 96_000})
    return copy


def bench_place_after_with_cpus(
    benchmark: Any, ahead: dict[str, Any], ahead_with_cpus: Cluster
) -> None:
    """``bench_place_after``'s gang asking 24 cores per pod (docs/resources.md "Node resources":
    counted node by node on every prefix tried)."""
    gang: GangRequest = ahead["gang"]
    asking = GangRequest(
        gang.pods,
        gang.gpus_per_pod,
        required_level=gang.required_level,
        resources_per_pod={"cpu": 24_000},
    )
    found = benchmark(ahead_with_cpus.place_after, asking, ahead["groups"])
    assert found == ahead["cluster"].place_after(gang, ahead["groups"])  # CPUs never bind
    benchmark.extra_info.update(groups=len(ahead["groups"]), released=found and found[0])


@pytest.fixture(scope="module")
def ahead_with_shares(ahead: dict[str, Any], request: pytest.FixtureRequest) -> dict[str, Any]:
    """The cluster copied with 4,000 shares of 700 running, dealt into the groups."""
    smoke = request.config.getoption("benchmark_disable", default=False)
    copy = Cluster.restore(ahead["cluster"].snapshot())
    by_id = {hold.id: hold for hold in copy.allocations()}
    groups = [[by_id[hold.id] for hold in group] for group in ahead["groups"]]
    for index in range(copy.stats().free // 2 if smoke else 4_000):  # tiny: half its free
        share = copy.commit(copy.reserve(GangRequest(1, 1, gpu_milli=700)))
        groups[index % len(groups)].append(share)
    level = ahead["gang"].required_level
    gang = None
    for pods in (8, 16, 32) if smoke else (4_096, 8_192, 16_384):
        candidate = GangRequest(pods, 1, gpu_milli=600, required_level=level)
        if copy.place_gang(candidate) is None and copy.place_after(candidate, groups):
            gang = candidate
            break
    assert gang is not None, "no fractional gang of the sizes tried waits for releases"
    return {"cluster": copy, "groups": groups, "gang": gang, "whole": ahead["gang"]}


@pytest.mark.parametrize("kind", ["whole", "shares"])
def bench_place_after_shares(benchmark: Any, ahead_with_shares: dict[str, Any], kind: str) -> None:
    """``place_after`` on the cluster with shares running: the whole gang, or the fractional
    one (docs/resources.md "Fractions of a GPU": released shares given back)."""
    cluster: Cluster = ahead_with_shares["cluster"]
    gang = ahead_with_shares["whole" if kind == "whole" else "gang"]
    held = cluster.stats()
    found = benchmark(cluster.place_after, gang, ahead_with_shares["groups"])
    assert found is not None and found[0] >= 1
    assert cluster.stats() == held  # a pure query
    benchmark.extra_info.update(released=found[0], pods=gang.pods, shared=held.shared)


@pytest.mark.parametrize("kind", ["whole", "shares"])
def bench_place_after_shares_reference(
    benchmark: Any, ahead_with_shares: dict[str, Any], kind: str
) -> None:
    """The same answers by the prefixes replayed on restored copies (one round)."""
    cluster: Cluster = ahead_with_shares["cluster"]
    gang = ahead_with_shares["whole" if kind == "whole" else "gang"]
    groups = ahead_with_shares["groups"]
    want = cluster.place_after(gang, groups)
    got = benchmark.pedantic(_replayed, args=(cluster, gang, groups), rounds=1, iterations=1)
    assert got == want
