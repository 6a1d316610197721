"""Bad input: each case raises its typed error and leaves the cluster byte-for-byte as it was.

"Byte-for-byte" is literal: the full state dump is ``cluster.snapshot()`` (every node, label,
health bit, cordon, hold, owner, deadline and remembered id), compared before and after.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from helpers import FakeClock, full_state, tree

from gangplace import (
    Cluster,
    Conflict,
    GangplaceError,
    GangRequest,
    InvalidRequest,
    InvalidSnapshot,
    LimitExceeded,
    ReservationError,
    UnknownNode,
    UnknownReservation,
)

HUGE = 10**30
TOPOLOGY = {"spine": "s9", "rack": "r9"}


def make() -> Cluster:
    """Two 8-GPU nodes; an allocation, a reservation and an owned reservation live."""
    cluster = tree(("spine", "rack"), (1, 1, 2), clock=FakeClock(), max_held_gpus_per_owner=6)
    cluster.commit(cluster.reserve(GangRequest(1, 4)))
    cluster.reserve(GangRequest(1, 2))
    cluster.reserve(GangRequest(1, 2), owner="team-a")
    return cluster


def owned(cluster: Cluster) -> str:
    return cluster.reservations("team-a")[0].id


def allocation(cluster: Cluster) -> str:
    return cluster.allocations()[0].id


def stale_placement(cluster: Cluster) -> Any:
    """A placement of GPUs that the live allocation holds."""
    held = cluster.allocations()[0].placement
    return held


def snapshot_with(cluster: Cluster, index: int, value: int) -> bytes:
    data = bytearray(cluster.snapshot())
    data[index] = value
    return bytes(data)


# The calls take Any: they pass wrong types on purpose.
Case = tuple[str, Callable[[Any], Any], type[BaseException]]

CASES: list[Case] = [
    ("duplicate node", lambda c: c.add_node("s0-r0-n0", gpus=8, topology=TOPOLOGY), InvalidRequest),
    ("empty node name", lambda c: c.add_node("", gpus=8, topology=TOPOLOGY), InvalidRequest),
    ("oversize name", lambda c: c.add_node("x" * 300, gpus=8, topology=TOPOLOGY), InvalidRequest),
    ("zero gpus", lambda c: c.add_node("x", gpus=0, topology=TOPOLOGY), InvalidRequest),
    ("negative gpus", lambda c: c.add_node("x", gpus=-8, topology=TOPOLOGY), InvalidRequest),
    ("65 gpus", lambda c: c.add_node("x", gpus=65, topology=TOPOLOGY), InvalidRequest),
    ("huge gpus", lambda c: c.add_node("x", gpus=HUGE, topology=TOPOLOGY), InvalidRequest),
    ("float gpus", lambda c: c.add_node("x", gpus=8.0, topology=TOPOLOGY), TypeError),
    ("bool gpus", lambda c: c.add_node("x", gpus=True, topology=TOPOLOGY), TypeError),
    ("None gpus", lambda c: c.add_node("x", gpus=None, topology=TOPOLOGY), TypeError),
    ("missing level", lambda c: c.add_node("x", gpus=8, topology={"rack": "r"}), InvalidRequest),
    (
        "extra level",
        lambda c: c.add_node("x", gpus=8, topology={**TOPOLOGY, "row": "w"}),
        InvalidRequest,
    ),
    (
        "empty domain",
        lambda c: c.add_node("x", gpus=8, topology={"spine": "", "rack": "r"}),
        InvalidRequest,
    ),
    ("topology not a mapping", lambda c: c.add_node("x", gpus=8, topology=["s"]), TypeError),
    (
        "non-str domain",
        lambda c: c.add_node("x", gpus=8, topology={"spine": 1, "rack": "r"}),
        TypeError,
    ),
    (
        "unhealthy out of range",
        lambda c: c.add_node("x", gpus=8, topology=TOPOLOGY, unhealthy=[8]),
        InvalidRequest,
    ),
    (
        "negative unhealthy",
        lambda c: c.add_node("x", gpus=8, topology=TOPOLOGY, unhealthy=[-1]),
        InvalidRequest,
    ),
    ("name not str", lambda c: c.add_node(7, gpus=8, topology=TOPOLOGY), TypeError),
    ("health unknown node", lambda c: c.set_gpu_health("nope", 0, False), UnknownNode),
    ("health gpu out of range", lambda c: c.set_gpu_health("s0-r0-n0", 8, False), InvalidRequest),
    ("health huge gpu", lambda c: c.set_gpu_health("s0-r0-n0", HUGE, False), InvalidRequest),
    ("health not bool", lambda c: c.set_gpu_health("s0-r0-n0", 0, 1), TypeError),
    ("cordon unknown", lambda c: c.cordon("nope"), UnknownNode),
    ("uncordon None", lambda c: c.uncordon(None), TypeError),
    ("node unknown", lambda c: c.node("nope"), UnknownNode),
    ("holds_on unknown node", lambda c: c.holds_on("nope"), UnknownNode),
    ("holds_on None", lambda c: c.holds_on(None), TypeError),
    ("place not a request", lambda c: c.place_gang({"pods": 1}), TypeError),
    ("unknown level", lambda c: c.place_gang(GangRequest(1, required_level="row")), InvalidRequest),
    (
        "reserve unknown level",
        lambda c: c.reserve(GangRequest(1, required_level="x")),
        InvalidRequest,
    ),
    ("ttl zero", lambda c: c.reserve(GangRequest(1), ttl=0), InvalidRequest),
    ("ttl NaN", lambda c: c.reserve(GangRequest(1), ttl=float("nan")), InvalidRequest),
    ("ttl str", lambda c: c.reserve(GangRequest(1), ttl="30"), TypeError),
    ("ttl bool", lambda c: c.reserve(GangRequest(1), ttl=True), TypeError),
    ("commit unknown", lambda c: c.commit("gp-" + "1" * 32), UnknownReservation),
    ("commit garbage", lambda c: c.commit("\x00" * 1000), UnknownReservation),
    ("commit wrong type", lambda c: c.commit(42), TypeError),
    ("rollback unknown", lambda c: c.rollback("r-1"), UnknownReservation),
    ("release None", lambda c: c.release(None), TypeError),
    ("release unknown", lambda c: c.release(""), UnknownReservation),
    ("release a reservation", lambda c: c.release(owned(c), owner="team-a"), ReservationError),
    ("commit as a foreign owner", lambda c: c.commit(owned(c), owner="team-b"), UnknownReservation),
    ("commit owned without owner", lambda c: c.commit(owned(c)), UnknownReservation),
    ("rollback as a foreign owner", lambda c: c.rollback(owned(c), owner="x"), UnknownReservation),
    ("release as an owner", lambda c: c.rollback(allocation(c), owner="x"), ReservationError),
    ("owner empty", lambda c: c.reserve(GangRequest(1), owner=""), InvalidRequest),
    ("owner oversize", lambda c: c.reserve(GangRequest(1), owner="o" * 300), InvalidRequest),
    ("owner not str", lambda c: c.reserve(GangRequest(1), owner=5), TypeError),
    ("owner over its cap", lambda c: c.reserve(GangRequest(3, 2), owner="team-a"), LimitExceeded),
    ("anonymous over the cap", lambda c: c.reserve(GangRequest(1, 1)), LimitExceeded),
    ("reserve a stale placement", lambda c: c.reserve(stale_placement(c)), Conflict),
    ("reserve a dict", lambda c: c.reserve({"pods": 1}), TypeError),
    ("reserve None", lambda c: c.reserve(None), TypeError),
    ("remove unknown node", lambda c: c.remove_node("nope"), UnknownNode),
    ("remove empty name", lambda c: c.remove_node(""), UnknownNode),
    ("remove None", lambda c: c.remove_node(None), TypeError),
    ("listing owner not str", lambda c: c.reservations(owner=3), TypeError),
    ("health NaN gpu", lambda c: c.set_gpu_health("s0-r0-n0", float("nan"), False), TypeError),
    ("health None node", lambda c: c.set_gpu_health(None, 0, False), TypeError),
    (
        "labels not str",
        lambda c: c.add_node("x", gpus=8, topology=TOPOLOGY, labels={1: 2}),
        TypeError,
    ),
    ("restore empty bytes", lambda c: Cluster.restore(b""), InvalidSnapshot),
    ("restore foreign bytes", lambda c: Cluster.restore(b"%PDF-1.7" + bytes(40)), InvalidSnapshot),
    ("restore truncated", lambda c: Cluster.restore(c.snapshot()[:-1]), InvalidSnapshot),
    ("restore padded", lambda c: Cluster.restore(c.snapshot() + b"\0"), InvalidSnapshot),
    (
        "restore corrupted body",
        lambda c: Cluster.restore(snapshot_with(c, 40, 0xFF)),
        InvalidSnapshot,
    ),
    (
        "restore future version",
        lambda c: Cluster.restore(snapshot_with(c, 8, 0xFF)),
        InvalidSnapshot,
    ),
    ("restore a str", lambda c: Cluster.restore("GANGPLCE"), TypeError),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("label", "call", "error"), CASES, ids=[case[0] for case in CASES])
def test_bad_input_raises_typed_error_and_changes_nothing(
    label: str, call: Callable[[Any], Any], error: type[BaseException]
) -> None:
    cluster = make()
    before, dump = full_state(cluster), cluster.snapshot()
    # A pyo3 PanicException derives from BaseException, so it would escape pytest.raises and
    # fail the test: matching the typed error is also the no-panic check.
    with pytest.raises(error) as caught:
        call(cluster)
    if error is not TypeError:
        assert isinstance(caught.value, GangplaceError)
    assert cluster.snapshot() == dump, label
    assert full_state(cluster) == before, label
    cluster.check_invariants()


def test_the_table_is_large_enough() -> None:
    assert len(CASES) >= 40


REQUESTS: list[tuple[dict[str, Any], type[BaseException]]] = [
    ({"pods": 0}, InvalidRequest),
    ({"pods": -1}, InvalidRequest),
    ({"pods": 2**31}, InvalidRequest),
    ({"pods": HUGE}, InvalidRequest),
    ({"pods": -HUGE}, InvalidRequest),
    ({"pods": 1.0}, TypeError),
    ({"pods": True}, TypeError),
    ({"pods": None}, TypeError),
    ({"pods": "4"}, TypeError),
    ({"pods": 1, "gpus_per_pod": 0}, InvalidRequest),
    ({"pods": 1, "gpus_per_pod": 65}, InvalidRequest),
    ({"pods": 1, "gpus_per_pod": float("nan")}, TypeError),
    ({"pods": 4, "min_pods": 5}, InvalidRequest),
    ({"pods": 4, "min_pods": 0}, InvalidRequest),
    ({"pods": 1, "required_level": ""}, InvalidRequest),
    ({"pods": 1, "required_level": 3}, TypeError),
    ({"pods": 1, "selector": {"a": 1}}, TypeError),
    ({"pods": 1, "selector": ["a"]}, TypeError),
    ({"pods": 1, "selector": {"": "x"}}, InvalidRequest),
    ({"pods": 1, "name": None}, TypeError),
]


@pytest.mark.parametrize(("kwargs", "error"), REQUESTS, ids=[repr(k) for k, _ in REQUESTS])
def test_bad_requests_are_refused_when_built(
    kwargs: dict[str, Any], error: type[BaseException]
) -> None:
    with pytest.raises(error):
        GangRequest(**kwargs)


def test_largest_valid_request_is_accepted_and_simply_does_not_fit() -> None:
    request = GangRequest(2**22, 64, min_pods=2**22)
    assert request.total_gpus == 2**28  # the most GPUs a cluster at its limits can hold
    assert make().place_gang(request) is None
    for pods, gpus_per_pod in ((2**22 + 1, 64), (2**28 + 1, 1), (2**31 - 1, 64)):
        with pytest.raises(InvalidRequest, match=r"limit|pods must be"):
            GangRequest(pods, gpus_per_pod)


@pytest.mark.parametrize(
    ("levels", "error"),
    [
        (("node",), InvalidRequest),
        (("cluster",), InvalidRequest),
        (("rack", "rack"), InvalidRequest),
        (("",), InvalidRequest),
        (tuple(f"l{i}" for i in range(17)), InvalidRequest),
        ("rack", TypeError),
        ((1,), TypeError),
        (None, TypeError),
    ],
)
def test_bad_levels(levels: Any, error: type[BaseException]) -> None:
    with pytest.raises(error):
        Cluster(levels)


def test_bad_policy_and_clock() -> None:
    with pytest.raises(InvalidRequest):
        Cluster(("rack",), policy="worst-fit")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Cluster(("rack",), clock=5)  # type: ignore[arg-type]
    cluster = Cluster(("rack",), clock=lambda: float("nan"))
    with pytest.raises(InvalidRequest, match="clock"):
        cluster.stats()
