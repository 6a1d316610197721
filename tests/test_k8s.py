"""Kubernetes nodes into clusters (dicts and real client objects), and binding plans."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gangplace import GangRequest
from gangplace.k8s import binding_patches, binding_plan, cluster_from_nodes

FIXTURE = Path(__file__).parent / "fixtures" / "k8s-nodes.json"
LEVELS = {
    "zone": "topology.kubernetes.io/zone",
    "spine": "network.topology.nvidia.com/spine",
    "rack": "example.com/rack",
}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def node_list() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text())
    return data


def test_node_list_json() -> None:
    cluster, warnings = cluster_from_nodes(node_list(), levels=LEVELS, tolerations=[GPU_TOLERATION])
    assert cluster.levels == ("zone", "spine", "rack")
    assert len(cluster) == 16  # the CPU-only node is left out silently
    assert warnings == [
        "node unlabelled-gpu-1 left out: no label topology.kubernetes.io/zone, "
        "network.topology.nvidia.com/spine, example.com/rack"
    ]
    first = cluster.node("1a-spine-1-r1-n1")
    assert first.topology == {"zone": "us-east-1a", "spine": "1a-spine-1", "rack": "1a-spine-1-r1"}
    assert not first.cordoned  # its nvidia.com/gpu NoSchedule taint is tolerated
    assert cluster.node("1a-spine-1-r1-n2").cordoned  # NoExecute maintenance taint
    assert cluster.node("1a-spine-1-r2-n1").cordoned  # Ready=False
    assert cluster.node("1a-spine-1-r2-n2").unhealthy == (6, 7)  # allocatable 6 of 8
    assert cluster.node("1a-spine-2-r1-n1").unhealthy == (1, 3)  # named by the annotation
    assert cluster.node("1a-spine-2-r1-n2").cordoned  # spec.unschedulable
    assert cluster.stats().unhealthy == 4


def test_untolerated_gpu_taint_cordons() -> None:
    cluster, _ = cluster_from_nodes(node_list(), levels=LEVELS)
    assert cluster.node("1a-spine-1-r1-n1").cordoned


def test_real_client_objects() -> None:
    api = client.ApiClient()
    items = [
        api._ApiClient__deserialize(item, "V1Node")  # type: ignore[attr-defined]
        for item in node_list()["items"]
    ]
    assert isinstance(items[0], client.V1Node)
    from_objects, warnings = cluster_from_nodes(items, levels=LEVELS, tolerations=[GPU_TOLERATION])
    from_dicts, _ = cluster_from_nodes(node_list(), levels=LEVELS, tolerations=[GPU_TOLERATION])
    assert len(warnings) == 1
    assert [from_objects.node(n) for n in from_objects.nodes()] == [
        from_dicts.node(n) for n in from_dicts.nodes()
    ]


def test_binding_plan_and_patches() -> None:
    cluster, _ = cluster_from_nodes(node_list(), levels=LEVELS, tolerations=[GPU_TOLERATION])
    placement = cluster.place_gang(GangRequest(2, 8, required_level="rack"))
    assert placement is not None
    plan = binding_plan(placement, ["job-0", "job-1"])
    assert [entry["pod"] for entry in plan] == ["job-0", "job-1"]
    assert [entry["nodeName"] for entry in plan] == list(placement.nodes)
    assert all(entry["gpus"] == list(range(8)) for entry in plan)
    patch = json.loads(binding_patches(plan)["job-1"])
    assert patch[0] == {"op": "add", "path": "/spec/nodeName", "value": plan[1]["nodeName"]}
    assert patch[2]["value"] == "0,1,2,3,4,5,6,7"
    with pytest.raises(ValueError, match="3 pod names for 2"):
        binding_plan(placement, ["a", "b", "c"])
