"""Kubernetes nodes and pods with CPU, memory and extended resources (docs/resources.md "Node
resources", "Kubernetes nodes"; issue 28 item 2, part).

Node allocatable becomes the node's resources (``pods`` and the GPU resource excepted); a
pod's requests are counted as the scheduler counts them (the larger of the largest init
container and the sum of the app containers, plus the pod's overhead; a request defaults to
its limit); bad quantities are warnings naming the object and field, never tracebacks.
"""

from __future__ import annotations

from typing import Any

import pytest

from gangplace import GangRequest
from gangplace.k8s import ClusterSync, cluster_from_nodes
from gangplace.k8s.fields import BadField
from gangplace.k8s.quantity import quantity

LEVELS = {"rack": "example.com/rack"}
GIB = 2**30


def node(name: str = "n1", **allocatable: str) -> dict[str, Any]:
    resources = {"nvidia.com/gpu": "8", "pods": "110", **allocatable}
    return {
        "metadata": {"name": name, "labels": {"example.com/rack": "r1"}},
        "status": {"allocatable": resources, "capacity": resources},
    }


def pod(name: str, gpus: int, node_name: str = "n1", **spec: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    resources.update(spec.pop("main", {}))
    main = {"name": "main", "resources": resources}
    return {
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}"},
        "spec": {"nodeName": node_name, "containers": [main, *spec.pop("sidecars", [])], **spec},
        "status": {"phase": "Running"},
    }


@pytest.mark.parametrize(
    ("value", "resource", "expected"),
    [
        ("500m", "cpu", 500),
        ("2", "cpu", 2_000),
        ("0.5", "cpu", 500),
        ("1n", "cpu", 1),  # rounded up to a millicore
        (4, "cpu", 4_000),
        ("2Gi", "memory", 2 * GIB),
        ("129M", "memory", 129_000_000),
        ("1e3", "memory", 1_000),
        ("1.5", "example.com/foo", 2),
    ],
)
def test_quantities_in_base_units(value: Any, resource: str, expected: int) -> None:
    assert quantity(value, resource, "f") == expected


@pytest.mark.parametrize("value", ["12x", "-1", "", None, True, "1Zi", "2e70", 1.5, "1 Gi"])
def test_bad_quantities_name_their_field(value: Any) -> None:
    with pytest.raises(BadField, match=r"^spec\.x: "):
        quantity(value, "cpu", "spec.x")


def test_allocatable_becomes_the_nodes_resources_and_mig_profiles_are_resources() -> None:
    mig = "nvidia.com/mig-1g.10gb"
    cluster, warnings = cluster_from_nodes(
        [node(cpu="96", memory="1Ti", **{"ephemeral-storage": "500Gi", "rdma/ib": "8", mig: "7"})],
        levels=LEVELS,
    )
    assert warnings == []
    assert cluster.node("n1").resources == {
        "cpu": 96_000,
        "ephemeral-storage": 500 * GIB,
        "memory": 2**40,
        mig: 7,
        "rdma/ib": 8,
    }


def test_a_bad_allocatable_entry_is_left_out_with_a_warning() -> None:
    cluster, warnings = cluster_from_nodes([node(cpu="lots", memory="64Gi")], levels=LEVELS)
    assert cluster.node("n1").resources == {"memory": 64 * GIB}
    assert warnings == [
        "node n1: status.allocatable[cpu]: 'lots' is not a Kubernetes quantity; cpu left out "
        "of its resources"
    ]


def test_pod_requests_are_counted_as_the_scheduler_counts_them() -> None:
    """App containers add up; the largest init container wins when larger; overhead adds;
    a container with only a limit requests its limit."""
    running = pod(
        "train",
        4,
        main={"requests": {"cpu": "8", "memory": "64Gi"}},
        sidecars=[{"name": "log", "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}}}],
        initContainers=[{"name": "warm", "resources": {"requests": {"cpu": "20"}}}],
        overhead={"cpu": "250m"},
    )
    cluster, warnings = cluster_from_nodes(
        [node(cpu="96", memory="512Gi")], levels=LEVELS, pods=[running], pod_owner="kube"
    )
    assert warnings == []
    assert cluster.node("n1").free_resources == {
        "cpu": 96_000 - 20_000 - 250,  # max(8 + 0.5, 20) + 0.25 cores
        "memory": 512 * GIB - 65 * GIB,
    }


def test_requests_for_resources_the_node_lacks_and_overcommitted_nodes_warn() -> None:
    asks_foo = pod("foo", 1, main={"requests": {"example.com/foo": "1", "cpu": "1"}})
    too_big = pod("big", 1, main={"requests": {"cpu": "200"}})
    cluster, warnings = cluster_from_nodes(
        [node(cpu="96")], levels=LEVELS, pods=[asks_foo, too_big], pod_owner="kube"
    )
    assert warnings[0] == (
        "pod ml/foo: its node n1 does not advertise example.com/foo; that part of its request "
        "is not counted"
    )
    assert warnings[1].startswith(
        "pods ml/big adopted without their CPU, memory and other resources (pods without "
        'GPUs not at all): node "n1" has {cpu=95000} free besides GPUs'
    )
    assert cluster.node("n1").allocated == (0, 1)  # both pods' GPUs are held
    assert cluster.node("n1").free_resources == {"cpu": 95_000}


def test_a_bad_pod_quantity_is_a_warning_naming_the_pod_and_field() -> None:
    bad = pod("bad", 1, main={"requests": {"memory": "much"}})
    cluster, warnings = cluster_from_nodes([node(memory="1Gi")], levels=LEVELS, pods=[bad])
    assert warnings == [
        "pod ml/bad not adopted: spec.containers[0].resources.requests[memory]: 'much' is not "
        "a Kubernetes quantity"
    ]
    assert cluster.node("n1").allocated == ()


def test_watch_events_follow_allocatable_changes() -> None:
    sync = ClusterSync(levels=LEVELS)
    sync.apply("ADDED", node(cpu="96"))
    sync.apply("ADDED", pod("p", 1, main={"requests": {"cpu": "90"}}))
    sync.apply("MODIFIED", node(cpu="64"))  # allocatable shrank under a running pod
    info = sync.cluster.node("n1")
    assert info.resources == {"cpu": 64_000} and info.free_resources == {"cpu": 0}
    sync.cluster.check_invariants()


def test_pods_without_gpus_are_adopted_with_their_resources() -> None:
    """docs/resources.md "Node resources": every bound, unfinished pod that asks something the nodes
    count is adopted, GPU or not; it ends as GPU pods do; a gang may mix both."""
    launcher = pod("launcher", 0, main={"requests": {"cpu": "4", "memory": "8Gi"}})
    launcher["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": "job"}
    worker = pod("worker", 8, main={"requests": {"cpu": "32"}})
    worker["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": "job"}
    best_effort = pod("idle", 0)  # asks nothing: holds nothing
    sync = ClusterSync(levels=LEVELS)
    sync.apply("ADDED", node(cpu="96", memory="64Gi"))
    results = [sync.apply("ADDED", p) for p in (launcher, worker, best_effort)]
    assert [r.action for r in results] == ["pod adopted", "pod joined", "ignored"]
    info = sync.cluster.node("n1")
    assert info.free_resources == {"cpu": 60_000, "memory": 56 * GIB}
    assert info.allocated == tuple(range(8))
    (allocation,) = sync.cluster.allocations()
    assert [len(p.gpus) for p in allocation.placement.pods] == [0, 8]
    done = dict(launcher, status={"phase": "Succeeded"})
    assert sync.apply("MODIFIED", done).action == "pod ended"
    assert sync.cluster.node("n1").free_resources == {"cpu": 64_000, "memory": 64 * GIB}
    sync.cluster.check_invariants()


@pytest.mark.parametrize("gpu_capacity", ["0", None])
def test_a_node_of_mig_slices_only_is_a_node_of_zero_gpus(gpu_capacity: str | None) -> None:
    """Issue 28 item 3: with the mixed strategy a node whose every GPU is partitioned
    advertises its MIG profiles and no whole GPU (``nvidia.com/gpu: 0``, or none at all); it
    is kept as a node of 0 GPUs with the profiles as resources, where MIG pods are placed.
    A CPU-only node (no GPU, no profile) is still not a GPU node."""
    mig = "nvidia.com/mig-3g.40gb"
    sliced = node("mig", cpu="64", **{mig: "14"})
    for key in ("allocatable", "capacity"):
        sliced["status"][key] = dict(sliced["status"][key])
        del sliced["status"][key]["nvidia.com/gpu"]
        if gpu_capacity is not None:
            sliced["status"][key]["nvidia.com/gpu"] = gpu_capacity
    cpu_only = node("cpu", cpu="64")
    for key in ("allocatable", "capacity"):
        cpu_only["status"][key] = {"cpu": "64", "pods": "110"}
    cluster, warnings = cluster_from_nodes([sliced, cpu_only, node("n1")], levels=LEVELS)
    assert warnings == []
    assert cluster.nodes() == ["mig", "n1"]
    assert cluster.node("mig").gpus == 0
    assert cluster.node("mig").resources == {"cpu": 64_000, mig: 14}

    held = cluster.reserve(GangRequest(14, 0, resources_per_pod={mig: 1}))
    assert {pod.node for pod in held.placement.pods} == {"mig"}
    assert cluster.place_gang(GangRequest(1, 0, resources_per_pod={mig: 1})) is None
