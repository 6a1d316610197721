"""Kubernetes nodes into clusters (dicts and real client objects), and binding plans."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gangplace import GangRequest, InvalidRequest
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
        "node 1a-spine-1-r2-n1 cordoned: Ready=False",
        "node 1a-spine-2-r1-n2 cordoned: spec.unschedulable",
        "node unlabelled-gpu-1 left out: no label topology.kubernetes.io/zone, "
        "network.topology.nvidia.com/spine, example.com/rack",
    ]
    first = cluster.node("1a-spine-1-r1-n1")
    assert first.topology == {"zone": "us-east-1a", "spine": "1a-spine-1", "rack": "1a-spine-1-r1"}
    assert not first.cordoned  # its nvidia.com/gpu NoSchedule taint is tolerated
    maintenance = cluster.node("1a-spine-1-r1-n2")  # K10: kept for the gangs tolerating it
    assert not maintenance.cordoned and maintenance.taints == (("maintenance", "", "NoExecute"),)
    assert cluster.node("1a-spine-1-r2-n1").cordoned  # Ready=False
    assert cluster.node("1a-spine-1-r2-n2").unhealthy == (6, 7)  # allocatable 6 of 8
    assert cluster.node("1a-spine-2-r1-n1").unhealthy == (1, 3)  # named by the annotation
    assert cluster.node("1a-spine-2-r1-n2").cordoned  # spec.unschedulable
    assert cluster.stats().unhealthy == 4


def test_the_gpu_taint_is_tolerated_by_default_and_kept_for_gangs_without_it() -> None:
    """K10: a taint every gang tolerates is dropped; any other stays on the node, where only
    gangs tolerating it are placed."""
    cluster, _ = cluster_from_nodes(node_list(), levels=LEVELS)  # GKE's taint: tolerated
    assert cluster.node("1a-spine-1-r1-n1").taints == ()
    strict, warnings = cluster_from_nodes(node_list(), levels=LEVELS, tolerations=())
    node = strict.node("1a-spine-1-r1-n1")
    assert not node.cordoned and node.taints == (("nvidia.com/gpu", "present", "NoSchedule"),)
    assert not any("nvidia.com/gpu" in warning for warning in warnings)
    pinned = {"kubernetes.io/hostname": "1a-spine-1-r1-n1"}
    assert strict.place_gang(GangRequest(1, 8, selector=pinned)) is None
    gpu = [("nvidia.com/gpu", "Exists", "", None)]
    placed = strict.place_gang(GangRequest(1, 8, selector=pinned, tolerations=gpu))
    assert placed is not None and placed.nodes == ("1a-spine-1-r1-n1",)


def test_real_client_objects() -> None:
    api = client.ApiClient()
    items = [
        api._ApiClient__deserialize(item, "V1Node")  # type: ignore[attr-defined]
        for item in node_list()["items"]
    ]
    assert isinstance(items[0], client.V1Node)
    from_objects, warnings = cluster_from_nodes(items, levels=LEVELS, tolerations=[GPU_TOLERATION])
    from_dicts, _ = cluster_from_nodes(node_list(), levels=LEVELS, tolerations=[GPU_TOLERATION])
    assert len(warnings) == 3
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
        "metadata": {
            "name": name,
            "namespace": "ml",
            "uid": f"uid-{name}",
            **extra.pop("metadata", {}),
        },
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
        "(time-slicing or MPS replicas without the label nvidia.com/gpu.replicas?)",
        "node gke-bad-0 left out: nvidia.com/gpu capacity 'abc' is not a GPU count in 0..64 "
        "(time-slicing or MPS replicas without the label nvidia.com/gpu.replicas?)",
    ]
    assert cluster.place_gang(GangRequest(2, 8)) is not None


def _shared_node(name: str, advertised: str, replicas: Any, allocatable: str | None = None) -> Any:
    """A node whose device plugin shares every GPU (time-slicing or MPS)."""
    node = _gke_node(name, advertised)
    node["metadata"]["labels"]["nvidia.com/gpu.replicas"] = replicas
    node["status"]["allocatable"]["nvidia.com/gpu"] = allocatable or advertised
    return node


def test_time_sliced_nodes_count_physical_gpus_and_pods_shares() -> None:
    """Issue 28, item 3: 32 advertised GPUs with 4 replicas each are 8 physical GPUs (with a
    warning that says so), never 32; a pod asking k < 4 replicas uses k/4 of one GPU (a
    share), one asking more ceil(k / 4) whole GPUs."""
    nodes = [
        _shared_node("ts-0", "32", "4"),
        _shared_node("ts-1", "128", "16", allocatable="120"),  # 7.5 GPUs allocatable
        _shared_node("ts-bad", "32", "four"),
        _shared_node("ts-zero", "32", "0"),
        _shared_node("ts-odd", "30", "4"),
        _shared_node("ts-one", "8", "1"),  # one replica: no sharing, no warning
    ]
    pods = [
        _pod("small", "ts-0", 1),
        _pod("three", "ts-0", 3),
        _pod("six", "ts-0", 6),
        _pod("whole", "ts-1", 16),
        _pod("tiny", "ts-1", 1),
    ]
    cluster, warnings = cluster_from_nodes(nodes, levels={"rack": "example.com/rack"}, pods=pods)
    assert cluster.nodes() == ["ts-0", "ts-1", "ts-one"]
    assert [cluster.node(n).gpus for n in cluster.nodes()] == [8, 8, 8]
    assert cluster.node("ts-1").unhealthy == (7,)  # 120 // 16 = 7 GPUs allocatable
    held = sorted(
        (a.placement.gpu_milli or 0, len(a.placement.pods[0].gpus)) for a in cluster.allocations()
    )
    assert held == [(0, 1), (0, 2), (62, 1), (250, 1), (750, 1)]
    # small (250) takes GPU 0, three (750) fills it by best fit (F2); six holds GPUs 1-2.
    assert cluster.node("ts-0").shared == {0: 1000}
    assert cluster.node("ts-1").shared == {1: 62}  # 1000 // 16; whole holds GPU 0
    assert cluster.place_gang(GangRequest(1, 32)) is None  # never 32 "GPUs" on one node
    assert warnings == [
        "node ts-0: nvidia.com/gpu capacity 32 is 4 shared replicas of each of 8 physical GPUs "
        "(label nvidia.com/gpu.replicas): read as 8 GPUs; a pod asking k < 4 replicas there "
        "uses k/4 of one GPU (gpu_milli 1000 k // 4), one asking more ceil(k / 4) whole GPUs",
        "node ts-1: nvidia.com/gpu capacity 128 is 16 shared replicas of each of 8 physical "
        "GPUs (label nvidia.com/gpu.replicas): read as 8 GPUs; a pod asking k < 16 replicas "
        "there uses k/16 of one GPU (gpu_milli 1000 k // 16), one asking more ceil(k / 16) "
        "whole GPUs",
        "node ts-bad left out: label nvidia.com/gpu.replicas 'four' is not a replica count in "
        "1..1024",
        "node ts-zero left out: label nvidia.com/gpu.replicas '0' is not a replica count in "
        "1..1024",
        "node ts-odd left out: nvidia.com/gpu capacity 30 is not a multiple of its label "
        "nvidia.com/gpu.replicas 4",
    ]


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
        'pod ml/too-big not adopted: node "gke-a3-1" has 4 free healthy GPUs for a pod of 6',
        "1 running pod(s) wait for nodes not in the cluster: ml/lost (gke-gone)",
    ]
    api = client.ApiClient()
    objects = [api._ApiClient__deserialize(p, "V1Pod") for p in pods["items"]]  # type: ignore[attr-defined]
    again, _ = cluster_from_nodes(
        nodes, levels={"rack": "example.com/rack"}, pods=objects, pod_owner="kube"
    )
    assert [again.node(n) for n in again.nodes()] == [cluster.node(n) for n in cluster.nodes()]


def _gang_pod(name: str, node: str, *, group: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return _pod(name, node, 4, metadata=group, spec=spec)


def test_gangs_are_adopted_whole_at_their_highest_priority() -> None:
    """docs/kubernetes.md: one allocation per gang, spec.priority kept, system pods safe."""
    nodes = [_gke_node(f"gke-a3-{i}", "8", rack=f"r{i // 2}") for i in range(4)]
    coscheduled = {"labels": {"scheduling.x-k8s.io/pod-group": "train"}}
    volcano = {"annotations": {"scheduling.k8s.io/group-name": "train"}}  # another gang
    lws = {
        "labels": {
            "leaderworkerset.sigs.k8s.io/name": "serve",
            "leaderworkerset.sigs.k8s.io/group-index": "0",
        }
    }
    pods = [
        _gang_pod("train-0", "gke-a3-0", group=coscheduled, priority=100),
        _gang_pod("train-1", "gke-a3-1", group=coscheduled, priority=300),
        _gang_pod("vc-0", "gke-a3-0", group=volcano),
        _gang_pod("leader", "gke-a3-2", group=lws, priorityClassName="system-cluster-critical"),
        _gang_pod("worker", "gke-a3-3", group=lws, priority=5),
        _gang_pod("solo", "gke-a3-1", group={}, priority=2_000_001_000),
        _gang_pod("bad", "gke-a3-2", group={}, priority="high"),
        _gang_pod("huge", "gke-a3-3", group={}, priority=2**40),
        _gang_pod("odd-class", "gke-a3-3", group={}, priorityClassName=["x"]),
        _gang_pod("odd-labels", "gke-a3-3", group={"labels": ["x"]}),
    ]
    cluster, warnings = cluster_from_nodes(
        nodes, levels={"rack": "example.com/rack"}, pods=pods, pod_owner="kube"
    )
    got = sorted(
        (sorted(p.node for p in a.placement.pods), a.priority, a.preemptible)
        for a in cluster.allocations()
    )
    assert got == [
        (["gke-a3-0"], 0, True),  # the Volcano gang: same name, another key
        (["gke-a3-0", "gke-a3-1"], 300, True),  # the coscheduling gang, its highest priority
        (["gke-a3-1"], 2_000_001_000, False),  # at the system threshold: never preemptible
        (["gke-a3-2", "gke-a3-3"], 5, False),  # a LeaderWorkerSet group with a system pod
    ]
    assert warnings == [
        "pod ml/bad not adopted: spec.priority: is str, not an integer",
        f"pod ml/huge not adopted: spec.priority: {2**40} is outside -2147483648..2147483647",
        "pod ml/odd-class not adopted: spec.priorityClassName: is list, not a string",
        "pod ml/odd-labels not adopted: metadata.labels: expected an object, got list ['x']",
    ]
    api = client.ApiClient()
    good = [api._ApiClient__deserialize(p, "V1Pod") for p in pods[:6]]  # type: ignore[attr-defined]
    again, _ = cluster_from_nodes(nodes, levels={"rack": "example.com/rack"}, pods=good)
    assert (
        sorted(
            (sorted(p.node for p in a.placement.pods), a.priority, a.preemptible)
            for a in again.allocations()
        )
        == got
    )  # the client's V1Pod objects (snake_case attributes) give the same


def test_a_gang_that_does_not_fit_is_named_with_its_pods() -> None:
    nodes = [_gke_node("gke-a3-0", "8")]
    group = {"labels": {"scheduling.x-k8s.io/pod-group": "big"}}
    pods = [_gang_pod(f"big-{i}", "gke-a3-0", group=group) for i in range(3)]
    cluster, warnings = cluster_from_nodes(nodes, levels={"rack": "example.com/rack"}, pods=pods)
    assert cluster.allocations() == []
    assert warnings[0].startswith(
        "gang scheduling.x-k8s.io/pod-group/big (pods ml/big-0, ml/big-1, ml/big-2) not adopted"
    )


def _gpu_node(name: str = "n1", **fields: Any) -> dict[str, Any]:
    node: dict[str, Any] = {
        "metadata": {"name": name, "labels": {"rack": "r1"}},
        "status": {"capacity": {"nvidia.com/gpu": "8"}},
    }
    node.update(fields)
    return node


def _bound_pod(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ml", "uid": "uid-p"},
        "spec": {"nodeName": "n2", **spec},
        "status": {"phase": "Running"},
    }


BAD_NODES = [
    (42, "node #0 left out: expected a V1Node or a dict, not int"),
    (_gpu_node(status=None), "node n1 left out: status: is null"),
    (_gpu_node(metadata=["x"]), "node #0 left out: metadata: expected an object, got list"),
    (_gpu_node(spec={"taints": "x"}), "node n1 left out: spec.taints: expected a list, got str"),
    (_gpu_node(spec={"taints": [7]}), "node n1 left out: spec.taints[0]: expected an object"),
    (
        _gpu_node(status={"capacity": {"nvidia.com/gpu": "8"}, "conditions": {"Ready": 1}}),
        "node n1 left out: status.conditions: expected a list, got dict",
    ),
    (
        _gpu_node(
            metadata={
                "name": "n1",
                "labels": {"rack": "r1"},
                "annotations": {"gangplace.io/unhealthy-gpus": "x,3"},
            }
        ),
        "node n1 left out: metadata.annotations[gangplace.io/unhealthy-gpus]: 'x,3' is not",
    ),
    (_gpu_node(metadata={"name": 5}), "node #0 left out: metadata.name: expected a string"),
    (_gpu_node(status={"capacity": "8"}), "node n1 left out: status.capacity: expected an obj"),
]


@pytest.mark.parametrize(("node", "warning"), BAD_NODES)
def test_one_bad_node_is_left_out_with_a_warning_naming_its_field(node: Any, warning: str) -> None:
    cluster, warnings = cluster_from_nodes([node, _gpu_node("n2")], levels={"rack": "rack"})
    assert cluster.nodes() == ["n2"]  # the rest is built
    assert len(warnings) == 1 and warnings[0].startswith(warning), warnings


BAD_PODS = [
    ("pod", "pod #0 not adopted: expected a V1Pod or a dict, not str"),
    (_bound_pod(containers=None), "pod ml/p not adopted: spec.containers: is null"),
    (
        _bound_pod(containers=[{"resources": {"limits": {"nvidia.com/gpu": "eight"}}}]),
        "pod ml/p not adopted: spec.containers[0].resources.limits[nvidia.com/gpu]: 'eight' is",
    ),
    (
        _bound_pod(containers=[{"resources": {"limits": {"nvidia.com/gpu": "-2"}}}]),
        "pod ml/p not adopted: spec.containers[0].resources.limits[nvidia.com/gpu]: '-2' is",
    ),
    (_bound_pod(containers="c"), "pod ml/p not adopted: spec.containers: expected a list"),
    (_bound_pod(nodeName=["n2"]), "pod ml/p not adopted: spec.nodeName: expected a string"),
    ({"metadata": "p", "spec": {}}, "pod #0 not adopted: metadata: expected an object"),
]


@pytest.mark.parametrize(("pod", "warning"), BAD_PODS)
def test_one_bad_pod_is_not_adopted_with_a_warning_naming_its_field(pod: Any, warning: str) -> None:
    good = _bound_pod(containers=[{"resources": {"limits": {"nvidia.com/gpu": "2"}}}])
    good["metadata"] = {"name": "good", "namespace": "ml", "uid": "uid-good"}
    cluster, warnings = cluster_from_nodes(
        [_gpu_node("n2")], levels={"rack": "rack"}, pods=[pod, good]
    )
    assert [a.placement.total_gpus for a in cluster.allocations()] == [2]  # the good one
    assert len(warnings) == 1 and warnings[0].startswith(warning), warnings


@pytest.mark.parametrize(
    ("nodes", "pods", "message"),
    [
        (None, (), "nodes must be a list of objects or a List, not null"),
        ("n1", (), "nodes must be a list of objects or a List, not str"),
        (7, (), "nodes must be a list of objects or a List, not int"),
        ([], 3.5, "pods must be a list of objects or a List, not float"),
        ({"items": "x"}, (), "nodes.items: expected a list, got str"),
    ],
)
def test_a_list_argument_that_is_not_a_list_is_invalid(nodes: Any, pods: Any, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        cluster_from_nodes(nodes, levels={}, pods=pods)


def test_node_and_pod_lists_of_the_client_are_read() -> None:
    node = client.V1Node(
        metadata=client.V1ObjectMeta(name="n2", labels={"rack": "r1"}),
        status=client.V1NodeStatus(capacity={"nvidia.com/gpu": "8"}),
    )
    nodes = client.V1NodeList(items=[node])
    cluster, warnings = cluster_from_nodes(nodes, levels={"rack": "rack"})
    assert (cluster.nodes(), warnings) == (["n2"], [])


def test_truncated_objects_are_skipped_or_warned() -> None:
    truncated = [{"metadata": {"name": "half"}}, {"status": {"capacity": {"nvidia.com/gpu": "4"}}}]
    cluster, warnings = cluster_from_nodes(truncated, levels={})
    assert cluster.nodes() == [] and warnings == [
        "a node without metadata.name left out (nvidia.com/gpu: 4)"
    ]
    _, warnings = cluster_from_nodes([], levels={}, pods=[{"spec": {"nodeName": "x"}}])
    assert warnings == []  # no GPUs requested: nothing to adopt
