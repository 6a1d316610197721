"""Slurm topology.conf: hostlists, both plugin forms, round trips, errors, topograph models."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from gangplace import Cluster, Conflict, GangRequest, PodPlacement
from gangplace.slurm import (
    SlurmConfWarning,
    SlurmError,
    apply_scontrol_nodes,
    cluster_from_topology_conf,
    compress_hostlist,
    expand_hostlist,
    gpus_from_conf,
    nodes_from_conf,
    sbatch_args,
    to_topology_conf,
)

FIXTURES = Path(__file__).parent / "fixtures" / "slurm"
MODELS = Path(__file__).resolve().parents[2] / "shared" / "data" / "topograph-models"


@pytest.mark.parametrize(
    ("expression", "names"),
    [
        ("node[01-03,07]", ["node01", "node02", "node03", "node07"]),
        ("r[1-2]-n[1-2]", ["r1-n1", "r1-n2", "r2-n1", "r2-n2"]),
        ("a,b[9-10],c", ["a", "b9", "b10", "c"]),
        ("[1101-1102]", ["1101", "1102"]),
        ("solo", ["solo"]),
    ],
)
def test_hostlists_expand_and_compress(expression: str, names: list[str]) -> None:
    assert expand_hostlist(expression) == names
    assert expand_hostlist(compress_hostlist(names)) == names


@pytest.mark.parametrize("bad", ["node[1-", "node[a-b]", "node]"])
def test_bad_hostlists(bad: str) -> None:
    with pytest.raises(ValueError):
        expand_hostlist(bad)


def partition(cluster: Cluster) -> set[tuple[str, ...]]:
    """Per level, the groups of nodes sharing a domain: the topology, whatever the names."""
    groups: dict[tuple[int, tuple[str, ...]], list[str]] = {}
    for name in cluster.nodes():
        topology = cluster.node(name).topology
        path = tuple(topology[level] for level in cluster.levels)
        for depth in range(1, len(path) + 1):
            groups.setdefault((depth, path[:depth]), []).append(name)
    return {(str(depth), *sorted(nodes)) for (depth, _), nodes in groups.items()}


def model_leaves(name: str) -> dict[str, str]:
    """node -> leaf switch of a topograph model, read from its YAML ``blocks`` section."""
    leaves: dict[str, str] = {}
    switch, in_nodes = "", False
    for line in (MODELS / name).read_text().split("blocks:", 1)[1].splitlines():
        stripped = line.strip()
        if stripped.startswith("- switch:"):
            switch, in_nodes = stripped.split(":", 1)[1].strip(), False
        elif stripped.startswith("nodes:"):
            inline = stripped.split(":", 1)[1].strip()
            in_nodes = not inline
            for item in re.findall(r'"([^"]+)"', inline):
                leaves.update(dict.fromkeys(expand_hostlist(item), switch))
        elif in_nodes and stripped.startswith("- "):
            item = stripped[2:].strip().strip('"')
            leaves.update(dict.fromkeys(expand_hostlist(item), switch))
        elif stripped:
            in_nodes = False
    return leaves


@pytest.mark.parametrize(
    ("conf", "model", "levels"),
    [
        ("small-tree.conf", "small-tree.yaml", ("switch1",)),
        ("medium.conf", "medium.yaml", ("switch1", "switch2")),
        ("nvl72.conf", "nvl72.yaml", ("switch1", "switch2")),
    ],
)
def test_topograph_models(conf: str, model: str, levels: tuple[str, ...]) -> None:
    cluster = cluster_from_topology_conf((FIXTURES / conf).read_text(), gpus=4, filename=conf)
    assert cluster.levels == levels
    leaf_of = {name: cluster.node(name).topology[levels[-1]] for name in cluster.nodes()}
    if MODELS.is_dir():
        assert leaf_of == model_leaves(model)
    assert cluster.stats().total == 4 * len(leaf_of)


def test_nvl72_structure_and_blocks() -> None:
    tree = cluster_from_topology_conf((FIXTURES / "nvl72.conf").read_text(), gpus=4)
    assert len(tree) == 72
    assert tree.node("node2118").topology == {"switch1": "spine-2", "switch2": "leaf-2-1"}
    blocks = cluster_from_topology_conf((FIXTURES / "nvl72-block.conf").read_text(), gpus=4)
    assert blocks.levels == ("block",)
    assert blocks.node("node1205").topology == {"block": "nvl-1-2"}
    # An 18-node NVLink domain holds a 72-GPU gang; two do not.
    from gangplace import GangRequest

    assert blocks.place_gang(GangRequest(18, 4, required_level="block")) is not None
    assert blocks.place_gang(GangRequest(19, 4, required_level="block")) is None


@pytest.mark.parametrize("conf", ["small-tree.conf", "medium.conf", "nvl72.conf"])
def test_round_trip_keeps_the_topology(conf: str) -> None:
    cluster = cluster_from_topology_conf((FIXTURES / conf).read_text(), gpus=8)
    again = cluster_from_topology_conf(to_topology_conf(cluster), gpus=8)
    assert partition(again) == partition(cluster)
    assert again.nodes() == cluster.nodes()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("SwitchName=a Switches=b\n", r"topology.conf:1: switch a names unknown switch b"),
        ("SwitchName=a Switches=b\nSwitchName=b Switches=a\n", "cycle"),
        ("SwitchName=a Nodes=n1\nSwitchName=b Nodes=n1\n", r"topology.conf:2: node n1 is under"),
        (
            "SwitchName=t Switches=a,b\nSwitchName=a Switches=c\nSwitchName=b Switches=c\n"
            "SwitchName=c Nodes=n1\n",
            r"topology.conf:3: switch c is under both a and b",
        ),
        ("SwitchName=t Switches=a\nSwitchName=t Nodes=n1\n", "declared twice"),
        ("Switch a\n", r"topology.conf:1: expected Key=Value"),
        ("SwitchName=a Nodes=n[1-\n", r"topology.conf:1: unbalanced"),
        ("BlockName=b1\n", "needs BlockName= and Nodes="),
    ],
)
def test_errors_name_file_and_line(text: str, message: str) -> None:
    with pytest.raises(SlurmError, match=message):
        cluster_from_topology_conf(text, gpus=8)


def test_gpus_from_slurm_conf_lines() -> None:
    conf = "NodeName=gpu[01-02] Gres=gpu:a100:8 CPUs=64\nNodeName=cpu1 CPUs=8\n"
    gpus = gpus_from_conf(conf)
    assert gpus == {"gpu01": 8, "gpu02": 8, "cpu1": 0}  # issue 45: a CPU node has 0 GPUs
    text = "SwitchName=s Nodes=gpu[01-02],cpu1,cpu2\n"
    with pytest.raises(SlurmError, match="no GPU count for node cpu2"):
        cluster_from_topology_conf(text, gpus=gpus)
    cluster = cluster_from_topology_conf("SwitchName=s Nodes=gpu[01-02],cpu1\n", gpus=gpus)
    assert cluster.nodes() == ["gpu01", "gpu02"]  # a bare 0: nothing could be placed there
    nodes = nodes_from_conf(conf)
    cluster = cluster_from_topology_conf("SwitchName=s Nodes=ALL\n", gpus=nodes)
    assert cluster.nodes() == ["cpu1", "gpu01", "gpu02"]
    assert (cluster.node("cpu1").gpus, cluster.node("cpu1").free_resources) == (0, {"cpu": 8000})


def test_gpus_from_gres_conf() -> None:
    gres = "NodeName=g[1-2] Name=gpu Type=h100 Count=4\nNodeName=g1 Name=gpu Count=4\n"
    assert gpus_from_conf(gres, filename="gres.conf") == {"g1": 8, "g2": 4}
    with pytest.raises(SlurmError, match=r"gres.conf:1: Count=x is not a count"):
        gpus_from_conf("NodeName=g1 Name=gpu Count=x\n", filename="gres.conf")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # The issue's cases: DEFAULT lines, gres.conf devices.
        ("NodeName=DEFAULT Gres=gpu:8\nNodeName=a[1-2] CPUs=8\n", {"a1": 8, "a2": 8}),
        ("NodeName=a Name=gpu File=/dev/nvidia[0-7]\n", {"a": 8}),
        # A later DEFAULT changes what follows; a node's own Gres wins over the default.
        (
            "NodeName=DEFAULT Gres=gpu:8\nNodeName=a1\nNodeName=a2 Gres=gpu:4\n"
            "NodeName=DEFAULT Gres=gpu:h100:2\nNodeName=a3\n",
            {"a1": 8, "a2": 4, "a3": 2},
        ),
        # Typed and several GRES per line, socket bindings, gpu alone, other GRES ignored.
        ("NodeName=b Gres=gpu:a100:4(S:0-1),gpu:h100:4,mps:400\n", {"b": 8}),
        ("NodeName=c[1-3] Gres=gpu,nic:2\n", {"c1": 1, "c2": 1, "c3": 1}),
        ('NodeName=d Gres=nic:2 Reason="no gpus here"\n', {"d": 0}),
        # gres.conf: Count= first, File= lists, lines for one node adding up.
        (
            "NodeName=e Name=gpu Type=h100 File=/dev/nvidia[0-3]\n"
            "NodeName=e Name=gpu Type=l4 File=/dev/nvidia4,/dev/nvidia5\n"
            "NodeName=f Name=gpu Count=2 File=/dev/nvidia[0-7]\n",
            {"e": 6, "f": 2},
        ),
    ],
)
def test_gpus_from_conf_reads_slurm_and_gres_conf(text: str, expected: dict[str, int]) -> None:
    assert gpus_from_conf(text) == expected


def test_gpus_from_conf_follows_include_files(tmp_path: Path) -> None:
    (tmp_path / "nodes.conf").write_text("NodeName=g[1-2] Gres=gpu:h100:8\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "more.conf").write_text("NodeName=g3 Gres=gpu:4\n")
    text = "ClusterName=x\nInclude nodes.conf\ninclude sub/more.conf\n"
    assert gpus_from_conf(text, base_dir=tmp_path) == {"g1": 8, "g2": 8, "g3": 4}
    with pytest.raises(SlurmError, match=r"slurm.conf:2: Include nodes.conf: pass base_dir"):
        gpus_from_conf(text)
    with pytest.raises(SlurmError, match=r"slurm.conf:1: Include missing.conf: No such file"):
        gpus_from_conf("Include missing.conf\n", base_dir=tmp_path)
    (tmp_path / "loop.conf").write_text("Include loop.conf\n")
    with pytest.raises(SlurmError, match="nested more than 16 deep"):
        gpus_from_conf("Include loop.conf\n", base_dir=tmp_path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("NodeName=a Gres=gpu:h100:x\n", r"slurm.conf:1: Gres: the count of 'gpu:h100:x'"),
        ("NodeName=a Name=gpu Count=-1\n", r"slurm.conf:1: Count=-1 is not a count"),
        ("NodeName=a Gres=gpu:8 garbage\n", r"slurm.conf:1: expected Key=Value, got 'garbage'"),
        ('NodeName=a Reason="unclosed\n', r"slurm.conf:1: No closing quotation"),
        ("NodeName=a[1-x] Gres=gpu:8\n", r"slurm.conf:1:"),
        ("Include\n", r"slurm.conf:1: Include without a file"),
    ],
)
def test_bad_conf_lines_raise_slurm_errors_naming_file_and_line(text: str, message: str) -> None:
    with pytest.raises(SlurmError, match=message):
        gpus_from_conf(text)


def test_what_cannot_be_counted_is_warned_about() -> None:
    with pytest.warns(SlurmConfWarning, match=r"gres.conf:1: AutoDetect=nvml"):
        assert gpus_from_conf("AutoDetect=nvml\n", filename="gres.conf") == {}
    with pytest.warns(SlurmConfWarning, match="without NodeName"):
        assert gpus_from_conf("Name=gpu File=/dev/nvidia[0-3]\n", filename="gres.conf") == {}


def test_disjoint_fabrics_stay_disjoint_through_a_round_trip() -> None:
    conf = "SwitchName=east Nodes=e[1-2]\nSwitchName=west Nodes=w[1-2]\n"
    cluster = cluster_from_topology_conf(conf, gpus=8)
    assert cluster.max_level == "switch1"
    written = to_topology_conf(cluster)
    assert "cluster" not in written
    assert written == "SwitchName=east Nodes=e[1-2]\nSwitchName=west Nodes=w[1-2]\n"
    again = cluster_from_topology_conf(written, gpus=8)
    assert again.max_level == "switch1"
    assert again.place_gang(GangRequest(3, 8)) is None  # never across the two fabrics


def test_round_trip_keeps_unique_switch_names() -> None:
    # Slurm switch names are unique: they come back as they were, never path-qualified.
    text = (
        "SwitchName=spine-1 Switches=leaf-1-[1-2]\n"
        "SwitchName=leaf-1-1 Nodes=gpu[01-02]\n"
        "SwitchName=leaf-1-2 Nodes=gpu[03-04]\n"
    )
    cluster = cluster_from_topology_conf(text, gpus=8)
    written = to_topology_conf(cluster)
    assert "SwitchName=leaf-1-1 Nodes=gpu[01-02]" in written
    assert "spine-1_leaf-1-1" not in written
    assert cluster_from_topology_conf(written, gpus=8).node("gpu03").topology == {
        "switch1": "leaf-1-2"
    }


def test_repeated_domain_names_are_qualified_only_where_they_collide() -> None:
    cluster = Cluster(("spine", "rack"))
    for spine in ("s1", "s2"):
        cluster.add_node(f"{spine}-n", gpus=8, topology={"spine": spine, "rack": "r1"})
    cluster.add_node("solo", gpus=8, topology={"spine": "s2", "rack": "r9"})
    lines = to_topology_conf(cluster).splitlines()
    assert "SwitchName=s1_r1 Nodes=s1-n" in lines
    assert "SwitchName=s2_r1 Nodes=s2-n" in lines
    assert "SwitchName=r9 Nodes=solo" in lines  # unique: kept as it is
    assert "SwitchName=cluster Switches=s1,s2" in lines
    again = cluster_from_topology_conf("\n".join(lines), gpus=8)
    assert partition(again) == partition(cluster)


# ------------------------------------------------------------------ scontrol show node

FIVE_NODES = "SwitchName=top Switches=leaf[1-2]\nSwitchName=leaf1 Nodes=gpu[01-03]\n"
FIVE_NODES += "SwitchName=leaf2 Nodes=gpu[04-05]\n"


def test_scontrol_d_output_is_adopted_and_cordons_unusable_nodes() -> None:
    cluster = cluster_from_topology_conf(FIVE_NODES, gpus=8)
    state = apply_scontrol_nodes(cluster, (FIXTURES / "scontrol_show_node_d.txt").read_text())
    assert sorted(state.adopted) == ["gpu01", "gpu03", "gpu04"]
    assert cluster.node("gpu01").allocated == (0, 1, 2, 3)
    assert cluster.node("gpu03").allocated == tuple(range(8))
    assert cluster.node("gpu04").allocated == (1, 6)  # IDX:1,6, a node being drained
    assert state.cordoned == ["gpu02", "gpu04", "gpu05"]  # IDLE+DRAIN, MIXED+DRAIN, DOWN*
    assert state.unknown == [] and state.warnings == []
    assert all(a.owner == "slurm" for a in state.adopted.values())
    # Applying fresh output again replaces the earlier adoption instead of conflicting.
    again = apply_scontrol_nodes(cluster, (FIXTURES / "scontrol_show_node_d.txt").read_text())
    assert cluster.stats().allocated == 14 and again.cordoned == []
    placement = cluster.place_gang(GangRequest(1, 4, required_level="node"))
    assert placement is not None and placement.nodes == ("gpu01",)
    assert sbatch_args(placement) == [
        "--nodelist=gpu01",
        "--nodes=1",
        "--ntasks=1",
        "--ntasks-per-node=1",
        "--gres=gpu:4",
    ]


def test_scontrol_cpus_and_memory_become_node_resources() -> None:
    """docs/resources.md "Node resources": CPUTot and RealMemory (MiB) are the node's resources; the
    CPUAlloc and AllocMem of its Slurm jobs are held by the node's adoption (as a pod without
    GPUs where no GPU is used); sbatch_args passes a request's CPUs and memory."""
    mib = 2**20
    cluster = cluster_from_topology_conf(FIVE_NODES, gpus=8)
    text = (FIXTURES / "scontrol_show_node_d.txt").read_text()
    apply_scontrol_nodes(cluster, text)
    gpu01 = cluster.node("gpu01")
    assert gpu01.resources == {"cpu": 64_000, "memory": 1_031_000 * mib}
    assert gpu01.free_resources == {"cpu": 32_000, "memory": 519_000 * mib}
    assert cluster.node("gpu02").resources == {"cpu": 64_000, "memory": 1_031_000 * mib}
    again = apply_scontrol_nodes(cluster, text)  # re-applied: the same, nothing held twice
    assert cluster.node("gpu01").free_resources == gpu01.free_resources and not again.warnings
    request = GangRequest(2, 2, resources_per_pod={"cpu": 1_500, "memory": 3 * mib + 1})
    placement = cluster.place_gang(request)
    assert placement is not None and placement.nodes == ("gpu01",)
    assert sbatch_args(placement, request)[-2:] == ["--cpus-per-task=2", "--mem=7M"]
    cpu_only = text.replace("gpu:h100:4(IDX:0-3)", "gpu:h100:0(IDX:N/A)", 1)
    state = apply_scontrol_nodes(cluster, cpu_only)
    assert cluster.node("gpu01").allocated == () and "gpu01" in state.adopted
    assert cluster.node("gpu01").free_resources == gpu01.free_resources  # CPU jobs still held
    bad = apply_scontrol_nodes(cluster, text.replace("CPUEfctv=64 CPUTot=64", "CPUTot=lots", 1))
    assert bad.warnings == ["gpu01: CPUTot=lots is not a count; left out"]
    assert cluster.node("gpu01").resources == {"memory": 1_031_000 * mib}


def test_scontrol_without_d_gives_counts_and_unknown_nodes_are_listed() -> None:
    cluster = cluster_from_topology_conf("SwitchName=leaf1 Nodes=gpu[01-02,09]\n", gpus=8)
    cluster.adopt([PodPlacement("gpu01", [0])], owner="kubelet")  # someone else's
    text = (FIXTURES / "scontrol_show_node_o.txt").read_text()
    state = apply_scontrol_nodes(cluster, text + "NodeName=gpu09 Gres=gpu:4 State=IDLE\n")
    assert cluster.node("gpu01").allocated == (0, 1, 2, 3, 4)  # no IDX: the lowest free
    assert state.unknown == ["gpu03"]
    assert state.cordoned == ["gpu02"]
    assert state.warnings == ["gpu09: Slurm has 4 GPUs, the cluster 8"]


def test_sbatch_args_pin_a_multi_node_gang() -> None:
    cluster = cluster_from_topology_conf(FIVE_NODES, gpus=8)
    placement = cluster.place_gang(GangRequest(4, 8))
    assert placement is not None
    assert sbatch_args(placement) == [
        "--nodelist=gpu[01-04]",
        "--nodes=4",
        "--ntasks=4",
        "--ntasks-per-node=1",
        "--gres=gpu:8",
    ]
    uneven = cluster.adopt(
        [PodPlacement("gpu05", [0, 1]), PodPlacement("gpu04", [0]), PodPlacement("gpu04", [1])]
    )
    # Unequal pods and GPUs per node: a heterogeneous job, one component per kind of node.
    assert [pod.node for pod in uneven.placement.pods] == ["gpu04", "gpu04", "gpu05"]
    assert sbatch_args(uneven.placement) == [
        "--nodelist=gpu04",
        "--nodes=1",
        "--ntasks=2",
        "--ntasks-per-node=2",
        "--gres=gpu:2",
        ":",
        "--nodelist=gpu05",
        "--nodes=1",
        "--ntasks=1",
        "--ntasks-per-node=1",
        "--gres=gpu:2",
    ]


def test_sbatch_args_group_nodes_of_one_kind_into_one_component() -> None:
    cluster = cluster_from_topology_conf(FIVE_NODES, gpus=8)
    pods = [PodPlacement(f"gpu0{i}", list(range(8))) for i in (1, 2, 3)]
    pods.append(PodPlacement("gpu04", [0, 1, 2, 3]))
    args = sbatch_args(cluster.adopt(pods).placement)
    assert args == [
        "--nodelist=gpu[01-03]",
        "--nodes=3",
        "--ntasks=3",
        "--ntasks-per-node=1",
        "--gres=gpu:8",
        ":",
        "--nodelist=gpu04",
        "--nodes=1",
        "--ntasks=1",
        "--ntasks-per-node=1",
        "--gres=gpu:4",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Gres=gpu:8 State=IDLE\n", "expected NodeName="),
        ("NodeName= Gres=gpu:8\n", "without a name"),
        ("NodeName=gpu01 GresUsed=gpu:h100:2(IDX:0-x) State=MIXED\n", "GresUsed: bad index list"),
        ("NodeName=gpu01 GresUsed=gpu:h100:3(IDX:0-1) State=MIXED\n", "names 2 GPUs but counts 3"),
        ("NodeName=gpu01 GresUsed=gpu:h100:x(IDX:0-1) State=MIXED\n", "GresUsed: the count of"),
    ],
)
def test_malformed_scontrol_output_names_the_line_and_changes_nothing(
    text: str, message: str
) -> None:
    cluster = cluster_from_topology_conf(FIVE_NODES, gpus=8, clock=lambda: 0.0)
    before = cluster.snapshot()
    with pytest.raises(SlurmError, match=message):
        apply_scontrol_nodes(cluster, text + "NodeName=gpu05 GresUsed=gpu:1 State=IDLE\n")
    assert cluster.snapshot() == before


@pytest.mark.parametrize(
    ("text", "warning", "cordoned"),
    [
        # A type without a count is one GPU of that type, as Slurm reads it.
        ("NodeName=gpu01 Gres=gpu:zz State=IDLE\n", "gpu01: Slurm has 1 GPUs", False),
        ("NodeName=gpu01 Gres=gpu:8 State=FOO\n", "gpu01: State=FOO has unknown", True),
        ("NodeName=gpu01 Gres=gpu:8 State=\n", "gpu01: no State field", True),
    ],
)  # fmt: skip
def test_scontrol_fields_it_cannot_read_are_warned_about(
    text: str, warning: str, cordoned: bool
) -> None:
    cluster = cluster_from_topology_conf(FIVE_NODES, gpus=8)
    cluster.cordon("gpu01")
    state = apply_scontrol_nodes(cluster, text)
    assert len(state.warnings) == 1 and state.warnings[0].startswith(warning)
    assert cluster.node("gpu01").cordoned is cordoned  # an unreadable state changes nothing


@pytest.mark.parametrize("text", [42, None, b"NodeName=gpu01 State=IDLE", ["NodeName=gpu01"]])
def test_scontrol_output_that_is_not_text_is_refused(text: Any) -> None:
    cluster = cluster_from_topology_conf(FIVE_NODES, gpus=8, clock=lambda: 0.0)
    before = cluster.snapshot()
    with pytest.raises(SlurmError, match="scontrol output must be text"):
        apply_scontrol_nodes(cluster, text)
    assert cluster.snapshot() == before


def test_scontrol_conflicting_with_other_holds_names_the_gpu() -> None:
    cluster = cluster_from_topology_conf(FIVE_NODES, gpus=8)
    cluster.adopt([PodPlacement("gpu01", [2])], owner="kubelet")
    with pytest.raises(Conflict, match='GPU 2 of node "gpu01"'):
        apply_scontrol_nodes(cluster, "NodeName=gpu01 GresUsed=gpu:4(IDX:0-3) State=MIXED\n")


def test_a_single_top_switch_keeps_its_name_through_a_round_trip() -> None:
    conf = "SwitchName=spine Switches=leaf[1-2]\nSwitchName=leaf1 Nodes=a[1-2]\n"
    conf += "SwitchName=leaf2 Nodes=a[3-4]\n"
    cluster = cluster_from_topology_conf(conf, gpus=8)
    written = to_topology_conf(cluster)
    assert written.splitlines()[0] == "SwitchName=spine Switches=leaf1,leaf2"
    again = cluster_from_topology_conf(written, gpus=8)
    assert to_topology_conf(again) == written
    assert to_topology_conf(cluster, top_switch="core").startswith("SwitchName=core ")
