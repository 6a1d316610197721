"""ClusterSync's fidelity (issue 44): identity, stale events, one-pass relists, threads, quiet
CPU pods. Each test is one of the ways the sync could double-book GPUs before."""

from __future__ import annotations

import threading
from typing import Any

from gangplace import GangRequest
from gangplace.k8s import ClusterSync

LEVELS = {"rack": "example.com/rack"}


def node(name: str, rack: str = "r0", gpus: int = 8, version: int = 1, **extra: Any) -> Any:
    capacity: dict[str, str] = {"cpu": "64", "memory": "512Gi"}
    if gpus:
        capacity["nvidia.com/gpu"] = str(gpus)
    return {
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": extra.pop("uid", f"node-{name}"),
            "resourceVersion": str(version),
            "labels": {"example.com/rack": rack},
        },
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def pod(
    name: str,
    where: str | None,
    gpus: int = 4,
    *,
    uid: str | None = None,
    version: int = 1,
    phase: str = "Running",
    cpu: str | None = None,
    gang: str | None = None,
) -> Any:
    limits: dict[str, str] = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    requests: dict[str, str] = {"cpu": cpu} if cpu else {}
    labels = {"scheduling.x-k8s.io/pod-group": gang} if gang else {}
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "uid": uid or f"uid-{name}",
            "resourceVersion": str(version),
            "labels": labels,
        },
        "spec": {
            "nodeName": where,
            "containers": [{"name": "main", "resources": {"limits": limits, "requests": requests}}],
        },
        "status": {"phase": phase},
    }


def synced(*names: str) -> ClusterSync:
    sync = ClusterSync(LEVELS, pod_owner="kube", clock=lambda: 0.0)
    sync.resync([node(name) for name in names])
    return sync


def used(sync: ClusterSync) -> dict[str, int]:
    """GPUs gangplace holds per node."""
    return {name: len(sync.cluster.node(name).allocated) for name in sync.cluster.nodes()}


def fresh(nodes: list[Any], pods: list[Any]) -> ClusterSync:
    sync = ClusterSync(LEVELS, pod_owner="kube", clock=lambda: 0.0)
    sync.resync(nodes, pods)
    return sync


def test_a_pod_made_again_under_its_name_elsewhere_is_a_new_pod() -> None:
    """K5: a StatefulSet pod deleted and made again on another node during a watch gap."""
    sync = synced("a", "b")
    sync.apply("ADDED", pod("web-0", "a", 8, uid="u1"))
    assert used(sync) == {"a": 8, "b": 0}
    again = pod("web-0", "b", 8, uid="u2", version=5)  # its DELETED was missed
    result = sync.apply("ADDED", again)
    assert result.action == "pod adopted"
    assert any("replaces uid u1" in w for w in result.warnings)
    assert used(sync) == {"a": 0, "b": 8}  # the old incarnation's GPUs are free
    placement = sync.cluster.place_gang(GangRequest(1, 8))
    assert placement is not None and placement.nodes == ("a",)  # never b
    assert sync.apply("MODIFIED", pod("web-0", "a", 8, uid="u1", version=3)).action == "ignored"
    assert used(sync) == {"a": 0, "b": 8}  # a late event of the old one changes nothing


def test_a_late_event_of_an_older_incarnation_never_seen_is_ignored() -> None:
    """K5, K6: the first incarnation's ADDED arrives after the second's (found by the relist
    machine): older than what is applied under the name, it ends nothing."""
    sync = synced("a", "b")
    sync.apply("ADDED", pod("web-0", "b", 1, uid="u2", version=9))
    late = sync.apply("ADDED", pod("web-0", "a", 0, uid="u1", version=5, cpu="1"))
    assert late.action == "ignored"
    assert any("older than 9 of uid u2" in w for w in late.warnings)
    assert used(sync) == {"a": 0, "b": 1}
    assert sync.apply("MODIFIED", pod("web-0", "a", 2, uid="u1", version=6)).action == "ignored"
    assert used(sync) == {"a": 0, "b": 1}


def test_a_relist_after_a_watch_gap_holds_the_new_incarnation() -> None:
    sync = synced("a", "b")
    sync.apply("ADDED", pod("web-0", "a", 8, uid="u1"))
    sync.resync([node("a"), node("b")], [pod("web-0", "b", 8, uid="u2", version=7)])
    assert used(sync) == {"a": 0, "b": 8}


def test_pods_of_a_node_registered_again_are_adopted_again() -> None:
    """K2: a kubelet restart deletes and registers the node; its pods keep running."""
    sync = synced("a", "b")
    sync.apply("ADDED", pod("train-0", "a", 8))
    assert sync.apply("DELETED", node("a", version=2)).action == "node removed"
    assert used(sync) == {"b": 0}
    assert sync.apply("ADDED", node("a", version=3, uid="node-a-2")).action == "node added"
    assert used(sync) == {"a": 8, "b": 0}  # train-0 waited for its node
    sync.resync([node("a", version=3, uid="node-a-2"), node("b")], [pod("train-0", "a", 8)])
    assert used(sync) == {"a": 8, "b": 0}


def test_a_node_registered_again_under_a_new_uid_without_a_deletion() -> None:
    sync = synced("a")
    sync.apply("ADDED", pod("train-0", "a", 8))
    result = sync.apply("MODIFIED", node("a", version=4, uid="node-a-2"))
    assert any("registered again" in w for w in result.warnings)
    assert used(sync) == {"a": 8}


def test_one_relist_converges_when_a_node_moves_rack_and_its_pods_vanish() -> None:
    """K4: the vanished pods end before nodes are applied, so the move is not deferred."""
    sync = synced("a", "b")
    sync.apply("ADDED", pod("old", "a", 8))
    nodes = [node("a", rack="r1", version=2), node("b")]
    sync.resync(nodes, [])
    assert sync.cluster.node("a").topology == {"rack": "r1"}
    assert _state(sync) == _state(fresh(nodes, []))


def test_a_relist_moves_a_busy_node_and_adopts_its_pods_again() -> None:
    sync = synced("a", "b")
    sync.apply("ADDED", pod("run", "a", 8))
    nodes, pods = [node("a", rack="r1", version=2), node("b")], [pod("run", "a", 8)]
    sync.resync(nodes, pods)
    assert sync.cluster.node("a").topology == {"rack": "r1"} and used(sync)["a"] == 8
    assert _state(sync) == _state(fresh(nodes, pods))


def test_a_stale_event_after_the_pod_finished_is_ignored_and_named() -> None:
    """K6: Running at version 3 arrives after Succeeded at version 5."""
    sync = synced("a")
    sync.apply("ADDED", pod("job", "a", 8, version=2))
    assert sync.apply("MODIFIED", pod("job", "a", 8, version=5, phase="Succeeded")).action == (
        "allocation ended"
    )
    stale = sync.apply("MODIFIED", pod("job", "a", 8, version=3))
    assert stale.action == "ignored" and used(sync) == {"a": 0}
    assert stale.warnings == (
        "pod ml/job: resourceVersion 3 is older than 5, already applied: ignored",
    )
    assert sync.apply("DELETED", pod("job", "a", 8, version=6)).warnings == ()


def test_an_older_node_event_is_ignored_and_named() -> None:
    sync = synced("a")
    sync.apply("MODIFIED", node("a", rack="r9", version=5))
    stale = sync.apply("MODIFIED", node("a", rack="r0", version=4))
    assert stale.warnings == (
        "node a: resourceVersion 4 is older than 5, already applied: ignored",
    )
    assert sync.cluster.node("a").topology == {"rack": "r9"}


def test_an_in_place_resize_is_read_again() -> None:
    """K5: a running pod's CPU request grows from 4 to 48 cores."""
    sync = synced("a")
    sync.apply("ADDED", pod("svc", "a", 1, cpu="4"))
    assert sync.cluster.node("a").free_resources["cpu"] == 60_000
    result = sync.apply("MODIFIED", pod("svc", "a", 1, cpu="48", version=2))
    assert any("what it holds changed" in w for w in result.warnings)
    assert sync.cluster.node("a").free_resources["cpu"] == 16_000
    assert len(sync.cluster.node("a").allocated) == 1


def test_a_node_that_stops_advertising_gpus_is_cordoned_at_once_and_left_out_at_relist() -> None:
    sync = synced("a", "b")
    result = sync.apply("MODIFIED", node("a", gpus=0, version=2))
    assert result.warnings == (
        "node a cordoned: it no longer advertises GPUs; a relist leaves it out",
    )
    assert sync.cluster.node("a").cordoned
    assert sync.cluster.place_gang(GangRequest(2, 8)) is None
    assert sync.apply("MODIFIED", node("a", version=3)).action == "node updated"
    assert not sync.cluster.node("a").cordoned  # GPUs back
    sync.apply("MODIFIED", node("a", gpus=0, version=4))
    sync.resync([node("a", gpus=0, version=4), node("b")])
    assert sync.cluster.nodes() == ["b"]


def test_cpu_pods_on_cpu_nodes_are_quiet_and_indexed_by_node() -> None:
    """K7: one summary line per relist at most; a node that gains GPUs adopts only its pods."""
    sync = ClusterSync(LEVELS, pod_owner="kube", clock=lambda: 0.0)
    nodes = [node("g"), *(node(f"c{i}", gpus=0) for i in range(50))]
    pods = [pod(f"web-{i}", f"c{i % 50}", 0, cpu="2") for i in range(200)]
    results = sync.resync(nodes, pods)
    warned = [w for result in results for w in result.warnings]
    assert warned == ["200 running pod(s) on 50 node(s) without GPUs not tracked"]
    event = sync.apply("MODIFIED", pod("web-0", "c0", 0, cpu="3", version=2))
    assert event.action == "pod waiting" and event.warnings == ()
    added = sync.apply("MODIFIED", node("c7", version=2))  # c7 now advertises GPUs
    assert added.action == "node added"
    assert sync.cluster.node("c7").free_resources["cpu"] == 64_000 - 4 * 2_000


def test_two_watch_threads_never_split_a_gang() -> None:
    """K8: nodes and pods applied from two threads; the gang is one allocation every time."""
    for round_ in range(40):
        sync = ClusterSync(LEVELS, pod_owner="kube")
        nodes = [node(f"n{i}") for i in range(4)]
        pods = [pod(f"w{i}", f"n{i}", 8, gang="job") for i in range(4)]
        barrier = threading.Barrier(2)

        def feed(objects: list[Any], sync: ClusterSync = sync, barrier: Any = barrier) -> None:
            barrier.wait()
            for obj in objects:
                sync.apply("ADDED", obj)

        threads = [threading.Thread(target=feed, args=(part,)) for part in (nodes, pods)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        allocations = sync.cluster.allocations()
        assert len(allocations) == 1, round_
        assert len(allocations[0].placement.pods) == 4


def test_bad_identity_fields_are_named() -> None:
    sync = synced("a")
    missing = pod("p", "a", 1)
    del missing["metadata"]["uid"]
    assert sync.apply("ADDED", missing).warnings == (
        "pod ml/p: metadata.uid is missing: known by namespace and name",
    )
    odd = pod("q", "a", 1)
    odd["metadata"]["resourceVersion"] = "v12"
    assert sync.apply("ADDED", odd).warnings[0] == (
        "pod ml/q: metadata.resourceVersion 'v12' is not a number: applied in arrival order"
    )


def _state(sync: ClusterSync) -> Any:
    """What placements depend on: every node as it reads, and the held GPUs and resources."""
    cluster = sync.cluster
    nodes = {}
    for name in cluster.nodes():
        info = cluster.node(name)
        nodes[name] = (
            info.gpus,
            tuple(sorted(info.topology.items())),
            tuple(sorted(info.labels.items())),
            info.unhealthy,
            info.cordoned,
            len(info.free),
            tuple(sorted(info.free_resources.items())),
        )
    return nodes


def test_a_bind_seen_before_its_commit_is_matched_silently() -> None:
    """K9: the scheduler reserved, bound the pods, and commits after their events came."""
    from gangplace.k8s import binding_patches, binding_plan

    sync = synced("a", "b")
    held = sync.cluster.reserve(GangRequest(2, 8), owner="sched")
    patches = binding_patches(binding_plan(held.placement, ["t-0", "t-1"]), allocation=held.id)
    for rank, where in enumerate(held.placement.nodes):
        bound = pod(f"t-{rank}", where, 8)
        bound["metadata"]["annotations"] = patches[f"t-{rank}"]["metadata"]["annotations"]
        result = sync.apply("ADDED", bound)
        assert (result.action, result.rank, result.warnings) == ("pod matched", rank, ())
    allocation = sync.cluster.commit(held, owner="sched")
    ended = sync.apply("DELETED", pod("t-0", held.placement.nodes[0], 8, version=9))
    assert ended.action == "pod ended"
    (after,) = sync.cluster.allocations()
    assert after.id == allocation.id and after.ended == (0,)
