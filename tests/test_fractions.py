"""Fractions of a GPU (docs/resources.md "Fractions of a GPU", issue 28 item 3).

A fractional pod takes ``gpu_milli`` thousandths of one GPU; a shared GPU is never free for a
whole-GPU pod and is free again when its last share ends (F1); each pod takes the usable GPU
with the least room that still holds it (F2). The engine agrees with ``gangplace.reference``
on random clusters, pod counts match a brute force on tiny nodes, bad inputs raise typed
errors and leave the snapshot byte-identical, and the operations that do not plan fractions
refuse them.
"""

from __future__ import annotations

import itertools
import pickle
from collections.abc import Callable
from typing import Any

import hypothesis.strategies as st
import pytest
from helpers import FakeClock, as_tuple, reserve_both
from hypothesis import event, given, note

import gangplace
from gangplace import Conflict, GangRequest, InvalidRequest, Unschedulable, reference

LEVELS = ("rack",)


def cluster_of(kind: Any = gangplace.Cluster, gpus: tuple[int, ...] = (2, 4)) -> Any:
    """Nodes n0, n1, ... of ``gpus`` GPUs in rack r1 (a fake clock: snapshots compare)."""
    cluster = kind(LEVELS, clock=FakeClock())
    for index, count in enumerate(gpus):
        cluster.add_node(f"n{index}", gpus=count, topology={"rack": "r1"})
    cluster._use_sequential_ids(1)
    return cluster


@pytest.mark.parametrize("kind", [gangplace.Cluster, reference.Cluster])
def test_shares_pack_by_best_fit_and_never_go_to_whole_pods(kind: Any) -> None:
    cluster = cluster_of(kind)
    held = cluster.reserve(GangRequest(5, 1, gpu_milli=460))
    # n0 (2 GPUs) holds 4 pods of 460: only n1 holds 5; two per GPU, best fit (F2).
    gpus = [pod.gpus for pod in held.placement.pods]
    assert gpus == [(0,), (0,), (1,), (1,), (2,)]
    assert held.placement.gpu_milli == 460
    assert getattr(held.placement, "total_gpus", 0) == 0  # whole GPUs: none
    assert cluster.node("n1").shared == {0: 920, 1: 920, 2: 460}
    assert cluster.node("n1").free == (3,)
    assert cluster.stats().shared == 3 and cluster.stats().free == 3
    # A whole GPU never goes to a shared one; a small share fills the fullest GPU with room.
    assert cluster.place_gang(GangRequest(1, 2, required_level="node")).nodes == ("n0",)
    small = cluster.reserve(GangRequest(1, 1, gpu_milli=80))
    assert small.placement.pods[0].node == "n1" and small.placement.pods[0].gpus == (0,)
    assert cluster.node("n1").shared[0] == 1000
    cluster.rollback(held)
    cluster.rollback(small)
    assert cluster.node("n1").shared == {} and cluster.stats().free == 6


@pytest.mark.parametrize("kind", [gangplace.Cluster, reference.Cluster])
def test_a_fractional_gang_is_all_or_nothing(kind: Any) -> None:
    cluster = cluster_of(kind, gpus=(1, 1))
    request = GangRequest(5, 1, gpu_milli=400)  # two per GPU: 4 fit in the cluster, not 5
    assert cluster.place_gang(request) is None
    with pytest.raises(Unschedulable) as caught:
        cluster.reserve(request)
    assert "5 pods x 400 thousandths of a GPU" in caught.value.reason
    assert cluster.stats().shared == 0
    assert cluster.capacity_for(GangRequest(1, 1, gpu_milli=400)) == 4


@pytest.mark.parametrize("kind", [gangplace.Cluster, reference.Cluster])
def test_ending_pods_and_health_and_node_loss(kind: Any) -> None:
    cluster = cluster_of(kind)
    allocation = cluster.commit(cluster.reserve(GangRequest(3, 1, gpu_milli=500)))
    assert cluster.node("n0").shared == {0: 1000, 1: 500}
    cluster.release_pods(allocation, [0])
    assert cluster.node("n0").shared == {0: 500, 1: 500}
    reservation = cluster.reserve(GangRequest(1, 1, gpu_milli=500, required_level="node"))
    assert reservation.placement.pods[0].gpus == (0,)  # best fit: ties to the lowest index
    # Health: the reservation sharing GPU 0 is revoked, the allocation keeps its share there
    # and reports the rank on it as lost.
    assert cluster.set_gpu_health("n0", 0, False) == sorted([allocation.id, reservation.id])
    assert cluster.hold_status(reservation) == "revoked"
    (lost,) = cluster.allocations(lost=True)
    assert lost.lost == (1,)
    assert cluster.node("n0").shared == {0: 500, 1: 500}
    assert cluster.place_gang(GangRequest(1, 1, gpu_milli=600, required_level="node")) is not None
    # Losing the node takes the allocation's pods there; the cluster stays consistent.
    assert cluster.remove_node("n0") == [allocation.id]
    if kind is gangplace.Cluster:
        cluster.check_invariants()
    assert cluster.release(allocation)
    assert cluster.stats().shared == 0


def test_gpu_state_and_pictures_show_shared_gpus() -> None:
    """A shared GPU is in ``shared_mask`` and none of the other masks; the rack map draws it
    in its own colour and counts it."""
    from gangplace.pictures import COLOURS

    cluster = cluster_of(gpus=(4,))
    cluster.reserve(GangRequest(3, 1, gpu_milli=400))  # GPUs 0 (two pods) and 1
    state = cluster.gpu_state()
    assert (int(state["shared_mask"][0]), int(state["free_mask"][0])) == (0b0011, 0b1100)
    assert int(state["reserved_mask"][0]) == int(state["allocated_mask"][0]) == 0
    svg = cluster.to_svg()
    assert COLOURS["shared"] in svg and "2 shared" in svg


def test_snapshot_and_pickle_keep_fractions() -> None:
    cluster = cluster_of()
    held = cluster.commit(cluster.reserve(GangRequest(3, 1, gpu_milli=250, name="infer")))
    restored = gangplace.Cluster.restore(cluster.snapshot(), clock=FakeClock())
    assert restored.node("n0").shared == cluster.node("n0").shared == {0: 750}
    assert restored.allocations()[0].placement == held.placement
    restored.check_invariants()
    request = GangRequest(2, 1, gpu_milli=5)
    assert pickle.loads(pickle.dumps(request)) == request
    assert pickle.loads(pickle.dumps(held.placement)) == held.placement
    oracle = cluster_of(reference.Cluster)
    oracle.commit(oracle.reserve(GangRequest(3, 1, gpu_milli=250)))
    again = reference.Cluster.restore(oracle.snapshot(), clock=FakeClock())
    assert again.node("n0").shared == {0: 750}


def test_reserve_of_a_stale_fractional_placement_is_a_conflict() -> None:
    cluster = cluster_of()
    placement = cluster.place_gang(GangRequest(2, 1, gpu_milli=600, required_level="node"))
    assert placement is not None
    cluster.reserve(GangRequest(1, 1, gpu_milli=600, required_level="node"))
    before = cluster.snapshot()
    with pytest.raises(Conflict, match=r'GPU 0 of node "n0" has 400 thousandths free'):
        cluster.reserve(placement)
    assert cluster.snapshot() == before
    fresh = cluster.place_gang(GangRequest(1, 1, gpu_milli=400, required_level="node"))
    assert cluster.reserve(fresh).placement == fresh


@pytest.mark.parametrize("kind", [gangplace.Cluster, reference.Cluster])
def test_adopt_records_running_shares(kind: Any) -> None:
    """docs/resources.md "Fractions of a GPU", adopt: ``(node, 1)`` entries take their GPU by rule
    F2 (earlier pods of the call counted), a ``PodPlacement`` exactly its GPU."""
    cluster = cluster_of(kind)
    cluster.commit(cluster.reserve(GangRequest(1, 1, gpu_milli=700, required_level="node")))
    adopted = cluster.adopt(
        [("n0", 1), ("n0", 1), gangplace.PodPlacement("n1", (3,))],
        gpu_milli=300,
        owner="kubelet",
    )
    # n0 GPU 0 had 300 left: the first pod fills it; the second takes GPU 1 (free).
    assert [(pod.node, pod.gpus) for pod in adopted.placement.pods] == [
        ("n0", (0,)),
        ("n0", (1,)),
        ("n1", (3,)),
    ]
    assert adopted.placement.gpu_milli == 300 and adopted.owner == "kubelet"
    assert cluster.node("n0").shared == {0: 1000, 1: 300}
    assert cluster.node("n1").shared == {3: 300}
    # A whole pod never takes a shared GPU; ending the adopted pods frees their shares.
    assert cluster.place_gang(GangRequest(1, 4, required_level="node")) is None
    assert cluster.release(adopted, owner="kubelet")
    assert cluster.node("n1").shared == {} and cluster.node("n0").shared == {0: 700}
    if kind is gangplace.Cluster:
        cluster.check_invariants()


@pytest.mark.parametrize("kind", [gangplace.Cluster, reference.Cluster])
def test_adopt_into_grows_a_fractional_allocation(kind: Any) -> None:
    """docs/transactions.md "Adopting running work", ``into``: a pod of a running fractional gang
    seen later joins its allocation with the same share, its GPU chosen by rule F2; ending the
    allocation frees every share, the joined pod's too."""
    cluster = cluster_of(kind, gpus=(2, 4, 1))
    gang = cluster.adopt([("n0", 1), ("n0", 1)], gpu_milli=400, owner="kubelet")
    assert [pod.gpus for pod in gang.placement.pods] == [(0,), (0,)]  # 800 on GPU 0
    grown = cluster.adopt(
        [("n0", 1), gangplace.PodPlacement("n2", (0,))],
        into=gang,
        gpu_milli=400,
        owner="kubelet",
        priority=3,
    )
    assert grown.id == gang.id and grown.placement.gpu_milli == 400
    # GPU 0 of n0 has 200 left: the new pod takes GPU 1; n2's pod exactly its GPU.
    assert [(pod.node, pod.gpus) for pod in grown.placement.pods] == [
        ("n0", (0,)),
        ("n0", (0,)),
        ("n0", (1,)),
        ("n2", (0,)),
    ]
    assert grown.placement.level == "rack" and grown.priority == 3
    assert cluster.node("n0").shared == {0: 800, 1: 400} and cluster.node("n2").shared == {0: 400}
    assert cluster.stats().allocated == 0  # shares hold no whole GPU
    if kind is gangplace.Cluster:
        cluster.check_invariants()
    assert cluster.release_pods(grown, [3], owner="kubelet") is not None
    assert cluster.node("n2").shared == {}
    assert cluster.release(grown, owner="kubelet")
    assert cluster.node("n0").shared == {} and cluster.stats().shared == 0


@pytest.mark.parametrize("kind", [gangplace.Cluster, reference.Cluster])
def test_adopt_into_takes_only_the_allocations_own_share(kind: Any) -> None:
    """An allocation has one share per pod: pods of another share, or whole pods, do not join a
    fractional allocation, nor fractional pods a whole one (``InvalidRequest``, nothing
    changed); a bad share is refused before the allocation is looked at."""
    cluster = cluster_of(kind)
    shared = cluster.adopt([("n0", 1)], gpu_milli=300)
    whole = cluster.adopt([("n1", 1)])
    before = cluster.snapshot()
    cases: list[tuple[Any, dict[str, Any], str]] = [
        (shared, {}, "must give gpu_milli=300"),
        (shared, {"gpu_milli": 400}, "must give gpu_milli=300"),
        (whole, {"gpu_milli": 300}, "holds whole GPUs"),
        (shared, {"gpu_milli": 1000}, "between 1 and 999"),
    ]
    for into, fields, text in cases:
        with pytest.raises(InvalidRequest, match=text):
            cluster.adopt([("n1", 1)], into=into, **fields)
        assert cluster.snapshot() == before
    with pytest.raises(Conflict, match='GPU 0 of node "n1" is held'):  # held whole by `whole`
        cluster.adopt([gangplace.PodPlacement("n1", (0,))], into=shared, gpu_milli=300)
    assert cluster.snapshot() == before


BAD_ADOPTIONS: list[tuple[list[Any], dict[str, Any], type, str]] = [
    ([("n0", 1)], {"gpu_milli": 0}, InvalidRequest, "between 1 and 999"),
    ([("n0", 1)], {"gpu_milli": 1000}, InvalidRequest, "between 1 and 999"),
    ([("n0", 1)], {"gpu_milli": True}, TypeError, "gpu_milli must be an int"),
    ([("n0", 1)], {"gpu_milli": "300"}, TypeError, "gpu_milli must be an int"),
    ([("n0", 2)], {"gpu_milli": 300}, InvalidRequest, "names 2 GPUs"),
    ([("n0", 0)], {"gpu_milli": 300}, InvalidRequest, "names 0 GPUs"),
    ([gangplace.PodPlacement("n0", (0, 1))], {"gpu_milli": 300}, InvalidRequest, "names 2"),
    ([gangplace.PodPlacement("n0", (5,))], {"gpu_milli": 300}, InvalidRequest, "not one of"),
    ([gangplace.PodPlacement("n0", (0,))], {"gpu_milli": 400}, Conflict, "300 thousandths free"),
    ([gangplace.PodPlacement("n0", (1,))], {"gpu_milli": 400}, Conflict, "is held"),
    ([("n0", 1)], {"gpu_milli": 400}, Conflict, "no healthy GPU with 400"),
    ([("nx", 1)], {"gpu_milli": 400}, gangplace.UnknownNode, "nx"),
]


@pytest.mark.parametrize("kind", [gangplace.Cluster, reference.Cluster])
@pytest.mark.parametrize(("pods", "fields", "error", "text"), BAD_ADOPTIONS)
def test_bad_fractional_adoptions_change_nothing(
    kind: Any, pods: list[Any], fields: dict[str, Any], error: type, text: str
) -> None:
    """n0: GPU 0 shared (700 used), GPU 1 held whole: every bad adoption raises its typed
    error, the same in the engine and the reference, and the snapshot stays byte-identical."""
    cluster = cluster_of(kind)
    cluster.commit(cluster.reserve(GangRequest(1, 1, gpu_milli=700, required_level="node")))
    cluster.adopt([gangplace.PodPlacement("n0", (1,))])
    before = cluster.snapshot()
    with pytest.raises(error, match=text):
        cluster.adopt(pods, **fields)
    assert cluster.snapshot() == before


def test_operations_that_do_not_plan_fractions_refuse_them() -> None:
    cluster = cluster_of()
    request = GangRequest(2, 1, gpu_milli=300)
    allocation = cluster.commit(cluster.reserve(request))
    before = cluster.snapshot()
    refusals: list[Callable[[], object]] = [
        lambda: cluster.reserve_spares(allocation, 1),  # docs/repair.md R7: no spares
    ]
    for call in refusals:
        with pytest.raises(InvalidRequest):
            call()
        assert cluster.snapshot() == before


def test_a_fractional_hold_is_a_victim() -> None:
    """docs/preemption.md P8: preemption ends a fractional allocation to free its GPU whole
    (on one node defragmentation has nowhere to move it, D5)."""
    cluster = cluster_of(gpus=(2,))
    share = GangRequest(1, 1, gpu_milli=500, priority=0, movable=True)
    shared = cluster.commit(cluster.reserve(share))
    whole = GangRequest(1, 2, priority=10)
    assert cluster.plan_defrag(whole) is None
    plan = cluster.plan_preemption(whole)
    assert plan is not None and plan.victims == (shared.id,) and plan.victim_gpus == 0
    held = cluster.preempt(plan)
    assert held.placement.pods[0].gpus == (0, 1) and cluster.node("n0").shared == {}
    assert cluster.hold_status(shared.id) == "preempted"


def test_the_scheduler_queues_fractions_but_not_under_quotas() -> None:
    """docs/resources.md "Fractions of a GPU": the Scheduler starts fractional gangs like any other;
    one with quotas refuses them (its quotas count whole GPUs) and queues nothing."""
    from gangplace import Scheduler

    cluster = cluster_of(gpus=(1,))
    clock = FakeClock()
    scheduler = Scheduler(cluster, clock=clock)
    for job in ("a", "b", "c"):
        scheduler.submit(job, GangRequest(1, 1, gpu_milli=400))
    decisions = scheduler.cycle(clock())
    assert [started.job_id for started in decisions.started] == ["a", "b"]  # 2 x 400 fit
    assert cluster.node("n0").shared == {0: 800}
    quoted = Scheduler(cluster_of(gpus=(1,)), clock=clock, quotas={"team": 4})
    with pytest.raises(InvalidRequest, match="whole GPUs"):
        quoted.submit("x", GangRequest(1, 1, gpu_milli=400), owner="team")


def _room_made(preemption: bool) -> list[tuple[Any, ...]]:
    """A fractional head that fits only once room is made, run by the Scheduler and its
    reference on twin clusters: what each started, evicted and moved, and the shares."""
    from gangplace import Scheduler
    from gangplace.reference.scheduler import ReferenceScheduler

    outcomes = []
    for kind in ("engine", "reference"):
        cluster = cluster_of(gpus=(2, 2))
        config: dict[str, Any] = {"preemption": preemption, "defrag": not preemption}
        scheduler: Any = (
            Scheduler(cluster, clock=lambda: 0.0, **config)
            if kind == "engine"
            else ReferenceScheduler(cluster, **config)
        )
        now, at = 0.0, ({} if kind == "engine" else {"now": 0.0})
        cluster.set_gpu_health("n0", 1, False)  # a on n0, b on n1: one GPU free on each
        for job in ("a", "b"):
            scheduler.submit(job, GangRequest(1, 1, movable=True), **at)
            scheduler.cycle(now)
        cluster.set_gpu_health("n0", 1, True)
        scheduler.submit(
            "head", GangRequest(2, 1, gpu_milli=600, priority=5, required_level="node"), **at
        )
        decisions = scheduler.cycle(now)
        started = [(s.job_id, s.preempted, s.allocation.placement) for s in decisions.started]
        moved = [(m.job_id, m.allocation.placement) for m in decisions.moved]
        shared = {name: cluster.node(name).shared for name in cluster.nodes()}
        outcomes.append((started, decisions.preempted, moved, shared))
    return outcomes


def test_the_scheduler_makes_room_for_a_fractional_head() -> None:
    """docs/scheduler.md S7 with shares (docs/preemption.md P8, D5): a fractional head blocked
    by whole-GPU jobs preempts them or has them moved, as its reference does."""
    engine, expected = _room_made(preemption=True)
    assert engine == expected
    started, preempted, moved, shared = engine
    assert len(preempted) == 1 and started[0][:2] == ("head", preempted) and not moved
    # one whole-GPU job evicted; it starts again in the same cycle on the other node
    assert [job for job, *_ in started] == ["head", preempted[0]]
    assert sorted(shared.values(), key=len) == [{}, {0: 600, 1: 600}]
    engine, expected = _room_made(preemption=False)
    assert engine == expected
    started, preempted, moved, shared = engine
    assert [job for job, *_ in started] == ["head"] and not preempted
    assert len(moved) == 1  # one job moved beside the other, a node left for the shares
    assert sorted(shared.values(), key=len) == [{}, {0: 600, 1: 600}]


def test_a_fractional_head_is_reserved_its_shares() -> None:
    """docs/scheduler.md S5 with shares: a blocked fractional head is reserved the GPUs its pods
    will share (by rules F1-F2 once jobs end), not a whole GPU per pod: 6 pods of 300 on one
    node wait for 2 GPUs of n1 (a whole GPU each would need 6 on one node: blind), and a
    long job backfills beside them. As the reference Scheduler does."""
    from gangplace import Scheduler
    from gangplace.reference.scheduler import ReferenceScheduler

    seen = []
    for kind in ("engine", "reference"):
        cluster = cluster_of(gpus=(4, 4))
        scheduler: Any = (
            Scheduler(cluster, clock=lambda: 0.0)
            if kind == "engine"
            else ReferenceScheduler(cluster)
        )
        at = {} if kind == "engine" else {"now": 0.0}
        scheduler.submit("full", GangRequest(1, 4), walltime=100.0, **at)
        scheduler.submit("three", GangRequest(1, 3), walltime=50.0, **at)
        scheduler.cycle(0.0)
        head = GangRequest(6, 1, gpu_milli=300, required_level="node")
        scheduler.submit("head", head, walltime=10.0, **at)
        scheduler.submit("long", GangRequest(1, 1), walltime=200.0, **at)
        decisions = scheduler.cycle(0.0)
        (shadow,) = decisions.reservations
        started = [(s.job_id, s.backfilled, s.allocation.placement) for s in decisions.started]
        seen.append((shadow, started))
    assert seen[0] == seen[1]
    shadow, started = seen[0]
    assert (shadow.job_id, shadow.time, shadow.placement.gpu_milli) == ("head", 50.0, 300)
    gpus = [(pod.node, pod.gpus) for pod in shadow.placement.pods]
    assert gpus == [("n1", (0,))] * 3 + [("n1", (1,))] * 3
    assert [(job, backfilled) for job, backfilled, _ in started] == [("long", True)]
    assert started[0][2].pods[0].gpus == (3,)  # beside the reservation, not on its GPUs


BAD = [
    ({"gpu_milli": 0}, InvalidRequest),
    ({"gpu_milli": 1000}, InvalidRequest),
    ({"gpu_milli": -1}, InvalidRequest),
    ({"gpu_milli": 2**70}, InvalidRequest),
    ({"gpu_milli": "half"}, TypeError),
    ({"gpu_milli": 0.5}, TypeError),
    ({"gpu_milli": 500, "spares": 1}, InvalidRequest),
    ({"gpu_milli": 500, "numa": "single"}, InvalidRequest),
]


@pytest.mark.parametrize(("fields", "error"), BAD)
def test_bad_fractions_raise_typed_errors(fields: dict[str, Any], error: type) -> None:
    cluster = cluster_of()
    before = cluster.snapshot()
    with pytest.raises(error):
        cluster.reserve(GangRequest(2, 1, **fields))
    with pytest.raises(InvalidRequest, match="gpus_per_pod must be 1"):
        GangRequest(2, 2, gpu_milli=500)
    assert cluster.snapshot() == before


# ---------------------------------------------------------------- differential and brute force


@st.composite
def small_clusters(draw: st.DrawFn) -> tuple[int, ...]:
    return tuple(draw(st.lists(st.sampled_from((1, 2, 4)), min_size=1, max_size=5)))


@given(data=st.data(), gpus=small_clusters())
def test_engine_agrees_with_reference_on_fractions(
    data: st.DataObject, gpus: tuple[int, ...]
) -> None:
    engine, oracle = cluster_of(gangplace.Cluster, gpus), cluster_of(reference.Cluster, gpus)
    held: list[tuple[Any, Any]] = []
    for _ in range(data.draw(st.integers(1, 8), label="steps")):
        action = data.draw(st.sampled_from(("reserve", "reserve", "end", "health", "adopt")))
        if action == "adopt":
            # Into an allocation mostly (a reservation refuses: ReservationError).
            grown = [pair for pair in held if isinstance(pair[0], gangplace.Allocation)] or held
            into = data.draw(st.none() | st.sampled_from(grown)) if grown else None
            adopted = adopt_both(data, gpus, engine, oracle, into)
            if adopted is not None and into is None:
                held.append(adopted)
        elif action == "end" and held:
            mine, theirs = held.pop(data.draw(st.integers(0, len(held) - 1)))
            end = "release" if isinstance(mine, gangplace.Allocation) else "rollback"
            assert getattr(engine, end)(mine) == getattr(oracle, end)(theirs)
        elif action == "health":
            node = f"n{data.draw(st.integers(0, len(gpus) - 1))}"
            gpu = data.draw(st.integers(0, gpus[int(node[1:])] - 1))
            healthy = data.draw(st.booleans())
            assert engine.set_gpu_health(node, gpu, healthy) == oracle.set_gpu_health(
                node, gpu, healthy
            )
        else:
            milli = data.draw(st.none() | st.sampled_from((100, 250, 333, 460, 500, 999)))
            request = GangRequest(
                data.draw(st.integers(1, 6), label="pods"),
                1 if milli else data.draw(st.sampled_from((1, 2))),
                min_pods=data.draw(st.none() | st.just(1), label="min_pods"),
                required_level=data.draw(st.sampled_from((None, "node")), label="level"),
                gpu_milli=milli,
            )
            note(repr(request))
            both = reserve_both(engine, oracle, request, queries=True)
            if both is None:
                continue
            held.append(both)
        for index in range(len(gpus)):
            mine_node, their_node = engine.node(f"n{index}"), oracle.node(f"n{index}")
            assert mine_node.shared == their_node.shared
            assert mine_node.free == their_node.free
            assert all(used <= 1000 for used in mine_node.shared.values())
        assert engine.stats().shared == oracle.stats().shared
        engine.check_invariants()


@given(data=st.data(), gpus=small_clusters())
def test_adopt_into_agrees_with_the_reference(data: st.DataObject, gpus: tuple[int, ...]) -> None:
    """Adoptions (fractional, sometimes whole), pods joining a drawn allocation (its own
    share mostly, another or none sometimes), ranks ended and allocations released: the
    engine and the reference give the same placements, errors and shares at every step."""
    engine, oracle = cluster_of(gangplace.Cluster, gpus), cluster_of(reference.Cluster, gpus)
    held: list[tuple[Any, Any]] = []
    for _ in range(data.draw(st.integers(1, 10), label="steps")):
        action = data.draw(st.sampled_from(("adopt", "into", "into", "end pod", "release")))
        if action == "adopt" or not held:
            adopted = adopt_both(data, gpus, engine, oracle)
            if adopted is not None:
                held.append(adopted)
        elif action == "into":
            at = data.draw(st.integers(0, len(held) - 1), label="into")
            grown = adopt_both(data, gpus, engine, oracle, held[at])
            if grown is not None:
                held[at] = grown
        elif action == "end pod":
            mine, theirs = held[data.draw(st.integers(0, len(held) - 1))]
            rank = data.draw(st.integers(0, len(mine.placement.pods) - 1), label="rank")
            assert outcome(engine.release_pods, mine, [rank]) == outcome(
                oracle.release_pods, theirs, [rank]
            )
        else:
            mine, theirs = held.pop(data.draw(st.integers(0, len(held) - 1)))
            assert engine.release(mine) == oracle.release(theirs)
        for index in range(len(gpus)):
            assert engine.node(f"n{index}").shared == oracle.node(f"n{index}").shared
            assert engine.node(f"n{index}").free == oracle.node(f"n{index}").free
        engine.check_invariants()


def outcome(call: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    """``call``'s ended ranks, or its error's type and text."""
    try:
        result = call(*args)
    except gangplace.GangplaceError as error:
        return "error", (type(error).__name__, str(error))
    return "ok", None if result is None else tuple(getattr(result, "ended", ()))


def adopt_both(
    data: st.DataObject,
    gpus: tuple[int, ...],
    engine: Any,
    oracle: Any,
    into: tuple[Any, Any] | None = None,
) -> tuple[Any, Any] | None:
    """Adopts the same drawn fractional pods into both, as a new allocation or ``into`` a held
    one (an adopted one grows when the share is its own; others refuse); the same placement
    or error."""
    pods: list[Any] = []
    for _ in range(data.draw(st.integers(1, 3), label="adopted pods")):
        index = data.draw(st.integers(0, len(gpus) - 1))
        if data.draw(st.booleans()):
            pods.append((f"n{index}", 1))
        else:
            gpu = data.draw(st.integers(0, gpus[index] - 1))
            pods.append(gangplace.PodPlacement(f"n{index}", (gpu,)))
    milli = data.draw(st.sampled_from((250, 500, 700, None)), label="adopted milli")
    # None: whole GPUs (a count of 1 or the one GPU named).
    if into is not None and into[0].placement.gpu_milli and data.draw(st.booleans()):
        milli = into[0].placement.gpu_milli  # mostly the target's own share
    mine_into, their_into = (None, None) if into is None else (into[0].id, into[1].id)
    note(f"adopt {pods} gpu_milli={milli} into={mine_into}")
    try:
        mine = engine.adopt(pods, gpu_milli=milli, into=mine_into)
    except gangplace.GangplaceError as error:
        with pytest.raises(type(error)) as expected:
            oracle.adopt(pods, gpu_milli=milli, into=their_into)
        assert str(error) == str(expected.value)
        return None
    theirs = oracle.adopt(pods, gpu_milli=milli, into=their_into)
    assert as_tuple(mine.placement) == as_tuple(theirs.placement)
    if into is not None:
        event(f"adopt into: grown to {len(mine.placement.pods)} pods")
    return mine, theirs


def brute_force_pods(room: tuple[int, ...], milli: int) -> int:
    """The most pods of ``milli`` thousandths GPUs with this room hold, trying every way of
    giving each pod a GPU (a pod never spans GPUs, no GPU above a whole one)."""
    best = 0
    for pods in range(1, 2 * 1000 // milli + 2):
        fits = any(
            all(
                sum(milli for chosen in assignment if chosen == gpu) <= left
                for gpu, left in enumerate(room)
            )
            for assignment in itertools.product(range(len(room)), repeat=pods)
        )
        if not fits:
            break
        best = pods
    return best


@given(
    used=st.lists(st.sampled_from((0, 0, 200, 500, 700, 1000)), min_size=1, max_size=2),
    milli=st.sampled_from((250, 300, 460, 500, 999)),
)
def test_pod_counts_match_a_brute_force(used: list[int], milli: int) -> None:
    """A node's count of fractional pods equals the most an exhaustive assignment fits, and
    the engine places exactly that many on it."""
    cluster = cluster_of(gpus=(len(used),))
    for taken in used:
        if taken == 1000:
            cluster.reserve(GangRequest(1, 1, gpu_milli=500, required_level="node"))
            cluster.reserve(GangRequest(1, 1, gpu_milli=500, required_level="node"))
        elif taken:
            cluster.reserve(GangRequest(1, 1, gpu_milli=taken, required_level="node"))
    room = tuple(1000 - cluster.node("n0").shared.get(gpu, 0) for gpu in range(len(used)))
    note(f"room {room}")
    expected = brute_force_pods(room, milli)
    assert cluster.capacity_for(GangRequest(1, 1, gpu_milli=milli)) == expected
    if expected:
        assert cluster.place_gang(GangRequest(expected, 1, gpu_milli=milli)) is not None
    assert cluster.place_gang(GangRequest(expected + 1, 1, gpu_milli=milli)) is None
