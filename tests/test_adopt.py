"""Cluster.adopt: running work recorded as one allocation (docs/transactions.md "Adopting running
work")."""

from __future__ import annotations

import contextlib
import pydoc
from typing import Any

import pytest
from helpers import node_state
from hypothesis import given, settings
from hypothesis import strategies as st

from gangplace import (
    Cluster,
    Conflict,
    GangRequest,
    InvalidRequest,
    LimitExceeded,
    PodPlacement,
    ReservationError,
    UnknownNode,
    UnknownReservation,
    reference,
)


def _cluster(kind: Any = Cluster, **kwargs: Any) -> Any:
    cluster = kind(("spine", "rack"), clock=lambda: 100.0, **kwargs)
    for index in range(4):
        cluster.add_node(f"n{index}", gpus=8, topology={"spine": "s0", "rack": f"r{index // 2}"})
    return cluster


@pytest.mark.parametrize("kind", [Cluster, reference.Cluster])
def test_adopted_work_is_an_ordinary_allocation(kind: Any) -> None:
    cluster = _cluster(kind)
    adopted = cluster.adopt([PodPlacement("n1", [6, 7]), ("n0", 3)], owner="kubelet", priority=-1)
    assert adopted.placement.level == "rack" and tuple(adopted.placement.domain) == ("s0", "r0")
    assert [(p.node, tuple(p.gpus)) for p in adopted.placement.pods] == [
        ("n0", (0, 1, 2)),
        ("n1", (6, 7)),
    ]
    assert (adopted.owner, adopted.priority, adopted.since) == ("kubelet", -1, 100.0)
    assert cluster.node("n0").allocated == (0, 1, 2)
    assert cluster.stats().allocated == 5
    # The rules see it: a 2 x 8 gang no longer fits rack r0.
    placement = cluster.place_gang(GangRequest(2, 8, required_level="rack"))
    assert placement is not None and tuple(placement.domain) == ("s0", "r1")
    assert cluster.release(adopted, owner="kubelet") is True
    assert cluster.stats().allocated == 0


def test_adopted_work_survives_snapshots_and_can_be_preempted() -> None:
    cluster = _cluster()
    adopted = cluster.adopt([("n0", 8), ("n1", 8), ("n2", 8), ("n3", 8)], priority=-5)
    restored = Cluster.restore(cluster.snapshot(), clock=lambda: 100.0)
    assert restored.hold_status(adopted.id) == "allocated"
    plan = restored.plan_preemption(GangRequest(1, 8, priority=0))
    assert plan is not None and plan.victims == (adopted.id,)
    restored.preempt(plan)
    assert restored.hold_status(adopted.id) == "preempted"


def test_cordoned_nodes_may_hold_running_work() -> None:
    cluster = _cluster()
    cluster.cordon("n3")
    adopted = cluster.adopt([("n3", 2)])
    assert adopted.placement.level == "node"
    assert tuple(adopted.placement.domain) == ("s0", "r1", "n3")


@pytest.mark.parametrize(
    ("pods", "kwargs", "error", "text"),
    [
        ([], {}, InvalidRequest, "at least one pod"),
        ([("n9", 1)], {}, UnknownNode, 'unknown node "n9"'),
        ([("n0", 0)], {}, InvalidRequest, "takes no GPUs and asks no resources"),
        ([("n0", 65)], {}, InvalidRequest, "must take 0 to 64 GPUs, not 65"),
        ([("n0", -3)], {}, InvalidRequest, "not -3"),
        ([("n1", 5)], {}, Conflict, 'node "n1" has 4 free healthy GPUs for a pod of 5'),
        ([PodPlacement("n0", [9])], {}, InvalidRequest, "GPU 9 is not one of them"),
        ([PodPlacement("n1", [0])], {}, Conflict, "held by another reservation"),
        ([PodPlacement("n2", [1])], {}, Conflict, 'GPU 1 of node "n2" is unhealthy'),
        ([PodPlacement("n3", [4]), PodPlacement("n3", [4, 5])], {}, Conflict, "for two pods"),
        ([("n3", 5), ("n3", 1)], {}, Conflict, "0 free healthy GPUs"),
        ([("n3", 4)], {"owner": "capped"}, LimitExceeded, "the cap per owner is 6"),
        ([("n3", 1)], {"owner": ""}, InvalidRequest, "owner must be 1 to"),
        ([("n3", 1)], {"priority": 2**31}, InvalidRequest, "priority must be between"),
        ("n3", {}, TypeError, "not a str"),
        ([["n3", 1]], {}, TypeError, "PodPlacement or a (node, count) tuple"),
        ([("n3", 1, 2)], {}, TypeError, "PodPlacement or a (node, count) tuple"),
        ([(3, 1)], {}, TypeError, "node"),
        ([("n3", "1")], {}, TypeError, "count"),
        ([("n3", 1)], {"preemptible": "yes"}, TypeError, "preemptible"),
        ([("n3", 1)], {"into": 7}, TypeError, "into"),
    ],
)
@pytest.mark.parametrize("kind", [Cluster, reference.Cluster])
def test_bad_adoptions_raise_typed_errors_and_change_nothing(
    kind: Any, pods: Any, kwargs: dict[str, Any], error: type[Exception], text: str
) -> None:
    cluster = _cluster(kind, max_held_gpus_per_owner=6)
    cluster.adopt([PodPlacement("n1", [0, 1, 2, 3])])
    cluster.set_gpu_health("n2", 1, False)
    cluster.adopt([("n3", 3)], owner="capped")
    before = cluster.snapshot() if kind is Cluster else None
    state = [cluster.node(name) for name in cluster.nodes()], cluster.stats()
    with pytest.raises(error) as raised:
        cluster.adopt(pods, **kwargs)
    assert text in str(raised.value)
    assert ([cluster.node(name) for name in cluster.nodes()], cluster.stats()) == state
    if before is not None:
        assert cluster.snapshot() == before


def test_help_shows_the_docs() -> None:
    text = pydoc.plain(pydoc.render_doc(Cluster.adopt))
    for phrase in ("no placement rule applies", "(node, count)", "Conflict", "cordoned"):
        assert phrase in text


entries = st.lists(
    st.tuples(
        st.sampled_from(["n0", "n1", "n2", "n3", "nx"]),
        st.integers(0, 9) | st.lists(st.integers(0, 9), min_size=1, max_size=4, unique=True),
    ),
    max_size=4,
)


@settings(max_examples=300)
@given(
    held=st.lists(
        st.tuples(st.sampled_from(["n0", "n1", "n2", "n3"]), st.integers(1, 4)), max_size=4
    ),
    unhealthy=st.lists(st.tuples(st.sampled_from(["n0", "n3"]), st.integers(0, 7)), max_size=3),
    pods=entries,
)
def test_adopt_agrees_with_the_reference(
    held: list[tuple[str, int]], unhealthy: list[tuple[str, int]], pods: list[Any]
) -> None:
    """Same outcome (placement or error type and text), same nodes after, on random states."""
    outcomes = []
    for kind in (Cluster, reference.Cluster):
        cluster = _cluster(kind)
        for node, count in held:
            with contextlib.suppress(Conflict):
                cluster.adopt([(node, count)])
        for node, gpu in unhealthy:
            cluster.set_gpu_health(node, gpu, False)
        converted = [
            PodPlacement(name, gpus) if isinstance(gpus, list) else (name, gpus)
            for name, gpus in pods
        ]
        try:
            result: Any = cluster.adopt(converted)
            result = (
                [(p.node, tuple(p.gpus)) for p in result.placement.pods],
                result.placement.level,
            )
        except (InvalidRequest, Conflict, UnknownNode) as error:
            result = type(error).__name__, str(error)
        outcomes.append((result, [node_state(cluster, n) for n in cluster.nodes()]))
    assert outcomes[0] == outcomes[1]


def test_holds_carry_their_request_through_snapshots() -> None:
    cluster = _cluster()
    request = GangRequest(2, 4, name="train", priority=3)
    allocation = cluster.commit(cluster.reserve(request))
    assert allocation.request == request and allocation.request.name == "train"
    where = cluster.place_gang(GangRequest(1, 1))
    assert where is not None
    placed = cluster.reserve(where)
    assert placed.request is None
    assert cluster.adopt([("n3", 1)]).request is None
    restored = Cluster.restore(cluster.snapshot(), clock=lambda: 100.0)
    again = next(a for a in restored.allocations() if a.id == allocation.id)
    assert again.request == request


@pytest.mark.parametrize("kind", [Cluster, reference.Cluster])
def test_a_gang_grows_by_pods_seen_later(kind: Any) -> None:
    cluster = _cluster(kind)
    first = cluster.adopt([("n1", 4)], owner="kubelet", priority=2, preemptible=False)
    assert first.placement.level == "node"
    grown = cluster.adopt([("n0", 2), ("n2", 1)], into=first, owner="kubelet")
    assert grown.id == first.id and len(cluster.allocations()) == 1
    assert [(p.node, tuple(p.gpus)) for p in grown.placement.pods] == [
        ("n1", (0, 1, 2, 3)),
        ("n0", (0, 1)),
        ("n2", (0,)),
    ]
    assert (grown.placement.level, tuple(grown.placement.domain)) == ("spine", ("s0",))
    assert (grown.owner, grown.priority, grown.preemptible, grown.since) == (
        "kubelet",
        2,
        False,
        100.0,
    )
    again = cluster.adopt([("n3", 1)], into=first.id, owner="kubelet", priority=7)
    assert again.priority == 7 and not again.preemptible
    assert cluster.release_pods(again, [0], owner="kubelet").ended == (0,)
    assert cluster.stats().allocated == 4


@pytest.mark.parametrize("kind", [Cluster, reference.Cluster])
def test_only_adopted_allocations_grow(kind: Any) -> None:
    cluster = _cluster(kind, max_held_gpus_per_owner=6)
    placed = cluster.commit(cluster.reserve(GangRequest(1, 2)))
    reserved = cluster.reserve(GangRequest(1, 1))
    mine = cluster.adopt([("n3", 4)], owner="team")
    cases: list[tuple[Any, dict[str, Any], type[Exception]]] = [
        (placed, {}, InvalidRequest),
        (reserved, {}, ReservationError),
        (mine, {}, UnknownReservation),  # another owner's allocation is unknown
        (mine, {"owner": "team", "priority": 2**40}, InvalidRequest),
        ("gp-" + "0" * 32, {}, UnknownReservation),
    ]
    for into, kwargs, error in cases:
        before = cluster.snapshot() if kind is Cluster else None
        with pytest.raises(error):
            cluster.adopt([("n2", 1)], into=into, **kwargs)
        if before is not None:
            assert cluster.snapshot() == before
    with pytest.raises(LimitExceeded):  # the allocation's owner's cap
        cluster.adopt([("n2", 3)], into=mine, owner="team")
    cluster.release(mine, owner="team")
    with pytest.raises(ReservationError):
        cluster.adopt([("n2", 1)], into=mine, owner="team")


@pytest.mark.parametrize("kind", [Cluster, reference.Cluster])
def test_the_first_node_short_of_resources_is_named_by_name(kind: Any) -> None:
    """Two adopted pods on two nodes short of CPUs: the error names the first by name, also
    when that node was added again after the other (a divergence the state machine found:
    the engine named the node added first)."""
    cluster = kind(("rack",), clock=lambda: 100.0)
    for name in ("n0", "n1"):
        cluster.add_node(name, gpus=1, topology={"rack": "r"}, resources={"cpu": 1_000})
    cluster.remove_node("n0")
    cluster.add_node("x0", gpus=1, topology={"rack": "r"})  # takes n0's old slot
    cluster.add_node("n0", gpus=1, topology={"rack": "r"}, resources={"cpu": 1_000})
    before = cluster.snapshot()
    with pytest.raises(Conflict, match=r'^node "n0" has \{cpu=1000\} free besides GPUs'):
        cluster.adopt([("n1", 0), ("n0", 0)], resources={"cpu": 2_000})
    assert cluster.snapshot() == before
