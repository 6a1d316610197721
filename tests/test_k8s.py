"""Kubernetes nodes into clusters (dicts and real client objects), and binding plans."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gangplace import GangRequest
from gangplace.k8s import binding_patches, binding_plan, bindings, cluster_from_nodes

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
        "node 1a-spine-1-r1-n2 cordoned: taint maintenance:NoExecute",
        "node 1a-spine-1-r2-n1 cordoned: Ready=False",
        "node 1a-spine-2-r1-n2 cordoned: spec.unschedulable",
        "node unlabelled-gpu-1 left out: no label topology.kubernetes.io/zone, "
        "network.topology.nvidia.com/spine, example.com/rack",
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


def test_the_gpu_taint_is_tolerated_by_default_and_cordons_without_it() -> None:
    cluster, _ = cluster_from_nodes(node_list(), levels=LEVELS)  # GKE's taint: tolerated
    assert not cluster.node("1a-spine-1-r1-n1").cordoned
    strict, warnings = cluster_from_nodes(node_list(), levels=LEVELS, tolerations=())
    assert strict.node("1a-spine-1-r1-n1").cordoned
    assert "node 1a-spine-1-r1-n1 cordoned: taint nvidia.com/gpu=present:NoSchedule" in warnings


def test_real_client_objects() -> None:
    api = client.ApiClient()
    items = [
        api._ApiClient__deserialize(item, "V1Node")  # type: ignore[attr-defined]
        for item in node_list()["items"]
    ]
    assert isinstance(items[0], client.V1Node)
    from_objects, warnings = cluster_from_nodes(items, levels=LEVELS, tolerations=[GPU_TOLERATION])
    from_dicts, _ = cluster_from_nodes(node_list(), levels=LEVELS, tolerations=[GPU_TOLERATION])
    assert len(warnings) == 4
    assert [from_objects.node(n) for n in from_objects.nodes()] == [
        from_dicts.node(n) for n in from_dicts.nodes()
    ]


def test_bindings_and_merge_patches() -> None:
    cluster, _ = cluster_from_nodes(node_list(), levels=LEVELS)
    placement = cluster.place_gang(GangRequest(2, 8, required_level="rack"))
    assert placement is not None
    plan = binding_plan(placement, ["job-0", "job-1"])
    assert [entry["pod"] for entry in plan] == ["job-0", "job-1"]
    assert [entry["nodeName"] for entry in plan] == list(placement.nodes)
    assert all(entry["gpus"] == list(range(8)) for entry in plan)
    patch = binding_patches(plan)["job-1"]
    assert patch == {
        "metadata": {
            "annotations": {"gangplace.io/rank": "1", "gangplace.io/gpus": "0,1,2,3,4,5,6,7"}
        }
    }
    made = bindings(placement, ["job-0", "job-1"], namespace="train")
    binding, merge = made[1]
    assert isinstance(binding, client.V1Binding)
    assert binding.metadata is not None
    assert (binding.metadata.name, binding.metadata.namespace) == ("job-1", "train")
    assert (binding.target.kind, binding.target.name) == ("Node", placement.nodes[1])
    assert merge == patch
    # The client serializes it into the body the pods/binding subresource takes.
    body = client.ApiClient().sanitize_for_serialization(binding)  # type: ignore[no-untyped-call]
    assert body == bindings(placement, ["job-0", "job-1"], namespace="train", as_dicts=True)[1][0]
    assert body["target"] == {"apiVersion": "v1", "kind": "Node", "name": placement.nodes[1]}
    with pytest.raises(ValueError, match="3 pod names for 2"):
        binding_plan(placement, ["a", "b", "c"])


def _gke_node(name: str, gpus: str, rack: str = "r1") -> dict[str, Any]:
    """A node as the GKE API server returns it: the GPU taint, accelerator labels."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "cloud.google.com/gke-accelerator": "nvidia-h100-80gb",
                "cloud.google.com/gke-nodepool": "a3-pool",
                "example.com/rack": rack,
                "kubernetes.io/hostname": name,
            },
        },
        "spec": {
            "providerID": f"gce://proj/us-central1-a/{name}",
            "taints": [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}],
        },
        "status": {
            "allocatable": {"cpu": "207", "nvidia.com/gpu": gpus},
            "capacity": {"cpu": "208", "nvidia.com/gpu": gpus},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def _pod(name: str, node: str | None, gpus: int, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", **extra.pop("metadata", {})},
        "spec": {
            "nodeName": node,
            "containers": [
                {"name": "main", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}},
                {"name": "sidecar", "resources": {}},
            ],
            **extra.pop("spec", {}),
        },
        "status": {"phase": extra.pop("phase", "Running")},
    }


def test_gke_nodes_time_slicing_and_bad_counts_are_warnings_not_failures() -> None:
    nodes = {
        "apiVersion": "v1",
        "kind": "NodeList",
        "items": [
            _gke_node("gke-a3-0", "8"),
            _gke_node("gke-a3-1", "8"),
            _gke_node("gke-ts-0", "128"),  # time-slicing: 16 replicas of 8 GPUs
            _gke_node("gke-bad-0", "abc"),
        ],
    }
    cluster, warnings = cluster_from_nodes(nodes, levels={"rack": "example.com/rack"})
    assert cluster.nodes() == ["gke-a3-0", "gke-a3-1"]
    assert not any(cluster.node(n).cordoned for n in cluster.nodes())
    assert warnings == [
        "node gke-ts-0 left out: nvidia.com/gpu capacity '128' is not a GPU count in 0..64 "
        "(time-slicing or MPS replicas?)",
        "node gke-bad-0 left out: nvidia.com/gpu capacity 'abc' is not a GPU count in 0..64 "
        "(time-slicing or MPS replicas?)",
    ]
    assert cluster.place_gang(GangRequest(2, 8)) is not None


GANGPLACE_GPUS = {"gangplace.io/gpus": "4,5"}
WARMUP = {"name": "warmup", "resources": {"requests": {"nvidia.com/gpu": "4"}}}


def test_running_pods_are_adopted() -> None:
    nodes = [_gke_node("gke-a3-0", "8"), _gke_node("gke-a3-1", "8", rack="r2")]
    pods = {
        "kind": "PodList",
        "items": [
            _pod("bound-by-gangplace", "gke-a3-0", 2, metadata={"annotations": GANGPLACE_GPUS}),
            _pod("bound-elsewhere", "gke-a3-0", 3),
            _pod(
                "with-init", "gke-a3-1", 1,
                spec={"initContainers": [WARMUP]},
            ),
            _pod("pending", None, 8),
            _pod("done", "gke-a3-1", 8, phase="Succeeded"),
            _pod("cpu-only", "gke-a3-1", 0),
            _pod("lost", "gke-gone", 1),
            _pod("too-big", "gke-a3-1", 6),
        ],
    }  # fmt: skip
    cluster, warnings = cluster_from_nodes(
        nodes, levels={"rack": "example.com/rack"}, pods=pods, pod_owner="kube"
    )
    assert cluster.node("gke-a3-0").allocated == (0, 1, 2, 4, 5)
    assert cluster.node("gke-a3-1").allocated == (0, 1, 2, 3)  # max(1, init 4)
    assert len(cluster.allocations(owner="kube")) == 3
    assert warnings == [
        "pod ml/lost not adopted: its node gke-gone is not in the cluster",
        'pod ml/too-big not adopted: node "gke-a3-1" has 4 free healthy GPUs for a pod of 6',
    ]
    api = client.ApiClient()
    objects = [api._ApiClient__deserialize(p, "V1Pod") for p in pods["items"]]  # type: ignore[attr-defined]
    again, _ = cluster_from_nodes(
        nodes, levels={"rack": "example.com/rack"}, pods=objects, pod_owner="kube"
    )
    assert [again.node(n) for n in again.nodes()] == [cluster.node(n) for n in cluster.nodes()]


@pytest.mark.parametrize(
    ("nodes", "pods", "error"),
    [
        ([42], (), "expected a V1Node or a dict, not int"),
        ([], ["pod"], "expected a V1Pod or a dict, not str"),
    ],
)
def test_wrong_kinds_are_type_errors(nodes: Any, pods: Any, error: str) -> None:
    with pytest.raises(TypeError, match=error):
        cluster_from_nodes(nodes, levels={}, pods=pods)


def test_truncated_objects_are_skipped_or_warned() -> None:
    truncated = [{"metadata": {"name": "half"}}, {"status": {"capacity": {"nvidia.com/gpu": "4"}}}]
    cluster, warnings = cluster_from_nodes(truncated, levels={})
    assert cluster.nodes() == [] and warnings == [
        "a node without metadata.name left out (nvidia.com/gpu: 4)"
    ]
    _, warnings = cluster_from_nodes([], levels={}, pods=[{"spec": {"nodeName": "x"}}])
    assert warnings == []  # no GPUs requested: nothing to adopt
