"""Repair planning (docs/repair.md "Repair after failures"; figures in docs/performance.md).

Issue 14's goal: ``plan_repair`` of 8 lost ranks of a 512-GPU gang (64 pods x 8 GPUs) on
``colossus100k`` at 90% fill in at most 100 us (median), and at least 100x the reference.
The cluster is a seeded ``synth`` build (guessed gang mix, not a trace); the gang is reserved
and committed on it, then one GPU fails on 8 of its nodes. Both the plan inside the gang's
domain and the widened one are timed. ``bench_plan_repair_shares``: the same cluster with a
gang of 64 pods x 500 thousandths of a GPU instead, 4 of its GPUs failed (8 lost ranks;
docs/repair.md R7). The smoke run (``--benchmark-disable``) uses the ``tiny`` shape and
checks answers.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from benches.clusters import twin
from gangplace import Cluster, GangRequest, Placement, PodPlacement, reference, synth


@pytest.fixture(scope="module")
def broken(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The cluster with the gang committed and 8 of its ranks lost, and its reference twin."""
    smoke = request.config.getoption("benchmark_disable", default=False)
    shape = synth.SHAPES["tiny" if smoke else "colossus100k"]
    cluster, _ = synth.build(shape, fill=0.5 if smoke else 0.9, seed=1)
    gpus = shape.gpus_per_node
    gang = GangRequest(4 if smoke else 64, gpus)
    allocation = cluster.commit(cluster.reserve(gang))
    oracle, twin_id = twin_with(cluster, shape, allocation, gang)
    lost_nodes = [pod.node for pod in allocation.placement.pods][:: 8 if not smoke else 2][:8]
    for node in lost_nodes:
        cluster.set_gpu_health(node, 0, False)
        oracle.set_gpu_health(node, 0, False)
    return {
        "cluster": cluster,
        "oracle": oracle,
        "allocation": allocation.id,
        "twin_id": twin_id,
        "lost": lost_nodes,
    }


def twin_with(
    cluster: Cluster, shape: synth.Shape, allocation: Any, gang: GangRequest
) -> tuple[reference.Cluster, str]:
    """The reference twin with the gang as a hold of its own (the rest as busy GPUs), and
    that hold's id."""
    oracle = twin(cluster, shape)
    for pod in allocation.placement.pods:
        oracle._nodes[pod.node].allocated.difference_update(pod.gpus)
    held = oracle.commit(oracle.reserve(allocation.placement))
    oracle._holds[held.id].request = gang  # what the engine's allocation was reserved with
    return oracle, held.id


@pytest.mark.parametrize("widen", [False, True], ids=["domain", "widened"])
def bench_plan_repair(benchmark: Any, broken: dict[str, Any], widen: bool) -> None:
    """8 lost ranks of the 64 x 8 gang: the plan inside its domain, or widened."""
    cluster: Cluster = broken["cluster"]
    plan = benchmark(cluster.plan_repair, broken["allocation"], widen=widen)
    benchmark.extra_info.update(
        op="plan_repair",
        lost=len(broken["lost"]),
        planned=None if plan is None else len(plan.replacements),
        level=None if plan is None else plan.level,
    )
    if widen:
        assert plan is not None and len(plan.replacements) == len(broken["lost"])


@pytest.mark.parametrize("widen", [False, True], ids=["domain", "widened"])
def bench_plan_repair_reference(benchmark: Any, broken: dict[str, Any], widen: bool) -> None:
    """The same plan by ``gangplace.reference`` (one round), checked against the engine."""
    oracle: reference.Cluster = broken["oracle"]
    got = benchmark.pedantic(
        oracle.plan_repair,
        args=(broken["twin_id"],),
        kwargs={"widen": widen},
        rounds=1,
        iterations=1,
    )
    expected = broken["cluster"].plan_repair(broken["allocation"], widen=widen)
    assert (got is None) == (expected is None)
    if got is not None and expected is not None:
        assert [(r, p.node, tuple(p.gpus)) for r, p in got.replacements] == [
            (r, p.node, tuple(p.gpus)) for r, p in expected.replacements
        ]


@pytest.fixture(scope="module")
def cycling(request: pytest.FixtureRequest) -> dict[str, Any]:
    """A cluster of its own for the repair cycle (each round fails 8 ranks afresh), and a
    reference twin with the gang as its own hold."""
    smoke = request.config.getoption("benchmark_disable", default=False)
    shape = synth.SHAPES["tiny" if smoke else "colossus100k"]
    cluster, _ = synth.build(shape, fill=0.5 if smoke else 0.9, seed=1)
    gang = GangRequest(4 if smoke else 64, shape.gpus_per_node)
    allocation = cluster.commit(cluster.reserve(gang))
    oracle, twin_id = twin_with(cluster, shape, allocation, gang)
    return {
        "cluster": cluster,
        "oracle": oracle,
        "allocation": allocation.id,
        "twin_id": twin_id,
        "step": 2 if smoke else 8,
        "failed": [],
    }


def fail_ranks(cluster: Any, hold: str, step: int, failed: list[tuple[str, int]]) -> None:
    """Heals the GPUs the previous round failed, then fails GPU 0 of every `step`-th rank's
    node (8 ranks of the 64), so that every round repairs 8 lost ranks on a cluster whose
    capacity stays the same."""
    for node, gpu in failed:
        cluster.set_gpu_health(node, gpu, True)
    failed.clear()
    (allocation,) = [a for a in cluster.allocations() if a.id == hold]
    for pod in allocation.placement.pods[::step][:8]:
        cluster.set_gpu_health(pod.node, pod.gpus[0], False)
        failed.append((pod.node, pod.gpus[0]))


def repair_cycle(cluster: Any, hold: str) -> Any:
    """The whole repair: plan (widened), hold, merge."""
    plan = cluster.plan_repair(hold, widen=True)
    assert plan is not None
    return cluster.commit_repair(cluster.repair(plan))


def bench_repair_cycle(benchmark: Any, cycling: dict[str, Any]) -> None:
    """8 lost ranks of the 64 x 8 gang: ``plan_repair(widen=True)``, ``repair`` and
    ``commit_repair`` (the failures are made before each round, outside the timing)."""
    cluster = cycling["cluster"]
    hold, step, failed = cycling["allocation"], cycling["step"], cycling["failed"]
    merged = benchmark.pedantic(
        repair_cycle,
        args=(cluster, hold),
        setup=lambda: fail_ranks(cluster, hold, step, failed),
        rounds=5 if benchmark.disabled else 300,
        iterations=1,
    )
    assert merged.id == hold and merged.lost == ()
    benchmark.extra_info.update(op="plan_repair+repair+commit_repair", lost=len(failed))
    cluster.check_invariants()


def bench_repair_cycle_reference(benchmark: Any, cycling: dict[str, Any]) -> None:
    """The same cycle by ``gangplace.reference`` (one round)."""
    oracle = cycling["oracle"]
    hold = cycling["twin_id"]
    failed: list[tuple[str, int]] = []
    merged = benchmark.pedantic(
        repair_cycle,
        args=(oracle, hold),
        setup=lambda: fail_ranks(oracle, hold, cycling["step"], failed),
        rounds=1,
        iterations=1,
    )
    assert merged.id == hold and merged.lost == ()


@pytest.fixture(scope="module")
def contested(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Rule R6's case. Where a 56 x 8 gang would go, a 48 x 8 job at priority 1 holds the
    first 48 nodes and one-node priority-0 jobs hold every GPU left free in its domain (the
    same holds on the reference twin); synth's own jobs are raised to priority 2 (the twin
    keeps them as plain busy GPUs, never victims). One GPU then fails on 8 of the job's
    ranks, so only preempting small jobs makes room inside its domain. Smoke run: 3 x 8 on
    ``tiny``, 1 lost."""
    return _contested(request.config.getoption("benchmark_disable", default=False), False)


@pytest.fixture(scope="module")
def contested_shares(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The same, the small jobs being two pods of 500 thousandths on each GPU left free
    (fractional victims: docs/preemption.md P8)."""
    return _contested(request.config.getoption("benchmark_disable", default=False), True)


def _contested(smoke: bool, shares: bool) -> dict[str, Any]:
    shape = synth.SHAPES["tiny" if smoke else "colossus100k"]
    cluster, _ = synth.build(shape, fill=0.5 if smoke else 0.9, seed=1)
    for other in cluster.allocations():
        cluster.set_priority(other, 2)
    oracle = twin(cluster, shape)
    kept, spare = (3, 1) if smoke else (48, 8)
    wide = cluster.place_gang(GangRequest(kept + spare, shape.gpus_per_node))
    assert wide is not None
    part = Placement._rebuild(list(wide.pods[:kept]), wide.level, list(wide.domain))
    job = cluster.set_priority(cluster.commit(cluster.reserve(part)), 1)
    twin_job = oracle.commit(oracle.reserve(part))
    oracle._holds[twin_job.id].priority = 1
    for name in cluster.nodes():  # every free GPU left in the domain: small jobs
        info = cluster.node(name)
        path = (*(info.topology[level] for level in shape.levels), name)
        if info.free and path[: len(part.domain)] == tuple(part.domain):
            for side in (cluster, oracle):
                if not shares:
                    side.adopt([(name, len(info.free))])
                    continue
                for gpu in info.free:  # two halves of each free GPU, one job each
                    for _ in range(2):
                        side.adopt([PodPlacement(name, [gpu])], gpu_milli=500)
    for pod in part.pods[:: 1 if smoke else 6][:spare]:
        for side in (cluster, oracle):
            side.set_gpu_health(pod.node, pod.gpus[0], False)
    return {"cluster": cluster, "oracle": oracle, "allocation": job.id, "twin": twin_job.id}


def bench_plan_repair_preempt(benchmark: Any, contested: dict[str, Any]) -> None:
    """8 lost ranks of the 48 x 8 job, no room in its domain: ``plan_repair(preempt=True)``."""
    cluster: Cluster = contested["cluster"]
    assert cluster.plan_repair(contested["allocation"]) is None
    plan = benchmark(cluster.plan_repair, contested["allocation"], preempt=True)
    assert plan is not None
    benchmark.extra_info.update(op="plan_repair(preempt)", victims=len(plan.victims))


def bench_plan_repair_preempt_shares(benchmark: Any, contested_shares: dict[str, Any]) -> None:
    """The same with the small jobs as shares: R6 ends fractional jobs (P8)."""
    bench_plan_repair_preempt(benchmark, contested_shares)


def bench_plan_repair_preempt_shares_reference(
    benchmark: Any, contested_shares: dict[str, Any]
) -> None:
    """The same by ``gangplace.reference`` (one round), checked against the engine."""
    bench_plan_repair_preempt_reference(benchmark, contested_shares)


def bench_plan_repair_preempt_reference(benchmark: Any, contested: dict[str, Any]) -> None:
    """The same by ``gangplace.reference`` (one round), checked against the engine."""
    oracle: reference.Cluster = contested["oracle"]
    got = benchmark.pedantic(
        oracle.plan_repair,
        args=(contested["twin"],),
        kwargs={"preempt": True},
        rounds=1,
        iterations=1,
    )
    expected = contested["cluster"].plan_repair(contested["allocation"], preempt=True)
    assert got is not None and expected is not None
    assert len(got.victims) == len(expected.victims)
    assert [(r, p.node, tuple(p.gpus)) for r, p in got.replacements] == [
        (r, p.node, tuple(p.gpus)) for r, p in expected.replacements
    ]


@pytest.mark.parametrize("lost", [True, False], ids=["lost-only", "all"])
def bench_lost_allocations(benchmark: Any, broken: dict[str, Any], lost: bool) -> None:
    """``allocations(lost=True)`` (what a scheduler asks every cycle, docs/repair.md "Repair after
    failures") against listing every allocation, at 90% fill with the one broken gang."""
    cluster: Cluster = broken["cluster"]
    found = benchmark(cluster.allocations, lost=lost)
    if lost:
        assert [a.id for a in found] == [broken["allocation"]]
    benchmark.extra_info.update(allocations=len(found))


def bench_lost_allocations_reference(benchmark: Any, broken: dict[str, Any]) -> None:
    """What a scheduler would do without it: list every allocation and keep those with lost
    ranks (the reference twin holds the gang only, so its own listing says nothing here)."""
    cluster: Cluster = broken["cluster"]
    found = benchmark(lambda: [a for a in cluster.allocations() if a.lost])
    assert [a.id for a in found] == [broken["allocation"]]


GIB = 2**30
CORES = {"cpu": 64_000, "memory": 512 * GIB}  # per 8-GPU pod: 8 cores and 64 GiB a GPU


@pytest.fixture(scope="module")
def resourced(request: pytest.FixtureRequest) -> dict[str, Any]:
    """``broken``'s cluster with CPUs and memory (96 or 192 cores, seeded, and 2 TiB a node;
    the other allocations ask none), the 64 x 8 gang asking ``CORES`` a pod, one GPU failed
    on 8 of its nodes; and its reference twin with the same resources and gang."""
    smoke = request.config.getoption("benchmark_disable", default=False)
    shape = synth.SHAPES["tiny" if smoke else "colossus100k"]
    cluster, _ = synth.build(shape, fill=0.5 if smoke else 0.9, seed=1)
    rng = random.Random(5)
    given = {
        name: {"cpu": rng.choice((96_000, 192_000)), "memory": 2048 * GIB}
        for name in cluster.nodes()
    }
    for name, resources in given.items():
        cluster.update_node(name, resources=resources)
    gang = GangRequest(4 if smoke else 64, shape.gpus_per_node, resources_per_pod=CORES)
    allocation = cluster.commit(cluster.reserve(gang))
    oracle = twin(cluster, shape)
    for name, resources in given.items():
        oracle._nodes[name].resources = resources
        oracle._resource_names.update(resources)
    for pod in allocation.placement.pods:
        oracle._nodes[pod.node].allocated.difference_update(pod.gpus)
    twin_id = oracle.commit(oracle.reserve(gang)).id
    assert [(p.node, p.gpus) for p in oracle.allocations()[0].placement.pods] == [
        (p.node, tuple(p.gpus)) for p in allocation.placement.pods
    ]
    lost_nodes = [pod.node for pod in allocation.placement.pods][:: 8 if not smoke else 2][:8]
    for node in lost_nodes:
        cluster.set_gpu_health(node, 0, False)
        oracle.set_gpu_health(node, 0, False)
    return {"cluster": cluster, "oracle": oracle, "allocation": allocation.id, "twin": twin_id}


@pytest.mark.parametrize("widen", [False, True], ids=["domain", "widened"])
def bench_plan_repair_resources(benchmark: Any, resourced: dict[str, Any], widen: bool) -> None:
    """The same 8 lost ranks when every pod asks 64 cores and 512 GiB (docs/resources.md "Node
    resources"): each replacement counted by its node's free CPUs and memory too."""
    _timed_plan(benchmark, resourced, widen, "plan_repair(resources)")


def _timed_plan(benchmark: Any, broken: dict[str, Any], widen: bool, op: str) -> None:
    """Times ``plan_repair`` of ``broken``'s allocation; a widened plan repairs every rank."""
    cluster: Cluster = broken["cluster"]
    plan = benchmark(cluster.plan_repair, broken["allocation"], widen=widen)
    benchmark.extra_info.update(
        op=op,
        planned=None if plan is None else len(plan.replacements),
        level=None if plan is None else plan.level,
    )
    if widen:
        assert plan is not None and len(plan.replacements) == len(plan.lost) > 0


def bench_plan_repair_resources_reference(benchmark: Any, resourced: dict[str, Any]) -> None:
    """The widened plan with resources by ``gangplace.reference`` (one round), checked."""
    oracle: reference.Cluster = resourced["oracle"]
    got = benchmark.pedantic(
        oracle.plan_repair, (resourced["twin"],), {"widen": True}, rounds=1, iterations=1
    )
    expected = resourced["cluster"].plan_repair(resourced["allocation"], widen=True)
    assert got is not None and expected is not None
    assert [(r, p.node, tuple(p.gpus)) for r, p in got.replacements] == [
        (r, p.node, tuple(p.gpus)) for r, p in expected.replacements
    ]


@pytest.fixture(scope="module")
def shared_broken(request: pytest.FixtureRequest) -> dict[str, Any]:
    """``broken``'s cluster with a gang of 64 pods x 500 thousandths of a GPU committed
    (docs/repair.md R7: two pods a GPU, best fit) instead of the 64 x 8 gang, then 4 of its
    GPUs failed (8 lost ranks); and its reference twin with the same shares."""
    smoke = request.config.getoption("benchmark_disable", default=False)
    shape = synth.SHAPES["tiny" if smoke else "colossus100k"]
    cluster, _ = synth.build(shape, fill=0.5 if smoke else 0.9, seed=1)
    gang = GangRequest(8 if smoke else 64, 1, gpu_milli=500)
    allocation = cluster.commit(cluster.reserve(gang))
    oracle = twin(cluster, shape)
    twin_id = oracle.commit(oracle.reserve(allocation.placement)).id
    oracle._holds[twin_id].request = gang
    gpus = sorted({(pod.node, pod.gpus[0]) for pod in allocation.placement.pods})
    for node, gpu in gpus[:: max(1, len(gpus) // 4)][:4]:
        cluster.set_gpu_health(node, gpu, False)
        oracle.set_gpu_health(node, gpu, False)
    return {"cluster": cluster, "oracle": oracle, "allocation": allocation.id, "twin": twin_id}


@pytest.mark.parametrize("widen", [False, True], ids=["domain", "widened"])
def bench_plan_repair_shares(benchmark: Any, shared_broken: dict[str, Any], widen: bool) -> None:
    """8 lost ranks of the 64-pod gang of shares: each replacement a share by rules F1-F2,
    counted node by node."""
    _timed_plan(benchmark, shared_broken, widen, "plan_repair(shares)")


@pytest.mark.parametrize("widen", [False, True], ids=["domain", "widened"])
def bench_plan_repair_shares_reference(
    benchmark: Any, shared_broken: dict[str, Any], widen: bool
) -> None:
    """The same plans by ``gangplace.reference`` (one round), checked against the engine."""
    oracle: reference.Cluster = shared_broken["oracle"]
    got = benchmark.pedantic(
        oracle.plan_repair, (shared_broken["twin"],), {"widen": widen}, rounds=1, iterations=1
    )
    expected = shared_broken["cluster"].plan_repair(shared_broken["allocation"], widen=widen)
    assert (got is None) == (expected is None)
    if got is not None and expected is not None:
        assert [(r, p.node, tuple(p.gpus)) for r, p in got.replacements] == [
            (r, p.node, tuple(p.gpus)) for r, p in expected.replacements
        ]
