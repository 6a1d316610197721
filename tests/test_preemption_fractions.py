"""A fractional gang may preempt (docs/preemption.md P8; docs/resources.md "Fractions of a GPU";
issue 47 item 4).

Victims are whole-GPU allocations (a fractional hold is never one): each GPU a victim frees
comes back whole and holds ``1000 // gpu_milli`` pods of the gang, beside the room partly used
GPUs already have. The engine agrees with ``gangplace.reference`` on plans and on the state
after ``preempt``; by brute force the victims are 1-minimal, none outranks the gang and the
highest priority among them is the smallest any set in the domain reaches; a stale plan
raises ``Conflict`` with the snapshot unchanged; defragmentation still refuses fractions.
"""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import event, given
from test_preemption import check_by_brute_force, jobs, load, pair, pin, same_plan, same_state

import gangplace
from gangplace import Conflict, GangRequest, InvalidRequest, PodPlacement, reference

shares = st.lists(st.tuples(st.integers(1, 3), st.sampled_from((300, 600, 700))), max_size=3)
gangs = st.tuples(
    st.integers(1, 8),  # pods
    st.sampled_from((250, 400, 500, 700)),  # thousandths each
    st.integers(-1, 3),  # priority
    st.sampled_from([None, "rack", "node"]),
)

# check_by_brute_force's domains are the two racks and the cluster: no node-level gangs.
rack_gangs = st.tuples(
    st.integers(1, 8),
    st.sampled_from((250, 400, 500, 700)),
    st.integers(-1, 3),
    st.sampled_from([None, "rack"]),
)


def loaded(
    specs: list[tuple[Any, ...]], shared: list[tuple[int, int]], gang: tuple[Any, ...]
) -> tuple[Any, Any, GangRequest]:
    """Both clusters (2 racks x 3 nodes x 4 GPUs) with the whole jobs, then fractional jobs
    (low priority, preemptible: never victims all the same), and the fractional gang."""
    engine, oracle = pair((2, 3), gpus=4)
    load((engine, oracle), specs)
    for pods, milli in shared:
        request = GangRequest(pods, 1, gpu_milli=milli, priority=-2)
        if engine.place_gang(request) is not None:
            for cluster in (engine, oracle):
                cluster.commit(cluster.reserve(request))
    pods, milli, priority, level = gang
    request = GangRequest(pods, 1, gpu_milli=milli, priority=priority, required_level=level)
    return engine, oracle, request


def same_shares(engine: Any, oracle: Any) -> None:
    for name in engine.nodes():
        assert engine.node(name).shared == oracle.node(name).shared, name


@given(jobs, shares, gangs)
def test_fractional_plans_agree_with_the_reference_and_apply_identically(
    specs: list[tuple[Any, ...]], shared: list[tuple[int, int]], gang_spec: tuple[Any, ...]
) -> None:
    engine, oracle, gang = loaded(specs, shared, gang_spec)
    for max_victims in (None, 1):
        got = engine.plan_preemption(gang, max_victims=max_victims)
        same_plan(got, oracle.plan_preemption(gang, max_victims=max_victims))
    plan = engine.plan_preemption(gang)
    if plan is None:
        event("no plan")
        return
    assert plan.placement.gpu_milli == gang.gpu_milli
    fractional = {a.id for a in engine.allocations() if a.placement.gpu_milli is not None}
    assert not fractional & set(plan.victims)  # a fractional hold is never a victim
    event("victims" if plan.victims else "fits now")
    engine.preempt(plan)
    oracle.preempt(oracle.plan_preemption(gang))
    same_state(engine, oracle)
    same_shares(engine, oracle)


def share_capacity(cluster: Any, domain: tuple[str, ...], removed: list[Any], milli: int) -> int:
    """Pods of ``milli`` thousandths ``domain`` holds with the allocations ``removed`` ended:
    on each uncordoned node, every healthy GPU that is free, shared or freed, by its room."""
    freed: dict[str, set[int]] = {}
    for allocation in removed:
        for pod in allocation.placement.pods:
            freed.setdefault(pod.node, set()).update(pod.gpus)
    pods = 0
    for name in cluster.nodes():
        info = cluster.node(name)
        path = (*info.topology.values(), name)
        if path[: len(domain)] != domain or info.cordoned:
            continue
        for gpu in range(info.gpus):
            usable = gpu in info.free or gpu in info.shared or gpu in freed.get(name, ())
            if usable and gpu not in info.unhealthy:
                pods += (1000 - info.shared.get(gpu, 0)) // milli
    return pods


@given(jobs, shares, rack_gangs)
def test_brute_force_minimality_and_priorities_for_shares(
    specs: list[tuple[Any, ...]], shared: list[tuple[int, int]], gang_spec: tuple[Any, ...]
) -> None:
    engine, _, gang = loaded(specs, shared, gang_spec)
    milli = gang_spec[1]
    check_by_brute_force(
        engine, gang, lambda domain, removed: share_capacity(engine, domain, removed, milli)
    )


@pytest.mark.parametrize("kind", [gangplace.Cluster, reference.Cluster])
def test_a_share_gang_ends_the_lowest_whole_job_and_lands_on_its_gpus(kind: Any) -> None:
    """Two nodes of 2 GPUs: n0 held whole at priority 0, n1 at priority 1; four pods of 500 at
    priority 5 end the priority-0 job and take its GPUs, two pods each (F2); a fractional job
    is never a victim."""
    engine, oracle = pair((1, 2), gpus=2)
    cluster = engine if kind is gangplace.Cluster else oracle
    low = pin(cluster, "r0-n0", 2, priority=0)
    pin(cluster, "r0-n1", 2, priority=1)
    plan = cluster.plan_preemption(GangRequest(4, 1, gpu_milli=500, priority=5))
    assert plan is not None and plan.victims == (low.id,) and plan.victim_gpus == 2
    assert [(p.node, tuple(p.gpus)) for p in plan.placement.pods] == [
        ("r0-n0", (0,)),
        ("r0-n0", (0,)),
        ("r0-n0", (1,)),
        ("r0-n0", (1,)),
    ]
    held = cluster.preempt(plan)
    assert held.placement.gpu_milli == 500 and cluster.node("r0-n0").shared == {0: 1000, 1: 1000}
    # The shares are no victims: a whole gang of priority 9 finds none on r0-n0.
    again = cluster.plan_preemption(GangRequest(1, 2, priority=9, required_level="node"))
    assert again is not None and [p.node for p in again.placement.pods] == ["r0-n1"]


@pytest.mark.parametrize("kind", [gangplace.Cluster, reference.Cluster])
def test_a_stale_fractional_plan_conflicts_and_changes_nothing(kind: Any) -> None:
    """Three pods of 400: the victim's GPU on r0-n0 holds two, r0-n1's shared GPU (500 used)
    the third; a share adopted there since leaves 200: ``Conflict`` naming the GPU, nothing
    changed; defragmentation refuses fractions (``InvalidRequest``)."""
    engine, oracle = pair((1, 2), gpus=1)
    cluster = engine if kind is gangplace.Cluster else oracle
    pin(cluster, "r0-n0", 1, priority=0)
    cluster.adopt([PodPlacement("r0-n1", (0,))], gpu_milli=500)
    gang = GangRequest(3, 1, gpu_milli=400, priority=5)
    plan = cluster.plan_preemption(gang)
    assert plan is not None and len(plan.victims) == 1
    assert sorted(p.node for p in plan.placement.pods) == ["r0-n0", "r0-n0", "r0-n1"]
    cluster.adopt([PodPlacement("r0-n1", (0,))], gpu_milli=300)
    before = cluster.snapshot()
    with pytest.raises(Conflict, match='GPU 0 of node "r0-n1" has 200 thousandths free'):
        cluster.preempt(plan)
    assert cluster.snapshot() == before
    with pytest.raises(InvalidRequest, match="plan_defrag does not plan fractions"):
        cluster.plan_defrag(gang)
    assert cluster.snapshot() == before
    assert cluster.plan_preemption(gang) is None  # 200 left on r0-n1: two pods fit, not three
