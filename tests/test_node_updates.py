"""docs/transactions.md "Node updates" (N1-N3): labels any time, structure only while a node holds
nothing."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import FakeClock

import gangplace
from gangplace import Conflict, GangRequest, InvalidRequest, NodeTopology, UnknownNode, reference

LEVELS = ("spine", "rack")


def build(kind: Any = gangplace.Cluster) -> Any:
    cluster = kind(LEVELS, clock=FakeClock())
    for rack in ("r0", "r1"):
        for index in range(2):
            cluster.add_node(
                f"{rack}-n{index}",
                gpus=8,
                topology={"spine": "s0", "rack": rack},
                labels={"pool": "a"},
            )
    return cluster


@pytest.mark.parametrize("kind", [gangplace.Cluster, reference.Cluster])
def test_labels_change_while_holds_sit_on_the_node_and_selectors_follow(kind: Any) -> None:
    cluster = build(kind)
    held = cluster.reserve(GangRequest(1, 2, selector={"pool": "a"}))
    assert cluster.place_gang(GangRequest(1, 8, selector={"pool": "b"})) is None
    cluster.update_node("r1-n1", labels={"pool": "b"})
    placed = cluster.place_gang(GangRequest(1, 8, selector={"pool": "b"}))
    assert placed is not None and placed.pods[0].node == "r1-n1"
    assert dict(cluster.node("r1-n1").labels) == {"pool": "b"}
    assert cluster.reservations()[0].id == held.id  # the hold is untouched


@pytest.mark.parametrize("kind", [gangplace.Cluster, reference.Cluster])
def test_structure_changes_while_the_node_holds_nothing(kind: Any) -> None:
    cluster = build(kind)
    cluster.set_gpu_health("r0-n0", 1, False)
    cluster.set_gpu_health("r0-n0", 6, False)
    cluster.cordon("r0-n0")
    cluster.update_node("r0-n0", topology={"spine": "s1", "rack": "r9"}, gpus=4)
    node = cluster.node("r0-n0")
    assert (node.gpus, dict(node.topology)) == (4, {"spine": "s1", "rack": "r9"})
    assert node.unhealthy == (1,) and node.cordoned  # GPU 6 is past the new count
    cluster.uncordon("r0-n0")
    placed = cluster.place_gang(GangRequest(1, 3, required_level="rack"))
    assert placed is not None and placed.domain[:2] == ("s1", "r9")  # the tightest fit
    groups = NodeTopology(("numa",), ((0,), (0,), (1,), (1,)))
    cluster.update_node("r0-n0", gpu_topology=groups)
    if kind is gangplace.Cluster:  # the reference's NodeInfo does not show groups
        assert cluster.node("r0-n0").gpu_topology == groups


def engine_and_reference_agree(call: str, **kwargs: Any) -> None:
    outcomes = []
    for kind in (gangplace.Cluster, reference.Cluster):
        cluster = build(kind)
        cluster.commit(cluster.reserve(GangRequest(1, 8)))  # on r0-n0 (best-fit, path order)
        before = cluster.snapshot()
        try:
            cluster.update_node(call, **kwargs)
            outcomes.append("ok")
        except gangplace.GangplaceError as error:
            outcomes.append(type(error).__name__)
            assert cluster.snapshot() == before  # nothing changed
    assert outcomes[0] == outcomes[1], outcomes


BAD = [
    ("nowhere", {"labels": {}}, UnknownNode),
    ("r0-n0", {"gpus": 4}, Conflict),
    ("r0-n0", {"topology": {"spine": "s0", "rack": "r1"}}, Conflict),
    ("r0-n1", {"gpus": 0}, InvalidRequest),
    ("r0-n1", {"gpus": 65}, InvalidRequest),
    ("r0-n1", {"topology": {"spine": "s0"}}, InvalidRequest),
    ("r0-n1", {"topology": {"spine": "s0", "rack": "r1", "row": "x"}}, InvalidRequest),
    ("r0-n1", {"topology": {"spine": "s0", "rack": ""}}, InvalidRequest),
    ("r0-n1", {"labels": {"": "x"}}, InvalidRequest),
    ("r0-n1", {"labels": {"k": "v" * 300}}, InvalidRequest),
    ("r0-n1", {"gpu_topology": NodeTopology(("numa",), ((0,), (1,)))}, InvalidRequest),
    ("r0-n0", {"gpu_topology": NodeTopology(("numa",), ((0,),) * 8)}, Conflict),
]


@pytest.mark.parametrize(("name", "kwargs", "error"), BAD)
def test_bad_updates_raise_and_change_nothing(name: str, kwargs: Any, error: type) -> None:
    cluster = build()
    cluster.commit(cluster.reserve(GangRequest(1, 8)))
    before = cluster.snapshot()
    with pytest.raises(error):
        cluster.update_node(name, **kwargs)
    assert cluster.snapshot() == before
    cluster.check_invariants()
    engine_and_reference_agree(name, **kwargs)


def test_an_unchanged_structure_is_no_conflict() -> None:
    cluster = build()
    cluster.commit(cluster.reserve(GangRequest(1, 8)))
    cluster.update_node("r0-n0", topology={"rack": "r0", "spine": "s0"}, gpus=8, labels={})
    assert dict(cluster.node("r0-n0").labels) == {}


def test_a_node_readded_unchanged_keeps_the_snapshot() -> None:
    """A structural update and its inverse leave the same bytes (ids reused, domains too)."""
    cluster = build()
    before = cluster.snapshot()
    cluster.update_node("r0-n1", topology={"spine": "s7", "rack": "r7"})
    cluster.update_node("r0-n1", topology={"spine": "s0", "rack": "r0"})
    assert cluster.snapshot() == before
    cluster.check_invariants()
