"""reserve / commit / rollback / release, lifetimes, health revocation, ids."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable

import pytest
from helpers import FakeClock, full_state, node_state, tree

import gangplace
from gangplace import (
    Allocation,
    Cluster,
    GangRequest,
    InvalidRequest,
    Reservation,
    ReservationError,
    ReservationExpired,
    ReservationRevoked,
    UnknownReservation,
)

LEVELS = ("spine", "rack")


@pytest.fixture
def cluster(clock: FakeClock) -> Cluster:
    return tree(LEVELS, (1, 2, 2), clock=clock)  # 4 nodes x 8 GPUs


def test_reserve_holds_exactly_the_placement(cluster: Cluster) -> None:
    request = GangRequest(2, 8)
    expected = cluster.place_gang(request)
    reservation = cluster.reserve(request)
    assert isinstance(reservation, Reservation)
    assert reservation.placement == expected
    for name in reservation.placement.nodes:
        assert cluster.node(name).reserved == tuple(range(8))
        assert cluster.node(name).free == ()
    stats = cluster.stats()
    assert (stats.reserved, stats.free, stats.allocated) == (16, 16, 0)
    # A pure query holds nothing and changes nothing.
    before = full_state(cluster)
    assert cluster.place_gang(GangRequest(2, 8)) is not None
    assert full_state(cluster) == before


def test_commit_is_idempotent_and_release_frees(cluster: Cluster) -> None:
    reservation = cluster.reserve(GangRequest(1, 8))
    allocation = cluster.commit(reservation)
    assert isinstance(allocation, Allocation)
    assert allocation.id == reservation.id and allocation.placement == reservation.placement
    assert cluster.commit(reservation.id) == allocation
    node = reservation.placement.nodes[0]
    assert cluster.node(node).allocated == tuple(range(8))
    assert cluster.release(allocation) is True
    assert cluster.release(allocation.id) is False
    assert cluster.node(node).free == tuple(range(8))
    with pytest.raises(ReservationError, match="released"):
        cluster.commit(reservation)
    with pytest.raises(ReservationError, match="committed"):
        cluster.rollback(reservation)


def test_rollback_restores_the_exact_prior_state(cluster: Cluster) -> None:
    cluster.set_gpu_health("s0-r0-n0", 3, False)
    kept = cluster.commit(cluster.reserve(GangRequest(1, 2)))
    before = full_state(cluster)
    reservation = cluster.reserve(GangRequest(3, 5))
    assert full_state(cluster) != before
    assert cluster.rollback(reservation) is True
    assert full_state(cluster) == before
    assert cluster.rollback(reservation) is False
    with pytest.raises(ReservationError, match="rolled back"):
        cluster.commit(reservation)
    with pytest.raises(ReservationError):
        cluster.release(reservation.id)
    assert cluster.release(kept) is True


def test_rollback_of_committed_raises_and_release_of_reserved_raises(cluster: Cluster) -> None:
    reservation = cluster.reserve(GangRequest(1))
    with pytest.raises(ReservationError, match="not committed"):
        cluster.release(reservation.id)
    cluster.commit(reservation)
    with pytest.raises(ReservationError, match="release the allocation"):
        cluster.rollback(reservation)
    assert cluster.node(reservation.placement.nodes[0]).allocated == (0,)


def test_unknown_ids(cluster: Cluster) -> None:
    for bad in ("", "gp-", "nope", "gp-" + "0" * 32, "gp-" + "f" * 31):
        before = full_state(cluster)
        with pytest.raises(UnknownReservation):
            cluster.commit(bad)
        with pytest.raises(UnknownReservation):
            cluster.rollback(bad)
        with pytest.raises(UnknownReservation):
            cluster.release(bad)
        assert full_state(cluster) == before


def test_reservation_expires_at_its_deadline(cluster: Cluster, clock: FakeClock) -> None:
    reservation = cluster.reserve(GangRequest(4, 8), ttl=10)
    assert reservation.expires_at == clock.now + 10
    clock.advance(9.999)
    assert cluster.stats().reserved == 32
    clock.advance(0.001)  # expires_at <= now: reclaimed before anything reads the state
    assert cluster.stats().reserved == 0
    assert cluster.stats().free == 32
    with pytest.raises(ReservationExpired):
        cluster.commit(reservation)
    assert cluster.rollback(reservation) is False


def test_expiry_is_reclaimed_before_placement(cluster: Cluster, clock: FakeClock) -> None:
    cluster.reserve(GangRequest(4, 8), ttl=5)
    assert cluster.place_gang(GangRequest(1, 8)) is None
    clock.advance(5)
    assert cluster.place_gang(GangRequest(4, 8)) is not None


def test_committed_allocation_never_expires(cluster: Cluster, clock: FakeClock) -> None:
    allocation = cluster.commit(cluster.reserve(GangRequest(1, 8), ttl=1))
    clock.advance(10_000)
    assert cluster.stats().allocated == 8
    assert cluster.release(allocation) is True


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), float("inf"), 7 * 24 * 3600 + 1, 10**400])
def test_bad_ttl_holds_nothing(cluster: Cluster, ttl: float) -> None:
    before = full_state(cluster)
    with pytest.raises(InvalidRequest, match="ttl"):
        cluster.reserve(GangRequest(1), ttl=ttl)
    assert full_state(cluster) == before


def test_unhealthy_reserved_gpu_revokes_the_whole_reservation(cluster: Cluster) -> None:
    before = full_state(cluster)
    reservation = cluster.reserve(GangRequest(2, 8))
    first, second = reservation.placement.nodes
    assert cluster.set_gpu_health(second, 6, False) == [reservation.id]
    assert cluster.node(first).free == tuple(range(8))  # all of it returned, not just GPU 6
    assert cluster.node(second).free == (0, 1, 2, 3, 4, 5, 7)
    assert cluster.node(second).unhealthy == (6,)
    with pytest.raises(ReservationRevoked):
        cluster.commit(reservation)
    assert cluster.rollback(reservation) is False
    cluster.set_gpu_health(second, 6, True)
    assert full_state(cluster) == before


def test_unhealthy_allocated_gpu_keeps_the_allocation(cluster: Cluster) -> None:
    allocation = cluster.commit(cluster.reserve(GangRequest(1, 8)))
    node = allocation.placement.nodes[0]
    assert cluster.set_gpu_health(node, 2, False) == [allocation.id]
    assert cluster.node(node).allocated == tuple(range(8))
    assert cluster.node(node).unhealthy == (2,)
    assert cluster.release(allocation) is True
    assert cluster.node(node).free == (0, 1, 3, 4, 5, 6, 7)  # GPU 2 stays out while unhealthy
    assert cluster.stats().unhealthy == 1
    assert cluster.set_gpu_health(node, 2, True) == []
    assert cluster.node(node).free == tuple(range(8))


def test_health_of_free_gpu_returns_no_ids(cluster: Cluster) -> None:
    assert cluster.set_gpu_health("s0-r0-n0", 0, False) == []
    assert node_state(cluster, "s0-r0-n0")[1] == tuple(range(1, 8))
    assert cluster.set_gpu_health("s0-r0-n0", 0, False) == []  # twice is harmless


def test_ids_are_random_128_bit_and_not_sequential(cluster: Cluster) -> None:
    ids = []
    for _ in range(200):
        reservation = cluster.reserve(GangRequest(1))
        ids.append(reservation.id)
        cluster.rollback(reservation)
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"gp-[0-9a-f]{32}", i) for i in ids)
    numbers = [int(i[3:], 16) for i in ids]
    assert len({b - a for a, b in itertools.pairwise(numbers)}) > 1
    # Every one of the 128 bits varies across 200 draws (the chance that one does not is 2^-199).
    varying = 0
    for bit in range(128):
        varying += len({(n >> bit) & 1 for n in numbers}) == 2
    assert varying == 128


def test_value_objects_are_frozen_and_hashable(cluster: Cluster) -> None:
    reservation = cluster.reserve(GangRequest(1, 2, name="x"))
    allocation = cluster.commit(reservation)
    for value in (reservation, allocation, reservation.placement, reservation.placement.pods[0]):
        assert hash(value) == hash(value)
        with pytest.raises(AttributeError):
            value.id = "other"  # type: ignore[misc,union-attr]
    assert len({GangRequest(1, 2), GangRequest(1, 2), GangRequest(2, 1)}) == 2
    assert repr(GangRequest(4, 8, required_level="rack", name="job")) == (
        "GangRequest(4, 8, required_level='rack', name='job')"
    )
    assert repr(reservation.placement.pods[0]) == "PodPlacement('s0-r0-n0', (0, 1))"
    assert "level='node'" in repr(reservation.placement)
    assert repr(cluster) == "Cluster(levels=('spine', 'rack'), policy='best-fit', nodes=4)"


def test_the_private_allocate_is_reserve_then_commit() -> None:
    """``Cluster._allocate`` (the Scheduler's start) holds what reserve then commit hold,
    with the same id; it refuses what reserve refuses, changing nothing."""
    twins = []
    for _ in range(2):
        cluster = gangplace.Cluster(("rack",), clock=lambda: 0.0)
        cluster._use_sequential_ids(1)  # type: ignore[attr-defined]
        for n in range(3):
            cluster.add_node(f"n{n}", gpus=8, topology={"rack": f"r{n % 2}"})
        twins.append(cluster)
    one, two = twins
    avoid = [gangplace.PodPlacement("n0", [0])]
    got = one._allocate(GangRequest(2, 4, spares=1), owner="a", avoid=avoid)
    want = two.commit(two.reserve(GangRequest(2, 4, spares=1), owner="a", avoid=avoid), owner="a")
    assert got == want and one.snapshot() == two.snapshot()
    before = one.snapshot()
    cases: tuple[tuple[type[BaseException], Callable[[], object]], ...] = (
        (gangplace.Unschedulable, lambda: one._allocate(GangRequest(4, 8))),
        (TypeError, lambda: one._allocate(got.placement)),  # type: ignore[arg-type]
        (gangplace.InvalidRequest, lambda: one._allocate(GangRequest(1), ttl=-1)),
    )
    for error, call in cases:
        with pytest.raises(error):
            call()
        assert one.snapshot() == before
