"""Preemption and defragmentation count resources besides GPUs (docs/resources.md "Node resources",
rules P1-P6, D1-D4; issue 28 item 1).

A gang asking CPUs preempts so that every pod's node has the GPUs *and* the CPUs: victims
give back both, a node's pods are counted by both. The engine's plans equal the reference's
on random clusters where jobs ask CPUs (some no GPU at all), and applying them leaves both in
the same state; brute force on tiny clusters checks P3-P4 with resources (the set is
1-minimal, no victim outranks the gang, the highest victim priority is the smallest any set
in the domain reaches, a missing plan means removing every candidate cannot fit); a plan
gone stale on resources raises ``Conflict`` and changes nothing; defragmentation moves
GPU-only jobs off the node with the CPUs.
"""

from __future__ import annotations

import itertools
from typing import Any

import hypothesis.strategies as st
import pytest
from helpers import FakeClock, as_tuple
from hypothesis import given
from test_preemption import check_by_brute_force, same_plan

from gangplace import (
    Cluster,
    Conflict,
    GangplaceError,
    GangRequest,
    Scheduler,
    reference,
)

LEVELS = ("rack",)
CPUS = 8  # per node, in units
BOTH = [Cluster, reference.Cluster]


def twins(cpus: int = CPUS) -> tuple[Any, Any]:
    """Engine and reference: 2 racks x 3 nodes x 4 GPUs, each node with ``cpus`` CPUs."""
    clock = FakeClock()
    pair = (Cluster(LEVELS, clock=clock), reference.Cluster(LEVELS, clock=clock))
    for cluster in pair:
        for rack, node in itertools.product(range(2), range(3)):
            name = f"r{rack}-n{node}"
            cluster.add_node(
                name,
                gpus=4,
                topology={"rack": f"r{rack}"},
                labels={"host": name},
                resources={"cpu": cpus},
            )
        cluster._use_sequential_ids(1)  # type: ignore[union-attr]
    return pair


def request(pods: int, gpus: int, cpu: int, **terms: Any) -> GangRequest:
    return GangRequest(pods, gpus, resources_per_pod={"cpu": cpu} if cpu else None, **terms)


@pytest.mark.parametrize("kind", BOTH)
def test_a_gang_short_of_cpus_preempts_the_job_holding_them(kind: Any) -> None:
    """r0-n0's GPUs are free but a low-priority service without GPUs holds 6 of its 8 CPUs:
    the gang (4 GPUs, 4 CPUs, on one node) preempts it, not a GPU job; a GPU-only count
    would see room already."""
    cluster = kind(LEVELS, clock=FakeClock())
    for name in ("a", "b"):
        resources = {"cpu": 8}
        cluster.add_node(
            name, gpus=4, topology={"rack": "r0"}, labels={"host": name}, resources=resources
        )
    cluster._use_sequential_ids(1)
    service = cluster.commit(cluster.reserve(request(1, 0, 6, priority=0, selector={"host": "a"})))
    busy = cluster.commit(cluster.reserve(request(1, 4, 2, priority=0, selector={"host": "b"})))
    assert [pod.node for pod in service.placement.pods] == ["a"]
    assert [pod.node for pod in busy.placement.pods] == ["b"]
    gang = request(1, 4, 4, priority=5, required_level="node")
    assert cluster.place_gang(gang) is None  # a's CPUs, b's GPUs
    plan = cluster.plan_preemption(gang)
    assert plan.victims == (service.id,) and plan.victim_gpus == 0
    assert plan.placement.domain == ("r0", "a")
    held = cluster.preempt(plan)
    assert cluster.hold_status(service) == "preempted"
    assert cluster.node("a").free_resources == {"cpu": 4}
    assert cluster.commit(held).placement == plan.placement
    if kind is Cluster:
        cluster.check_invariants()


def test_a_plan_stale_on_resources_conflicts_and_changes_nothing() -> None:
    engine, _ = twins()
    low = engine.commit(engine.reserve(request(1, 4, 4, priority=0, selector={"host": "r0-n0"})))
    for name in ("r0-n1", "r0-n2", "r1-n0", "r1-n1", "r1-n2"):
        engine.commit(engine.reserve(request(1, 4, 1, priority=9, selector={"host": name})))
    gang = request(1, 4, 8, priority=5)
    plan = engine.plan_preemption(gang)
    assert plan is not None and plan.victims == (low.id,)
    # A pod without GPUs takes 3 of r0-n0's CPUs after the plan was made.
    engine.commit(engine.reserve(request(1, 0, 3, priority=9, selector={"host": "r0-n0"})))
    before = engine.snapshot()
    with pytest.raises(Conflict, match=r'node "r0-n0" would have \{cpu=5\} free besides GPUs'):
        engine.preempt(plan)
    assert engine.snapshot() == before


@pytest.mark.parametrize("kind", BOTH)
def test_defragmentation_moves_gpus_to_the_node_with_the_cpus(kind: Any) -> None:
    """``fat`` has the CPUs but a movable 2-GPU job; ``thin`` has free GPUs but 1 CPU: the
    gang (4 GPUs, 8 CPUs) needs the job moved off fat, which a GPU-only count would not see
    (it would place the gang on thin)."""
    cluster = kind(LEVELS, clock=FakeClock())
    for name, cpu in (("fat", 16), ("thin", 1)):
        cluster.add_node(name, gpus=4, topology={"rack": "r0"}, labels={"host": name},
                         resources={"cpu": cpu})  # fmt: skip
    cluster._use_sequential_ids(1)
    mover = cluster.commit(cluster.reserve(GangRequest(1, 2, movable=True)))  # fat: path order
    gang = request(1, 4, 8, priority=5, required_level="node")
    assert cluster.place_gang(gang) is None
    assert cluster.place_gang(GangRequest(1, 4, required_level="node")).domain == ("r0", "thin")
    plan = cluster.plan_defrag(gang)
    assert plan.placement.domain == ("r0", "fat")
    assert [(move.allocation, move.target.domain) for move in plan.moves] == [
        (mover.id, ("r0", "thin"))
    ]
    held, _ = cluster.apply_defrag(plan)
    assert held.placement == plan.placement
    assert cluster.node("fat").free_resources == {"cpu": 8}
    if kind is Cluster:
        cluster.check_invariants()


def test_the_scheduler_preempts_for_a_gang_asking_cpus() -> None:
    """docs/resources.md "Node resources": the Scheduler's preemption (S8) counts resources."""
    clock = FakeClock()
    cluster = Cluster(LEVELS, clock=clock)
    cluster.add_node("a", gpus=4, topology={"rack": "r0"}, resources={"cpu": 8})
    scheduler = Scheduler(cluster, clock=clock, preemption=True, defrag=True)
    scheduler.submit("service", request(1, 1, 6, priority=0))
    scheduler.cycle(clock())
    scheduler.submit("train", request(1, 3, 4, priority=5))  # 3 GPUs free, 2 CPUs
    decisions = scheduler.cycle(clock())
    assert [started.job_id for started in decisions.started] == ["train"]
    assert "service" in decisions.preempted


# ------------------------------------------------------------------ the reference

jobs = st.lists(
    st.tuples(
        st.integers(1, 2),  # pods
        st.integers(0, 4),  # GPUs per pod (0: CPUs only)
        st.integers(0, 4),  # CPUs per pod
        st.integers(-2, 2),  # priority
        st.booleans(),  # preemptible
        st.sampled_from([None, "node", "rack"]),
        st.booleans(),  # movable (defragmentation moves those asking no CPUs)
    ),
    max_size=8,
)
gangs = st.tuples(
    st.integers(1, 3),
    st.integers(0, 4),
    st.integers(1, 6),
    st.integers(-1, 3),
    st.sampled_from([None, "rack"]),
)


def loaded(specs: list[tuple[Any, ...]]) -> tuple[Any, Any]:
    """Both twins loaded with the same jobs; both agree on each outcome."""
    engine, oracle = twins()
    for pods, gpus, cpu, priority, preemptible, level, movable in specs:
        if gpus == 0 and cpu == 0:
            cpu = 1  # pods without GPUs ask something
        job = request(
            pods,
            gpus,
            cpu,
            priority=priority,
            preemptible=preemptible,
            movable=movable,
            required_level=level,
        )
        outcomes: list[Any] = []
        for cluster in (engine, oracle):
            try:
                outcomes.append(cluster.commit(cluster.reserve(job)).id)
            except GangplaceError as error:
                outcomes.append(type(error))
        assert outcomes[0] == outcomes[1]
    return engine, oracle


def gang_of(spec: tuple[Any, ...]) -> GangRequest:
    pods, gpus, cpu, priority, level = spec
    return request(pods, gpus, cpu, priority=priority, required_level=level)


def same_state(engine: Any, oracle: Any) -> None:
    engine.check_invariants()
    for name in engine.nodes():
        a, b = engine.node(name), oracle.node(name)
        assert (a.free, a.allocated, a.reserved) == (b.free, b.allocated, b.reserved), name
        assert a.free_resources == b.free_resources, name
    assert [(x.id, as_tuple(x.placement)) for x in engine.allocations()] == [
        (y.id, as_tuple(y.placement)) for y in oracle.allocations()
    ]


@given(jobs, gangs)
def test_plans_with_resources_agree_with_the_reference_and_apply(
    specs: list[tuple[Any, ...]], gang_spec: tuple[Any, ...]
) -> None:
    engine, oracle = loaded(specs)
    gang = gang_of(gang_spec)
    for max_victims in (None, 1):
        got = engine.plan_preemption(gang, max_victims=max_victims)
        same_plan(got, oracle.plan_preemption(gang, max_victims=max_victims))
    plan = engine.plan_preemption(gang)
    if plan is not None:
        engine.preempt(plan)
        oracle.preempt(oracle.plan_preemption(gang))
    same_state(engine, oracle)


@given(jobs, gangs, st.booleans())
def test_defrag_plans_with_resources_agree_with_the_reference_and_apply(
    specs: list[tuple[Any, ...]], gang_spec: tuple[Any, ...], evict: bool
) -> None:
    engine, oracle = loaded(specs)
    gang = gang_of(gang_spec)
    got = engine.plan_defrag(gang, evict_unplaceable=evict)
    expected = oracle.plan_defrag(gang, evict_unplaceable=evict)
    assert (got is None) == (expected is None)
    if got is None:
        return
    assert as_tuple(got.placement) == as_tuple(expected.placement)
    assert [(m.allocation, as_tuple(m.target)) for m in got.moves] == [
        (m.allocation, as_tuple(m.target)) for m in expected.moves
    ]
    assert got.evictions == expected.evictions
    engine.apply_defrag(got)
    oracle.apply_defrag(expected)
    same_state(engine, oracle)


def capacity_after(cluster: Any, domain: tuple[str, ...], removed: list[Any], gang: Any) -> int:
    """Pods of ``gang`` that ``domain`` holds with the allocations ``removed`` ended, each
    node counted by its GPUs and CPUs (a brute force over the public API)."""
    gpus, cpu = gang.gpus_per_pod, gang.resources_per_pod["cpu"]
    freed_gpus: dict[str, int] = {}
    freed_cpu: dict[str, int] = {}
    for allocation in removed:
        asks = allocation.request.resources_per_pod.get("cpu", 0)
        for pod in allocation.placement.pods:
            unhealthy = set(cluster.node(pod.node).unhealthy)
            freed_gpus[pod.node] = freed_gpus.get(pod.node, 0) + len(set(pod.gpus) - unhealthy)
            freed_cpu[pod.node] = freed_cpu.get(pod.node, 0) + asks
    total = 0
    for name in cluster.nodes():
        info = cluster.node(name)
        if (*info.topology.values(), name)[: len(domain)] != domain:
            continue
        free_cpu = info.free_resources.get("cpu", 0) + freed_cpu.get(name, 0)
        by_gpus = (len(info.free) + freed_gpus.get(name, 0)) // gpus if gpus else 10**9
        total += min(by_gpus, free_cpu // cpu)
    return total


@given(jobs, gangs)
def test_brute_force_minimality_and_priorities_with_resources(
    specs: list[tuple[Any, ...]], gang_spec: tuple[Any, ...]
) -> None:
    engine, _ = loaded(specs)
    gang = gang_of(gang_spec)
    check_by_brute_force(
        engine, gang, lambda domain, removed: capacity_after(engine, domain, removed, gang)
    )
