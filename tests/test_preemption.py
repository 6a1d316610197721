"""Priorities, preemption and defragmentation (docs/preemption.md, rules P1-P6 and D1-D4).

- Scenarios with hand-computed answers.
- A differential property: random small clusters filled with allocations of random
  priorities, flags and owners; the engine's plans equal the reference's, and applying them
  leaves both in the same state. Both hand out sequential ids (a test-build switch), so that
  tie-breaks by id agree.
- Brute force on tiny clusters (<= 6 nodes, <= 8 allocations): no victim outranks the gang;
  the set is 1-minimal; in the chosen domain the highest victim priority is the smallest any
  set reaches; a missing plan means removing every candidate cannot fit; moves never overlap
  the gang or each other.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import hypothesis.strategies as st
import pytest
from helpers import FakeClock, as_tuple, fill, regular_nodes
from hypothesis import given

from gangplace import (
    Cluster,
    Conflict,
    GangplaceError,
    GangRequest,
    InvalidRequest,
    LimitExceeded,
    ReservationError,
    UnknownReservation,
    reference,
)
from gangplace.reference import rules

LEVELS = ("rack",)
OWNERS = (None, "team-a", "team-b")


def pair(shape: tuple[int, ...], gpus: int = 4, **kwargs: Any) -> tuple[Any, Any]:
    """An engine and a reference cluster on one clock, with sequential ids; every node is
    labelled ``host=<its name>``."""
    clock = FakeClock()
    engine = Cluster(LEVELS, clock=clock, **kwargs)
    oracle = reference.Cluster(LEVELS, clock=clock, **kwargs)
    nodes = [replace(n, labels={"host": n.name}) for n in regular_nodes(LEVELS, shape, gpus)]
    for cluster in (engine, oracle):
        fill(cluster, LEVELS, nodes)
        cluster._use_sequential_ids(1)  # type: ignore[union-attr]
    return engine, oracle


def pin(cluster: Any, node: str, gpus: int, **terms: Any) -> Any:
    """Commits a 1-pod job of `gpus` GPUs on `node` (by its host label)."""
    request = GangRequest(1, gpus, selector={"host": node}, **terms)
    return cluster.commit(cluster.reserve(request))


jobs = st.lists(
    st.tuples(
        st.integers(1, 2),  # pods
        st.integers(1, 4),  # GPUs per pod
        st.integers(-2, 2),  # priority
        st.booleans(),  # preemptible
        st.booleans(),  # movable
        st.sampled_from(OWNERS),
        st.sampled_from([None, "node", "rack"]),
    ),
    max_size=8,
)
gangs = st.tuples(
    st.integers(1, 4), st.integers(1, 4), st.integers(-1, 3), st.sampled_from([None, "rack"])
)


def load(clusters: tuple[Any, Any], specs: list[tuple[Any, ...]]) -> None:
    """The same jobs reserved and committed on both; both must agree on each outcome."""
    for pods, size, priority, preemptible, movable, owner, level in specs:
        request = GangRequest(
            pods,
            size,
            required_level=level,
            priority=priority,
            preemptible=preemptible,
            movable=movable,
        )
        held: list[str | type] = []
        for cluster in clusters:
            try:
                reservation = cluster.reserve(request, owner=owner)
            except GangplaceError as error:
                held.append(type(error))
                continue
            held.append(cluster.commit(reservation, owner=owner).id)
        assert held[0] == held[1]


def same_state(engine: Any, oracle: Any) -> None:
    engine.check_invariants()
    for name in engine.nodes():
        a, b = engine.node(name), oracle.node(name)
        assert (a.free, a.reserved, a.allocated) == (b.free, b.reserved, b.allocated), name
    assert [(x.id, x.priority, as_tuple(x.placement)) for x in engine.allocations()] == [
        (y.id, y.priority, as_tuple(y.placement)) for y in oracle.allocations()
    ]
    assert [x.id for x in engine.reservations()] == [y.id for y in oracle.reservations()]


def same_plan(got: Any, expected: Any) -> None:
    assert (got is None) == (expected is None)
    if got is None:
        return
    assert as_tuple(got.placement) == as_tuple(expected.placement)
    for field in ("victims", "victim_gpus", "max_victim_priority", "chosen_victims"):
        if hasattr(expected, field):
            assert getattr(got, field) == getattr(expected, field), field


def contended(
    specs: list[tuple[Any, ...]], gang_spec: tuple[Any, ...]
) -> tuple[Any, Any, GangRequest]:
    """Both clusters (2 racks x 3 nodes x 4 GPUs) loaded with `specs`, and the gang."""
    engine, oracle = pair((2, 3), gpus=4)
    load((engine, oracle), specs)
    pods, size, priority, level = gang_spec
    return engine, oracle, GangRequest(pods, size, required_level=level, priority=priority)


# ------------------------------------------------------------------ scenarios


def test_a_high_priority_gang_preempts_scattered_low_priority_jobs() -> None:
    engine, oracle = pair((3, 2), gpus=8)
    for cluster in (engine, oracle):
        # One 2-GPU job of priority 0 in every rack: no rack holds a 2 x 8 gang.
        held = [pin(cluster, f"r{rack}-n0", 2) for rack in range(3)]
        cluster.set_priority(held[1], -5)  # rack r1's job matters least
    gang = GangRequest(2, 8, required_level="rack", priority=10)
    plans = [cluster.plan_preemption(gang) for cluster in (engine, oracle)]
    same_plan(*plans)
    plan = plans[0]
    assert plan.placement.domain == ("r1",)  # P5: the lowest highest-victim priority
    assert plan.max_victim_priority == -5 and plan.victim_gpus == 2 and len(plan.victims) == 1
    reservations = [
        c.preempt(p, owner="train") for c, p in zip((engine, oracle), plans, strict=True)
    ]
    assert reservations[0].priority == 10 and reservations[0].owner == "train"
    assert engine.hold_status(plan.victims[0]) == "preempted"
    assert engine.release(plan.victims[0]) is False
    same_state(engine, oracle)
    with pytest.raises(Conflict):
        engine.preempt(plan)  # the victim is gone: the plan is stale


def test_equal_priorities_never_preempt_and_unpreemptible_jobs_are_never_victims() -> None:
    engine, _ = pair((1, 2), gpus=4)
    engine.commit(engine.reserve(GangRequest(1, 4, priority=3)))
    engine.commit(engine.reserve(GangRequest(1, 4, priority=1, preemptible=False)))
    assert engine.plan_preemption(GangRequest(2, 4, priority=3)) is None
    plan = engine.plan_preemption(GangRequest(1, 4, priority=9))
    assert plan is not None and plan.victims != ()
    assert engine.plan_preemption(GangRequest(2, 4, priority=9)) is None  # one never moves


def test_min_runtime_and_exempt_owners_protect_jobs(clock: FakeClock) -> None:
    cluster = Cluster(LEVELS, clock=clock)
    fill(cluster, LEVELS, regular_nodes(LEVELS, (1, 1), 4))
    young = cluster.commit(cluster.reserve(GangRequest(1, 4), owner="a"), owner="a")
    gang = GangRequest(1, 4, priority=1)
    assert cluster.plan_preemption(gang, min_runtime=10) is None
    assert cluster.plan_preemption(gang, exempt_owners=["a"]) is None
    assert cluster.plan_preemption(gang, exempt_allocations=[young]) is None
    clock.advance(10)
    plan = cluster.plan_preemption(gang, min_runtime=10)
    assert plan is not None and plan.victims == (young.id,)
    assert young.since == 1000.0


def test_a_fitting_gang_plans_no_victims_and_capacity_for_counts_copies() -> None:
    engine, oracle = pair((2, 2), gpus=4)
    plan = engine.plan_preemption(GangRequest(2, 4))
    assert plan.victims == () and plan.max_victim_priority is None and len(plan.placement) == 2
    for cluster in (engine, oracle):
        cluster.commit(cluster.reserve(GangRequest(1, 1)))
    assert engine.capacity_for(GangRequest(1, 4)) == oracle.capacity_for(GangRequest(1, 4)) == 3
    assert engine.capacity_for(GangRequest(2, 2)) == oracle.capacity_for(GangRequest(2, 2)) == 3


def test_defragmentation_moves_two_small_jobs_to_the_edge() -> None:
    engine, oracle = pair((3, 2), gpus=8)
    for cluster in (engine, oracle):
        small = GangRequest(1, 2, required_level="node", movable=True)
        for _ in range(2):  # best-fit stacks both on r0-n0
            cluster.commit(cluster.reserve(small))
        for node, gpus in (("r1-n0", 8), ("r1-n1", 4), ("r2-n0", 6), ("r2-n1", 2)):
            pin(cluster, node, gpus)  # not movable
    gang = GangRequest(2, 8, required_level="rack", priority=1)
    plans = [cluster.plan_defrag(gang) for cluster in (engine, oracle)]
    got, expected = plans
    assert as_tuple(got.placement) == as_tuple(expected.placement)
    assert got.placement.domain == ("r0",)
    assert [(m.allocation, as_tuple(m.target)) for m in got.moves] == [
        (m.allocation, as_tuple(m.target)) for m in expected.moves
    ]
    assert sorted(m.target.nodes[0] for m in got.moves) == ["r1-n1", "r2-n0"]  # the edge
    assert got.moved_gpus == 4 and got.evictions == ()
    assert engine.plan_defrag(gang, max_moves=1) is None
    results = [c.apply_defrag(p) for c, p in zip((engine, oracle), plans, strict=True)]
    (gang_held, moved), _ = results
    assert set(moved) == {m.allocation for m in got.moves}
    assert all(engine.hold_status(old) == "migrated" for old in moved)
    assert all(r.movable and r.expires_at == 1300.0 for r in moved.values())
    assert gang_held.placement.domain == ("r0",)
    same_state(engine, oracle)


def test_evict_unplaceable_preempts_a_member_that_cannot_move() -> None:
    engine, oracle = pair((2, 1), gpus=4)
    for cluster in (engine, oracle):
        cluster.commit(cluster.reserve(GangRequest(1, 2, movable=True)))  # r0-n0
        pin(cluster, "r1-n0", 3)  # r1 keeps 1 GPU free: the mover cannot go there
    gang = GangRequest(1, 4, required_level="node", priority=1)
    assert engine.plan_defrag(gang) is None
    plans = [c.plan_defrag(gang, evict_unplaceable=True) for c in (engine, oracle)]
    assert plans[0].moves == () and len(plans[0].evictions) == 1
    assert plans[0].evictions == plans[1].evictions
    for cluster, plan in zip((engine, oracle), plans, strict=True):
        cluster.apply_defrag(plan)
    assert engine.hold_status(plans[0].evictions[0]) == "preempted"
    same_state(engine, oracle)


# ------------------------------------------------------------------ differential


@given(jobs, gangs)
def test_plans_agree_with_the_reference_and_apply_identically(
    specs: list[tuple[Any, ...]], gang_spec: tuple[Any, ...]
) -> None:
    engine, oracle, gang = contended(specs, gang_spec)
    for max_victims in (None, 1):
        got = engine.plan_preemption(gang, max_victims=max_victims)
        same_plan(got, oracle.plan_preemption(gang, max_victims=max_victims))
    if got is not None and got.victims:  # the same plan with its first victim spared
        spared = (got.victims[0], "gp-" + "f" * 32)  # an id of no allocation is ignored
        same_plan(
            engine.plan_preemption(gang, exempt_allocations=spared),
            oracle.plan_preemption(gang, exempt_allocations=spared),
        )
    assert engine.capacity_for(gang) == oracle.capacity_for(gang)
    for evict in (False, True):
        got, expected = (c.plan_defrag(gang, evict_unplaceable=evict) for c in (engine, oracle))
        assert (got is None) == (expected is None)
        if got is not None:
            assert as_tuple(got.placement) == as_tuple(expected.placement)
            assert [(m.allocation, as_tuple(m.target)) for m in got.moves] == [
                (m.allocation, as_tuple(m.target)) for m in expected.moves
            ]
            assert (got.evictions, got.moved_gpus) == (expected.evictions, expected.moved_gpus)
    plan = engine.plan_preemption(gang)
    if plan is not None:
        engine.preempt(plan)
        oracle.preempt(oracle.plan_preemption(gang))
    same_state(engine, oracle)


@given(jobs, gangs, st.lists(st.booleans(), min_size=8, max_size=8))
def test_chosen_candidates_agree_with_the_reference_and_apply(
    specs: list[tuple[Any, ...]], gang_spec: tuple[Any, ...], chosen: list[bool]
) -> None:
    """docs/preemption.md P7: victims only among ``candidates``, whatever their priority."""
    engine, oracle, gang = contended(specs, gang_spec)
    ids = sorted(a.id for a in engine.allocations())
    picked = [hold for hold, keep in zip(ids, chosen, strict=False) if keep]
    got = engine.plan_preemption(gang, candidates=picked)
    same_plan(got, oracle.plan_preemption(gang, candidates=picked))
    if got is None:
        return
    assert set(got.victims) <= set(picked)
    assert got.chosen_victims == bool(got.victims)
    engine.preempt(got)
    oracle.preempt(oracle.plan_preemption(gang, candidates=picked))
    same_state(engine, oracle)


# ------------------------------------------------------------------ brute force


@given(jobs, gangs, st.lists(st.booleans(), min_size=8, max_size=8))
def test_brute_force_chosen_candidates_are_1_minimal(
    specs: list[tuple[Any, ...]], gang_spec: tuple[Any, ...], chosen: list[bool]
) -> None:
    """docs/preemption.md P7: the victims are 1-minimal among the candidates, of any priority."""
    engine, _, gang = contended(specs, gang_spec)
    pods, size, _, level = gang_spec
    by_id = {a.id: a for a in engine.allocations()}
    picked = [by_id[h] for h, keep in zip(sorted(by_id), chosen, strict=False) if keep]
    eligible = [a for a in picked if a.preemptible]
    plan = engine.plan_preemption(gang, candidates=picked)
    if plan is None:
        allowed = [("r0",), ("r1",), ()] if level is None else [("r0",), ("r1",)]
        assert all(capacity_after(engine, d, eligible, size) < pods for d in allowed)
        return
    victims = [by_id[v] for v in plan.victims]
    assert all(v in eligible for v in victims)
    domain = plan.placement.domain
    assert capacity_after(engine, domain, victims, size) >= pods
    for victim in victims:
        rest = [v for v in victims if v is not victim]
        assert capacity_after(engine, domain, rest, size) < pods


def views(cluster: Any) -> list[rules.NodeView]:
    out = []
    for name in cluster.nodes():
        info = cluster.node(name)
        out.append(
            rules.NodeView(name, tuple(info.topology.values()), tuple(info.free), info.cordoned)
        )
    return out


def capacity_after(cluster: Any, domain: tuple[str, ...], removed: list[Any], size: int) -> int:
    """Pods of `size` GPUs `domain` holds with the allocations `removed` ended."""
    freed: dict[str, set[int]] = {}
    for allocation in removed:
        for pod in allocation.placement.pods:
            unhealthy = set(cluster.node(pod.node).unhealthy)
            freed.setdefault(pod.node, set()).update(set(pod.gpus) - unhealthy)
    nodes = [node for node in views(cluster) if node.full_path[: len(domain)] == domain]
    return sum((len(node.free) + len(freed.get(node.name, ()))) // size for node in nodes)


@given(jobs, gangs)
def test_brute_force_minimality_and_priorities(
    specs: list[tuple[Any, ...]], gang_spec: tuple[Any, ...]
) -> None:
    engine, _, gang = contended(specs, gang_spec)
    size = gang_spec[1]
    check_by_brute_force(
        engine, gang, lambda domain, removed: capacity_after(engine, domain, removed, size)
    )


def check_by_brute_force(
    engine: Any, gang: Any, capacity: Callable[[tuple[str, ...], list[Any]], int]
) -> None:
    """P2-P5 on a two-rack cluster by brute force: without a plan, removing every candidate
    fits no allowed domain; with one, no victim outranks the gang, the set is 1-minimal in
    its domain, and its highest priority is the smallest any set there reaches
    (``capacity(domain, removed)``: pods the domain holds with ``removed`` ended)."""
    pods, priority, level = gang.pods, gang.priority, gang.required_level
    plan = engine.plan_preemption(gang)
    by_id = {a.id: a for a in engine.allocations()}
    candidates = [a for a in by_id.values() if a.preemptible and a.priority < priority]
    if plan is None:
        # Removing every candidate cannot make room in any allowed domain.
        allowed = [("r0",), ("r1",), ()] if level is None else [("r0",), ("r1",)]
        assert all(capacity(d, candidates) < pods for d in allowed)
        return
    victims = [by_id[v] for v in plan.victims]
    assert all(v.priority < priority and v.preemptible for v in victims)
    if not victims:
        return
    domain = plan.placement.domain
    assert capacity(domain, victims) >= pods
    for victim in victims:  # 1-minimal
        rest = [v for v in victims if v is not victim]
        assert capacity(domain, rest) < pods

    def inside(node: str) -> bool:
        path = (*engine.node(node).topology.values(), node)
        return bool(path[: len(domain)] == domain)

    touching = [c for c in candidates if any(inside(pod.node) for pod in c.placement.pods)]
    best = min(
        max(v.priority for v in subset)
        for count in range(1, len(touching) + 1)
        for subset in itertools.combinations(touching, count)
        if capacity(domain, list(subset)) >= pods
    )
    assert plan.max_victim_priority == best


# ------------------------------------------------------------------ bad input


def test_bad_inputs_raise_typed_errors_and_change_nothing() -> None:
    engine, _ = pair((2, 2), gpus=4, max_held_gpus_per_owner=8)
    low = engine.commit(engine.reserve(GangRequest(2, 4), owner="a"), owner="a")
    plan = engine.plan_preemption(GangRequest(4, 4, priority=1))
    before = engine.snapshot()
    cases: list[tuple[type[BaseException], Any]] = [
        (InvalidRequest, lambda: GangRequest(1, priority=2**31)),
        (InvalidRequest, lambda: GangRequest(1, priority=-(2**31) - 1)),
        (TypeError, lambda: GangRequest(1, priority=None)),  # type: ignore[arg-type]
        (TypeError, lambda: GangRequest(1, preemptible=1)),  # type: ignore[arg-type]
        (TypeError, lambda: GangRequest(1, movable="yes")),  # type: ignore[arg-type]
        (UnknownReservation, lambda: engine.hold_status("gp-" + "0" * 32)),
        (UnknownReservation, lambda: engine.hold_status(low.id)),  # another owner's
        (UnknownReservation, lambda: engine.set_priority(low, 5)),
        (InvalidRequest, lambda: engine.set_priority(low, 2**40, owner="a")),
        (TypeError, lambda: engine.set_priority(low, 1.5, owner="a")),
        (InvalidRequest, lambda: engine.plan_preemption(GangRequest(1), max_victims=-1)),
        (InvalidRequest, lambda: engine.plan_preemption(GangRequest(1), min_runtime=-1)),
        (InvalidRequest, lambda: engine.plan_preemption(GangRequest(1), min_runtime=float("nan"))),
        (TypeError, lambda: engine.plan_preemption(GangRequest(1), exempt_owners="a")),
        (TypeError, lambda: engine.plan_preemption(GangRequest(1), exempt_allocations="gp-1")),
        (TypeError, lambda: engine.plan_preemption(GangRequest(1), exempt_allocations=[7])),
        (
            UnknownReservation,
            lambda: engine.plan_preemption(GangRequest(1), exempt_allocations=["x"]),
        ),
        (TypeError, lambda: engine.plan_preemption(GangRequest(1), candidates="gp-1")),
        (TypeError, lambda: engine.plan_preemption(GangRequest(1), candidates=[low.priority])),
        (UnknownReservation, lambda: engine.plan_preemption(GangRequest(1), candidates=["x"])),
        (InvalidRequest, lambda: engine.plan_defrag(GangRequest(1), max_moves=-1)),
        (TypeError, lambda: engine.preempt("a plan")),
        (TypeError, lambda: engine.apply_defrag(plan)),
        (InvalidRequest, lambda: engine.preempt(plan, ttl=0)),
        (LimitExceeded, lambda: engine.preempt(plan, owner="b")),  # 16 GPUs > cap 8
        (TypeError, lambda: engine.capacity_for("2 x 4")),
    ]
    for error, call in cases:
        with pytest.raises(error):
            call()
        assert engine.snapshot() == before
    engine.release(low, owner="a")
    before = engine.snapshot()
    with pytest.raises(Conflict):
        engine.preempt(plan)  # stale: its victim ended
    assert engine.snapshot() == before
    with pytest.raises(ReservationError):
        engine.set_priority(low, 1, owner="a")  # released
    assert engine.hold_status(low, owner="a") == "released"


# Fragmented layouts: fixed jobs pinned per node, small movable jobs put on chosen nodes (by
# cordoning the others while they are reserved), so that defragmentation has work to do.
layouts = st.tuples(
    st.lists(st.integers(0, 3), min_size=6, max_size=6),
    st.lists(
        st.tuples(st.integers(1, 2), st.integers(-1, 1), st.integers(0, 5), st.booleans()),
        min_size=1,
        max_size=5,
    ),
)
defrag_gangs = st.tuples(
    st.integers(1, 2), st.just(4), st.integers(0, 2), st.sampled_from(["node", "rack"])
)


def build(clusters: tuple[Any, Any], layout: tuple[list[int], list[Any]]) -> None:
    fixed, movers = layout
    names = clusters[0].nodes()
    for cluster in clusters:
        for name, gpus in zip(names, fixed, strict=True):
            if gpus:
                pin(cluster, name, gpus, preemptible=False)
        for gpus, priority, where, preemptible in movers:
            others = [name for name in names if name != names[where]]
            for name in others:
                cluster.cordon(name)
            request = GangRequest(
                1,
                gpus,
                required_level="node",
                priority=priority,
                preemptible=preemptible,
                movable=True,
            )
            with contextlib.suppress(GangplaceError):
                cluster.commit(cluster.reserve(request))
            for name in others:
                cluster.uncordon(name)


@given(layouts, defrag_gangs, st.booleans(), st.booleans())
def test_defrag_plans_agree_on_fragmented_layouts(
    layout: tuple[list[int], list[Any]], gang_spec: tuple[Any, ...], downgrade: bool, evict: bool
) -> None:
    engine, oracle = pair((3, 2), gpus=4)
    build((engine, oracle), layout)
    pods, size, priority, level = gang_spec
    gang = GangRequest(pods, size, required_level=level, priority=priority)
    options = {"allow_downgrade": downgrade, "evict_unplaceable": evict}
    got, expected = (cluster.plan_defrag(gang, **options) for cluster in (engine, oracle))
    assert (got is None) == (expected is None)
    if got is None:
        return
    assert as_tuple(got.placement) == as_tuple(expected.placement)
    assert [(m.allocation, as_tuple(m.source), as_tuple(m.target)) for m in got.moves] == [
        (m.allocation, as_tuple(m.source), as_tuple(m.target)) for m in expected.moves
    ]
    assert (got.evictions, got.moved_gpus) == (expected.evictions, expected.moved_gpus)
    held, moved = engine.apply_defrag(got)
    oracle_held, oracle_moved = oracle.apply_defrag(expected)
    assert as_tuple(held.placement) == as_tuple(oracle_held.placement)
    assert {k: as_tuple(v.placement) for k, v in moved.items()} == {
        k: as_tuple(v.placement) for k, v in oracle_moved.items()
    }
    same_state(engine, oracle)


def test_stale_defrag_plans_conflict_and_change_nothing() -> None:
    engine, _ = pair((2, 1), gpus=4)
    mover = engine.commit(engine.reserve(GangRequest(1, 2, required_level="node", movable=True)))
    pin(engine, "r1-n0", 2)
    plan = engine.plan_defrag(GangRequest(1, 4, required_level="node", priority=1))
    assert plan is not None and [m.allocation for m in plan.moves] == [mover.id]
    engine.commit(engine.reserve(GangRequest(1, 2, selector={"host": "r1-n0"})))  # the target
    before = engine.snapshot()
    with pytest.raises(Conflict):
        engine.apply_defrag(plan)
    assert engine.snapshot() == before
    assert engine.hold_status(mover) == "allocated"


@pytest.mark.parametrize(
    "name",
    [
        "plan_preemption",
        "preempt",
        "plan_defrag",
        "apply_defrag",
        "set_priority",
        "hold_status",
        "capacity_for",
    ],
)
def test_the_new_methods_explain_themselves_in_help(name: str) -> None:
    doc = getattr(Cluster, name).__doc__
    assert doc and len(doc.split()) >= 8, name


@given(layouts, defrag_gangs, st.booleans())
def test_brute_force_moves_never_overlap(
    layout: tuple[list[int], list[Any]], gang_spec: tuple[Any, ...], evict: bool
) -> None:
    """Every GPU of the gang and of each move is taken once; moves stay outside the gang's
    domain (on fragmented layouts, where defragmentation has moves to make)."""
    engine, oracle = pair((3, 2), gpus=4)
    build((engine, oracle), layout)
    pods, size, priority, level = gang_spec
    plan = engine.plan_defrag(
        GangRequest(pods, size, required_level=level, priority=priority), evict_unplaceable=evict
    )
    if plan is None:
        return
    taken: set[tuple[str, int]] = set()
    for placement in [plan.placement, *(m.target for m in plan.moves)]:
        gpus = {(pod.node, g) for pod in placement.pods for g in pod.gpus}
        assert not gpus & taken
        taken |= gpus
    domain = plan.placement.domain
    for move in plan.moves:
        for node in move.target.nodes:
            path = (*engine.node(node).topology.values(), node)
            assert path[: len(domain)] != domain
