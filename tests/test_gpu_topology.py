"""GPU groups inside a node (docs/shapes.md "Inside a node"): nvidia-smi, the GPU choice, the
reference.

The two ``nvidia-smi topo -m`` fixtures are written to match the format the tool prints: an
HGX H100 board (NV18 between every pair of GPUs, two NUMA nodes, four NICs) and a PCIe board
(pairs behind PCIe switches, PIX and PXB; NODE inside a socket, SYS across).
"""

from __future__ import annotations

from pathlib import Path

import hypothesis.strategies as st
import pytest
from helpers import FakeClock
from hypothesis import given, note

import gangplace
from gangplace import Cluster, GangRequest, InvalidRequest, NodeTopology, PodPlacement, reference

FIXTURES = Path(__file__).parent / "fixtures"


def topology_of(board: str) -> NodeTopology:
    return NodeTopology.from_nvidia_smi((FIXTURES / f"nvidia-smi-topo-{board}.txt").read_text())


def one_node(groups: NodeTopology | None, taken: list[int]) -> Cluster:
    cluster = Cluster((), clock=FakeClock())
    cluster.add_node("n0", gpus=8, topology={}, gpu_topology=groups)
    if taken:
        cluster.adopt([PodPlacement("n0", taken)])
    return cluster


def test_an_hgx_h100_board_reads_as_two_sockets_of_lone_gpus() -> None:
    h100 = topology_of("hgx-h100")
    assert h100.levels == ("numa", "pcie")
    assert h100.paths == tuple((gpu // 4, gpu) for gpu in range(8))  # NV18: no PCIe groups
    # GPUs 1, 4, 5 busy: a 2-GPU pod takes the socket with fewer free GPUs (6, 7), keeping
    # socket 0's three for a larger pod; counting GPUs alone would take 0 and 2.
    pod = one_node(h100, [1, 4, 5]).place_gang(GangRequest(1, 2))
    assert pod is not None and pod.pods[0].gpus == (6, 7)
    plain = one_node(None, [1, 4, 5]).place_gang(GangRequest(1, 2))
    assert plain is not None and plain.pods[0].gpus == (0, 2)


def test_a_pcie_board_keeps_pods_behind_one_switch() -> None:
    board = topology_of("pcie")
    assert board.paths == ((0, 0), (0, 0), (0, 1), (0, 1), (1, 2), (1, 2), (1, 3), (1, 3))
    # GPU 0 busy: a 2-GPU pod takes the pair 2-3 (whole behind its switch), not 1 and 2.
    pods = one_node(board, [0]).place_gang(GangRequest(3, 2))
    assert pods is not None
    assert [pod.gpus for pod in pods.pods] == [(2, 3), (4, 5), (6, 7)]
    plain = one_node(None, [0]).place_gang(GangRequest(1, 2))
    assert plain is not None and plain.pods[0].gpus == (1, 2)


def test_groups_survive_snapshots_and_bad_topologies_change_nothing() -> None:
    cluster = one_node(topology_of("pcie"), [0])
    restored = Cluster.restore(cluster.snapshot(), clock=FakeClock())
    assert restored.snapshot() == cluster.snapshot()
    assert restored.place_gang(GangRequest(1, 2)) == cluster.place_gang(GangRequest(1, 2))
    before = cluster.snapshot()
    with pytest.raises(InvalidRequest, match="describes 4 GPUs but the node has 8"):
        cluster.add_node(
            "n1", gpus=8, topology={}, gpu_topology=NodeTopology(("numa",), ((0,),) * 4)
        )
    with pytest.raises(TypeError, match="gpu_topology must be a NodeTopology"):
        cluster.add_node("n1", gpus=8, topology={}, gpu_topology=42)  # type: ignore[arg-type]
    assert cluster.snapshot() == before and "n1" not in cluster


@pytest.mark.parametrize(
    ("levels", "paths", "message"),
    [
        ((), ((0,),), "1 to 4 levels"),
        (("numa", "numa"), ((0, 0),), "names a level twice"),
        (("node",), ((0,),), "not a usable name"),
        (("numa",), (), "1 to 64 GPUs"),
        (("numa",), ((0, 1),), "2 group ids for 1 levels"),
        (("numa",), ((64,),), "in 0..63"),
        (("numa",), ((True,),), "must be ints"),
    ],
)
def test_bad_node_topologies_are_refused(
    levels: tuple[str, ...], paths: tuple[tuple[int, ...], ...], message: str
) -> None:
    with pytest.raises(InvalidRequest, match=message):
        NodeTopology(levels, paths)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no header line with GPU0"),
        ("\tGPU0\tCPU Affinity\nGPU0\t X \t0-3\n", "no NUMA Affinity column"),
        ("\tGPU0\tNUMA Affinity\n", "no GPU rows"),
        ("\tGPU0\tGPU1\tNUMA Affinity\nGPU0\t X \t0\n", "line 2: 2 cells for 3 columns"),
        ("\tGPU0\tNUMA Affinity\nGPU1\t X \t0\n", "line 2: expected GPU0, got GPU1"),
    ],
)
def test_bad_nvidia_smi_output_names_the_line(text: str, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        NodeTopology.from_nvidia_smi(text)


@st.composite
def grouped_nodes(draw: st.DrawFn) -> list[tuple[int, NodeTopology | None, list[int]]]:
    """Nodes of 2-8 GPUs, most with random 1- or 2-level groups, some GPUs taken."""
    nodes = []
    for _ in range(draw(st.integers(1, 4))):
        gpus = draw(st.integers(2, 8))
        groups = None
        if draw(st.integers(0, 3)):
            depth = draw(st.integers(1, 2))
            paths = tuple(tuple(draw(st.integers(0, 2)) for _ in range(depth)) for _ in range(gpus))
            groups = NodeTopology(("numa", "pcie")[:depth], paths)
        taken = sorted(draw(st.sets(st.integers(0, gpus - 1), max_size=gpus - 1)))
        nodes.append((gpus, groups, taken))
    return nodes


@given(nodes=grouped_nodes(), requests=st.lists(st.tuples(st.integers(1, 6), st.integers(1, 4))))
def test_gpu_choice_agrees_with_the_reference(
    nodes: list[tuple[int, NodeTopology | None, list[int]]], requests: list[tuple[int, int]]
) -> None:
    engine = gangplace.Cluster(("rack",))
    oracle = reference.Cluster(("rack",))
    for index, (gpus, groups, taken) in enumerate(nodes):
        for cluster in (engine, oracle):
            name = f"n{index}"
            cluster.add_node(name, gpus=gpus, topology={"rack": "r"}, gpu_topology=groups)
            if taken:
                cluster.adopt([PodPlacement(name, taken)])
    for pods, size in requests:
        request = GangRequest(pods, size)
        got, expected = engine.place_gang(request), oracle.place_gang(request)
        note(f"{request!r}: engine {got!r}, reference {expected!r}")
        assert (got is None) == (expected is None)
        if got is not None and expected is not None:
            assert [(p.node, p.gpus) for p in got.pods] == [(p.node, p.gpus) for p in expected.pods]
            engine.reserve(got)
            oracle.reserve(got)
    engine.check_invariants()


def test_numa_single_never_places_a_pod_across_sockets() -> None:
    # A 2x4 node whose free GPUs are split 2 + 2 (GPUs 0, 1 and 4, 5 busy): counting GPUs,
    # a 4-GPU pod fits; with numa="single" it does not (the kubelet would reject it), and
    # explain says why.
    sockets = NodeTopology(("numa",), tuple((gpu // 4,) for gpu in range(8)))
    cluster = one_node(sockets, [0, 1, 4, 5])
    assert cluster.place_gang(GangRequest(1, 4)) is not None
    single = GangRequest(1, 4, numa="single")
    assert single.numa == "single" and repr(single) == "GangRequest(1, 4, numa='single')"
    assert cluster.place_gang(single) is None
    assert cluster.explain(single).excluded["numa_split"] == 1
    pairs = cluster.place_gang(GangRequest(2, 2, numa="single"))
    assert pairs is not None and [pod.gpus for pod in pairs.pods] == [(2, 3), (6, 7)]
    with pytest.raises(InvalidRequest, match="numa must be 'none' or 'single'"):
        GangRequest(1, 4, numa="both")  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest, match="does not take numa='single' gangs"):
        cluster.plan_preemption(single)


def test_numa_single_level_bound_follows_every_change() -> None:
    # The largest per-NUMA capacity of a level is remembered between changes (docs/shapes.md "Inside
    # a node"): after each change the search must see the new state, here moving the
    # 2 x 4-GPU gang between the one rack that holds it and the cluster level.
    sockets = NodeTopology(("numa",), tuple((gpu // 4,) for gpu in range(8)))
    cluster = Cluster(("rack",), clock=FakeClock())
    for rack in ("r0", "r1"):
        for node in ("a", "b"):
            cluster.add_node(f"{rack}{node}", gpus=8, topology={"rack": rack}, gpu_topology=sockets)
    cluster.adopt([PodPlacement(f"r0{node}", [0, 1, 4, 5]) for node in "ab"])
    cluster.adopt([PodPlacement("r1a", [0, 1, 2, 3]), PodPlacement("r1b", [0, 1, 2, 3])])
    gang = GangRequest(2, 4, numa="single")
    for _ in range(2):  # the second query reads the remembered bound
        placed = cluster.place_gang(gang)
        assert placed is not None and placed.domain == ("r1",)
    blocker = cluster.adopt([PodPlacement("r1b", [4])])
    assert cluster.place_gang(gang) is None  # r1a's socket 1 is the only whole one left
    cluster.check_invariants()
    cluster.release(blocker)
    placed = cluster.place_gang(gang)
    assert placed is not None and placed.domain == ("r1",)
    cluster.set_gpu_health("r1a", 4, False)
    assert cluster.place_gang(gang) is None
    cluster.set_gpu_health("r1a", 4, True)
    cluster.cordon("r1b")
    assert cluster.place_gang(gang) is None
    cluster.uncordon("r1b")
    cluster.add_node("r2a", gpus=8, topology={"rack": "r2"}, gpu_topology=sockets)
    placed = cluster.place_gang(gang)  # a new node holds both pods: the node level wins
    assert placed is not None and placed.domain == ("r2", "r2a")
    cluster.check_invariants()


@given(
    nodes=grouped_nodes(),
    requests=st.lists(st.tuples(st.integers(1, 6), st.integers(1, 4), st.booleans())),
    policy=st.sampled_from(("best-fit", "first-fit", "best-fit-path")),
)
def test_numa_single_agrees_with_the_reference_and_keeps_pods_in_one_group(
    nodes: list[tuple[int, NodeTopology | None, list[int]]],
    requests: list[tuple[int, int, bool]],
    policy: str,
) -> None:
    # Two spines of up to three racks: the node-level tie-break by ancestry is exercised.
    engine = gangplace.Cluster(("spine", "rack"), policy=policy)  # type: ignore[arg-type]
    oracle = reference.Cluster(("spine", "rack"), policy=policy)
    groups_of: dict[str, NodeTopology | None] = {}
    for index, (gpus, groups, taken) in enumerate(nodes):
        name = f"n{index}"
        groups_of[name] = groups
        where = {"spine": f"s{index % 2}", "rack": f"r{index % 3}"}
        for cluster in (engine, oracle):
            cluster.add_node(name, gpus=gpus, topology=where, gpu_topology=groups)
            if taken:
                cluster.adopt([PodPlacement(name, taken)])
    for pods, size, elastic in requests:
        request = GangRequest(pods, size, min_pods=1 if elastic else None, numa="single")
        got, expected = engine.place_gang(request), oracle.place_gang(request)
        note(f"{request!r}: engine {got!r}, reference {expected!r}")
        assert (got is None) == (expected is None)
        if got is None or expected is None:
            continue
        assert [(p.node, p.gpus) for p in got.pods] == [(p.node, p.gpus) for p in expected.pods]
        for pod in got.pods:
            groups = groups_of[pod.node]
            if groups is not None:
                assert len({groups.paths[gpu][0] for gpu in pod.gpus}) == 1
        engine.reserve(got)
        oracle.reserve(got)
    engine.check_invariants()


def test_pods_know_their_affinity_and_keep_it_through_snapshots_and_pickles() -> None:
    import pickle

    board = topology_of("pcie")  # numa 0: pairs 0-1, 2-3; numa 1: pairs 4-5, 6-7
    cluster = one_node(board, [0])
    placement = cluster.place_gang(GangRequest(1, 2))
    assert placement is not None and placement.pods[0].affinity == "pcie"  # pair 2-3
    socket = cluster.place_gang(GangRequest(1, 3))
    assert socket is not None and socket.pods[0].affinity == "numa"  # 1, 2, 3 in socket 0
    spanning = cluster.place_gang(GangRequest(1, 7))
    assert spanning is not None and spanning.pods[0].affinity == "node"
    assert PodPlacement("n0", [2, 3]).affinity == "node"  # built by hand: unknown
    assert PodPlacement("n0", [2, 3]) == placement.pods[0]  # affinity is not identity
    held = cluster.commit(cluster.reserve(GangRequest(1, 2)))
    restored = Cluster.restore(cluster.snapshot(), clock=FakeClock())
    (kept,) = [a for a in restored.allocations() if a.id == held.id]
    assert kept.placement.pods[0].affinity == "pcie"
    again = pickle.loads(pickle.dumps(held.placement))
    assert again.pods[0].affinity == "pcie" and again == held.placement
    adopted = cluster.adopt([PodPlacement("n0", [4, 5])])
    assert adopted.placement.pods[0].affinity == "pcie"
    plain = one_node(None, []).place_gang(GangRequest(1, 2))
    assert plain is not None and plain.pods[0].affinity == "node"


def test_from_arrays_takes_one_topology_or_codes_into_a_table() -> None:
    import numpy as np

    board = topology_of("pcie")
    names, racks = ["a", "b", "c"], [["r0", "r0", "r1"]]
    gpus, masks = np.array([8, 8, 8]), np.array([1, 1, 1], dtype=np.uint64)  # GPU 0 unhealthy
    every = Cluster.from_arrays(("rack",), names, racks, gpus, masks, gpu_topology=board)
    placement = every.place_gang(GangRequest(3, 2))
    assert placement is not None and all(pod.affinity == "pcie" for pod in placement.pods)
    some = Cluster.from_arrays(
        ("rack",), names, racks, gpus, masks, gpu_topology=([0, -1, 0], [board])
    )
    pods = some.place_gang(GangRequest(1, 2, required_level="node"))
    assert pods is not None and (pods.pods[0].node, pods.pods[0].affinity) == ("c", "pcie")
    assert some.adopt([PodPlacement("b", [2, 3])]).placement.pods[0].affinity == "node"
    with pytest.raises(InvalidRequest, match='code 1 of node "b" is outside its table of 1'):
        Cluster.from_arrays(("rack",), names, racks, gpus, masks, gpu_topology=([0, 1, 0], [board]))
    with pytest.raises(InvalidRequest, match="2 codes for 3 nodes"):
        Cluster.from_arrays(("rack",), names, racks, gpus, masks, gpu_topology=([0, 0], [board]))
    with pytest.raises(TypeError, match="NodeTopology or"):
        Cluster.from_arrays(("rack",), names, racks, gpus, masks, gpu_topology=7)  # type: ignore[arg-type]
