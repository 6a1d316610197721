"""docs/kubernetes.md K12: the controller, with the real ``kubernetes`` client against a test
API server on 127.0.0.1 (``fake_apiserver``): lists and watches with bookmarks, 410 Gone and
one relist, gangs of pending pods bound whole, bindings answered 201, 409 and 500, and the
metrics."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client
from prometheus_client import CollectorRegistry

from gangplace.k8s import GANG_SIZE_ANNOTATION, Controller
from gangplace.k8s.testing import FakeApiServer

LEVELS = {"rack": "example.com/rack"}
RACK = "example.com/rack"


def gpu_node(name: str, rack: str) -> dict[str, Any]:
    capacity = {"nvidia.com/gpu": "8", "cpu": "64", "memory": "512Gi"}
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": {RACK: rack}},
        "spec": {},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def gang_pod(name: str, gang: str, size: int, gpus: int = 8) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "labels": {"scheduling.x-k8s.io/pod-group": gang},
            "annotations": {GANG_SIZE_ANNOTATION: str(size)},
        },
        "spec": {
            "schedulerName": "gangplace",
            "containers": [
                {"name": "main", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
            ],
        },
        "status": {"phase": "Pending"},
    }


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    api = FakeApiServer()
    for index in range(4):
        api.put("node", gpu_node(f"n{index}", f"r{index // 2}"))
    yield api
    api.close()


def controller_for(server: FakeApiServer, **kwargs: Any) -> tuple[Controller, CollectorRegistry]:
    configuration = client.Configuration(host=server.url)
    core = client.CoreV1Api(client.ApiClient(configuration))
    registry = CollectorRegistry()
    made = Controller(core, LEVELS, metrics=registry, watch_timeout=1, **kwargs)
    made.start()
    return made, registry


def step_until(controller: Controller, done: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, "the controller did not get there in time"
        controller.step(timeout=0.1)


def metric(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def bound(server: FakeApiServer, *names: str) -> list[str | None]:
    return [server.pods[("ml", name)]["spec"].get("nodeName") for name in names]


def test_a_gang_is_bound_whole_once_all_its_pods_exist(server: FakeApiServer) -> None:
    controller, registry = controller_for(server)
    try:
        server.put("pod", gang_pod("train-0", "train", 3))
        server.put("pod", gang_pod("train-1", "train", 3))
        step_until(controller, lambda: metric(registry, "gangplace_k8s_pods_waiting") == 2)
        assert bound(server, "train-0", "train-1") == [None, None]  # 2 of 3: it waits
        server.put("pod", gang_pod("train-2", "train", 3))
        step_until(controller, lambda: None not in bound(server, "train-0", "train-1", "train-2"))
        step_until(controller, lambda: len(controller.sync.cluster.allocations()) == 1)
        held = controller.sync.cluster.allocations()[0]
        assert held.placement.nodes == tuple(bound(server, "train-0", "train-1", "train-2"))
        annotations = server.pods[("ml", "train-1")]["metadata"]["annotations"]
        assert annotations["gangplace.io/rank"] == "1"
        assert annotations["gangplace.io/allocation"] == held.id
        assert metric(registry, "gangplace_k8s_binds_total", result="bound") == 3
        step_until(
            controller,
            lambda: (
                metric(registry, "gangplace_k8s_events_total", kind="pod", result="pod matched")
                == 3
            ),
        )
        assert metric(registry, "gangplace_k8s_relists_total", reason="start") == 1
    finally:
        controller.close()


def test_a_410_relists_once_and_misses_nothing(server: FakeApiServer) -> None:
    controller, registry = controller_for(server)
    try:
        server.bookmarks = False  # the node watch keeps the list's version...
        other = gang_pod("other-0", "other", 1)
        other["spec"]["schedulerName"] = "default-scheduler"  # not the controller's to bind
        server.put("pod", other)
        server.compact()  # ...which is now compacted away: its restart gets 410
        step_until(
            controller,
            lambda: metric(registry, "gangplace_k8s_relists_total", reason="gone") >= 1,
            seconds=15,
        )
        server.put("node", gpu_node("n9", "r9"))  # after the relist: seen by the new watch
        step_until(controller, lambda: "n9" in controller.sync.cluster)
        server.put("pod", gang_pod("solo-0", "solo", 1))
        step_until(controller, lambda: bound(server, "solo-0") != [None])
        assert metric(registry, "gangplace_k8s_relists_total", reason="gone") == 1
    finally:
        controller.close()


def test_bookmarks_keep_a_quiet_watch_current(server: FakeApiServer) -> None:
    """The node watch sees only bookmarks while pods change; restarted after its timeout it
    asks from the bookmark's version, so a compaction behind it costs no relist."""
    controller, registry = controller_for(server)
    try:
        server.put("pod", gang_pod("solo-0", "solo", 1))
        step_until(controller, lambda: bound(server, "solo-0") != [None])
        time.sleep(1.5)  # both watches end (timeout 1 s) and restart from their versions
        controller.step(timeout=0.5)
        server.compact()
        server.put("node", gpu_node("n8", "r8"))
        step_until(controller, lambda: "n8" in controller.sync.cluster)
        assert metric(registry, "gangplace_k8s_relists_total", reason="gone") == 0
        node_versions = [int(v) for kind, v in server.watch_versions if kind == "node"]
        assert node_versions[-1] > node_versions[0]  # moved forward by bookmarks alone
    finally:
        controller.close()


def test_a_failed_binding_deletes_the_bound_pods_rolls_back_and_retries(
    server: FakeApiServer,
) -> None:
    server.binding_replies["pair-1"] = [500]
    server.put("pod", gang_pod("pair-0", "pair", 2))
    server.put("pod", gang_pod("pair-1", "pair", 2))
    controller, registry = controller_for(server, retry_seconds=0.3)
    try:
        step_until(
            controller, lambda: metric(registry, "gangplace_k8s_binds_total", result="failed") == 1
        )
        assert ("ml", "pair-0") not in server.pods  # bound before the failure: deleted
        assert "gangplace.io/rank" not in server.pods[("ml", "pair-1")]["metadata"]["annotations"]
        assert metric(registry, "gangplace_k8s_binds_total", result="deleted") == 1
        assert not [h for h in controller.sync.cluster.reservations()]
        server.put("pod", gang_pod("pair-0", "pair", 2))  # its controller makes it again
        step_until(controller, lambda: None not in bound(server, "pair-0", "pair-1"))
        assert metric(registry, "gangplace_k8s_binds_total", result="bound") == 2
    finally:
        controller.close()


def test_a_409_for_a_pod_already_bound_to_its_node_counts_as_bound(server: FakeApiServer) -> None:
    """A retry after a lost reply: the server says 409, the pod is on the placed node."""
    pod = server.put("pod", gang_pod("solo-0", "solo", 1))
    server.binding_replies["solo-0"] = [409]
    original = FakeApiServer.put

    def bind_first(self: FakeApiServer, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        annotations = obj["metadata"].get("annotations", {})
        if obj is pod and "gangplace.io/gpus" in annotations and not obj["spec"].get("nodeName"):
            obj["spec"]["nodeName"] = "n0"  # the lost first reply had bound it to n0
        return original(self, kind, obj)

    server.put = bind_first.__get__(server)  # type: ignore[method-assign]
    controller, registry = controller_for(server)
    try:
        step_until(
            controller, lambda: metric(registry, "gangplace_k8s_binds_total", result="bound") == 1
        )
        assert bound(server, "solo-0") == ["n0"]
    finally:
        controller.close()


def test_events_of_an_older_watch_are_dropped_after_a_relist(server: FakeApiServer) -> None:
    controller, registry = controller_for(server)
    try:
        stale = (controller.generation - 1, "node", "DELETED", gpu_node("n0", "r0"))
        controller.events.put(stale)
        controller.step(timeout=0.5)
        assert "n0" in controller.sync.cluster
        assert metric(registry, "gangplace_k8s_events_total", kind="node", result="stale") == 1
    finally:
        controller.close()


def test_a_failed_relist_is_retried_after_a_pause(server: FakeApiServer) -> None:
    controller, registry = controller_for(server, retry_seconds=0.2)
    try:
        calls = {"count": 0}
        listing = controller.core_v1.list_node

        def flaky(*args: Any, **kwargs: Any) -> Any:
            if not kwargs.get("watch"):
                calls["count"] += 1
                if calls["count"] == 1:
                    raise client.ApiException(status=500, reason="the test's failure")
            return listing(*args, **kwargs)

        controller.core_v1.list_node = flaky
        controller.events.put((controller.generation, "node", "gone", None))
        controller.step(timeout=0.1)
        assert calls["count"] == 1 and metric(registry, "gangplace_k8s_warnings_total") >= 1
        controller.step(timeout=0.0)
        assert calls["count"] == 1  # not yet: the pause
        step_until(controller, lambda: calls["count"] == 2)
        assert metric(registry, "gangplace_k8s_relists_total", reason="gone") == 1
    finally:
        controller.close()
