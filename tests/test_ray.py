"""gangplace.ray (docs/ray.md): Ray's tables read as untrusted input, bundles pinned to the
nodes gangplace chose, and a real local multi-node Ray cluster on 127.0.0.1.

The real cluster (``ray.cluster_utils.Cluster``: a head without GPUs and six workers with 8
fake GPUs each, racks ``r0`` and ``r1``) is started once for this module, in one pytest
worker (xdist group ``ray``), with Ray kept on loopback as the sweeps keep it.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from gangplace import GangRequest, InvalidRequest, MultiGangRequest, PodGroup, Unschedulable
from gangplace.ray import (
    NODE_ID_LABEL,
    RayError,
    RaySync,
    bundles_for,
    cluster_from_ray,
    placement_group,
    repair,
)
from gangplace.ray.nodes import read_node

LEVELS = {"rack": "example.com/rack"}


def _record(node_id: str, rack: str | None = "r0", gpus: Any = 8.0, **fields: Any) -> Any:
    labels = {NODE_ID_LABEL: node_id}
    if rack is not None:
        labels["example.com/rack"] = rack
    record = {
        "NodeID": node_id,
        "Alive": True,
        "Resources": {"GPU": gpus, "CPU": 16.0, "memory": 2.0**36},
        "Labels": labels,
    }
    record.update(fields)
    return record


# ------------------------------------------------------------------ reading (no Ray)


@pytest.mark.parametrize(
    ("record", "warning"),
    [
        (_record("a", Alive=False), "node a left out: dead (Alive is false)"),
        (_record("a", rack=None), "node a left out: Labels: no 'example.com/rack' label"),
        (_record("a", gpus=0.5), "node a left out: Resources.GPU: 0.5 GPUs: not a whole"),
        (_record("a", gpus="8"), "node a left out: Resources.GPU: expected a number"),
        (_record("a", gpus=128), "node a left out: Resources.GPU: 128 GPUs, above 64"),
        (_record("a", Resources=None), "node a left out: Resources: expected a dict"),
        (_record("a", Labels=["x"]), "node a left out: Labels: expected a dict of strings"),
        (_record("a", Alive=None), "node a left out: Alive: got None"),
        ({"Alive": True}, "node record left out: NodeID: expected a node id"),
        ("a", "node record left out: expected a dict, got str"),
    ],
)
def test_a_bad_record_is_left_out_with_a_warning_naming_the_field(
    record: Any, warning: str
) -> None:
    node, said = read_node(record, LEVELS)
    assert node is None and said is not None and said.startswith(warning), said


def test_nodes_without_gpus_are_left_out_quietly_and_the_rest_is_read() -> None:
    head = _record("head", gpus=0)
    bad_cpu = _record("c", Resources={"GPU": 8.0, "CPU": -1.0})
    cluster, warnings = cluster_from_ray(LEVELS, nodes=[head, _record("a"), bad_cpu])
    assert cluster.nodes() == ["a"]
    assert warnings == ["node c left out: Resources.CPU: expected a number >= 0, got -1.0"]
    node = cluster.node("a")
    assert node.topology == {"rack": "r0"} and node.gpus == 8
    assert node.resources == {"cpu": 16_000, "memory": 2**36}
    assert node.labels[NODE_ID_LABEL] == "a"  # the labels stay, for selectors


def test_bad_tables_are_typed_errors_that_change_nothing() -> None:
    sync = RaySync(LEVELS, clock=lambda: 0.0)
    sync.refresh([_record("a")], {})
    before = sync.cluster.snapshot()
    for nodes, groups in (("a", None), ({"a": 1}, None), ([_record("a")], ["x"])):
        with pytest.raises(InvalidRequest):
            sync.refresh(nodes, groups)  # type: ignore[arg-type]
    assert sync.cluster.snapshot() == before
    with pytest.raises(TypeError):
        RaySync({"rack": 7})  # type: ignore[dict-item]


def test_without_a_connected_ray_the_calls_say_so(monkeypatch: pytest.MonkeyPatch) -> None:
    ray = pytest.importorskip("ray")
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    sync = RaySync(LEVELS)
    with pytest.raises(RayError, match=r"Ray is not connected: call ray\.init"):
        sync.refresh()
    with pytest.raises(RayError, match="Ray is not connected"):
        placement_group(sync, GangRequest(1, 8))


def test_refresh_follows_nodes_and_adopts_others_groups() -> None:
    sync = RaySync(LEVELS)
    nodes = [_record(f"n{i}", rack=f"r{i // 2}") for i in range(4)]
    group = {
        "state": "CREATED",
        "bundles": {0: {"GPU": 8.0, "CPU": 2.0}, 1: {"GPU": 0.5}},
        "bundles_to_node_id": {0: "n0", 1: "n1"},
    }
    changes = sync.refresh(nodes, {"g1": group})
    assert changes.added == ["n0", "n1", "n2", "n3"] and changes.adopted == ["g1"]
    assert changes.warnings == []  # half a GPU is a share of one (docs/ray.md RY3)
    assert sync.cluster.stats().allocated == 8 and sync.cluster.node("n0").free == ()
    assert sync.cluster.node("n1").shared == {0: 500}
    nodes[3] = _record("n3", rack="r9")  # relabelled: no hold on it, so it moves
    changes = sync.refresh(nodes, {"g1": group})
    assert changes.updated == ["n3"] and sync.cluster.node("n3").topology == {"rack": "r9"}
    assert changes.adopted == [] and changes.released == []
    changes = sync.refresh(nodes[1:], {"g1": {**group, "state": "REMOVED"}})  # n0 died
    assert changes.removed == ["n0"] and changes.released == ["g1"]
    assert sync.cluster.stats().allocated == 0 and sync.cluster.node("n1").shared == {}


def test_shares_of_others_groups_are_adopted_as_shares() -> None:
    """docs/ray.md RY3: a bundle asking less than one GPU holds that share of one GPU (rounded
    up to a thousandth), one allocation per share asked beside the whole-GPU bundles'; a
    bundle of 1.5 GPUs is counted as 2 whole ones, with a warning; removing the group gives
    every part back."""
    sync = RaySync(LEVELS)
    nodes = [_record(f"n{i}", rack="r0") for i in range(2)]
    bundles = {
        0: {"GPU": 0.25},
        1: {"GPU": 0.25},
        2: {"GPU": 0.1},
        3: {"GPU": 1.5},
        4: {"GPU": 0.9999},
    }
    group = {
        "state": "CREATED",
        "bundles": bundles,
        "bundles_to_node_id": dict.fromkeys(bundles, "n0"),
    }
    changes = sync.refresh(nodes, {"g": group})
    assert changes.adopted == ["g"]
    assert changes.warnings == ["placement group g: bundle 3 asks 1.5 GPU: counted as 2 whole GPUs"]
    held = sync.cluster.allocations(owner="ray")
    assert sorted(a.placement.gpu_milli or 0 for a in held) == [0, 100, 250]
    # 0.9999 GPU rounds up to a whole one: GPUs 0-2 whole, shares on GPU 3.
    assert sync.cluster.node("n0").shared == {3: 600} and sync.cluster.node("n0").free == tuple(
        range(4, 8)
    )
    changes = sync.refresh(nodes, {})
    assert changes.released == ["g"] and sync.cluster.allocations(owner="ray") == []
    assert sync.cluster.node("n0").shared == {} and len(sync.cluster.node("n0").free) == 8


# ------------------------------------------------------------------ bundles (no Ray)


def test_bundles_pin_each_pod_to_its_node_in_rank_order() -> None:
    cluster, _ = cluster_from_ray(LEVELS, nodes=[_record(f"n{i}") for i in range(3)])
    request = MultiGangRequest(
        [
            PodGroup("launcher", 1, 0, resources_per_pod={"cpu": 2_000}),
            PodGroup("workers", 2, 8, resources_per_pod={"cpu": 4_000, "memory": 2**30}),
        ],
        required_level="rack",
    )
    placement = cluster.place_gang(request)
    assert placement is not None
    bundles, selectors = bundles_for(placement, request)
    assert bundles == [
        {"CPU": 2.0},
        {"GPU": 8.0, "CPU": 4.0, "memory": float(2**30)},
        {"GPU": 8.0, "CPU": 4.0, "memory": float(2**30)},
    ]
    assert selectors == [{NODE_ID_LABEL: pod.node} for pod in placement.pods]
    share = GangRequest(2, 1, gpu_milli=250)
    shared = cluster.place_gang(share)
    assert shared is not None and bundles_for(shared, share)[0] == [{"GPU": 0.25}] * 2
    cpu_only = cluster.place_gang(GangRequest(1, 0, resources_per_pod={"cpu": 1_000}))
    assert cpu_only is not None
    with pytest.raises(InvalidRequest, match="asks nothing Ray counts"):
        bundles_for(cpu_only, GangRequest(1, 0, resources_per_pod={"rdma/ib": 1}))


# ------------------------------------------------------------------ a real Ray


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[tuple[Any, dict[str, Any]]]:
    ray = pytest.importorskip("ray")
    from gangplace.sim.sweep import _loopback_only

    _loopback_only()
    from ray.cluster_utils import Cluster

    before = _listening()
    started = time.monotonic()
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    handles = {}
    try:
        for index in range(6):
            rack = f"r{index // 3}"
            handle = cluster.add_node(num_cpus=2, num_gpus=8, labels={LEVELS["rack"]: rack})
            handles[handle.node_id] = handle
        ray.init(address=cluster.address, log_to_driver=False)
        print(f"local Ray of 7 nodes up in {time.monotonic() - started:.1f} s")
        if before is not None:  # everything Ray opened listens on loopback only
            opened = (_listening() or set()) - before
            assert opened, "Ray opened no listening socket: the check would see nothing"
            loopback = {"127.0.0.1", "[::1]", "[::ffff:127.0.0.1]"}
            assert {address for address, _ in opened} <= loopback, opened
        yield cluster, handles
    finally:
        ray.shutdown()
        cluster.shutdown()  # type: ignore[no-untyped-call]


def _listening() -> set[tuple[str, str]] | None:
    """(address, port) of every listening TCP socket, from ``ss``; ``None`` without it."""
    if shutil.which("ss") is None:
        return None
    lines = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True, check=True).stdout
    return {tuple(line.split()[3].rsplit(":", 1)) for line in lines.splitlines()}  # type: ignore[misc]


@pytest.mark.xdist_group("ray")
def test_a_gang_runs_on_the_nodes_gangplace_chose_and_is_repaired(
    ray_cluster: tuple[Any, dict[str, Any]],
) -> None:
    import ray
    from ray.util import placement_group as ray_group
    from ray.util import remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    cluster, handles = ray_cluster
    sync = RaySync(LEVELS)
    assert sorted(sync.refresh().added) == sorted(handles)
    # Another user's group holds two nodes of r1: adopted, so gangplace places around it.
    other = ray_group([{"GPU": 8}] * 2, bundle_label_selector=[{LEVELS["rack"]: "r1"}] * 2)
    ray.get(other.ready(), timeout=30)
    assert sync.refresh().adopted == [other.id.hex()]
    request = GangRequest(2, 8, required_level="rack", resources_per_pod={"cpu": 1_000})
    gang = placement_group(sync, request, name="train")
    racks = {sync.cluster.node(node).topology["rack"] for node in gang.node_ids}
    assert racks == {"r0"}, "one rack: r1 has a single node left"

    @ray.remote(num_gpus=8, num_cpus=1)
    def where() -> str:
        return str(ray.get_runtime_context().get_node_id())

    def ranks_run_on() -> list[str]:
        tasks = [
            where.options(scheduling_strategy=PlacementGroupSchedulingStrategy(*gang.bundle(r)))
            for r in range(2)
        ]
        return list(ray.get([task.remote() for task in tasks], timeout=60))

    assert ranks_run_on() == list(gang.node_ids)
    survivor, dead = gang.node_ids
    cluster.remove_node(handles.pop(dead))  # a worker node dies
    for _ in range(60):
        changes = sync.refresh()
        if changes.removed:
            break
        time.sleep(0.5)
    assert changes.removed == [dead] and changes.lost == {gang.placement_group.id.hex(): (1,)}
    fixed = repair(sync, gang)
    assert fixed.ranks == (1,) and gang.node_ids[0] == survivor  # the survivor kept its node
    assert {sync.cluster.node(node).topology["rack"] for node in gang.node_ids} == {"r0"}
    assert ranks_run_on() == list(gang.node_ids)
    assert gang.remove() and not gang.remove()
    remove_placement_group(other)
    assert sync.refresh().released == [other.id.hex()]
    assert sync.cluster.stats().allocated == 0


@pytest.mark.xdist_group("ray")
def test_a_group_ray_cannot_make_ready_is_removed_and_its_hold_given_back(
    ray_cluster: tuple[Any, dict[str, Any]],
) -> None:
    import ray
    from ray.util import placement_group_table
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    _, handles = ray_cluster
    sync = RaySync(LEVELS)
    sync.refresh()
    node = sorted(handles)[0]

    @ray.remote(num_gpus=8, num_cpus=0)
    class Hog:  # GPUs held outside any placement group: invisible to the sync
        def ready(self) -> bool:
            return True

    there = NodeAffinitySchedulingStrategy(node, soft=False)
    hog = Hog.options(scheduling_strategy=there).remote()  # type: ignore[attr-defined]
    ray.get(hog.ready.remote(), timeout=30)
    pinned = GangRequest(1, 8, selector={NODE_ID_LABEL: node})
    before = sync.cluster.stats()
    with pytest.raises(RayError, match="was not ready within 2 s"):
        placement_group(sync, pinned, ready_timeout=2)
    assert sync.cluster.stats() == before and sync.gangs == {}
    assert sync.cluster.reservations() == [] and sync.cluster.allocations() == []
    assert placement_group_table() == {} or all(
        record["state"] == "REMOVED" for record in placement_group_table().values()
    )
    ray.kill(hog)
    with pytest.raises(Unschedulable):  # nothing made when gangplace finds no room
        placement_group(sync, GangRequest(9, 8, required_level="rack"))
