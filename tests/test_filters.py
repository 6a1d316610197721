"""Rule 1's filter (docs/placement.md): taints, tolerations and required node affinity.

The engine and ``gangplace.reference`` agree on random labelled, tainted clusters and random
requests with selectors, affinity terms and tolerations; which nodes admit a request is
checked by brute force against a plain restatement of Kubernetes' semantics; bad values are
typed errors that change nothing; snapshots, pickles and multi-role units keep the filters.
"""

from __future__ import annotations

import pickle
from typing import Any

import hypothesis.strategies as st
import pytest
from helpers import NodeSpec, as_tuple, reserve_both
from hypothesis import given, note

import gangplace
from gangplace import (
    Cluster,
    GangRequest,
    InvalidRequest,
    MultiGangRequest,
    PodGroup,
    UnknownNode,
    reference,
)

LEVELS = ("rack",)
LABELS = {"zone": ("a", "b", "c"), "gen": ("8", "9", "10")}
TAINTS = (
    ("dedicated", "train", "NoSchedule"),
    ("dedicated", "infer", "NoExecute"),
    ("maint", "", "NoSchedule"),
    ("soft", "x", "PreferNoSchedule"),
)
TOLERATIONS = (
    ("dedicated", "Equal", "train", None),
    ("dedicated", "Exists", "", "NoSchedule"),
    ("maint", "Exists", "", None),
    ("", "Exists", "", None),  # tolerates everything
    ("dedicated", "Equal", "infer", "NoExecute"),
)
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


@st.composite
def tainted_clusters(draw: st.DrawFn) -> list[tuple[NodeSpec, tuple[tuple[str, str, str], ...]]]:
    nodes = []
    for index in range(draw(st.integers(1, 16))):
        labels = {k: draw(st.sampled_from(v)) for k, v in LABELS.items() if draw(st.booleans())}
        taints = tuple(draw(st.sets(st.sampled_from(TAINTS), max_size=2)))
        gpus = draw(st.sampled_from((4, 8)))
        rack = draw(st.sampled_from(("r0", "r1", "r2")))
        nodes.append((NodeSpec(f"n{index:02d}", gpus, (rack,), labels, ()), taints))
    return nodes


@st.composite
def requirements(draw: st.DrawFn) -> tuple[str, str, tuple[str, ...]]:
    key = draw(st.sampled_from(tuple(LABELS)))
    operator = draw(st.sampled_from(OPERATORS))
    if operator in ("Exists", "DoesNotExist"):
        return key, operator, ()
    if operator in ("Gt", "Lt"):
        return "gen", operator, (draw(st.sampled_from(("7", "8", "9", "10"))),)
    values = draw(st.sets(st.sampled_from(LABELS[key]), min_size=1, max_size=2))
    return key, operator, tuple(sorted(values))


@st.composite
def filtered_requests(draw: st.DrawFn) -> GangRequest:
    terms = draw(st.lists(st.lists(requirements(), min_size=1, max_size=2), max_size=2))
    tolerations = draw(st.lists(st.sampled_from(TOLERATIONS), max_size=2))
    selector = {
        k: draw(st.sampled_from(v)) for k, v in LABELS.items() if draw(st.integers(0, 3)) == 0
    }
    pods = draw(st.integers(1, 6))
    return GangRequest(
        pods,
        draw(st.sampled_from((1, 2, 4))),
        min_pods=draw(st.none() | st.integers(1, pods)),
        required_level=draw(st.sampled_from((None, "node", "rack"))),
        selector=selector,
        affinity=terms,
        tolerations=tolerations,
    )


def _add(cluster: Any, node: NodeSpec, taints: tuple[tuple[str, str, str], ...]) -> None:
    cluster.add_node(
        node.name, gpus=node.gpus, topology={"rack": node.path[0]}, labels=node.labels,
        taints=taints,
    )  # fmt: skip


def admits(request: GangRequest, labels: dict[str, str], taints: Any) -> bool:
    """Kubernetes' semantics, restated once more for the brute force."""

    def meets(key: str, operator: str, values: tuple[str, ...]) -> bool:
        label = labels.get(key)
        if operator == "In":
            return label in values
        if operator == "NotIn":
            return label not in values
        if operator == "Exists":
            return label is not None
        if operator == "DoesNotExist":
            return label is None
        if label is None or not label.lstrip("-").isdigit():
            return False
        return int(label) > int(values[0]) if operator == "Gt" else int(label) < int(values[0])

    def tolerated(taint: tuple[str, str, str]) -> bool:
        for key, operator, value, effect in request.tolerations:
            if effect is not None and effect != taint[2]:
                continue
            if (not key and operator == "Exists") or (
                key == taint[0] and (operator == "Exists" or value == taint[1])
            ):
                return True
        return False

    return (
        all(labels.get(k) == v for k, v in request.selector.items())
        and (not request.affinity or any(all(meets(*r) for r in t) for t in request.affinity))
        and all(t[2] == "PreferNoSchedule" or tolerated(t) for t in taints)
    )


@given(data=st.data(), nodes=tainted_clusters())
def test_engine_agrees_with_reference_on_filters(data: st.DataObject, nodes: Any) -> None:
    engine, oracle = Cluster(LEVELS, clock=lambda: 0.0), reference.Cluster(LEVELS)
    for node, taints in data.draw(st.permutations(nodes), label="engine order"):
        _add(engine, node, taints)
    for node, taints in nodes:
        _add(oracle, node, taints)
    current = {node.name: (node.labels, taints) for node, taints in nodes}
    for _ in range(5):
        request = data.draw(filtered_requests())
        got, expected = engine.place_gang(request), oracle.place_gang(request)
        note(f"{request!r}: engine {got!r}, reference {expected!r}")
        assert as_tuple(got) == as_tuple(expected)
        if got is not None:
            assert all(admits(request, *current[pod.node]) for pod in got.pods)
        reserve_both(engine, oracle, request)
        if data.draw(st.booleans(), label="retaint a node"):
            node, _ = data.draw(st.sampled_from(nodes))
            taints = tuple(data.draw(st.sets(st.sampled_from(TAINTS), max_size=2)))
            engine.update_node(node.name, taints=taints)  # any time, like labels
            oracle.update_node(node.name, taints=taints)
            current[node.name] = (node.labels, taints)
            assert engine.node(node.name).taints == oracle.node(node.name).taints
    for node, _ in nodes:
        assert engine.node(node.name).free == oracle.node(node.name).free
    engine.check_invariants()
    restored = Cluster.restore(engine.snapshot(), clock=lambda: 0.0)
    assert restored.snapshot() == engine.snapshot()
    assert [h.request for h in restored.allocations()] == [h.request for h in engine.allocations()]


@given(nodes=tainted_clusters(), request=filtered_requests())
def test_the_nodes_a_request_may_use_are_those_kubernetes_admits(
    nodes: Any, request: GangRequest
) -> None:
    """Brute force: a one-pod gang pinned to each node fits exactly where rule 1 admits it."""
    cluster = Cluster(LEVELS)
    for node, taints in nodes:
        _add(cluster, node, taints)
        cluster.update_node(node.name, labels={**node.labels, "host": node.name})
    for node, taints in nodes:
        pinned = GangRequest(
            1,
            1,
            selector={**request.selector, "host": node.name},
            affinity=request.affinity,
            tolerations=request.tolerations,
        )
        fits = cluster.place_gang(pinned) is not None
        assert fits == admits(request, node.labels, taints), (node, taints, request)


def test_a_taint_keeps_plain_requests_out_and_a_toleration_lets_them_in() -> None:
    cluster = Cluster(LEVELS, clock=lambda: 0.0)
    cluster.add_node(
        "a", gpus=8, topology={"rack": "r0"}, taints=[("dedicated", "x", "NoSchedule")]
    )
    cluster.add_node("b", gpus=8, topology={"rack": "r1"})
    plain = cluster.place_gang(GangRequest(1, 8, required_level="node"))
    assert plain is not None and plain.nodes == ("b",)
    assert cluster.place_gang(GangRequest(2, 8)) is None
    assert cluster.explain(GangRequest(2, 8)).excluded["untolerated_taints"] == 1
    tolerant = GangRequest(2, 8, tolerations=[("dedicated", "Equal", "x", "NoSchedule")])
    placed = cluster.place_gang(tolerant)
    assert placed is not None and placed.nodes == ("a", "b")
    held = cluster.commit(
        cluster.reserve(GangRequest(1, 4, tolerations=[("", "Exists", "", None)], selector={}))
    )
    cluster.update_node("a", taints=[])  # holds stay; the node joins every view
    assert cluster.node("a").taints == () and held.placement.nodes == ("a",)
    assert cluster.place_gang(GangRequest(1, 4, required_level="node")).nodes == ("a",)  # type: ignore[union-attr]
    cluster.check_invariants()


def test_a_multi_role_unit_that_tolerates_a_taint_is_ordered_over_those_nodes() -> None:
    """docs/roles.md, rule 2: a dedicated, tainted rack is a candidate for a unit whose
    groups tolerate its taint, though the cluster's own view leaves it out."""
    for cluster in (Cluster(LEVELS), reference.Cluster(LEVELS)):
        for index in range(4):
            taints = [("dedicated", "llm", "NoSchedule")] if index < 2 else []
            rack = "r0" if index < 2 else "r1"
            cluster.add_node(f"n{index}", gpus=8, topology={"rack": rack}, taints=taints)
        cluster.reserve(GangRequest(2, 4, required_level="rack"))  # r1 half full
        tolerate = [("dedicated", "Equal", "llm", None)]
        unit = MultiGangRequest(
            (
                PodGroup("leader", 1, 8, tolerations=tolerate),
                PodGroup("workers", 1, 8, tolerations=tolerate),
            ),
            required_level="rack",
        )
        placed = cluster.place_gang(unit)
        assert placed is not None and placed.domain == ("r0",)


BAD_REQUESTS: list[tuple[str, dict[str, Any], type[Exception]]] = [
    ("unknown operator", {"affinity": [[("zone", "Near", ["a"])]]}, InvalidRequest),
    ("In without values", {"affinity": [[("zone", "In", [])]]}, InvalidRequest),
    ("Exists with values", {"affinity": [[("zone", "Exists", ["a"])]]}, InvalidRequest),
    ("Gt not an integer", {"affinity": [[("gen", "Gt", ["x"])]]}, InvalidRequest),
    ("an empty term", {"affinity": [[]]}, InvalidRequest),
    ("a term as a str", {"affinity": "zone"}, TypeError),
    ("a requirement of 4 items", {"affinity": [[("a", "In", ["b"], "c")]]}, TypeError),
    ("Equal without a key", {"tolerations": [("", "Equal", "x", None)]}, InvalidRequest),
    ("Exists with a value", {"tolerations": [("k", "Exists", "v", None)]}, InvalidRequest),
    ("an unknown effect", {"tolerations": [("k", "Equal", "v", "Never")]}, InvalidRequest),
    ("an unknown operator", {"tolerations": [("k", "Is", "v", None)]}, InvalidRequest),
    ("a toleration of 3 items", {"tolerations": [("k", "Equal", "v")]}, TypeError),
    ("a key of 254 bytes", {"affinity": [[("k" * 254, "Exists")]]}, InvalidRequest),
]


@pytest.mark.parametrize(
    ("label", "fields", "error"), BAD_REQUESTS, ids=[b[0] for b in BAD_REQUESTS]
)
def test_bad_filters_are_typed_errors(label: str, fields: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        GangRequest(1, 1, **fields)
    with pytest.raises(error):
        PodGroup("g", 1, 1, **fields)


BAD_TAINTS: list[tuple[str, Any, type[Exception]]] = [
    ("an unknown effect", [("k", "v", "Sometimes")], InvalidRequest),
    ("an empty key", [("", "v", "NoSchedule")], InvalidRequest),
    ("too many", [(f"k{i}", "", "NoSchedule") for i in range(33)], InvalidRequest),
    ("a str", "dedicated", TypeError),
    ("two items", [("k", "NoSchedule")], TypeError),
    ("a number as the value", [("k", 1, "NoSchedule")], TypeError),
]


@pytest.mark.parametrize(("label", "taints", "error"), BAD_TAINTS, ids=[b[0] for b in BAD_TAINTS])
@pytest.mark.parametrize("kind", [Cluster, reference.Cluster])
def test_bad_taints_change_nothing(label: str, taints: Any, error: type, kind: Any) -> None:
    cluster = kind(LEVELS, clock=lambda: 0.0)
    cluster.add_node("a", gpus=8, topology={"rack": "r0"})
    before = cluster.snapshot()
    with pytest.raises(error):
        cluster.add_node("b", gpus=8, topology={"rack": "r0"}, taints=taints)
    with pytest.raises(error):
        cluster.update_node("a", taints=taints)
    with pytest.raises(UnknownNode):
        cluster.update_node("z", taints=[])
    assert cluster.snapshot() == before


def test_requests_and_groups_keep_their_filters_through_pickle_and_repr() -> None:
    request = GangRequest(
        2,
        8,
        affinity=[[("zone", "In", ["b", "a", "a"])], [("gen", "Gt", ["8"]), ("zone", "Exists")]],
        tolerations=[("maint", "Exists", "", None), ("dedicated", "Equal", "x", "NoSchedule")],
    )
    assert request.affinity == (
        (("gen", "Gt", ("8",)), ("zone", "Exists", ())),
        (("zone", "In", ("a", "b")),),
    )
    assert request.tolerations == (
        ("dedicated", "Equal", "x", "NoSchedule"),
        ("maint", "Exists", "", None),
    )
    assert pickle.loads(pickle.dumps(request)) == request
    assert eval(repr(request), vars(gangplace)) == request
    group = PodGroup("g", 1, 1, tolerations=[("", "Exists", "", None)])
    assert pickle.loads(pickle.dumps(group)) == group and group.tolerations


@pytest.mark.parametrize("kind", ["engine", "reference"])
def test_the_scheduler_keeps_a_jobs_filter_and_admits_by_taints(kind: str) -> None:
    """docs/scheduler.md S2: taints are structure; a job no node admits is refused at submit,
    a job tolerating the dedicated pool starts there, and its copies keep the filter."""
    from gangplace.reference.scheduler import ReferenceScheduler
    from gangplace.scheduler import Scheduler

    cluster = Cluster(LEVELS, clock=lambda: 0.0)  # the reference Scheduler drives one too
    for index in range(3):
        taints = [("dedicated", "llm", "NoSchedule")] if index < 2 else []
        rack = "r0" if index < 2 else "r1"
        cluster.add_node(f"n{index}", gpus=8, topology={"rack": rack}, taints=taints)
    scheduler: Any = (
        Scheduler(cluster, clock=lambda: 0.0) if kind == "engine" else ReferenceScheduler(cluster)
    )
    at: dict[str, Any] = {} if kind == "engine" else {"now": 0.0}
    with pytest.raises(gangplace.Unschedulable):
        scheduler.submit("plain", GangRequest(2, 8), walltime=100, **at)
    tolerate = [("dedicated", "Equal", "llm", "NoSchedule")]
    llm = GangRequest(2, 8, tolerations=tolerate, min_pods=1)
    scheduler.submit("llm", llm, walltime=100, **at)
    scheduler.submit("small", GangRequest(1, 8), walltime=100, **at)
    started = {s.job_id: s.allocation for s in scheduler.cycle(0.0).started}
    assert started["llm"].placement.nodes == ("n0", "n1")
    assert started["llm"].request.tolerations == tuple(tolerate)
    assert started["small"].placement.nodes == ("n2",)
