"""Multi-role gangs whose groups ask resources besides GPUs (docs/roles.md, "Node
resources"; issue 28 item 1).

A group's pods are counted on each node by its free GPUs and its free resources less what the
earlier groups of the unit took there; a group may ask no GPU at all (an MPIJob launcher, a
MIG slice). Holds keep every group's asks, spares included, until they end. The engine agrees
with ``gangplace.reference`` on random clusters with CPUs and memory; bad inputs raise typed
errors and leave the snapshot byte-identical; preemption and defragmentation, which do not
count resources yet, refuse such units.
"""

from __future__ import annotations

import pickle
from typing import Any

import hypothesis.strategies as st
import pytest
from helpers import FakeClock, as_tuple, reserve_both
from hypothesis import given, note
from test_resources import build

import gangplace
from gangplace import (
    GangRequest,
    InvalidRequest,
    MultiGangRequest,
    PodGroup,
    Unschedulable,
    reference,
)

LEVELS = ("rack",)
GIB = 2**30
BOTH = [gangplace.Cluster, reference.Cluster]


def farm(kind: Any = gangplace.Cluster) -> Any:
    """Rack r1: ``thin`` (8 GPUs, 10 CPUs) and ``fat`` (8 GPUs, 96 CPUs); rack r2: ``big``
    (8 GPUs, 48 CPUs), each with 512 GiB (a fake clock: snapshots compare)."""
    cluster = kind(LEVELS, clock=FakeClock())
    for name, rack, cpu in (("thin", "r1", 10_000), ("fat", "r1", 96_000), ("big", "r2", 48_000)):
        cluster.add_node(
            name, gpus=8, topology={"rack": rack}, resources={"cpu": cpu, "memory": 512 * GIB}
        )
    cluster._use_sequential_ids(1)
    return cluster


def mpi_job(worker_cpu: int = 40_000, launcher_cpu: int = 8_000, **options: Any) -> Any:
    """An MPIJob: a launcher without GPUs beside two 4-GPU workers, all on one node."""
    return MultiGangRequest(
        (
            PodGroup("launcher", 1, 0, resources_per_pod={"cpu": launcher_cpu}),
            PodGroup("workers", 2, 4, resources_per_pod={"cpu": worker_cpu}, **options),
        ),
        required_level="node",
    )


@pytest.mark.parametrize("kind", BOTH)
def test_each_group_sees_the_resources_the_earlier_groups_took(kind: Any) -> None:
    """Workers (8 GPUs, placed first) take 80 of fat's 96 CPUs and the launcher 8 of the 16
    left; big (48 CPUs), first in best-fit order, holds one worker and thin (10) none: a
    GPU-only count would place the unit on big."""
    cluster = farm(kind)
    placement = cluster.place_gang(mpi_job())
    assert placement.domain == ("r1", "fat")
    assert [(pod.node, tuple(pod.gpus)) for pod in placement.pods] == [
        ("fat", ()),
        ("fat", (0, 1, 2, 3)),
        ("fat", (4, 5, 6, 7)),
    ]
    # Launchers of 20 CPUs do not fit beside 80 CPUs of workers on fat, nor on big (48).
    with pytest.raises(Unschedulable) as caught:
        cluster.reserve(mpi_job(launcher_cpu=20_000))
    assert caught.value.reason == (
        'multi-role gang of 2 groups (8 GPUs) does not fit: in node r2/big, group "workers" '
        "holds 1 of its 2 pods"
    )
    held = cluster.reserve(mpi_job())
    assert cluster.node("fat").free_resources["cpu"] == 8_000
    assert cluster.capacity_for(mpi_job(worker_cpu=20_000)) == 1  # big only: 40 + 8 of 48
    cluster.rollback(held)
    assert cluster.node("fat").free_resources["cpu"] == 96_000
    if kind is gangplace.Cluster:
        cluster.check_invariants()


@pytest.mark.parametrize("kind", BOTH)
def test_spares_of_a_group_ask_what_its_pods_ask(kind: Any) -> None:
    cluster = farm(kind)
    request = MultiGangRequest(
        (
            PodGroup("launcher", 1, 0, resources_per_pod={"cpu": 2_000}),
            PodGroup("workers", 2, 2, spares=1, resources_per_pod={"cpu": 30_000}),
        ),
        required_level="node",
    )
    held = cluster.commit(cluster.reserve(request))
    assert len(held.placement.spares) == 1 and held.placement.domain == ("r1", "fat")
    assert cluster.node("fat").free_resources["cpu"] == 96_000 - 2_000 - 3 * 30_000
    released = cluster.release_pods(held, [0])  # the launcher ends: its 2 CPUs come back
    assert released is not None
    assert cluster.node("fat").free_resources["cpu"] == 96_000 - 3 * 30_000
    assert cluster.release(held)
    assert cluster.node("fat").free_resources["cpu"] == 96_000


def test_snapshots_and_pickles_keep_the_groups_asks() -> None:
    cluster = farm()
    cluster.commit(cluster.reserve(mpi_job()))
    restored = gangplace.Cluster.restore(cluster.snapshot(), clock=FakeClock())
    restored.check_invariants()
    assert restored.node("fat").free_resources == cluster.node("fat").free_resources
    assert restored.snapshot() == cluster.snapshot()
    group = PodGroup("launcher", 1, 0, resources_per_pod={"cpu": 8_000, "memory": GIB})
    assert pickle.loads(pickle.dumps(group)) == group
    assert group.resources_per_pod == {"cpu": 8_000, "memory": GIB}
    assert (
        repr(group)
        == "PodGroup('launcher', 1, 0, resources_per_pod={'cpu': 8000, 'memory': 1073741824})"
    )


@pytest.mark.parametrize("kind", BOTH)
def test_a_unit_preempts_the_job_holding_the_cpus_its_launcher_needs(kind: Any) -> None:
    """docs/roles.md 7 with resources: fat has the GPUs but a low-priority job
    without GPUs holds 60 of its 96 CPUs; the MPIJob (80 CPUs of workers, 8 for the
    launcher) preempts it, not a GPU job, and the plan applies."""
    cluster = kind(LEVELS, clock=FakeClock())
    cluster.add_node("fat", gpus=8, topology={"rack": "r1"}, labels={"host": "fat"},
                     resources={"cpu": 96_000})  # fmt: skip
    cluster._use_sequential_ids(1)
    service = GangRequest(1, 0, selector={"host": "fat"}, resources_per_pod={"cpu": 60_000})
    held = cluster.commit(cluster.reserve(service))
    job = MultiGangRequest(mpi_job().groups, required_level="node", priority=5)
    assert cluster.place_gang(job) is None
    plan = cluster.plan_preemption(job)
    assert plan is not None and plan.victims == (held.id,)
    assert cluster.commit(cluster.preempt(plan)).placement == plan.placement
    assert cluster.node("fat").free_resources["cpu"] == 8_000
    if kind is gangplace.Cluster:
        cluster.check_invariants()


BAD_GROUPS: list[tuple[dict[str, Any], type, str]] = [
    ({"gpus": 0}, InvalidRequest, "ask resources"),
    ({"resources_per_pod": {"cpu": -1}}, InvalidRequest, "between 0"),
    ({"resources_per_pod": {"nvidia.com/gpu": 1}}, InvalidRequest, "gpus"),
    ({"resources_per_pod": {"cpu": True}}, TypeError, "int"),
    ({"resources_per_pod": {"cpu": 0.5}}, TypeError, "int"),
    ({"resources_per_pod": {"cpu": 2**51}}, InvalidRequest, "between 0"),
    ({"resources_per_pod": ["cpu"]}, TypeError, "mapping"),
]


@pytest.mark.parametrize(("fields", "error", "text"), BAD_GROUPS)
def test_bad_group_resources_raise_typed_errors(
    fields: dict[str, Any], error: type, text: str
) -> None:
    gpus = fields.pop("gpus", 1)
    with pytest.raises(error, match=text):
        PodGroup("g", 1, gpus, **fields)


CALLS = [(kind, call) for kind in BOTH for call in ("place_gang", "reserve", "capacity_for")]


@pytest.mark.parametrize(("kind", "call"), [*CALLS, (gangplace.Cluster, "explain")])
def test_an_unknown_resource_name_is_invalid_when_placed(kind: Any, call: str) -> None:
    cluster = farm(kind)
    request = MultiGangRequest((PodGroup("a", 1, 1, resources_per_pod={"cpus": 1}),))
    before = cluster.snapshot()
    with pytest.raises(InvalidRequest, match=r".cpus., which no node of the cluster offers"):
        getattr(cluster, call)(request)
    assert cluster.snapshot() == before


# ------------------------------------------------------------------------ the reference


@st.composite
def resourced_nodes(draw: st.DrawFn) -> list[tuple[str, int, str, dict[str, int]]]:
    nodes = []
    for index in range(draw(st.integers(1, 8))):
        gpus = draw(st.sampled_from((1, 2, 4, 8)))
        rack = draw(st.sampled_from(("r1", "r2", "r3")))
        # Every node declares both names (asking one no node has is an InvalidRequest).
        resources = {"cpu": draw(st.integers(1, 16)), "memory": draw(st.integers(1, 8))}
        nodes.append((f"n{index}", gpus, rack, resources))
    return nodes


@st.composite
def resourced_units(draw: st.DrawFn) -> MultiGangRequest:
    groups = []
    for name in draw(
        st.lists(st.sampled_from(("a", "b", "c")), min_size=1, max_size=3, unique=True)
    ):
        asks = draw(
            st.fixed_dictionaries(
                {}, optional={"cpu": st.integers(1, 6), "memory": st.integers(1, 3)}
            )
        )
        sizes = (0, 1, 2, 4) if asks else (1, 2, 4)
        gpus = draw(st.sampled_from(sizes))
        pods = draw(st.integers(1, 4))
        groups.append(
            PodGroup(
                name,
                pods,
                gpus,
                min_pods=draw(st.none() | st.just(1)),
                spares=draw(st.sampled_from((0, 0, 1))) if gpus else 0,
                resources_per_pod=asks,
            )
        )
    return MultiGangRequest(
        groups,
        required_level=draw(st.sampled_from((None, "node", "rack"))),
        spread=draw(st.sampled_from(("pack", "balanced"))),
    )


@given(data=st.data(), nodes=resourced_nodes())
def test_engine_agrees_with_reference_on_units_asking_resources(
    data: st.DataObject, nodes: list[tuple[str, int, str, dict[str, int]]]
) -> None:
    engine, oracle = build(gangplace.Cluster, nodes), build(reference.Cluster, nodes)
    held: list[tuple[Any, Any]] = []
    for _ in range(data.draw(st.integers(1, 5), label="steps")):
        if held and data.draw(st.integers(0, 3), label="end one") == 0:
            mine, theirs = held.pop(data.draw(st.integers(0, len(held) - 1)))
            assert engine.rollback(mine) == oracle.rollback(theirs)
            continue
        request = data.draw(resourced_units())
        note(repr(request))
        both = reserve_both(engine, oracle, request, queries=True)
        if both is None:
            continue
        held.append(both)
        for name, *_ in nodes:
            assert engine.node(name).free_resources == oracle.node(name).free_resources
        engine.check_invariants()


@given(data=st.data(), nodes=resourced_nodes())
def test_unit_preemption_with_resources_agrees_with_the_reference(
    data: st.DataObject, nodes: list[tuple[str, int, str, dict[str, int]]]
) -> None:
    """Random jobs of random priorities (some without GPUs) asking CPUs and memory, then a
    unit of priority 3 asking resources: the same plan (or none), applied alike."""
    engine, oracle = build(gangplace.Cluster, nodes), build(reference.Cluster, nodes)
    for _ in range(data.draw(st.integers(0, 6), label="jobs")):
        cpu = data.draw(st.integers(0, 4))
        gpus = data.draw(st.sampled_from((0, 1, 2) if cpu else (1, 2)))
        job = GangRequest(
            data.draw(st.integers(1, 2)),
            gpus,
            priority=data.draw(st.integers(0, 4)),
            resources_per_pod={"cpu": cpu} if cpu else None,
        )
        reserve_both(engine, oracle, job)  # the same reservation, or both refuse
    for cluster in (engine, oracle):
        for held in cluster.reservations():
            cluster.commit(held)
    unit = data.draw(resourced_units())
    unit = MultiGangRequest(
        [PodGroup(g.name, g.pods, g.gpus_per_pod, min_pods=g.min_pods,
                  resources_per_pod=g.resources_per_pod) for g in unit.groups],
        required_level=unit.required_level,
        priority=3,
    )  # fmt: skip
    note(repr(unit))
    got, expected = engine.plan_preemption(unit), oracle.plan_preemption(unit)
    assert (got is None) == (expected is None)
    if got is None:
        return
    assert got.victims == expected.victims
    assert as_tuple(got.placement) == as_tuple(expected.placement)
    engine.commit(engine.preempt(got))
    oracle.commit(oracle.preempt(expected))
    for name, *_ in nodes:
        assert engine.node(name).free_resources == oracle.node(name).free_resources
        assert engine.node(name).free == oracle.node(name).free
    engine.check_invariants()
