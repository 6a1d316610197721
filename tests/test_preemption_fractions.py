"""Shares of a GPU in preemption (docs/preemption.md P8; docs/resources.md "Fractions of a GPU";
issue 47 item 4).

A fractional gang may preempt, and a fractional allocation may be a victim: each GPU a whole
victim frees comes back whole and holds ``1000 // gpu_milli`` pods of the gang, each share a
victim gives back leaves its GPU that much more room, and a shared GPU all of whose shares
are victims' is free again (for a whole-GPU gang too). The engine agrees with
``gangplace.reference`` on plans and on the state after ``preempt``; by brute force the
victims are 1-minimal, none outranks the gang and the highest priority among them is the
smallest any set in the domain reaches; a stale plan raises ``Conflict`` with the snapshot
unchanged. Defragmentation makes room for a fractional gang the same way (D5): whole-GPU
movers move out of its domain (a fractional hold never moves), agreeing with the reference.
"""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import pytest
from helpers import FakeClock, as_tuple
from hypothesis import event, given
from test_preemption import (
    build,
    check_by_brute_force,
    jobs,
    layouts,
    load,
    pair,
    pin,
    same_plan,
    same_state,
)

import gangplace
from gangplace import Conflict, GangRequest, PodPlacement, reference

shares = st.lists(
    st.tuples(
        st.integers(1, 4),  # pods
        st.sampled_from((300, 600, 700)),  # thousandths each
        st.sampled_from((-2, 0, 2)),  # priority
        st.booleans(),  # preemptible
    ),
    max_size=8,
)
gangs = st.tuples(
    st.integers(1, 12),  # pods
    st.sampled_from((None, 250, 400, 500, 700)),  # thousandths each (None: whole GPUs)
    st.integers(-1, 3),  # priority
    st.sampled_from([None, "rack", "node"]),
)

# check_by_brute_force's domains are the two racks and the cluster: no node-level gangs.
rack_gangs = st.tuples(
    st.integers(1, 12),
    st.sampled_from((None, 250, 400, 500, 700)),
    st.integers(-1, 3),
    st.sampled_from([None, "rack"]),
)


# The clusters: 2 racks x 3 nodes x 4 GPUs, or crowded: 2 racks x 2 nodes x 2 GPUs (shares
# then hold most GPUs, so that fractional victims are common).
layouts_of = st.sampled_from([((2, 3), 4), ((2, 2), 2)])


def loaded(
    specs: list[tuple[Any, ...]],
    shared: list[tuple[Any, ...]],
    gang: tuple[Any, ...],
    layout: tuple[tuple[int, int], int] = ((2, 3), 4),
) -> tuple[Any, Any, GangRequest]:
    """Both clusters (``layout``) with the whole jobs, then fractional jobs, and the gang
    (whole GPUs when its thousandths are ``None``: 1 or 2 GPUs a pod)."""
    engine, oracle = pair(layout[0], gpus=layout[1])
    load((engine, oracle), specs)
    for pods, milli, priority, preemptible in shared:
        request = GangRequest(pods, 1, gpu_milli=milli, priority=priority, preemptible=preemptible)
        if engine.place_gang(request) is not None:
            for cluster in (engine, oracle):
                cluster.commit(cluster.reserve(request))
    pods, milli, priority, level = gang
    size = 1 if milli is not None else 1 + pods % 2
    pods = pods if milli is not None else 1 + pods // 2
    request = GangRequest(pods, size, gpu_milli=milli, priority=priority, required_level=level)
    return engine, oracle, request


def same_shares(engine: Any, oracle: Any) -> None:
    for name in engine.nodes():
        assert engine.node(name).shared == oracle.node(name).shared, name


@given(jobs, shares, gangs, layouts_of)
def test_fractional_plans_agree_with_the_reference_and_apply_identically(
    specs: list[tuple[Any, ...]],
    shared: list[tuple[Any, ...]],
    gang_spec: tuple[Any, ...],
    layout: tuple[tuple[int, int], int],
) -> None:
    engine, oracle, gang = loaded(specs, shared, gang_spec, layout)
    for max_victims in (None, 1):
        got = engine.plan_preemption(gang, max_victims=max_victims)
        same_plan(got, oracle.plan_preemption(gang, max_victims=max_victims))
    plan = engine.plan_preemption(gang)
    if plan is None:
        event("no plan")
        return
    assert plan.placement.gpu_milli == gang.gpu_milli
    fractional = {a.id for a in engine.allocations() if a.placement.gpu_milli is not None}
    kind = "fractional" if gang.gpu_milli is not None else "whole-GPU"
    event(f"{kind} gang: " + ("victims" if plan.victims else "fits now"))
    if fractional & set(plan.victims):
        event(f"{kind} gang: fractional victims")
    engine.preempt(plan)
    oracle.preempt(oracle.plan_preemption(gang))
    same_state(engine, oracle)
    same_shares(engine, oracle)


def share_capacity(
    cluster: Any, domain: tuple[str, ...], removed: list[Any], milli: int | None, size: int = 1
) -> int:
    """Pods ``domain`` holds with the allocations ``removed`` ended, counted GPU by GPU from
    the nodes' free and shared GPUs: whole victims' GPUs come back whole, fractional
    victims' shares give their GPU's room back. Pods of ``milli`` thousandths count every
    healthy usable GPU's room; whole-GPU pods (``milli`` ``None``) of ``size`` GPUs count the
    GPUs with nothing left on them."""
    freed: dict[str, set[int]] = {}
    back: dict[tuple[str, int], int] = {}
    for allocation in removed:
        for pod in allocation.placement.pods:
            if allocation.placement.gpu_milli is None:
                freed.setdefault(pod.node, set()).update(pod.gpus)
            else:
                for gpu in pod.gpus:
                    back[(pod.node, gpu)] = (
                        back.get((pod.node, gpu), 0) + allocation.placement.gpu_milli
                    )
    pods = 0
    for name in cluster.nodes():
        info = cluster.node(name)
        path = (*info.topology.values(), name)
        if path[: len(domain)] != domain or info.cordoned:
            continue
        whole = 0
        for gpu in range(info.gpus):
            usable = gpu in info.free or gpu in info.shared or gpu in freed.get(name, ())
            if not usable or gpu in info.unhealthy:
                continue
            used = info.shared.get(gpu, 0) - back.get((name, gpu), 0)
            if milli is not None:
                pods += (1000 - used) // milli
            whole += used == 0
        pods += whole // size if milli is None else 0
    return pods


@given(jobs, shares, rack_gangs, layouts_of)
def test_brute_force_minimality_and_priorities_for_shares(
    specs: list[tuple[Any, ...]],
    shared: list[tuple[Any, ...]],
    gang_spec: tuple[Any, ...],
    layout: tuple[tuple[int, int], int],
) -> None:
    engine, _, gang = loaded(specs, shared, gang_spec, layout)
    milli, size = gang.gpu_milli, gang.gpus_per_pod
    check_by_brute_force(
        engine,
        gang,
        lambda domain, removed: share_capacity(engine, domain, removed, milli, size),
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
    # Its shares are a reservation, no victim: a whole gang of priority 9 finds none there.
    again = cluster.plan_preemption(GangRequest(1, 2, priority=9, required_level="node"))
    assert again is not None and [p.node for p in again.placement.pods] == ["r0-n1"]


@pytest.mark.parametrize("kind", [gangplace.Cluster, reference.Cluster])
def test_a_stale_fractional_plan_conflicts_and_changes_nothing(kind: Any) -> None:
    """Three pods of 400: the victim's GPU on r0-n0 holds two, r0-n1's shared GPU (500 used)
    the third; a share adopted there since leaves 200: ``Conflict`` naming the GPU, nothing
    changed (the shares are not preemptible: no victims)."""
    engine, oracle = pair((1, 2), gpus=1)
    cluster = engine if kind is gangplace.Cluster else oracle
    pin(cluster, "r0-n0", 1, priority=0)
    cluster.adopt([PodPlacement("r0-n1", (0,))], gpu_milli=500, preemptible=False)
    gang = GangRequest(3, 1, gpu_milli=400, priority=5)
    plan = cluster.plan_preemption(gang)
    assert plan is not None and len(plan.victims) == 1
    assert sorted(p.node for p in plan.placement.pods) == ["r0-n0", "r0-n0", "r0-n1"]
    cluster.adopt([PodPlacement("r0-n1", (0,))], gpu_milli=300, preemptible=False)
    before = cluster.snapshot()
    with pytest.raises(Conflict, match='GPU 0 of node "r0-n1" has 200 thousandths free'):
        cluster.preempt(plan)
    assert cluster.snapshot() == before
    assert cluster.plan_preemption(gang) is None  # 200 left on r0-n1: two pods fit, not three


def same_defrag_plans(
    clusters: tuple[Any, Any], gang: GangRequest, evict: bool, label: str
) -> tuple[Any, Any] | None:
    """The engine's and the reference's defragmentation plans for ``gang``, asserted equal
    (placement, moves, evictions, moved GPUs); ``None`` when neither has one."""
    got, expected = (c.plan_defrag(gang, evict_unplaceable=evict) for c in clusters)
    assert (got is None) == (expected is None)
    if got is None:
        event(f"{label}: no plan")
        return None
    assert as_tuple(got.placement) == as_tuple(expected.placement)
    assert [(m.allocation, as_tuple(m.target)) for m in got.moves] == [
        (m.allocation, as_tuple(m.target)) for m in expected.moves
    ]
    assert (got.evictions, got.moved_gpus) == (expected.evictions, expected.moved_gpus)
    return got, expected


def _shares(pods: int, milli: int, level: str) -> GangRequest:
    return GangRequest(pods, 1, gpu_milli=milli, required_level=level)


@given(
    layouts,
    st.tuples(st.integers(3, 12), st.sampled_from((500, 700, 900)), st.integers(0, 2)),
    st.sampled_from(["node", "rack"]),
    st.booleans(),
    st.sampled_from([None, 0, 1]),
)
def test_defrag_for_shares_agrees_with_the_reference_and_applies(
    layout: tuple[list[int], list[Any]],
    gang_spec: tuple[int, int, int],
    level: str,
    evict: bool,
    beyond: int | None,
) -> None:
    """docs/preemption.md D5: fragmented layouts (fixed jobs, small movable ones), a gang of
    shares: the same plan (placement, moves, evictions) as the reference, applied on both
    with the same state and shares after; no move lands on a GPU the gang shares. With
    ``beyond``, the gang has that many pods more than the fewest that do not fit now (so
    that moves have work to do more often)."""
    engine, oracle = pair((3, 2), gpus=4)
    build((engine, oracle), layout)
    pods, milli, priority = gang_spec
    if beyond is not None:
        pods = next(n for n in range(1, 50) if engine.place_gang(_shares(n, milli, level)) is None)
        pods += beyond
    gang = GangRequest(pods, 1, gpu_milli=milli, required_level=level, priority=priority)
    plans = same_defrag_plans((engine, oracle), gang, evict, "defrag")
    if plans is None:
        return
    got, expected = plans
    assert got.placement.gpu_milli == milli
    shared = {(p.node, g) for p in got.placement.pods for g in p.gpus}
    assert not shared & {(p.node, g) for m in got.moves for p in m.target.pods for g in p.gpus}
    event("defrag: moves" if got.moves or got.evictions else "defrag: fits now")
    engine.apply_defrag(got)
    oracle.apply_defrag(expected)
    same_state(engine, oracle)
    same_shares(engine, oracle)


def two_racks_with_a_mover(kind: Any, mover: GangRequest) -> tuple[Any, Any]:
    """Racks r0 (a0, a1) and r1 (b0, b1) of 1-GPU nodes, ``mover`` committed on a0 (the
    other nodes cordoned meanwhile, so no selector pins it), sequential ids."""
    cluster = kind(("rack",), clock=FakeClock())
    for name, rack in (("a0", "r0"), ("a1", "r0"), ("b0", "r1"), ("b1", "r1")):
        cluster.add_node(name, gpus=1, topology={"rack": rack}, labels={"host": name})
    cluster._use_sequential_ids(1)
    for name in ("a1", "b0", "b1"):
        cluster.cordon(name)
    moving = cluster.commit(cluster.reserve(mover))
    for name in ("a1", "b0", "b1"):
        cluster.uncordon(name)
    return cluster, moving


@pytest.mark.parametrize("kind", [gangplace.Cluster, reference.Cluster])
def test_defrag_moves_a_whole_job_out_of_the_way_of_shares(kind: Any) -> None:
    """Racks r0 (a0, a1) and r1 (b0, b1) of 1-GPU nodes: a movable job on a0, a fixed one on
    b0. Four pods of 400 need two GPUs of one rack: the job on a0 moves to b1 and the shares
    take r0 (D5); a plan gone stale (the mover ended) conflicts with nothing changed."""
    cluster, moving = two_racks_with_a_mover(kind, GangRequest(1, 1, movable=True))
    fixed = GangRequest(1, 1, selector={"host": "b0"}, preemptible=False)
    cluster.commit(cluster.reserve(fixed))
    gang = GangRequest(4, 1, gpu_milli=400, required_level="rack")
    assert cluster.place_gang(gang) is None  # each rack has one free GPU: two pods
    plan = cluster.plan_defrag(gang)
    assert plan is not None and [m.allocation for m in plan.moves] == [moving.id]
    assert [p.node for p in plan.moves[0].target.pods] == ["b1"]
    assert plan.placement.domain == ("r0",) and plan.placement.gpu_milli == 400
    held, moved = cluster.apply_defrag(plan)
    assert held.placement.gpu_milli == 400
    assert cluster.node("a0").shared == {0: 800} and cluster.node("a1").shared == {0: 800}
    assert [p.node for p in moved[moving.id].placement.pods] == ["b1"]
    if kind is gangplace.Cluster:
        cluster.check_invariants()
    before = cluster.snapshot()
    with pytest.raises(Conflict):
        cluster.apply_defrag(plan)  # its mover has moved: stale
    assert cluster.snapshot() == before


@pytest.mark.parametrize("kind", [gangplace.Cluster, reference.Cluster])
def test_share_victims_free_their_gpu_and_stale_plans_conflict(kind: Any) -> None:
    """docs/preemption.md P8: two shares of priority 0 on one GPU, one of 500 at priority 3
    on the other. A whole GPU for priority 2 ends both low shares (never the priority-3 one);
    a 700-thousandths pod for priority 5 ends one share of 300 only. A plan whose victim
    ended, or whose freed GPU took a new share, raises ``Conflict`` with the snapshot
    unchanged."""
    engine, oracle = pair((1, 1), gpus=2)
    cluster = engine if kind is gangplace.Cluster else oracle
    low = [
        cluster.commit(cluster.reserve(GangRequest(1, 1, gpu_milli=300, priority=0)))
        for _ in range(2)
    ]
    cluster.commit(cluster.reserve(GangRequest(1, 1, gpu_milli=500, priority=3)))
    assert cluster.node("r0-n0").shared == {0: 600, 1: 500}
    whole = GangRequest(1, 1, priority=2)
    plan = cluster.plan_preemption(whole)
    assert plan is not None and set(plan.victims) == {low[0].id, low[1].id}
    assert plan.victim_gpus == 0 and plan.placement.pods[0].gpus == (0,)
    share = cluster.plan_preemption(GangRequest(1, 1, gpu_milli=700, priority=5))
    assert share is not None and len(share.victims) == 1 and share.victims[0] in plan.victims
    cluster.release(low[1])  # a victim ended: the plan is stale
    before = cluster.snapshot()
    with pytest.raises(Conflict):
        cluster.preempt(plan)
    assert cluster.snapshot() == before
    plan = cluster.plan_preemption(whole)
    assert plan is not None and plan.victims == (low[0].id,)
    cluster.adopt([PodPlacement("r0-n0", (0,))], gpu_milli=100)  # GPU 0 stays shared
    before = cluster.snapshot()
    with pytest.raises(Conflict, match="GPU 0"):
        cluster.preempt(plan)
    assert cluster.snapshot() == before
    if kind is gangplace.Cluster:
        cluster.check_invariants()


@pytest.mark.parametrize("kind", [gangplace.Cluster, reference.Cluster])
def test_a_small_share_is_the_cheaper_victim(kind: Any) -> None:
    """docs/preemption.md P5 and P8: r0-n0's GPU is held whole at priority 0, r0-n1's shared
    by 100 thousandths at priority 0. One GPU for priority 5: either ends one job of priority
    0, and P5's third key (thousandths held) prefers the share. The engine's plan may come
    from the kept index's descent (test builds check it against every candidate): a bound
    that counted a share as a whole GPU would stop at r0-n0, first in path order."""
    engine, oracle = pair((1, 2), gpus=1)
    cluster = engine if kind is gangplace.Cluster else oracle
    pin(cluster, "r0-n0", 1, priority=0)
    share = cluster.adopt([PodPlacement("r0-n1", (0,))], gpu_milli=100)
    plan = cluster.plan_preemption(GangRequest(1, 1, priority=5))
    assert plan is not None and plan.victims == (share.id,) and plan.victim_gpus == 0
    assert [(p.node, tuple(p.gpus)) for p in plan.placement.pods] == [("r0-n1", (0,))]


share_movers = st.lists(
    st.tuples(
        st.integers(1, 2),  # pods, on one node
        st.sampled_from((300, 500, 700)),  # thousandths each
        st.integers(-1, 1),  # priority
        st.integers(0, 5),  # the node
        st.booleans(),  # preemptible
    ),
    max_size=6,
)


def build_shares(clusters: tuple[Any, Any], movers: list[tuple[Any, ...]]) -> None:
    """Movable fractional jobs, each pinned to one node by cordoning the others."""
    names = clusters[0].nodes()
    for cluster in clusters:
        for pods, milli, priority, where, preemptible in movers:
            others = [name for name in names if name != names[where]]
            for name in others:
                cluster.cordon(name)
            request = GangRequest(
                pods,
                1,
                gpu_milli=milli,
                required_level="node",
                priority=priority,
                preemptible=preemptible,
                movable=True,
            )
            if cluster.place_gang(request) is not None:
                cluster.commit(cluster.reserve(request))
            for name in others:
                cluster.uncordon(name)


@given(
    layouts,
    share_movers,
    st.tuples(st.sampled_from((None, 500, 700)), st.integers(0, 2)),
    st.sampled_from(["node", "rack"]),
    st.booleans(),
    st.sampled_from([0, 1]),
)
def test_fractional_movers_agree_with_the_reference_and_apply(
    layout: tuple[list[int], list[Any]],
    movers: list[tuple[Any, ...]],
    gang_spec: tuple[int | None, int],
    level: str,
    evict: bool,
    beyond: int,
) -> None:
    """docs/preemption.md D5: fixed jobs, whole and fractional movable jobs; a whole-GPU or
    fractional gang one or two pods past what fits now. The same plan (placement, moves,
    evictions) as the reference; by brute force its members make room and each is needed;
    applied on both with the same state and shares after; no move lands on a GPU the gang
    holds or shares; fractional moves keep their share."""
    engine, oracle = pair((3, 2), gpus=4)
    build((engine, oracle), layout)
    build_shares((engine, oracle), movers)
    milli, priority = gang_spec

    def gang_of(pods: int) -> GangRequest:
        size = 1 if milli is not None else 2
        return GangRequest(pods, size, gpu_milli=milli, required_level=level, priority=priority)

    pods = next(n for n in range(1, 60) if engine.place_gang(gang_of(n)) is None) + beyond
    gang = gang_of(pods)
    plans = same_defrag_plans((engine, oracle), gang, evict, "fractional movers")
    if plans is None:
        return
    got, expected = plans
    # By brute force, GPU by GPU: the members (moved and evicted) make room, and each is
    # needed (the set is 1-minimal, D1).
    by_id = {a.id: a for a in engine.allocations()}
    members = [by_id[m.allocation] for m in got.moves] + [by_id[e] for e in got.evictions]
    size = gang.gpus_per_pod
    if members:

        def room(removed: list[Any]) -> int:
            return share_capacity(engine, got.placement.domain, removed, milli, size)

        assert room(members) >= pods
        for member in members:
            assert room([m for m in members if m is not member]) < pods
    gang_gpus = {(p.node, g) for p in got.placement.pods for g in p.gpus}
    for move in got.moves:
        assert move.target.gpu_milli == move.source.gpu_milli
        assert not gang_gpus & {(p.node, g) for p in move.target.pods for g in p.gpus}
    if any(m.target.gpu_milli is not None for m in got.moves):
        event("fractional movers: fractional moves")
    event("fractional movers: " + ("moves" if got.moves or got.evictions else "fits now"))
    engine.apply_defrag(got)
    oracle.apply_defrag(expected)
    same_state(engine, oracle)
    same_shares(engine, oracle)
    engine.check_invariants()


@pytest.mark.parametrize("kind", [gangplace.Cluster, reference.Cluster])
def test_defrag_moves_a_share_out_of_the_way(kind: Any) -> None:
    """docs/preemption.md D5: racks r0 (a0, a1) and r1 (b0, b1) of 1-GPU nodes; a movable
    share of 500 on a0, a fixed job on b0. Two whole GPUs in one rack: the share moves to b1
    (keeping its 500) and the gang takes r0. Planned again after 600 thousandths were
    adopted on b1, the stale plan raises ``Conflict`` naming the GPU, nothing changed."""
    share = GangRequest(1, 1, gpu_milli=500, movable=True)
    cluster, moving = two_racks_with_a_mover(kind, share)
    cluster.commit(cluster.reserve(GangRequest(1, 1, selector={"host": "b0"}, preemptible=False)))
    gang = GangRequest(2, 1, required_level="rack")
    assert cluster.place_gang(gang) is None
    plan = cluster.plan_defrag(gang)
    assert plan is not None and [m.allocation for m in plan.moves] == [moving.id]
    target = plan.moves[0].target
    assert target.gpu_milli == 500 and [(p.node, tuple(p.gpus)) for p in target.pods] == [
        ("b1", (0,))
    ]
    assert plan.placement.domain == ("r0",) and plan.moved_gpus == 0
    stale = cluster.adopt([PodPlacement("b1", (0,))], gpu_milli=600)
    before = cluster.snapshot()
    with pytest.raises(Conflict, match='GPU 0 of node "b1" has 400 thousandths free'):
        cluster.apply_defrag(plan)
    assert cluster.snapshot() == before
    cluster.release(stale)
    held, moved = cluster.apply_defrag(plan)
    assert [p.node for p in held.placement.pods] == ["a0", "a1"]
    assert moved[moving.id].placement.gpu_milli == 500
    assert cluster.node("b1").shared == {0: 500} and cluster.node("a0").shared == {}
    if kind is gangplace.Cluster:
        cluster.check_invariants()
