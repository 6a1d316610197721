"""Reliability scenarios: stale placements, owners and caps, node removal, snapshots, limits
and fail-closed behaviour after an internal error."""

from __future__ import annotations

import pytest
from helpers import FakeClock, full_state, set_failpoint, tree

from gangplace import (
    Cluster,
    Conflict,
    GangplaceError,
    GangRequest,
    InternalError,
    InvalidRequest,
    LimitExceeded,
    ReservationError,
    ReservationRevoked,
    UnknownReservation,
)


def rack_cluster(clock: FakeClock, **kwargs: object) -> Cluster:
    """2 spines x 2 racks x 2 nodes x 8 GPUs."""
    return tree(("spine", "rack"), (2, 2, 2), clock=clock, **kwargs)  # type: ignore[arg-type]


# ------------------------------------------------------------------ reserve(placement)


def test_reserving_a_placement_holds_exactly_its_gpus(clock: FakeClock) -> None:
    cluster = rack_cluster(clock)
    placement = cluster.place_gang(GangRequest(2, 4))
    assert placement is not None
    reservation = cluster.reserve(placement, ttl=10)
    assert reservation.placement == placement
    for pod in placement.pods:
        assert set(pod.gpus) <= set(cluster.node(pod.node).reserved)
    assert cluster.stats().reserved == 8


def test_decide_then_bind_race_is_closed(clock: FakeClock) -> None:
    """Two schedulers decide on the same state; the second bind conflicts and holds nothing."""
    cluster = rack_cluster(clock)
    first = cluster.place_gang(GangRequest(1, 8))
    second = cluster.place_gang(GangRequest(1, 8))
    assert first is not None and second is not None and first == second
    cluster.reserve(first)
    before = cluster.snapshot()
    with pytest.raises(Conflict, match="held by another"):
        cluster.reserve(second)
    assert cluster.snapshot() == before


@pytest.mark.parametrize("change", ["unhealthy", "cordon", "remove", "moved"])
def test_stale_placements_conflict(clock: FakeClock, change: str) -> None:
    cluster = rack_cluster(clock)
    placement = cluster.place_gang(GangRequest(2, 8, required_level="rack"))
    assert placement is not None and placement.nodes == ("s0-r0-n0", "s0-r0-n1")
    if change == "unhealthy":
        cluster.set_gpu_health("s0-r0-n1", 5, False)
    elif change == "cordon":
        cluster.cordon("s0-r0-n1")
    else:
        cluster.remove_node("s0-r0-n1")
        if change == "moved":  # back under the same name, in another rack
            cluster.add_node("s0-r0-n1", gpus=8, topology={"spine": "s1", "rack": "s1-r0"})
    before = full_state(cluster)
    with pytest.raises(Conflict) as caught:
        cluster.reserve(placement)
    assert isinstance(caught.value, ReservationError)
    assert "s0-r0-n1" in str(caught.value)
    assert full_state(cluster) == before


# ------------------------------------------------------------------ owners


def test_owner_guards_its_holds(clock: FakeClock) -> None:
    cluster = rack_cluster(clock)
    mine = cluster.reserve(GangRequest(1, 8), owner="team-a")
    assert mine.owner == "team-a"
    for other in (None, "team-b"):
        with pytest.raises(UnknownReservation):
            cluster.commit(mine, owner=other)
        with pytest.raises(UnknownReservation):
            cluster.rollback(mine, owner=other)
    allocation = cluster.commit(mine, owner="team-a")
    assert allocation.owner == "team-a"
    with pytest.raises(UnknownReservation):
        cluster.release(allocation, owner="team-b")
    assert cluster.release(allocation, owner="team-a") is True
    # Ended holds stay private too: a foreign caller still sees an unknown id.
    with pytest.raises(UnknownReservation):
        cluster.release(allocation)
    assert cluster.release(allocation, owner="team-a") is False


def test_unowned_holds_accept_any_caller(clock: FakeClock) -> None:
    cluster = rack_cluster(clock)
    reservation = cluster.reserve(GangRequest(1, 1))
    assert reservation.owner is None
    assert cluster.commit(reservation, owner="anyone").owner is None


def test_listings_by_owner(clock: FakeClock) -> None:
    cluster = rack_cluster(clock)
    a = cluster.reserve(GangRequest(1, 2), owner="team-a")
    b = cluster.reserve(GangRequest(1, 2), owner="team-b")
    anonymous = cluster.reserve(GangRequest(1, 2))
    committed = cluster.commit(cluster.reserve(GangRequest(1, 2), owner="team-a"), owner="team-a")
    assert cluster.reservations("team-a") == [a]
    assert cluster.reservations("team-b") == [b]
    assert cluster.reservations() == sorted([a, b, anonymous], key=lambda r: r.id)
    assert cluster.allocations("team-a") == [committed]
    assert cluster.allocations("team-b") == []
    clock.advance(31)  # the reservations expire; the allocation stays
    assert cluster.reservations() == []
    assert cluster.allocations() == [committed]


def test_per_owner_cap(clock: FakeClock) -> None:
    cluster = rack_cluster(clock, max_held_gpus_per_owner=16)
    assert cluster.max_held_gpus_per_owner == 16
    first = cluster.commit(cluster.reserve(GangRequest(1, 8), owner="a"), owner="a")
    cluster.reserve(GangRequest(1, 8), owner="a")
    with pytest.raises(LimitExceeded, match="cap per owner is 16"):
        cluster.reserve(GangRequest(1, 1), owner="a")
    cluster.reserve(GangRequest(2, 8), owner="b")  # another owner has its own cap
    cluster.release(first, owner="a")
    cluster.reserve(GangRequest(1, 8), owner="a")  # room again
    with pytest.raises(InvalidRequest):
        Cluster(("rack",), max_held_gpus_per_owner=-1)


def test_cap_counts_an_elastic_gang_by_what_it_would_take(clock: FakeClock) -> None:
    cluster = rack_cluster(clock, max_held_gpus_per_owner=8)
    with pytest.raises(LimitExceeded):
        cluster.reserve(GangRequest(4, 4, min_pods=3), owner="a")  # even 3 pods exceed 8
    with pytest.raises(LimitExceeded):
        cluster.reserve(GangRequest(4, 4, min_pods=1), owner="a")  # 4 pods fit: 16 > 8
    assert cluster.stats().reserved == 0


# ------------------------------------------------------------------ node removal


def test_remove_node_revokes_reservations_and_detaches_allocations(clock: FakeClock) -> None:
    cluster = rack_cluster(clock)
    spread = cluster.reserve(GangRequest(2, 8, required_level="rack"))  # s0-r0-n0 and n1
    assert spread.placement.nodes == ("s0-r0-n0", "s0-r0-n1")
    allocation = cluster.commit(cluster.reserve(GangRequest(2, 8, required_level="rack")))
    assert allocation.placement.nodes == ("s0-r1-n0", "s0-r1-n1")
    # remove_node names every hold it touched: here the reservation it revoked.
    assert cluster.remove_node("s0-r0-n1") == [spread.id]
    with pytest.raises(ReservationRevoked):
        cluster.commit(spread)
    assert cluster.node("s0-r0-n0").free == tuple(range(8))  # the other node's GPUs came back
    assert cluster.remove_node("s0-r1-n0") == [allocation.id]
    assert cluster.allocations() == [allocation]  # listed with its original placement
    assert cluster.node("s0-r1-n1").allocated == tuple(range(8))
    assert cluster.release(allocation) is True
    assert cluster.node("s0-r1-n1").free == tuple(range(8))
    assert "s0-r1-n0" not in cluster.nodes() and len(cluster) == 6
    cluster.check_invariants()


def test_removing_a_racks_last_node_prunes_the_rack(clock: FakeClock) -> None:
    cluster = rack_cluster(clock)
    for node in ("s0-r0-n0", "s0-r0-n1"):
        cluster.remove_node(node)
    cluster.add_node("s0-r0-n0", gpus=8, topology={"spine": "s0", "rack": "s0-r0"})
    # The rack is back with one fresh node; the answer is as on a cluster built that way.
    fresh = rack_cluster(FakeClock())
    for node in ("s0-r0-n0", "s0-r0-n1"):
        fresh.remove_node(node)
    fresh.add_node("s0-r0-n0", gpus=8, topology={"spine": "s0", "rack": "s0-r0"})
    for request in (GangRequest(1, 8), GangRequest(2, 8), GangRequest(3, 8)):
        assert cluster.place_gang(request) == fresh.place_gang(request)
    cluster.check_invariants()


# ------------------------------------------------------------------ snapshots


def busy_cluster(clock: FakeClock) -> Cluster:
    cluster = rack_cluster(clock, max_held_gpus_per_owner=24)
    cluster.add_node("gpu-x", gpus=4, topology={"spine": "s1", "rack": "s1-r1"}, labels={"a": "b"})
    cluster.commit(cluster.reserve(GangRequest(2, 4), owner="team-a"), owner="team-a")
    cluster.reserve(GangRequest(1, 8), ttl=50)
    cluster.rollback(cluster.reserve(GangRequest(1, 1)))
    cluster.set_gpu_health("s1-r0-n0", 2, False)
    cluster.cordon("s1-r1-n1")
    return cluster


def test_restore_answers_exactly_like_the_original(clock: FakeClock) -> None:
    original = busy_cluster(clock)
    data = original.snapshot()
    copy = Cluster.restore(data, clock=clock)
    assert copy.snapshot() == data
    assert (copy.levels, copy.policy, copy.max_held_gpus_per_owner) == (
        original.levels,
        original.policy,
        original.max_held_gpus_per_owner,
    )
    assert full_state(copy) == full_state(original)
    assert copy.reservations() == original.reservations()
    assert copy.allocations() == original.allocations()
    for cluster in (original, copy):  # the same operations give the same answers
        assert cluster.place_gang(GangRequest(3, 4)) == original.place_gang(GangRequest(3, 4))
        ended = cluster.reservations()[0]
        clock.advance(0)
        assert cluster.rollback(ended) is True
        assert cluster.rollback(ended) is False
    assert copy.snapshot() == original.snapshot()


def test_restore_keeps_remaining_lifetimes(clock: FakeClock) -> None:
    original = busy_cluster(clock)
    deadline = original.reservations()[0].expires_at
    later = FakeClock(clock.now + 500.0)
    copy = Cluster.restore(original.snapshot(), clock=later)
    assert copy.reservations()[0].expires_at == deadline + 500.0
    later.advance(49)
    assert len(copy.reservations()) == 1
    later.advance(2)
    assert copy.reservations() == []


def test_restore_of_a_removed_node_allocation(clock: FakeClock) -> None:
    cluster = busy_cluster(clock)
    allocation = cluster.allocations()[0]
    cluster.remove_node(allocation.placement.nodes[0])
    copy = Cluster.restore(cluster.snapshot(), clock=clock)
    assert copy.release(allocation, owner="team-a") is True
    copy.check_invariants()


# ------------------------------------------------------------------ fail closed


def test_a_panic_mid_mutation_fails_closed_until_restored(clock: FakeClock) -> None:
    cluster = rack_cluster(clock)
    cluster.reserve(GangRequest(1, 2))
    saved = cluster.snapshot()
    set_failpoint(cluster, True)
    with pytest.raises(InternalError) as caught:
        cluster.reserve(GangRequest(2, 8))  # spans two nodes: the panic hits after the first
    assert isinstance(caught.value, GangplaceError) and isinstance(caught.value, Exception)
    assert "failpoint" in str(caught.value)
    for call in (
        cluster.stats,
        cluster.snapshot,
        lambda: cluster.place_gang(GangRequest(1)),
        lambda: cluster.reserve(GangRequest(1)),
        cluster.check_invariants,
    ):
        with pytest.raises(InternalError, match="failed closed"):
            call()
    restored = Cluster.restore(saved, clock=clock)
    restored.check_invariants()
    assert restored.stats().reserved == 2
    assert restored.reserve(GangRequest(2, 8)).placement.total_gpus == 16


# ------------------------------------------------------------------ limits


def test_limits() -> None:
    cluster = Cluster(("rack",))
    with pytest.raises(InvalidRequest, match="ttl"):
        cluster.reserve(GangRequest(1), ttl=7 * 24 * 3600 + 1)
    with pytest.raises(InvalidRequest, match="limit"):
        GangRequest(2**27, 4)
    with pytest.raises(InvalidRequest, match="levels"):
        Cluster(tuple(f"l{i}" for i in range(17)))
    with pytest.raises(InvalidRequest, match="253"):
        cluster.add_node("n" * 254, gpus=1, topology={"rack": "r"})
