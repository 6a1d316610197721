"""Relist equivalence as a property (issue 44, item 3; docs/kubernetes.md K4-K6).

A world of nodes and pods changes (pods created, finished, deleted, made again under their
name on another node, resized; nodes added, deleted, registered again, moved to another rack,
marked NotReady, losing GPUs); every change is an event at the next ``resourceVersion``,
delivered to a :class:`ClusterSync` as is, twice, late (after newer events of the same
object), or not at all. After every delivery no GPU that a running pod of the objects the
sync has applied uses is free, on every node no event was missed for; after every relist
the sync's cluster is the one a new sync builds from the same lists. Objects are dicts, or
the client's model objects for half the runs.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from kubernetes import client

from gangplace.k8s import ClusterSync

LEVELS = {"rack": "example.com/rack"}
NODES = [f"n{i}" for i in range(5)]
RACKS = ["r0", "r1"]
API = client.ApiClient()


def _node(name: str, spec: dict[str, Any], version: int) -> dict[str, Any]:
    capacity = {"cpu": "32", "memory": "256Gi"}
    if spec["gpus"]:
        capacity["nvidia.com/gpu"] = str(spec["gpus"])
    allocatable = {**capacity}
    if spec["gpus"]:
        allocatable["nvidia.com/gpu"] = str(spec["gpus"] - spec["broken"])
    ready = "False" if spec["notready"] else "True"
    taints = [{"key": "dedicated", "value": "llm", "effect": "NoSchedule"}]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": spec["uid"],
            "resourceVersion": str(version),
            "labels": {"example.com/rack": spec["rack"]},
        },
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": ready}],
        },
        "spec": {"taints": taints if spec.get("tainted") else []},  # K10
    }


def _pod(uid: str, spec: dict[str, Any], version: int) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": str(spec["gpus"])} if spec["gpus"] else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": spec["name"],
            "namespace": "ml",
            "uid": uid,
            "resourceVersion": str(version),
            "labels": {"scheduling.x-k8s.io/pod-group": spec["gang"]} if spec["gang"] else {},
        },
        "spec": {
            "nodeName": spec["node"],
            "containers": [
                {
                    "name": "main",
                    "resources": {"limits": limits, "requests": {"cpu": str(spec["cpu"])}},
                }
            ],
        },
        "status": {"phase": spec["phase"]},
    }


class SyncMachine(RuleBasedStateMachine):
    """The world, the events it made, and a sync fed a perturbed stream of them."""

    @initialize(models=st.booleans())
    def start(self, models: bool) -> None:
        self.models = models
        self.version = 0
        self.nodes: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, dict[str, Any]] = {}  # uid -> spec (running or pending)
        self.uids = 0
        self.rvs: dict[str, int] = {}  # object id -> the version of its last change
        self.late: list[tuple[str, dict[str, Any]]] = []  # events held back, delivered later
        self.applied: dict[str, tuple[int, dict[str, Any]]] = {}  # object id -> newest applied
        self.dirty: set[str] = set()  # nodes an event was missed for, until the next relist
        self.sync = ClusterSync(LEVELS, pod_owner="kube", clock=lambda: 0.0)
        for name, rack, gpus in (
            ("n0", "r0", 8),
            ("n1", "r0", 8),
            ("n2", "r1", 8),
            ("n3", "r1", 0),
        ):
            self.add_node(name, rack, gpus, "send")

    # ------------------------------------------------------------------ the world

    def _next(self) -> int:
        self.version += 1
        return self.version

    def _uid(self) -> str:
        self.uids += 1
        return f"uid-{self.uids:04d}"

    def _free(self, name: str) -> tuple[int, int]:
        """Free GPUs (healthy) and cores on a node, as the kubelet counts them."""
        spec = self.nodes[name]
        running = [p for p in self.pods.values() if p["node"] == name]
        gpus = spec["gpus"] - spec["broken"] - sum(p["gpus"] for p in running)
        return gpus, 32 - sum(p["cpu"] for p in running)

    def _emit(self, event: str, obj: dict[str, Any], delivery: str, nodes: set[str]) -> None:
        meta = obj["metadata"]
        self.rvs[meta["uid"] if obj["kind"] == "Pod" else meta["name"]] = int(
            meta["resourceVersion"]
        )
        if delivery == "miss":
            self.dirty |= nodes
            return
        if delivery == "late":
            self.late.append((event, obj))
            self.dirty |= nodes  # until it arrives, the sync misses it
            return
        self._deliver(event, obj)
        if delivery == "twice":
            self._deliver(event, obj)

    def _deliver(self, event: str, obj: dict[str, Any]) -> None:
        sent = copy.deepcopy(obj)
        kind = sent["kind"]
        if self.models:
            sent = API._ApiClient__deserialize(sent, f"V1{kind}")  # type: ignore[attr-defined]
        self.sync.apply(event, sent)
        meta = obj["metadata"]
        key = f"{kind}/{meta['uid'] if kind == 'Pod' else meta['name']}"
        version = int(meta["resourceVersion"])
        if key not in self.applied or self.applied[key][0] < version:
            self.applied[key] = (version, obj if event != "DELETED" else {})

    deliveries = st.sampled_from(["send", "send", "send", "twice", "late", "miss"])

    @rule(name=st.sampled_from(NODES), rack=st.sampled_from(RACKS), gpus=st.sampled_from([0, 8]),
          delivery=deliveries)  # fmt: skip
    def add_node(self, name: str, rack: str, gpus: int, delivery: str) -> None:
        if name in self.nodes:
            return
        spec = {"rack": rack, "gpus": gpus, "broken": 0, "notready": False, "uid": self._uid()}
        self.nodes[name] = spec
        self._emit("ADDED", _node(name, spec, self._next()), delivery, {name})

    @precondition(lambda self: bool(self.nodes))
    @rule(data=st.data(), delivery=deliveries, again=st.booleans())
    def delete_node(self, data: st.DataObject, delivery: str, again: bool) -> None:
        """Deleted; with ``again``, registered again at once under a new uid (pods keep running)."""
        name = data.draw(st.sampled_from(sorted(self.nodes)))
        spec = self.nodes[name]
        self._emit("DELETED", _node(name, spec, self._next()), delivery, {name})
        if again:
            spec["uid"] = self._uid()
            self._emit("ADDED", _node(name, spec, self._next()), delivery, {name})
            return
        del self.nodes[name]
        for uid in [u for u, p in self.pods.items() if p["node"] == name]:
            del self.pods[uid]  # the pod garbage collector deletes them; their events missed
            self.dirty.add(name)

    @precondition(lambda self: bool(self.nodes))
    @rule(data=st.data(), change=st.sampled_from(["rack", "notready", "broken", "taint"]),
          delivery=deliveries)  # fmt: skip
    def change_node(self, data: st.DataObject, change: str, delivery: str) -> None:
        name = data.draw(st.sampled_from(sorted(self.nodes)))
        spec = self.nodes[name]
        if change == "rack":
            spec["rack"] = "r1" if spec["rack"] == "r0" else "r0"
        elif change == "notready":
            spec["notready"] = not spec["notready"]
        elif change == "taint":
            spec["tainted"] = not spec.get("tainted")
        elif spec["gpus"] and self._free(name)[0] > 0:
            spec["broken"] += 1  # a free GPU withdrawn by the device plugin
        elif spec["broken"]:
            spec["broken"] -= 1
        self._emit("MODIFIED", _node(name, spec, self._next()), delivery, {name})

    @precondition(lambda self: bool(self.nodes))
    @rule(data=st.data(), name=st.sampled_from(["w0", "w1", "w2", "w3", "svc"]),
          gpus=st.sampled_from([0, 1, 4]), cpu=st.sampled_from([1, 4]),
          gang=st.sampled_from([None, "job"]), delivery=deliveries)  # fmt: skip
    def create_pod(
        self, data: st.DataObject, name: str, gpus: int, cpu: int, gang: str | None, delivery: str
    ) -> None:
        """A pod bound and running; if one of that name runs, it is deleted first (a
        StatefulSet's pod made again, maybe on another node)."""
        where = data.draw(st.sampled_from(sorted(self.nodes)))
        for uid, spec in list(self.pods.items()):
            if spec["name"] == name:
                del self.pods[uid]
                self._emit("DELETED", _pod(uid, spec, self._next()), delivery, {spec["node"]})
        free_gpus, free_cpu = self._free(where)
        if gpus > free_gpus or cpu > free_cpu or (gpus and not self.nodes[where]["gpus"]):
            return
        spec = {"name": name, "node": where, "gpus": gpus, "cpu": cpu, "gang": gang,
                "phase": "Running"}  # fmt: skip
        uid = self._uid()
        self.pods[uid] = spec
        self._emit("ADDED", _pod(uid, spec, self._next()), delivery, {where})

    @precondition(lambda self: bool(self.pods))
    @rule(data=st.data(), end=st.sampled_from(["Succeeded", "Failed", "deleted", "resize"]),
          delivery=deliveries)  # fmt: skip
    def change_pod(self, data: st.DataObject, end: str, delivery: str) -> None:
        uid = data.draw(st.sampled_from(sorted(self.pods)))
        spec = self.pods[uid]
        if end == "resize":
            more = 4 if self._free(spec["node"])[1] >= 4 else -spec["cpu"] + 1
            spec["cpu"] += more
            self._emit("MODIFIED", _pod(uid, spec, self._next()), delivery, {spec["node"]})
            return
        del self.pods[uid]
        if end == "deleted":
            self._emit("DELETED", _pod(uid, spec, self._next()), delivery, {spec["node"]})
        else:
            self._emit("MODIFIED", _pod(uid, {**spec, "phase": end}, self._next()), delivery,
                       {spec["node"]})  # fmt: skip

    @precondition(lambda self: bool(self.late))
    @rule()
    def deliver_late(self) -> None:
        """A held-back event arrives, after newer events of its object: the sync ignores it."""
        event, obj = self.late.pop(0)
        self._deliver(event, obj)

    @rule()
    def relist(self) -> None:
        nodes = [_node(name, spec, self.rvs[name]) for name, spec in sorted(self.nodes.items())]
        pods = [_pod(uid, spec, self.rvs[uid]) for uid, spec in sorted(self.pods.items())]
        if self.models:
            nodes = [API._ApiClient__deserialize(n, "V1Node") for n in nodes]  # type: ignore[attr-defined]
            pods = [API._ApiClient__deserialize(p, "V1Pod") for p in pods]  # type: ignore[attr-defined]
        self.sync.resync(nodes, pods)
        fresh = ClusterSync(LEVELS, pod_owner="kube", clock=lambda: 0.0)
        fresh.resync(nodes, pods)
        assert _state(self.sync) == _state(fresh)
        self.dirty.clear()
        self.late.clear()  # a relist restarts the watch at its version: older events never come
        self.applied = {}

    # ------------------------------------------------------------------ the promise

    @invariant()
    def no_gpu_of_a_running_pod_is_free(self) -> None:
        if not hasattr(self, "sync"):
            return
        cluster = self.sync.cluster
        need: dict[str, int] = {}
        for key, (_, obj) in self.applied.items():
            if not key.startswith("Pod/") or not obj or obj["status"]["phase"] != "Running":
                continue
            where = obj["spec"]["nodeName"]
            limits = obj["spec"]["containers"][0]["resources"]["limits"]
            need[where] = need.get(where, 0) + int(limits.get("nvidia.com/gpu", 0))
        for name in cluster.nodes():
            if name in self.dirty:
                continue
            assert len(cluster.node(name).allocated) >= need.get(name, 0), name


def _state(sync: ClusterSync) -> Any:
    cluster = sync.cluster
    state = {}
    for name in cluster.nodes():
        info = cluster.node(name)
        state[name] = (
            info.gpus,
            tuple(sorted(info.topology.items())),
            len(info.unhealthy),  # counted from allocatable: which GPUs is not known
            info.cordoned,
            info.taints,  # K10
            len(info.free),
            tuple(sorted(info.free_resources.items())),
        )
    return state


SyncMachine.TestCase.settings = settings(
    settings.default,  # the profile's examples: 500 in the test command
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_relists_equal_a_fresh_build_and_no_running_gpu_is_free = SyncMachine.TestCase


def test_a_withdrawn_gpu_marked_on_a_held_one_moves_to_a_free_one() -> None:
    """Found by the machine above (K2): all 8 GPUs held by two pods when the device plugin
    withdraws one (the deletion of one pod not seen yet), so the mark goes on a held GPU; once
    that pod's deletion arrives (an event, or a relist) the mark moves to a free GPU: the
    running pod loses no rank, and the state is the one a new sync builds."""
    for by_relist in (False, True):
        sync = ClusterSync(LEVELS, pod_owner="kube", clock=lambda: 0.0)
        node = {"rack": "r0", "gpus": 8, "broken": 0, "notready": False, "uid": "uid-n0"}
        sync.apply("ADDED", _node("n0", node, 1))
        first = {"name": "a", "node": "n0", "gpus": 4, "cpu": 1, "gang": None, "phase": "Running"}
        second = {**first, "name": "b"}
        sync.apply("ADDED", _pod("uid-a", first, 2))
        sync.apply("ADDED", _pod("uid-b", second, 3))
        node["broken"] = 1  # a was deleted, its event held back: a GPU is withdrawn
        sync.apply("MODIFIED", _node("n0", node, 5))
        assert len(sync.cluster.node("n0").unhealthy) == 1 and sync.cluster.node("n0").free == ()
        if by_relist:
            nodes, pods = [_node("n0", node, 5)], [_pod("uid-b", second, 3)]
            sync.resync(nodes, pods)
        else:
            sync.apply("DELETED", _pod("uid-a", first, 4))
            nodes, pods = [_node("n0", node, 5)], [_pod("uid-b", second, 3)]
        info = sync.cluster.node("n0")
        assert len(info.free) == 3 and not set(info.unhealthy) & set(info.allocated)
        assert sync.cluster.allocations(lost=True) == []
        fresh = ClusterSync(LEVELS, pod_owner="kube", clock=lambda: 0.0)
        fresh.resync(nodes, pods)
        assert _state(sync) == _state(fresh)
