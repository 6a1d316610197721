"""Contract defects found by trying the package as a new user would (issue 10, item 7), the
reprs built from Python's own ``repr``, and the limits the extension exports."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import gangplace
from gangplace import LIMITS, Cluster, GangRequest, PodPlacement, Unschedulable, reference

ERRORS_PAGE = Path(__file__).resolve().parents[1] / "docs" / "errors.md"
CLUSTERS: list[Any] = [Cluster, reference.Cluster]


@pytest.mark.parametrize("value", [None, 8.0, "8", True])
def test_gpus_per_pod_of_the_wrong_type_is_a_type_error(value: object) -> None:
    with pytest.raises(TypeError, match="gpus_per_pod must be an int"):
        GangRequest(4, gpus_per_pod=value)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="gpus_per_pod must be an int"):
        GangRequest(4, value)  # type: ignore[arg-type]
    assert GangRequest(4).gpus_per_pod == 1  # the default stays 1


@pytest.mark.parametrize("make", CLUSTERS)
def test_set_gpu_health_names_the_holders_in_both_directions(make: Any) -> None:
    cluster = make(("rack",))
    cluster.add_node("a", gpus=8, topology={"rack": "r"})
    held = cluster.reserve(GangRequest(1, 4))  # GPUs 0-3
    assert cluster.set_gpu_health("a", 2, True) == [held.id]
    assert cluster.set_gpu_health("a", 6, True) == []  # GPU 6 is free
    allocation = cluster.commit(held)
    assert cluster.set_gpu_health("a", 3, False) == [allocation.id]
    assert cluster.set_gpu_health("a", 3, True) == [allocation.id]


@pytest.mark.parametrize("make", CLUSTERS)
def test_remove_node_names_revoked_reservations_and_detached_allocations(make: Any) -> None:
    cluster = make(("rack",))
    for name in ("a", "b"):
        cluster.add_node(name, gpus=8, topology={"rack": "r"})
    allocations = [cluster.commit(cluster.reserve(GangRequest(1, 4))) for _ in range(2)]
    reservation = cluster.reserve(GangRequest(1, 8))
    assert {pod.node for pod in reservation.placement.pods} == {"b"}
    assert {allocation.placement.nodes for allocation in allocations} == {("a",)}
    assert cluster.remove_node("a") == sorted(allocation.id for allocation in allocations)
    assert cluster.remove_node("b") == [reservation.id]
    assert cluster.reservations() == [] and len(cluster.allocations()) == 2


def test_reprs_are_pythons_own() -> None:
    tricky = "tab\there 'quote' \"double\" é \x00"
    request = GangRequest(4, 8, required_level="rack", selector={"k": tricky}, name=tricky)
    assert repr(request) == (
        f"GangRequest(4, 8, required_level='rack', selector={ {'k': tricky}!r}, name={tricky!r})"
    )
    assert repr(GangRequest(2, min_pods=1)) == "GangRequest(2, 1, min_pods=1)"
    pod = PodPlacement(tricky, [3, 1])
    assert repr(pod) == f"PodPlacement({tricky!r}, (1, 3))"
    cluster = Cluster(("rack",), clock=lambda: 10.0)
    cluster.add_node("n'0", gpus=2, topology={"rack": "r\n1"})
    reservation = cluster.reserve(GangRequest(1, 1), ttl=0.5, owner="o\t")
    assert repr(reservation) == (
        f"Reservation(id={reservation.id!r}, expires_at=10.5, owner='o\\t', "
        "placement=Placement(level='node', domain=('r\\n1', \"n'0\"), "
        'pods=[("n\'0", (0,))]))'
    )
    assert repr(cluster) == "Cluster(levels=('rack',), policy='best-fit', nodes=1)"
    level = cluster.explain(GangRequest(1, 1)).levels[0]
    assert repr(level) == (
        "LevelExplanation(level='node', domain=('r\\n1', \"n'0\"), capacity=1, needed=1, "
        "gpus_to_free=0, preemption_victims=None, preemption_max_priority=None)"
    )


def limits_table() -> dict[str, str]:
    """The limits table of docs/errors.md: first column -> second column."""
    text = ERRORS_PAGE.read_text()
    section = text.split("## Limits", 1)[1].split("## ", 1)[0]
    rows = [line.split("|")[1:3] for line in section.splitlines() if line.startswith("| ")]
    return {what.strip(): limit.strip() for what, limit in rows[1:]}


def number(text: str) -> float:
    return float(re.sub(r"[ ,]", "", text).replace("2^28=", ""))


def test_the_docs_limits_table_states_the_exported_limits() -> None:
    table = limits_table()
    assert table["GPUs per node"] == f"1..{LIMITS['max_gpus_per_node']} (GPU sets are 64-bit masks)"
    assert number(table["nodes per cluster"]) == LIMITS["max_nodes"]
    assert number(table["levels (besides `node` and `cluster`)"]) == LIMITS["max_levels"]
    assert number(table["slice layers per request"]) == LIMITS["max_slice_layers"]
    assert number(table["groups per multi-role gang"]) == LIMITS["max_groups"]
    assert table["names, label keys and values, owners"].startswith(
        f"{LIMITS['max_name_bytes']} bytes"
    )
    gang = table["`pods * gpus_per_pod`"]
    assert f"{LIMITS['max_gang_gpus']:,}" in gang and "2^28" in gang
    assert LIMITS["max_gang_gpus"] == 2**28
    assert table["`ttl`"] == "(0, 7 days]" and LIMITS["max_ttl_seconds"] == 7 * 24 * 3600
    assert "default 30 s" in table["`ttl` default"]
    assert LIMITS["default_ttl_seconds"] == 30.0
    assert "60 s for `repair`" in table["`ttl` default"]
    assert LIMITS["default_repair_ttl_seconds"] == 60.0
    assert f"{LIMITS['remembered_ended_holds']:,}" in table["ended holds remembered"]


def test_the_reference_uses_the_exported_limits() -> None:
    from gangplace.reference import values

    assert LIMITS["max_gpus_per_node"] == values.MAX_GPUS_PER_NODE
    assert LIMITS["max_nodes"] == values.MAX_NODES
    assert LIMITS["default_ttl_seconds"] == values.DEFAULT_TTL_SECONDS
    assert LIMITS["default_repair_ttl_seconds"] == values.DEFAULT_REPAIR_TTL_SECONDS


def test_synth_and_numpy_load_lazily() -> None:
    import subprocess
    import sys

    probe = (
        "import sys, gangplace\n"
        "print('numpy' in sys.modules, 'gangplace.synth' in sys.modules)\n"
        "gangplace.synth.build\n"
        "print('gangplace.synth' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "True"]
    assert "synth" in gangplace.__all__


def test_in_asks_whether_a_node_exists() -> None:
    from gangplace import Cluster, reference

    for kind in (Cluster, reference.Cluster):
        cluster = kind(("rack",))
        cluster.add_node("n0", gpus=8, topology={"rack": "r0"})
        assert "n0" in cluster and "n1" not in cluster and 3 not in cluster
        cluster.remove_node("n0")
        assert "n0" not in cluster


def test_messages_read_as_python_and_english() -> None:
    from gangplace import Cluster, GangRequest, InvalidRequest

    pattern = r"gpus_per_pod must be between 1 and 64 \(0 with resources_per_pod\), got 65"
    with pytest.raises(InvalidRequest, match=pattern):
        GangRequest(1, 65)
    with pytest.raises(InvalidRequest, match=r"min_pods must be between 1 and pods \(2\), got 3"):
        GangRequest(2, 1, min_pods=3)
    cluster = Cluster(())
    cluster.add_node("n0", gpus=4, topology={})
    assert cluster.explain(GangRequest(1, 8)).summary.startswith("gang of 1 pod x 8 GPUs")
    assert cluster.explain(GangRequest(1, 1)).summary.startswith("gang of 1 pod x 1 GPU fits")


def test_explain_names_the_domain_cheapest_to_free() -> None:
    """Rack a holds the most pods now (3 of 4) but needs 8 GPUs freed; rack b none now but
    only 4 (one small job per node)."""
    from gangplace import Cluster, GangRequest, PodPlacement

    cluster = Cluster(("rack",))
    for rack in ("a", "b"):
        for node in range(4):
            cluster.add_node(f"{rack}{node}", gpus=8, topology={"rack": rack})
    cluster.adopt([("a0", 8)])
    for node in range(4):
        cluster.adopt([PodPlacement(f"b{node}", [7])])
    explanation = cluster.explain(GangRequest(4, 8, required_level="rack"))
    by_level = {level.level: level for level in explanation.levels}
    assert (by_level["rack"].domain, by_level["rack"].capacity) == (("a",), 3)
    assert by_level["rack"].gpus_to_free == 8
    assert (by_level["rack"].cheapest_domain, by_level["rack"].cheapest_gpus_to_free) == (
        ("b",),
        4,
    )
    assert "cheapest: b, freeing 4 held GPUs" in str(explanation)
    assert explanation.summary.endswith("; freeing 4 held GPUs in rack b would fit it")
    with pytest.raises(Unschedulable) as raised:
        cluster.reserve(GangRequest(4, 8, required_level="rack"))
    assert (
        explanation.summary == raised.value.reason + "; freeing 4 held GPUs in rack b would fit it"
    )
    fits = cluster.explain(GangRequest(1, 8)).levels[0]
    assert fits.cheapest_gpus_to_free == 0
