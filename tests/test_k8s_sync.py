"""docs/kubernetes.md "Staying current: watch events": ClusterSync applies node and pod watch events
to a cluster."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
from kubernetes import client

from gangplace import GangRequest, InvalidRequest
from gangplace.k8s import ClusterSync, bindings, cluster_from_nodes

LEVELS = {"rack": "example.com/rack"}
GROUP = {"labels": {"scheduling.x-k8s.io/pod-group": "train"}}


def node(name: str, rack: str = "r0", gpus: str = "8", **extra: Any) -> dict[str, Any]:
    """A GPU node as the API server sends it in a watch event."""
    metadata = {"name": name, "labels": {"example.com/rack": rack}, **extra.pop("metadata", {})}
    status: dict[str, Any] | None = {
        "capacity": {"nvidia.com/gpu": gpus},
        "allocatable": {"nvidia.com/gpu": gpus},
    }
    given = extra.pop("status", {})
    status = None if given is None else {**(status or {}), **given}
    return {"kind": "Node", "metadata": metadata, "spec": extra.pop("spec", {}), "status": status}


def pod(name: str, where: str | None, gpus: int = 4, **extra: Any) -> dict[str, Any]:
    """A pod with ``gpus`` GPUs bound to ``where`` (``None``: pending)."""
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "uid": f"uid-{name}",
            **extra.pop("metadata", {}),
        },
        "spec": {
            "nodeName": where,
            "containers": [
                {"name": "main", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
            ],
            **extra.pop("spec", {}),
        },
        "status": {"phase": extra.pop("phase", "Running")},
    }


def synced(*names: str) -> ClusterSync:
    sync = ClusterSync(LEVELS, pod_owner="kube", clock=lambda: 0.0)
    for index, name in enumerate(names):
        assert sync.apply("ADDED", node(name, rack=f"r{index // 2}")).action == "node added"
    return sync


def test_pods_of_one_gang_become_one_allocation_in_any_order() -> None:
    """Three pods of one gang, their events shuffled: one allocation, ranks kept."""
    for order in itertools.permutations(range(3)):
        sync = synced("n0", "n1", "n2")
        pods = [
            pod(f"train-{i}", f"n{i}", 8, metadata=GROUP, spec={"priority": 10 * i})
            for i in range(3)
        ]
        results = [sync.apply("ADDED", pods[i]) for i in order]
        assert [r.action for r in results] == ["pod adopted", "pod joined", "pod joined"]
        (gang,) = sync.cluster.allocations()
        assert len(gang.placement.pods) == 3 and gang.priority == 20
        assert {r.rank for r in results} == {0, 1, 2}
        assert sync.apply("MODIFIED", pods[order[0]]).action == "ignored"  # nothing new


def test_pods_end_by_rank_and_the_last_ends_the_allocation() -> None:
    sync = synced("n0", "n1")
    pods = [pod(f"train-{i}", f"n{i}", 8, metadata=GROUP) for i in range(2)]
    for item in pods:
        sync.apply("ADDED", item)
    finished = sync.apply("MODIFIED", {**pods[1], "status": {"phase": "Succeeded"}})
    assert finished.action == "pod ended" and finished.rank == 1
    assert sync.cluster.allocations()[0].ended == (1,) and sync.cluster.stats().free == 8
    assert sync.apply("DELETED", pods[1]).action == "ignored"  # already ended
    assert sync.apply("DELETED", pods[0]).action == "allocation ended"
    assert sync.cluster.allocations() == [] and sync.cluster.stats().free == 16
    again = sync.apply("ADDED", pod("train-9", "n0", 8, metadata=GROUP))
    assert again.action == "pod adopted"  # the gang's old allocation is gone: a new one


def test_a_pod_gangplace_bound_is_matched_not_adopted_twice() -> None:
    sync = synced("n0", "n1")
    placement = sync.cluster.place_gang(GangRequest(2, 8))
    assert placement is not None
    job = sync.cluster.commit(sync.cluster.reserve(placement))
    for rank, (_, patch) in enumerate(bindings(placement, ["w0", "w1"], namespace="ml")):
        annotations = {**patch["metadata"]["annotations"], "gangplace.io/allocation": job.id}
        bound = pod(f"w{rank}", placement.pods[rank].node, 8, metadata={"annotations": annotations})
        result = sync.apply("ADDED", bound)
        assert (result.action, result.allocation, result.rank) == ("pod matched", job.id, rank)
    assert len(sync.cluster.allocations()) == 1
    ended = sync.apply("DELETED", bound)
    assert ended.action == "pod ended" and sync.cluster.allocations()[0].ended == (1,)


def test_a_pod_before_its_node_waits_and_is_adopted_when_the_node_comes() -> None:
    sync = synced("n0")
    early = sync.apply("ADDED", pod("early", "n1", 2))
    assert early.action == "pod waiting" and "not in the cluster" in early.warnings[0]
    assert sync.apply("ADDED", node("n1")).action == "node added"
    assert sync.cluster.node("n1").allocated == (0, 1)


def test_node_updates_health_cordons_and_removal() -> None:
    sync = synced("n0", "n1")
    sync.apply("ADDED", pod("busy", "n0", 2))
    sick = node("n0", status={"allocatable": {"nvidia.com/gpu": "6"}})
    assert sync.apply("MODIFIED", sick).action == "node updated"
    assert sync.cluster.node("n0").unhealthy == (6, 7)
    tainted = node(
        "n1",
        spec={"unschedulable": True},
        metadata={"labels": {"example.com/rack": "r0", "pool": "x"}},
    )
    result = sync.apply("MODIFIED", tainted)
    assert sync.cluster.node("n1").cordoned and "cordoned: spec.unschedulable" in result.warnings[0]
    assert dict(sync.cluster.node("n1").labels)["pool"] == "x"
    assert not sync.apply("MODIFIED", node("n1")).warnings and not sync.cluster.node("n1").cordoned
    moved = sync.apply("MODIFIED", node("n0", rack="r7"))  # busy: the move waits
    assert "waits until it holds nothing" in moved.warnings[0]
    assert sync.cluster.node("n0").topology["rack"] == "r0"
    sync.apply("DELETED", pod("busy", "n0", 2))
    sync.apply("MODIFIED", node("n0", rack="r7"))
    assert sync.cluster.node("n0").topology["rack"] == "r7"
    assert sync.apply("DELETED", node("n1")).action == "node removed"
    assert sync.cluster.nodes() == ["n0"]


def test_resync_brings_the_cluster_to_the_relist() -> None:
    sync = synced("n0", "n1", "n2")
    sync.apply("ADDED", pod("gone", "n0", 8))
    sync.apply("ADDED", pod("stays", "n1", 4))
    results = sync.resync(
        {"items": [node("n1"), node("n2", rack="r1")]},
        {"items": [pod("stays", "n1", 4), pod("new", "n2", 2)]},
    )
    assert sync.cluster.nodes() == ["n1", "n2"]
    actions = sorted(r.action for r in results)
    assert "node removed" in actions and "pod adopted" in actions
    assert sorted(len(a.placement.pods) for a in sync.cluster.allocations()) == [1, 1]
    assert sync.cluster.stats().allocated == 6


BAD_EVENTS: list[tuple[str, Any, str]] = [
    ("ADDED", 42, "int ignored"),
    ("ADDED", node("n9", status=None), "node n9 left out: status: is null"),
    ("ADDED", node("n9", spec={"taints": "x"}), "node n9 left out: spec.taints: expected a list"),
    (
        "ADDED",
        {"kind": "Node", "metadata": ["x"]},
        "node #0 left out: metadata: expected an object",
    ),
    (
        "ADDED",
        pod("p", "n0", spec={"containers": None}),
        "pod ml/p not adopted: spec.containers: is null",
    ),
    ("ADDED", pod("p", "n0", spec={"priority": "high"}), "pod ml/p not adopted: spec.priority"),
    ("ADDED", pod("p", "n0", metadata={"labels": ["x"]}), "pod ml/p not adopted: metadata.labels"),
    ("ADDED", {"kind": "Pod", "metadata": "p"}, "pod #0 not adopted: metadata: expected an object"),
    ("ADDED", pod("p", "n0", 9), 'pod ml/p not adopted: node "n0" has 6 free healthy GPUs'),
    ("ADDED", {"kind": "ConfigMap"}, "ConfigMap ignored"),
    ("ERROR", {"kind": "Status"}, "event type 'ERROR' ignored"),
    ("SURPRISE", node("n0"), "event type 'SURPRISE' ignored"),
]


@pytest.mark.parametrize(("event", "obj", "warning"), BAD_EVENTS)
def test_bad_events_warn_and_change_nothing(event: str, obj: Any, warning: str) -> None:
    sync = synced("n0")
    sync.apply("ADDED", pod("ok", "n0", 2))
    before = sync.cluster.snapshot()
    result = sync.apply(event, obj)
    assert result.action == "ignored" and result.warnings, result
    assert result.warnings[0].startswith(warning), result.warnings
    assert sync.cluster.snapshot() == before


def test_client_objects_and_lists_work() -> None:
    api = client.ApiClient()
    as_node = api._ApiClient__deserialize(node("n0"), "V1Node")  # type: ignore[attr-defined]
    as_pod = api._ApiClient__deserialize(pod("p", "n0", 3), "V1Pod")  # type: ignore[attr-defined]
    sync = ClusterSync(LEVELS)
    assert sync.apply("ADDED", as_node).action == "node added"
    assert sync.apply("ADDED", as_pod).action == "pod adopted"
    listed, _ = cluster_from_nodes(
        client.V1NodeList(items=[as_node]), levels=LEVELS, pods=client.V1PodList(items=[as_pod])
    )
    assert listed.stats().allocated == 3
    with pytest.raises(InvalidRequest):
        sync.resync(7)


def test_random_event_streams_match_a_relist() -> None:
    """Any order of the same events, then a resync of the final lists, changes nothing more:
    the watch-driven cluster equals the one cluster_from_nodes builds from the lists."""
    rng = random.Random(7)
    nodes = [node(f"n{i}", rack=f"r{i // 2}") for i in range(4)]
    pods = [pod(f"g-{i}", f"n{i % 4}", 2, metadata=GROUP) for i in range(6)]
    pods += [pod(f"solo-{i}", f"n{i}", 1) for i in range(3)]
    for _ in range(20):
        events = [("ADDED", n) for n in nodes] + [("ADDED", p) for p in pods]
        events += [("DELETED", p) for p in rng.sample(pods, 3)]
        rng.shuffle(events)
        sync = ClusterSync(LEVELS)
        for kind, obj in events:
            assert not (result := sync.apply(kind, obj)).warnings or result.action == "pod waiting"
        alive = [p for p in pods if not any(k == "DELETED" and o is p for k, o in events)]
        sync.resync(nodes, alive)
        built, _ = cluster_from_nodes(nodes, levels=LEVELS, pods=alive)
        mine = sorted(len(a.placement.pods) - len(a.ended) for a in sync.cluster.allocations())
        theirs = sorted(len(a.placement.pods) for a in built.allocations())
        assert mine == theirs
        assert sync.cluster.stats().allocated == built.stats().allocated
        sync.cluster.check_invariants()


def test_a_kueue_workload_is_one_gang() -> None:
    sync = synced("n0", "n1")
    kueue = {"annotations": {"kueue.x-k8s.io/workload": "job-train-3f2a"}}
    actions = [sync.apply("ADDED", pod(f"w{i}", f"n{i}", 8, metadata=kueue)).action for i in (0, 1)]
    assert actions == ["pod adopted", "pod joined"] and len(sync.cluster.allocations()) == 1


def test_changes_behind_the_syncs_back_do_not_break_it() -> None:
    """A rank ended by the caller, a node removed by the caller: later events still apply."""
    sync = synced("n0", "n1", "n2")
    pods = [pod(f"train-{i}", f"n{i}", 8, metadata=GROUP) for i in range(3)]
    for item in pods:
        sync.apply("ADDED", item)
    (gang,) = sync.cluster.allocations()
    sync.cluster.release_pods(gang, [0], owner="kube")  # the caller ended rank 0 itself
    assert sync.apply("DELETED", pods[0]).action == "pod ended"
    assert sync.apply("DELETED", pods[1]).action == "pod ended"  # the gang goes on
    sync.cluster.remove_node("n2")
    removed = sync.apply("DELETED", node("n2"))
    assert removed.action == "node removed" and sync.cluster.allocations() == []  # K2: its pod
    assert removed.warnings == ("node n2 removed: 1 pod(s) there wait for it",)  # waits for it
    assert sync.apply("DELETED", pods[2]).action == "ignored"  # it was waiting


def test_watch_events_on_a_time_sliced_node_count_physical_gpus() -> None:
    """Issue 28, item 3: a node sharing each GPU 4 times is 8 GPUs; a pod event asking 3
    replicas uses 750 thousandths of one GPU; a pod that came before its node asking 5 holds
    ceil(5 / 4) = 2 whole GPUs."""
    sync = ClusterSync(LEVELS, pod_owner="kube", clock=lambda: 0.0)
    shared = node(
        "ts",
        gpus="32",
        metadata={"labels": {"example.com/rack": "r0", "nvidia.com/gpu.replicas": "4"}},
    )
    early = sync.apply("ADDED", pod("early", "ts", 5))
    assert early.action == "pod waiting"
    added = sync.apply("ADDED", shared)
    assert added.action == "node added" and "read as 8 GPUs" in added.warnings[0]
    assert sync.cluster.node("ts").gpus == 8
    assert sync.apply("ADDED", pod("late", "ts", 3)).action == "pod adopted"
    held = sorted(len(a.placement.pods[0].gpus) for a in sync.cluster.allocations())
    assert held == [1, 2]  # a share of one GPU, and ceil(5 / 4)
    assert sync.cluster.node("ts").shared == {2: 750}
    assert sync.apply("DELETED", pod("late", "ts", 3)).action == "allocation ended"
    assert sync.cluster.stats().free == 6


def shared_node(name: str) -> dict[str, Any]:
    """A node of 8 GPUs shared 4 times each (time-slicing)."""
    labels = {"example.com/rack": "r0", "nvidia.com/gpu.replicas": "4"}
    return node(name, gpus="32", metadata={"labels": labels})


def test_gangs_of_shared_pods_and_pods_gangplace_bound_as_shares() -> None:
    """docs/kubernetes.md: pods of one gang using the same share are one allocation;
    a gang mixing shares and whole GPUs becomes one allocation per share, with a warning; a
    later pod of a fractional gang joins it with the same share, and is adopted on its own
    with another; a pod gangplace bound with a share (its gpu-milli annotation) is adopted
    as that share after a restart."""
    sync = ClusterSync(LEVELS, pod_owner="kube", clock=lambda: 0.0)
    sync.apply("ADDED", shared_node("ts"))
    pods = [pod(f"w{i}", "ts", 2, metadata=GROUP) for i in range(3)]
    results = sync.resync([shared_node("ts")], pods)
    (gang,) = sync.cluster.allocations()
    assert gang.placement.gpu_milli == 500 and len(gang.placement.pods) == 3
    assert sync.cluster.node("ts").shared == {0: 1000, 1: 500}
    late = sync.apply("ADDED", pod("w3", "ts", 2, metadata=GROUP))
    assert late.action == "pod joined" and not late.warnings
    (grown,) = sync.cluster.allocations()
    assert grown.id == gang.id and len(grown.placement.pods) == 4
    assert sync.cluster.node("ts").shared == {0: 1000, 1: 1000}
    other = sync.apply("ADDED", pod("w4", "ts", 1, metadata=GROUP))
    assert other.action == "pod adopted"
    assert "it uses 250 thousandths of a GPU, its gang's pods 500" in other.warnings[0]
    assert sync.cluster.node("ts").shared == {0: 1000, 1: 1000, 2: 250}
    assert sync.apply("DELETED", pod("w3", "ts", 2, metadata=GROUP)).action == "pod ended"
    assert sync.cluster.node("ts").shared == {0: 1000, 1: 500, 2: 250}
    sync.apply("DELETED", pod("w4", "ts", 1, metadata=GROUP))
    mixed = [pod("m0", "ts", 1, metadata=GROUP), pod("m1", "ts", 4, metadata=GROUP)]
    results = sync.resync([shared_node("ts")], mixed)
    assert any(
        "use different shares of a GPU: adopted as 2 allocations" in w
        for r in results
        for w in r.warnings
    )
    assert sorted(a.placement.gpu_milli or 0 for a in sync.cluster.allocations()) == [0, 250]
    # Bound by gangplace with a share: the annotations name the GPU and the share.
    fresh = ClusterSync(LEVELS, pod_owner="kube", clock=lambda: 0.0)
    fresh.apply("ADDED", shared_node("ts"))
    placement = fresh.cluster.place_gang(GangRequest(2, 1, gpu_milli=300))
    assert placement is not None
    patches = [patch for _, patch in bindings(placement, ["b0", "b1"], as_dicts=True)]
    annotations = patches[0]["metadata"]["annotations"]
    assert annotations["gangplace.io/gpu-milli"] == "300"
    bound = [pod(f"b{i}", "ts", 1, metadata=patch["metadata"]) for i, patch in enumerate(patches)]
    fresh.resync([shared_node("ts")], bound)
    assert fresh.cluster.node("ts").shared == {0: 600}
    bad = pod(
        "bad",
        "ts",
        1,
        metadata={"annotations": {"gangplace.io/gpus": "3", "gangplace.io/gpu-milli": "1000"}},
    )
    result = fresh.apply("ADDED", bad)
    assert "bad gangplace.io/gpu-milli '1000'" in result.warnings[0]
    assert fresh.cluster.node("ts").shared == {0: 600}  # counted as whole GPU 3
    assert 3 not in fresh.cluster.node("ts").free
