"""Preemption and defragmentation benchmarks (docs/preemption.md "Priorities, preemption and
defragmentation"; figures in docs/performance.md).

Clusters, built once per session (seeded):

- ``colossus100k@100``: the 102,400-GPU shape filled to the last GPU by ``synth.fill`` with
  gangs of mixed priorities (each -1 or +1 with equal odds) of which 30% are movable. At
  95% fill a 64 x 8 gang still fits without preemption (its plan has no victims and costs
  microseconds), so the preemption figure is taken where it must preempt.
- ``2k@95``: 16 blocks x 16 racks x 8 nodes x 8 GPUs (2,048 nodes, 16,384 GPUs) at 95%,
  78% of the gangs at priority -1: about 700 preemption candidates for a gang of priority 0,
  the size of the Kueue report (kueue #13148).
- ``all-candidates``: ``synth.build("colossus100k", fill=1.0)``, every hold at priority 0
  (issue 29): every one of its ~6,400 allocations is a candidate for a gang of priority 10;
  ``all-candidates-superpod`` the same on the 16,384-GPU ``superpod`` (~1,070 allocations).
- ``2k`` also serves a fractional gang: 2,048 pods of 500 thousandths (the same 1,024 GPUs of
  room; docs/preemption.md P8).
- ``2k-shared``: the 2k shape filled to 80% as ``2k``, then every free GPU taken by one-pod
  fractional jobs of 300, 500 or 700 thousandths (seeded, priority -1 or 1 as the whole
  jobs), packed by best fit: fractional allocations are candidates beside whole ones (P8),
  and the descent is off while GPUs are shared.
- ``fragmented2k``: the same shape with one movable 2-GPU job on the first node of every rack
  and the rest filled with fixed gangs to 90%: no rack is whole, defragmentation must move;
  ``fragmented-shares`` the same with a movable fractional job (two pods of 500 on one GPU)
  instead (docs/preemption.md D5).

The README's test command runs them once on small versions with ``--benchmark-disable``.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from gangplace import Cluster, GangRequest, MultiGangRequest, PodGroup, reference, synth

SMALL = synth.Shape("small", ("block", "rack"), (2, 2, 4), 8, "smoke-test size")
TWO_K = synth.Shape("2k", ("block", "rack"), (16, 16, 8), 8, "about 2,000 nodes")


def _cluster(shape: synth.Shape, seed: int = 1) -> Cluster:
    data = synth.columns(shape, unhealthy=0.002, seed=seed)
    return Cluster.from_arrays(
        shape.levels,
        data["names"],
        data["domains"],
        data["gpus"],
        data["unhealthy_mask"],
        data["labels"],
    )


def _mixed(low_share: float, movable_share: float) -> Any:
    def mix(rng: random.Random, gpus_per_node: int) -> GangRequest:
        base = synth.gang_mix(rng, gpus_per_node)
        priority = -1 if rng.random() < low_share else 1
        movable = rng.random() < movable_share
        return GangRequest(base.pods, base.gpus_per_pod, priority=priority, movable=movable)

    return mix


def _filled(shape: synth.Shape, fill: float, low_share: float) -> Cluster:
    cluster = _cluster(shape)
    synth.fill(cluster, fill, seed=1, gpus_per_node=shape.gpus_per_node, mix=_mixed(low_share, 0.3))
    return cluster


def _shared(cluster: Cluster) -> Cluster:
    """Every free GPU of ``cluster`` taken by one-pod fractional jobs (seeded)."""
    rng = random.Random(3)
    while cluster.stats().free:
        milli = rng.choice((300, 500, 700))
        job = GangRequest(1, 1, gpu_milli=milli, priority=-1 if rng.random() < 0.78 else 1)
        cluster.commit(cluster.reserve(job))
    return cluster


SHARE_MOVER = GangRequest(
    2, 1, gpu_milli=500, required_level="node", movable=True, preemptible=False
)  # two halves of one GPU (rule F2 packs them)


def _fragmented(shape: synth.Shape, fill: float, mover: GangRequest | None = None) -> Cluster:
    """One movable job (2 GPUs, or ``mover``) on the first node of every rack, then fixed
    gangs to `fill`."""
    cluster = _cluster(shape)
    names = cluster.nodes()
    for name in names:
        cluster.cordon(name)
    nodes_per_rack = shape.fanout[-1]
    for first in names[::nodes_per_rack]:
        cluster.uncordon(first)
        job = mover or GangRequest(1, 2, required_level="node", movable=True, preemptible=False)
        cluster.commit(cluster.reserve(job))
        cluster.cordon(first)
    for name in names:
        cluster.uncordon(name)

    def fixed(rng: random.Random, gpus_per_node: int) -> GangRequest:
        base = synth.gang_mix(rng, gpus_per_node)
        return GangRequest(base.pods, base.gpus_per_pod, preemptible=False)

    synth.fill(cluster, fill, seed=2, gpus_per_node=shape.gpus_per_node, mix=fixed)
    return cluster


@pytest.fixture(scope="module")
def clusters(request: pytest.FixtureRequest) -> dict[str, Cluster]:
    smoke = request.config.getoption("benchmark_disable", default=False)
    big = SMALL if smoke else synth.SHAPES["colossus100k"]
    two_k = SMALL if smoke else TWO_K
    return {
        "all-candidates": synth.build("tiny" if smoke else "colossus100k", fill=1.0, seed=0)[0],
        "all-candidates-superpod": synth.build(SMALL if smoke else "superpod", fill=1.0, seed=0)[0],
        "all-candidates-2k": synth.build(SMALL if smoke else TWO_K, fill=1.0, seed=0)[0],
        "full": _filled(big, 1.0, 0.5),
        "2k": _filled(two_k, 0.95, 0.78),
        "2k-shared": _shared(_filled(two_k, 0.8, 0.78)),
        "fragmented": _fragmented(two_k, 0.5 if smoke else 0.9),
        "fragmented-shares": _fragmented(two_k, 0.5 if smoke else 0.9, SHARE_MOVER),
    }


def _preempting_gang(cluster: Cluster) -> GangRequest:
    """64 x 8 GPUs, or a quarter of a smaller cluster."""
    return _gang(cluster, min(512, cluster.stats().total // 4), priority=0)


def _gang(cluster: Cluster, total_gpus: int, **kwargs: Any) -> GangRequest:
    gpus = cluster.node(cluster.nodes()[0]).gpus
    return GangRequest(max(1, total_gpus // gpus), gpus, **kwargs)


def bench_plan_preemption_full(benchmark: Any, clusters: dict[str, Cluster]) -> None:
    """A 64 x 8 (512-GPU) gang of priority 0 on a full cluster: it must preempt."""
    cluster = clusters["full"]
    request = _preempting_gang(cluster)
    assert cluster.place_gang(request) is None
    plan = benchmark(cluster.plan_preemption, request)
    assert plan is not None and plan.victims and plan.max_victim_priority == -1
    benchmark.extra_info.update(victims=len(plan.victims), level=plan.placement.level)


@pytest.fixture(scope="module")
def full_with_cpus(clusters: dict[str, Cluster]) -> Cluster:
    """A copy of ``colossus100k@100`` whose every node has 96 or 192 cores (seeded) and
    whose holds ask none: the CPUs bind nothing, but a gang asking them is counted by them."""
    copy = Cluster.restore(clusters["full"].snapshot())
    rng = random.Random(5)
    for name in copy.nodes():
        copy.update_node(name, resources={"cpu": rng.choice((96_000, 192_000))})
    return copy


@pytest.mark.parametrize("asks", ["gpu-only", "cpu"])
def bench_plan_preemption_full_with_cpus(
    benchmark: Any, full_with_cpus: Cluster, asks: str
) -> None:
    """``bench_plan_preemption_full``'s gang on the copy with CPUs, asking none or 3 cores
    per GPU (docs/resources.md "Node resources": a removal set counts resources node by node)."""
    cluster = full_with_cpus
    gang = _preempting_gang(cluster)
    cpu = {"cpu": 3_000 * gang.gpus_per_pod} if asks == "cpu" else None
    request = GangRequest(gang.pods, gang.gpus_per_pod, priority=0, resources_per_pod=cpu)
    plan = benchmark(cluster.plan_preemption, request)
    assert plan is not None and plan.victims
    benchmark.extra_info.update(asks=asks, victims=len(plan.victims))


@pytest.mark.parametrize("shape", ["colossus100k", "superpod"])
@pytest.mark.parametrize("pods", [1, 8, 64])
def bench_plan_preemption_all_candidates(
    benchmark: Any, clusters: dict[str, Cluster], pods: int, shape: str
) -> None:
    """A pods x 8 gang of priority 10 on colossus100k (or the 16k-GPU superpod) full of
    priority-0 holds: every allocation is a candidate (issue 29, part 4: goal <= 1 ms median;
    issue 50, item 1: colossus100k at most 2x the superpod, docs/preemption.md "How a plan
    finds its set")."""
    cluster = clusters["all-candidates" if shape == "colossus100k" else "all-candidates-superpod"]
    gpus = cluster.node(cluster.nodes()[0]).gpus
    pods = min(pods, len(cluster) // 2)  # the smoke run's tiny cluster holds fewer
    request = GangRequest(pods, gpus, priority=10)
    assert cluster.place_gang(request) is None or len(cluster) < 100
    plan = benchmark(cluster.plan_preemption, request)
    assert plan is not None
    benchmark.extra_info.update(candidates=_candidates(cluster, 10), victims=len(plan.victims))


def bench_plan_preemption_all_candidates_2k_reference(
    benchmark: Any, clusters: dict[str, Cluster]
) -> None:
    """A 1 x 8 gang on the 2k shape full of priority-0 holds, by ``gangplace.reference``
    (one round) and by the engine: the same victims count."""
    cluster = clusters["all-candidates-2k"]
    request = GangRequest(1, cluster.node(cluster.nodes()[0]).gpus, priority=10)
    oracle = _twin(cluster)
    got = benchmark.pedantic(oracle.plan_preemption, args=(request,), rounds=1, iterations=1)
    plan = cluster.plan_preemption(request)
    assert got is not None and plan is not None
    assert len(got.victims) == len(plan.victims)
    benchmark.extra_info.update(candidates=_candidates(cluster, 10))


def bench_plan_preemption_all_candidates_2k(benchmark: Any, clusters: dict[str, Cluster]) -> None:
    """The engine's side of the reference benchmark above."""
    cluster = clusters["all-candidates-2k"]
    request = GangRequest(1, cluster.node(cluster.nodes()[0]).gpus, priority=10)
    plan = benchmark(cluster.plan_preemption, request)
    assert plan is not None
    benchmark.extra_info.update(candidates=_candidates(cluster, 10))


def _candidates(cluster: Cluster, priority: int) -> int:
    return sum(1 for a in cluster.allocations() if a.preemptible and a.priority < priority)


def bench_plan_preemption_2k(benchmark: Any, clusters: dict[str, Cluster]) -> None:
    """About 700 candidates on about 2,000 nodes: a 128 x 8 gang of priority 0."""
    cluster = clusters["2k"]
    request = _gang(cluster, min(1024, cluster.stats().total // 2), priority=0)
    plan = benchmark(cluster.plan_preemption, request)
    benchmark.extra_info.update(
        candidates=_candidates(cluster, 0),
        nodes=len(cluster),
        victims=None if plan is None else len(plan.victims),
    )


def bench_plan_preemption_2k_with_cpus(benchmark: Any, clusters: dict[str, Cluster]) -> None:
    """``bench_plan_preemption_2k``'s gang asking 3 cores per GPU on the same cluster with 96
    cores per node (its holds ask none)."""
    cluster = Cluster.restore(clusters["2k"].snapshot())
    for name in cluster.nodes():
        cluster.update_node(name, resources={"cpu": 96_000})
    gang = _gang(cluster, min(1024, cluster.stats().total // 2), priority=0)
    asks = {"cpu": 3_000 * gang.gpus_per_pod}
    request = GangRequest(gang.pods, gang.gpus_per_pod, priority=0, resources_per_pod=asks)
    plan = benchmark(cluster.plan_preemption, request)
    benchmark.extra_info.update(victims=None if plan is None else len(plan.victims))


def bench_plan_preemption_2k_with_cpus_reference(
    benchmark: Any, clusters: dict[str, Cluster]
) -> None:
    """The same plan by ``gangplace.reference`` (one round)."""
    cluster = clusters["2k"]
    oracle = _twin(cluster)
    for name in cluster.nodes():
        oracle.update_node(name, resources={"cpu": 96_000})
    gang = _gang(cluster, min(1024, cluster.stats().total // 2), priority=0)
    asks = {"cpu": 3_000 * gang.gpus_per_pod}
    request = GangRequest(gang.pods, gang.gpus_per_pod, priority=0, resources_per_pod=asks)
    got = benchmark.pedantic(oracle.plan_preemption, args=(request,), rounds=1, iterations=1)
    assert (got is None) == (
        cluster.plan_preemption(_gang(cluster, gang.pods * gang.gpus_per_pod, priority=0)) is None
    )


def bench_plan_preemption_2k_reference(benchmark: Any, clusters: dict[str, Cluster]) -> None:
    """The same plan by ``gangplace.reference`` (one round: it takes seconds)."""
    cluster = clusters["2k"]
    oracle = _twin(cluster)
    request = _gang(cluster, min(1024, cluster.stats().total // 2), priority=0)
    got = benchmark.pedantic(oracle.plan_preemption, args=(request,), rounds=1, iterations=1)
    # Ids and start times differ between the twins, so tie-breaks may pick other victims.
    assert (got is None) == (cluster.plan_preemption(request) is None)


def _shares(cluster: Cluster) -> GangRequest:
    """``bench_plan_preemption_2k``'s 1,024 GPUs as pods of half a GPU (docs/preemption.md P8)."""
    return GangRequest(2 * min(1024, cluster.stats().total // 2), 1, gpu_milli=500, priority=0)


def bench_plan_preemption_2k_shares(benchmark: Any, clusters: dict[str, Cluster]) -> None:
    """The 2k cluster's preemption for 2,048 pods of 500 thousandths (P8: whole-GPU victims,
    pods counted by the room of the GPUs, node by node)."""
    cluster = clusters["2k"]
    plan = benchmark(cluster.plan_preemption, _shares(cluster))
    benchmark.extra_info.update(victims=None if plan is None else len(plan.victims))
    assert plan is None or plan.placement.gpu_milli == 500


def bench_plan_preemption_2k_shares_reference(benchmark: Any, clusters: dict[str, Cluster]) -> None:
    """The same plan by ``gangplace.reference`` (one round)."""
    cluster = clusters["2k"]
    oracle = _twin(cluster)
    got = benchmark.pedantic(
        oracle.plan_preemption, args=(_shares(cluster),), rounds=1, iterations=1
    )
    assert (got is None) == (cluster.plan_preemption(_shares(cluster)) is None)


def bench_plan_preemption_2k_share_victims(benchmark: Any, clusters: dict[str, Cluster]) -> None:
    """1,024 whole GPUs (128 x 8) of priority 0 on ``2k-shared``: whole and fractional
    victims (P8), every candidate read."""
    cluster = clusters["2k-shared"]
    request = _gang(cluster, min(1024, cluster.stats().total // 2), priority=0)
    plan = benchmark(cluster.plan_preemption, request)
    assert plan is not None and plan.victims
    shares = {a.id for a in cluster.allocations() if a.placement.gpu_milli is not None}
    fractional = len(shares & set(plan.victims))
    benchmark.extra_info.update(victims=len(plan.victims), fractional_victims=fractional)


def bench_plan_preemption_2k_share_victims_reference(
    benchmark: Any, clusters: dict[str, Cluster]
) -> None:
    """The same plan by ``gangplace.reference`` (one round)."""
    cluster = clusters["2k-shared"]
    oracle = _twin(cluster)
    request = _gang(cluster, min(1024, cluster.stats().total // 2), priority=0)
    got = benchmark.pedantic(oracle.plan_preemption, args=(request,), rounds=1, iterations=1)
    assert (got is None) == (cluster.plan_preemption(request) is None)


def _unit(cluster: Cluster) -> MultiGangRequest:
    """A leader (one whole node) and workers colocated in its block: the 2k bench's 128 x 8
    GPUs as a multi-role unit (a quarter of a smaller cluster)."""
    gpus = cluster.node(cluster.nodes()[0]).gpus
    workers = max(1, min(1024, cluster.stats().total // 2) // gpus - 1)
    return MultiGangRequest(
        (PodGroup("leader", 1, gpus), PodGroup("workers", workers, gpus)),
        colocate=(("leader", "workers", cluster.levels[0]),),
        priority=0,
    )


def bench_plan_preemption_roles_2k(benchmark: Any, clusters: dict[str, Cluster]) -> None:
    """The 128 x 8 GPUs of ``bench_plan_preemption_2k`` as leader + workers (docs/roles.md
    "Multi-role gangs", 7): every fit is a placement of the unit on a what-if copy."""
    cluster = clusters["2k"]
    request = _unit(cluster)
    plan = benchmark(cluster.plan_preemption, request)
    benchmark.extra_info.update(
        candidates=_candidates(cluster, 0),
        victims=None if plan is None else len(plan.victims),
    )


def bench_plan_preemption_roles_2k_with_cpus(benchmark: Any, clusters: dict[str, Cluster]) -> None:
    """The same unit with a launcher of 8 cores and no GPU and workers asking 24 cores each,
    on a copy whose every node has 96 cores (docs/roles.md, rule 9)."""
    cluster = Cluster.restore(clusters["2k"].snapshot())
    for name in cluster.nodes():
        cluster.update_node(name, resources={"cpu": 96_000})
    unit = _unit(cluster)
    leader, workers = unit.groups
    request = MultiGangRequest(
        (
            PodGroup("leader", 1, 0, resources_per_pod={"cpu": 8_000}),
            PodGroup("workers", workers.pods, workers.gpus_per_pod,
                     resources_per_pod={"cpu": 24_000}),
        ),
        colocate=unit.colocate,
        priority=0,
    )  # fmt: skip
    assert leader.name == "leader"
    plan = benchmark(cluster.plan_preemption, request)
    benchmark.extra_info.update(victims=None if plan is None else len(plan.victims))


def bench_plan_preemption_roles_2k_reference(benchmark: Any, clusters: dict[str, Cluster]) -> None:
    """The same unit's plan by ``gangplace.reference`` (one round: it takes tens of seconds)."""
    cluster = clusters["2k"]
    oracle = _twin(cluster)
    request = _unit(cluster)
    got = benchmark.pedantic(oracle.plan_preemption, args=(request,), rounds=1, iterations=1)
    assert (got is None) == (cluster.plan_preemption(request) is None)


def _twin(cluster: Cluster) -> reference.Cluster:
    """The cluster rebuilt in the reference: nodes, health, and its allocations as placed."""
    twin = reference.Cluster(cluster.levels)
    for name in cluster.nodes():
        info = cluster.node(name)
        twin.add_node(
            name,
            gpus=info.gpus,
            topology=info.topology,
            labels=info.labels,
            unhealthy=info.unhealthy,
        )
    for allocation in cluster.allocations():
        held = twin.reserve(allocation.placement)
        twin.commit(held)
        hold = twin._holds[held.id]
        hold.priority, hold.preemptible, hold.movable = (
            allocation.priority,
            allocation.preemptible,
            allocation.movable,
        )
    return twin


def _twin_with_movers(cluster: Cluster) -> reference.Cluster:
    """The fragmented cluster's twin, its movers given the request they were reserved with."""
    oracle = _twin(cluster)
    mover = GangRequest(1, 2, required_level="node", movable=True, preemptible=False)
    for hold in oracle._holds.values():
        if hold.movable:
            hold.request = mover
    return oracle


def bench_plan_defrag_full(benchmark: Any, clusters: dict[str, Cluster]) -> None:
    """A 2 x 8 gang required in one rack on the full cluster: no free GPU to move to."""
    cluster = clusters["full"]
    request = _gang(cluster, 16, priority=1, required_level=cluster.levels[-1])
    benchmark(cluster.plan_defrag, request)


def _nodes_per_rack(cluster: Cluster) -> int:
    """The nodes of the first node's rack (the fragmented cluster's racks are all alike)."""
    first = cluster.node(cluster.nodes()[0]).topology
    return sum(1 for n in cluster.nodes() if cluster.node(n).topology == first)


def bench_plan_defrag_moves(benchmark: Any, clusters: dict[str, Cluster]) -> None:
    """A whole-rack gang on the fragmented cluster: one movable job must go elsewhere."""
    cluster = clusters["fragmented"]
    request = _gang(cluster, 8 * _nodes_per_rack(cluster), required_level=cluster.levels[-1])
    _timed_defrag(benchmark, cluster, request)


def _rack_of_shares(cluster: Cluster) -> GangRequest:
    """``bench_plan_defrag_moves``'s whole rack as pods of half a GPU (docs/preemption.md D5)."""
    nodes_per_rack = _nodes_per_rack(cluster)
    gpus = cluster.node(cluster.nodes()[0]).gpus
    pods = 2 * gpus * nodes_per_rack
    return GangRequest(pods, 1, gpu_milli=500, required_level=cluster.levels[-1])


def bench_plan_defrag_moves_shares(benchmark: Any, clusters: dict[str, Cluster]) -> None:
    """The whole-rack gang as shares on the fragmented cluster: one movable job must go."""
    cluster = clusters["fragmented"]
    plan = _timed_defrag(benchmark, cluster, _rack_of_shares(cluster))
    assert plan.placement.gpu_milli == 500


def bench_plan_defrag_moves_shares_reference(benchmark: Any, clusters: dict[str, Cluster]) -> None:
    """The same defragmentation by ``gangplace.reference`` (one round)."""
    cluster = clusters["fragmented"]
    _reference_defrag(benchmark, cluster, _rack_of_shares(cluster))


def bench_plan_defrag_share_movers(benchmark: Any, clusters: dict[str, Cluster]) -> None:
    """A whole-rack gang on ``fragmented-shares``: the rack's movable fractional job (two
    pods of 500 on one GPU) must go elsewhere, keeping its share (docs/preemption.md D5)."""
    cluster = clusters["fragmented-shares"]
    request = _gang(cluster, 8 * _nodes_per_rack(cluster), required_level=cluster.levels[-1])
    plan = _timed_defrag(benchmark, cluster, request)
    assert all(move.target.gpu_milli == 500 for move in plan.moves)


def bench_plan_defrag_share_movers_reference(benchmark: Any, clusters: dict[str, Cluster]) -> None:
    """The same defragmentation by ``gangplace.reference`` (one round)."""
    cluster = clusters["fragmented-shares"]
    request = _gang(cluster, 8 * _nodes_per_rack(cluster), required_level=cluster.levels[-1])
    oracle = _twin(cluster)
    for hold in oracle._holds.values():
        if hold.movable:
            hold.request = SHARE_MOVER
    got = benchmark.pedantic(oracle.plan_defrag, args=(request,), rounds=1, iterations=1)
    expected = cluster.plan_defrag(request)
    assert got is not None and expected is not None and len(got.moves) == len(expected.moves)
    assert all(move.target.gpu_milli == 500 for move in got.moves)


def _timed_defrag(benchmark: Any, cluster: Cluster, request: Any) -> Any:
    """Times ``plan_defrag`` of a gang that does not fit as it is and must move something."""
    assert cluster.place_gang(request) is None
    plan = benchmark(cluster.plan_defrag, request)
    assert plan is not None and plan.moves
    benchmark.extra_info.update(moves=len(plan.moves), moved_gpus=plan.moved_gpus)
    return plan


def _reference_defrag(benchmark: Any, cluster: Cluster, request: Any) -> None:
    """Times the reference's ``plan_defrag`` on a twin with the movers (one round)."""
    oracle = _twin_with_movers(cluster)
    got = benchmark.pedantic(oracle.plan_defrag, args=(request,), rounds=1, iterations=1)
    expected = cluster.plan_defrag(request)
    assert (got is None) == (expected is None)


def _rack_unit(cluster: Cluster) -> MultiGangRequest:
    """``bench_plan_defrag_moves``'s whole-rack gang as a leader node plus worker nodes
    colocated in its rack."""
    nodes_per_rack = _nodes_per_rack(cluster)
    gpus = cluster.node(cluster.nodes()[0]).gpus
    rack = cluster.levels[-1]
    return MultiGangRequest(
        (PodGroup("leader", 1, gpus), PodGroup("workers", nodes_per_rack - 1, gpus)),
        colocate=(("leader", "workers", rack),),
        required_level=rack,
    )


def bench_plan_defrag_roles_moves(benchmark: Any, clusters: dict[str, Cluster]) -> None:
    """The whole-rack unit on the fragmented cluster (docs/roles.md, 7)."""
    cluster = clusters["fragmented"]
    _timed_defrag(benchmark, cluster, _rack_unit(cluster))


def bench_plan_defrag_roles_moves_reference(benchmark: Any, clusters: dict[str, Cluster]) -> None:
    """The same defragmentation by ``gangplace.reference`` (one round)."""
    cluster = clusters["fragmented"]
    _reference_defrag(benchmark, cluster, _rack_unit(cluster))


def bench_capacity_for(benchmark: Any, clusters: dict[str, Cluster]) -> None:
    """How many 8-GPU pods still fit on the 2k cluster at 95%."""
    cluster = clusters["2k"]
    benchmark(cluster.capacity_for, _gang(cluster, 8))


def bench_plan_defrag_moves_reference(benchmark: Any, clusters: dict[str, Cluster]) -> None:
    """The same defragmentation by ``gangplace.reference`` (one round)."""
    cluster = clusters["fragmented"]
    oracle = _twin_with_movers(cluster)
    nodes_per_rack = _nodes_per_rack(cluster)
    request = _gang(cluster, 8 * nodes_per_rack, required_level=cluster.levels[-1])
    got = benchmark.pedantic(oracle.plan_defrag, args=(request,), rounds=1, iterations=1)
    expected = cluster.plan_defrag(request)
    assert got is not None and expected is not None
    assert len(got.moves) == len(expected.moves)
