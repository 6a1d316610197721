"""Error texts the engine and the reference share (docs/errors.md; issue 30).

The state machine compares every ``Conflict``, ``LimitExceeded`` and ``Unschedulable`` text
word for word. Each text is built in one place per implementation: the core's
``error/texts.rs`` and ``gangplace.reference.texts``, one function of the same name each.
These tests pin that: every path below is driven on both sides on every run of the test
command (the state machine reaches some of them only rarely), the two source files define the
same functions, docs/errors.md lists every one, and no other module builds such a text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import FakeClock

import gangplace
from gangplace import (
    Conflict,
    GangplaceError,
    GangRequest,
    LimitExceeded,
    PodPlacement,
    Unschedulable,
    reference,
)

ROOT = Path(__file__).resolve().parent.parent
CORE_TEXTS = ROOT / "rust/gangplace-core/src/error/texts.rs"
REFERENCE_TEXTS = ROOT / "python/gangplace/reference/texts.py"
DOCS = ROOT / "docs/errors.md"

Scenario = Callable[[Any], object]


def _both(scenario: Scenario, **cluster_args: Any) -> tuple[type, str]:
    """Runs ``scenario`` on an engine and a reference cluster (sequential ids on both) and
    returns the one error type and text both raised."""
    outcomes = []
    makers: tuple[Callable[..., Any], ...] = (gangplace.Cluster, reference.Cluster)
    for make in makers:
        cluster = make(("rack",), clock=FakeClock(), **cluster_args)
        cluster._use_sequential_ids(1)
        with pytest.raises(GangplaceError) as caught:
            scenario(cluster)
        outcomes.append((type(caught.value), str(caught.value)))
    assert outcomes[0] == outcomes[1]
    return outcomes[0]


def _rack(cluster: Any, nodes: int, gpus: int = 1, rack: str = "r0") -> None:
    for index in range(nodes):
        cluster.add_node(f"{rack}-n{index}", gpus=gpus, topology={"rack": rack})


def _issue_reproducer(cluster: Any) -> None:
    """Issue 30's reproducer: the allocation loses another rank between repair and commit."""
    _rack(cluster, 4)
    alloc = cluster.commit(cluster.reserve(GangRequest(pods=2, gpus_per_pod=1)))
    pods = [pod.node for pod in alloc.placement.pods]
    cluster.set_gpu_health(pods[0], 0, False)
    repair = cluster.repair(cluster.plan_repair(alloc))
    cluster.set_gpu_health(pods[1], 0, False)
    cluster.commit_repair(repair)


def test_issue_reproducer_has_one_text() -> None:
    kind, text = _both(_issue_reproducer)
    assert kind is Conflict
    assert re.fullmatch(
        r"allocation gp-\d+ has lost ranks \[0, 1\] now, the repair replaces \[0\]; "
        r"the repair reservation gp-\d+ was rolled back",
        text,
    ), text


def _stale_repair_plan(cluster: Any) -> None:
    _rack(cluster, 4)
    alloc = cluster.commit(cluster.reserve(GangRequest(2, 1)))
    cluster.set_gpu_health(alloc.placement.pods[0].node, 0, False)
    plan = cluster.plan_repair(alloc)
    cluster.set_gpu_health(alloc.placement.pods[1].node, 0, False)
    cluster.repair(plan)


def _repair_victim_changed(cluster: Any) -> None:
    _rack(cluster, 3)
    alloc = cluster.commit(cluster.reserve(GangRequest(2, 1, priority=5)))
    victim = cluster.commit(cluster.reserve(GangRequest(1, 1, preemptible=True)))
    cluster.set_gpu_health(alloc.placement.pods[0].node, 0, False)
    plan = cluster.plan_repair(alloc, preempt=True)
    assert plan is not None and plan.victims
    cluster.release(victim)
    cluster.repair(plan)


def _repair_target_taken(cluster: Any) -> None:
    _rack(cluster, 3)
    alloc = cluster.commit(cluster.reserve(GangRequest(2, 1)))
    cluster.set_gpu_health(alloc.placement.pods[0].node, 0, False)
    plan = cluster.plan_repair(alloc)
    cluster.reserve(GangRequest(1, 1))
    cluster.repair(plan)


def _node_gone(cluster: Any) -> None:
    _rack(cluster, 2)
    placement = cluster.place_gang(GangRequest(2, 1))
    cluster.remove_node(placement.pods[1].node)
    cluster.reserve(placement)


def _node_cordoned(cluster: Any) -> None:
    _rack(cluster, 2)
    placement = cluster.place_gang(GangRequest(2, 1))
    cluster.cordon(placement.pods[0].node)
    cluster.reserve(placement)


def _gpu_unhealthy(cluster: Any) -> None:
    _rack(cluster, 2, gpus=2)
    placement = cluster.place_gang(GangRequest(1, 2))
    cluster.set_gpu_health(placement.pods[0].node, 1, False)
    cluster.reserve(placement)


def _owner_cap(cluster: Any) -> None:
    _rack(cluster, 2, gpus=4)
    cluster.reserve(GangRequest(1, 4), owner="team-a")
    cluster.reserve(GangRequest(1, 2), owner="team-a")


def _adopt_short(cluster: Any) -> None:
    _rack(cluster, 1, gpus=4)
    cluster.reserve(GangRequest(1, 2))
    cluster.adopt([("r0-n0", 3)])


def _adopt_resources_short(cluster: Any) -> None:
    cluster.add_node("n", gpus=4, topology={"rack": "r0"}, resources={"cpu": 8_000, "m": 0})
    cluster.adopt([("n", 1)], resources={"cpu": 6_000})
    cluster.adopt([("n", 1), ("n", 1)], resources={"cpu": 2_000, "m": 1})


def _adopt_busy(cluster: Any) -> None:
    _rack(cluster, 1, gpus=4)
    cluster.set_gpu_health("r0-n0", 2, False)
    cluster.adopt([PodPlacement("r0-n0", (1, 2))])


def _adopt_twice(cluster: Any) -> None:
    _rack(cluster, 1, gpus=4)
    cluster.adopt([PodPlacement("r0-n0", (0, 1)), PodPlacement("r0-n0", (1, 3))])


def _preemption_victim_changed(cluster: Any) -> None:
    _rack(cluster, 2)
    victims = [cluster.commit(cluster.reserve(GangRequest(1, 1))) for _ in range(2)]
    plan = cluster.plan_preemption(GangRequest(2, 1, priority=3))
    assert plan is not None
    cluster.set_priority(victims[0], 7)
    cluster.preempt(plan)


def _no_room_for_spares(cluster: Any) -> None:
    _rack(cluster, 2)
    alloc = cluster.commit(cluster.reserve(GangRequest(2, 1, required_level="rack")))
    cluster.reserve_spares(alloc, 1)


SCENARIOS: dict[str, tuple[Scenario, type, str, dict[str, Any]]] = {
    "repair_plan_stale": (
        _stale_repair_plan,
        Conflict,
        r"the plan is stale: allocation gp-\d+ has lost ranks \[0, 1\] now, "
        r"the plan repairs \[0\]",
        {},
    ),
    "repair_victim_changed": (
        _repair_victim_changed,
        Conflict,
        r"the plan is stale: victim gp-\d+ is no longer a live preemptible allocation "
        r"of a lower priority",
        {},
    ),
    "placement_gpu_busy (held)": (
        _repair_target_taken,
        Conflict,
        r'the placement is stale: GPU 0 of node "r0-n2" is held by another reservation '
        r"or allocation",
        {},
    ),
    "placement_gpu_busy (unhealthy)": (
        _gpu_unhealthy,
        Conflict,
        r'the placement is stale: GPU 1 of node "r0-n\d" is unhealthy',
        {},
    ),
    "node_gone": (_node_gone, Conflict, r'the placement is stale: node "r0-n1" is gone', {}),
    "node_cordoned": (
        _node_cordoned,
        Conflict,
        r'the placement is stale: node "r0-n0" is cordoned',
        {},
    ),
    "owner_cap": (
        _owner_cap,
        LimitExceeded,
        r'"team-a" would hold 6 GPUs; the cap per owner is 5 \(held now: 4\)',
        {"max_held_gpus_per_owner": 5},
    ),
    "adopt_short": (
        _adopt_short,
        Conflict,
        r'node "r0-n0" has 2 free healthy GPUs for a pod of 3',
        {},
    ),
    "adopt_resources_short": (
        _adopt_resources_short,
        Conflict,
        r'node "n" has \{cpu=2000\} free besides GPUs; the pods adopted there ask '
        r"\{cpu=4000, m=2\}",
        {},
    ),
    "adopt_gpu_busy": (_adopt_busy, Conflict, r'GPU 2 of node "r0-n0" is unhealthy', {}),
    "adopt_gpu_twice": (
        _adopt_twice,
        Conflict,
        r'adopt names GPU 1 of node "r0-n0" for two pods',
        {},
    ),
    "victim_changed": (
        _preemption_victim_changed,
        Conflict,
        r"the plan is stale: allocation gp-\d+ ended or its priority changed",
        {},
    ),
    "no_room_for_spares": (
        _no_room_for_spares,
        Unschedulable,
        r"no room for 1 more spare\(s\) of 1 GPUs in the allocation's domain",
        {},
    ),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_both_implementations_word_it_alike(name: str) -> None:
    scenario, kind, pattern, cluster_args = SCENARIOS[name]
    got_kind, text = _both(scenario, **cluster_args)
    assert got_kind is kind
    assert re.fullmatch(pattern, text), text


def test_quoted_names_escape_like_rust() -> None:
    """Names with quotes, backslashes and control characters: the same text on both sides."""
    name = 'odd"name\\with\ttab'

    def scenario(cluster: Any) -> None:
        cluster.add_node(name, gpus=1, topology={"rack": "r0"})
        placement = cluster.place_gang(GangRequest(1, 1))
        cluster.cordon(name)
        cluster.reserve(placement)

    _, text = _both(scenario)
    assert text == 'the placement is stale: node "odd\\"name\\\\with\\ttab" is cordoned'


def _core_functions() -> list[str]:
    return re.findall(r"^pub\(crate\) fn (\w+)\(", CORE_TEXTS.read_text(), re.M)


def test_one_function_per_text_on_both_sides_and_in_the_docs() -> None:
    core = _core_functions()
    ours = re.findall(r"^def (\w+)\(", REFERENCE_TEXTS.read_text(), re.M)
    assert core, "no text functions found in error/texts.rs"
    helpers = {"quoted"}  # and private ones (a leading underscore): no text of their own
    assert sorted(core) == sorted(n for n in ours if n not in helpers and not n.startswith("_"))
    texts = DOCS.read_text().split("## The texts of the errors", 1)[1]
    documented = set(re.findall(r"^\| `(\w+)` \|", texts, re.M))
    assert documented == set(core)


def test_no_other_module_builds_a_compared_text() -> None:
    """Outside the two text modules, no ``Conflict``/``LimitExceeded`` text is written."""
    core = ROOT / "rust/gangplace-core/src"
    offenders = [
        str(path.relative_to(ROOT))
        for path in core.rglob("*.rs")
        if path.parent.name != "error"
        and re.search(r"CoreError::(Conflict|LimitExceeded)\(\s*(format!|\")", path.read_text())
    ]
    offenders += [
        str(path.relative_to(ROOT))
        for path in (ROOT / "python/gangplace/reference").glob("*.py")
        if path.name != "texts.py"
        and re.search(r"raise (Conflict|LimitExceeded)\(", path.read_text())
    ]
    assert offenders == []
