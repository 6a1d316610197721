"""docs/transactions.md "Ending some pods" (E1-E4): ``release_pods`` against the reference, bad
input, and what an ended rank is not (lost, repaired, moved)."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
from helpers import FakeClock, as_tuple
from hypothesis import given
from hypothesis import strategies as st

import gangplace
from gangplace import (
    Conflict,
    GangRequest,
    InvalidRequest,
    ReservationError,
    UnknownReservation,
    reference,
)

LEVELS = ("rack",)
KINDS = [gangplace.Cluster, reference.Cluster]


def build(kind: Any = gangplace.Cluster, nodes: int = 2, gpus: int = 8) -> Any:
    cluster = kind(LEVELS, clock=FakeClock())
    for index in range(nodes):
        cluster.add_node(f"n{index}", gpus=gpus, topology={"rack": f"r{index // 2}"})
    return cluster


def state(cluster: Any) -> Any:
    nodes = tuple(
        (name, node.free, node.allocated, node.unhealthy)
        for name in cluster.nodes()
        for node in [cluster.node(name)]
    )
    holds = tuple((a.ended, a.lost, as_tuple(a.placement)) for a in cluster.allocations())
    return nodes, holds


@pytest.mark.parametrize("kind", KINDS)
def test_the_other_ranks_keep_their_numbers_and_the_last_ends_the_allocation(kind: Any) -> None:
    cluster = build(kind)
    job = cluster.commit(cluster.reserve(GangRequest(4, 4)))
    after = cluster.release_pods(job, [3, 1])
    assert after.ended == (1, 3) and after.placement == job.placement
    assert cluster.stats().free == 8 and cluster.allocations()[0].ended == (1, 3)
    assert cluster.release_pods(job.id, [0, 2]) is None
    assert cluster.hold_status(job) == "released" and cluster.stats().free == 16
    assert cluster.release(job) is False
    with pytest.raises(ReservationError):
        cluster.release_pods(job, [0])


@pytest.mark.parametrize("kind", KINDS)
def test_an_ended_rank_is_never_lost_nor_repaired(kind: Any) -> None:
    cluster = build(kind, nodes=3)
    job = cluster.commit(cluster.reserve(GangRequest(2, 8)))
    gone = job.placement.pods[1].node
    cluster.remove_node(gone)
    assert cluster.allocations()[0].lost == (1,)
    after = cluster.release_pods(job, [1])
    assert (after.lost, after.ended) == ((), (1,))
    assert cluster.plan_repair(after).lost == ()  # nothing to repair


@pytest.mark.parametrize("kind", KINDS)
def test_unhealthy_gpus_stay_out_of_the_pool(kind: Any) -> None:
    cluster = build(kind, nodes=1)
    job = cluster.commit(cluster.reserve(GangRequest(2, 4)))
    node = job.placement.pods[0].node
    bad = job.placement.pods[0].gpus[0]
    cluster.set_gpu_health(node, bad, False)
    cluster.release_pods(job, [0])
    assert bad not in cluster.node(node).free and len(cluster.node(node).free) == 3


@pytest.mark.parametrize("kind", KINDS)
def test_a_rank_under_repair_cannot_end(kind: Any) -> None:
    cluster = build(kind, nodes=3)
    job = cluster.commit(cluster.reserve(GangRequest(2, 8)))
    cluster.set_gpu_health(job.placement.pods[0].node, 0, False)
    repair = cluster.repair(cluster.plan_repair(job, widen=True))
    with pytest.raises(ReservationError, match="repair reservation"):
        cluster.release_pods(job, [0])
    assert cluster.release_pods(job, [1]).ended == (1,)  # the other rank may end
    cluster.rollback(repair)
    assert cluster.release_pods(job, [0]) is None


@pytest.mark.parametrize("kind", KINDS)
def test_a_hold_with_ended_ranks_is_not_moved(kind: Any) -> None:
    cluster = kind(LEVELS, clock=FakeClock())
    for name, pool in (("n0", "a"), ("n1", "b")):
        cluster.add_node(name, gpus=8, topology={"rack": "r0"}, labels={"pool": pool})
    mover = cluster.commit(cluster.reserve(GangRequest(2, 2, movable=True)))
    cluster.commit(cluster.reserve(GangRequest(1, 4, selector={"pool": "b"})))
    wanted = GangRequest(1, 8, priority=1)
    plan = cluster.plan_defrag(wanted)
    assert plan is not None and [m.allocation for m in plan.moves] == [mover.id]
    cluster.release_pods(mover, [0])
    with pytest.raises(Conflict):
        cluster.apply_defrag(plan)
    assert cluster.plan_defrag(wanted) is None


def test_snapshots_pickles_and_copies_keep_the_ended_ranks() -> None:
    cluster = build()
    job = cluster.commit(cluster.reserve(GangRequest(4, 4)))
    after = cluster.release_pods(job, [2])
    restored = gangplace.Cluster.restore(cluster.snapshot(), clock=FakeClock())
    assert restored.allocations() == cluster.allocations()
    assert restored.snapshot() == cluster.snapshot()
    assert pickle.loads(pickle.dumps(after)) == after and copy.copy(after).ended == (2,)
    assert after != job and "ended=(2,)" in repr(after)
    oracle = build(reference.Cluster)
    ojob = oracle.commit(oracle.reserve(GangRequest(4, 4)))
    oracle.release_pods(ojob, [2])
    back = reference.Cluster.restore(oracle.snapshot(), clock=FakeClock())
    assert back.allocations()[0].ended == (2,) and back.stats().free == 4


@pytest.mark.parametrize(
    ("ranks", "owner", "error"),
    [
        ([], None, InvalidRequest),
        ([4], None, InvalidRequest),
        ([-1], None, InvalidRequest),
        ([1, 1], None, InvalidRequest),
        ([0], None, InvalidRequest),  # already ended below
        ([2**70], None, InvalidRequest),
        (None, None, TypeError),
        ("01", None, TypeError),
        ([1.0], None, TypeError),
        ([True], None, TypeError),
        ([1], 7, TypeError),
        ([1], "someone-else", UnknownReservation),
    ],
)
def test_bad_input_changes_nothing(ranks: Any, owner: Any, error: type) -> None:
    cluster = build()
    job = cluster.commit(cluster.reserve(GangRequest(4, 4), owner="team"), owner="team")
    cluster.release_pods(job, [0], owner="team")
    before = cluster.snapshot()
    with pytest.raises(error):
        cluster.release_pods(job, ranks, owner="team" if owner is None else owner)
    assert cluster.snapshot() == before


def test_wrong_holds_raise_typed_errors() -> None:
    cluster = build()
    held = cluster.reserve(GangRequest(1, 4))
    before = cluster.snapshot()
    with pytest.raises(ReservationError, match="not committed"):
        cluster.release_pods(held, [0])
    with pytest.raises(UnknownReservation):
        cluster.release_pods("gp-" + "0" * 32, [0])
    with pytest.raises(TypeError):
        cluster.release_pods(3, [0])
    assert cluster.snapshot() == before


steps = st.lists(
    st.tuples(
        st.sampled_from(("end", "remove", "health", "readd", "repair")),
        st.integers(0, 7),
        st.lists(st.integers(0, 7), min_size=1, max_size=3, unique=True),
    ),
    max_size=12,
)


@given(
    shape=st.tuples(st.integers(2, 6), st.sampled_from((1, 2, 4))),
    spares=st.integers(0, 1),
    steps=steps,
)
def test_engine_and_reference_agree(shape: tuple[int, int], spares: int, steps: Any) -> None:
    """Random endings mixed with failures, returned nodes and repairs: same state on both."""
    clusters = [build(kind, nodes=4, gpus=4) for kind in KINDS]
    for cluster in clusters:
        cluster._use_sequential_ids(1)
    pods, gpus = shape
    request = GangRequest(pods, gpus, spares=spares)
    jobs = [c.commit(c.reserve(request)) if c.place_gang(request) else None for c in clusters]
    if jobs[0] is None or jobs[1] is None:
        assert jobs[0] is jobs[1] is None
        return
    ids = [job.id for job in jobs if job is not None]
    for action, number, ranks in steps:
        outcomes = []
        for cluster, job_id in zip(clusters, ids, strict=True):
            outcomes.append(_step(cluster, job_id, action, number, ranks))
        assert outcomes[0] == outcomes[1], (action, number, ranks)
        assert state(clusters[0]) == state(clusters[1])


def _step(cluster: Any, job: str, action: str, number: int, ranks: list[int]) -> Any:
    node = f"n{number % 4}"
    try:
        if action == "end":
            after = cluster.release_pods(job, ranks)
            return None if after is None else after.ended
        if action == "remove" and node in cluster.nodes():
            return cluster.remove_node(node) and "removed"
        if action == "readd" and node not in cluster.nodes():
            cluster.add_node(node, gpus=4, topology={"rack": "r9"})
        if action == "health" and node in cluster.nodes():
            return cluster.set_gpu_health(node, number % 4, number % 2 == 0) and "health"
        if action == "repair":
            plan = cluster.plan_repair(job)
            if plan is not None and plan.lost:
                cluster.commit_repair(cluster.repair(plan))
                return "repaired"
    except gangplace.GangplaceError as error:
        return type(error).__name__
    return None
