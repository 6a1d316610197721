"""Slurm read exactly as slurmctld runs it (issue 45, items 1-4 and 7).

Each misread of the issue is a test here, most with the files that showed it:
``tests/fixtures/slurm/slurmctld-22.05/`` holds what Debian's slurmctld 22.05.8 printed for
a configuration with a MIG node, a shard node, CPU-only and cloud nodes (its README says how
it was captured); the rest are small files written as Slurm accepts them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gangplace import Cluster, Conflict, GangRequest
from gangplace.slurm import (
    SlurmConfWarning,
    SlurmError,
    apply_scontrol_nodes,
    cluster_from_topology_conf,
    gpus_from_conf,
    nodes_from_conf,
    parse_topology_conf,
    sbatch_args,
)

REAL = Path(__file__).parent / "fixtures" / "slurm" / "slurmctld-22.05"
MIB = 2**20
# What the five jobs of the capture use (REAL/README.md): GPUs per node.
USED = {"shard01": 4, "gpu01": 8, "gpu03": 8, "gpu04": 8}


def real_cluster() -> Cluster:
    nodes = nodes_from_conf((REAL / "slurm.conf").read_text(), base_dir=REAL)
    topology = (REAL / "topology.conf").read_text()
    return cluster_from_topology_conf(topology, gpus=nodes, clock=lambda: 0.0)


def held(cluster: Cluster) -> dict[str, int]:
    return {n: len(cluster.node(n).allocated) for n in cluster.nodes() if cluster.node(n).allocated}


# ------------------------------------------------------------------ item 1: scontrol


@pytest.mark.parametrize("name", ["nodes_d.txt", "nodes_do.txt"])
def test_with_d_the_adopted_gpus_equal_slurms_gres_used(name: str) -> None:
    cluster = real_cluster()
    state = apply_scontrol_nodes(cluster, (REAL / name).read_text())
    assert held(cluster) == USED
    assert cluster.node("gpu01").allocated == tuple(range(8))  # IDX:0-7
    mig = cluster.node("mig01")
    assert (mig.gpus, mig.free_resources["nvidia.com/mig-1g.10gb"]) == (0, 11)
    assert cluster.node("gpu01").free_resources["memory"] == 0  # two jobs of 32000 MiB
    assert state.cordoned == [] and state.unknown == [] and state.warnings == []


@pytest.mark.parametrize("name", ["nodes_plain.txt", "nodes_o.txt"])
def test_without_d_busy_gpus_are_never_read_as_free(name: str) -> None:
    """The issue: without -d, 148 GPUs in use read as free. Now a typed error, nothing
    changed; or, asked for, every busy node cordoned."""
    cluster = real_cluster()
    before = cluster.snapshot()
    with pytest.raises(SlurmError, match=r"5 busy nodes \(gpu01, gpu03, gpu04, mig01, shard01"):
        apply_scontrol_nodes(cluster, (REAL / name).read_text())
    assert cluster.snapshot() == before
    state = apply_scontrol_nodes(cluster, (REAL / name).read_text(), missing_used="cordon")
    assert sorted(state.cordoned) == ["gpu01", "gpu03", "gpu04", "mig01", "shard01"]
    placement = cluster.place_gang(GangRequest(1, 8))
    assert placement is not None and placement.nodes[0] not in USED


def test_alloc_tres_counts_gpus_when_accounting_tracks_them() -> None:
    cluster = cluster_from_topology_conf("SwitchName=s Nodes=g[1-2]\n", gpus=8)
    text = "NodeName=g1 Gres=gpu:8 CPUAlloc=4 State=MIXED AllocTRES=cpu=4,gres/gpu=3\n"
    apply_scontrol_nodes(cluster, text)
    assert cluster.node("g1").allocated == (0, 1, 2)


def test_a_refresh_that_conflicts_changes_nothing_and_names_every_conflict() -> None:
    """The issue: one GPU under a running job turned unhealthy left the refresh half-done
    (88 GPUs Slurm used read as free). Now it is all or nothing."""
    cluster = real_cluster()
    text = (REAL / "nodes_d.txt").read_text()
    apply_scontrol_nodes(cluster, text)
    cluster.set_gpu_health("gpu03", 5, False)
    cluster.set_gpu_health("gpu04", 0, False)
    before = cluster.snapshot()
    with pytest.raises(Conflict) as raised:
        apply_scontrol_nodes(cluster, text)
    assert "gpu03" in str(raised.value) and "gpu04" in str(raised.value)
    assert "nothing was applied" in str(raised.value)
    assert cluster.snapshot() == before
    assert held(cluster) == USED  # the old adoption stands


# ------------------------------------------------------------------ item 2: GRES


def test_mig_profiles_and_shards_are_never_whole_gpus() -> None:
    nodes = nodes_from_conf((REAL / "slurm.conf").read_text(), base_dir=REAL)
    assert nodes["mig01"].gpus == 0
    assert nodes["mig01"].resources["nvidia.com/mig-1g.10gb"] == 14
    assert nodes["mig01"].resources["nvidia.com/mig-3g.40gb"] == 4
    assert (nodes["shard01"].gpus, nodes["shard01"].resources["shard"]) == (4, 16)
    gres = nodes_from_conf((REAL / "gres.conf").read_text(), filename="gres.conf")
    assert (gres["mig01"].gpus, gres["shard01"].resources) == (0, {"shard": 16})
    cluster = real_cluster()
    for _ in range(6):  # whole-GPU gangs fill every GPU node and never touch mig01
        placement = cluster.place_gang(GangRequest(2, 8))
        if placement is None:
            break
        assert "mig01" not in placement.nodes
        cluster.reserve(placement)
    mig = GangRequest(2, 0, resources_per_pod={"nvidia.com/mig-3g.40gb": 2})
    placement = cluster.place_gang(mig)
    assert placement is not None and [pod.node for pod in placement.pods] == ["mig01"] * 2
    assert "--gres=gpu:3g.40gb:4" in sbatch_args(placement, mig)


def test_autodetect_lines_are_accepted_with_a_warning_and_count_nothing() -> None:
    """The issue: AutoDetect=nvml with Name=gpu counted 1 GPU per node."""
    text = "AutoDetect=nvml\nNodeName=g[1-2] AutoDetect=nvml Name=gpu\n"
    with pytest.warns(SlurmConfWarning) as caught:
        assert gpus_from_conf(text, filename="gres.conf") == {}
    assert [str(w.message).split(":")[1] for w in caught] == ["1", "2"]
    assert "gres.conf:2: AutoDetect=nvml with neither Count nor File" in str(caught[1].message)
    files = "NodeName=g1 AutoDetect=nvml Name=gpu File=/dev/nvidia[0-3]\n"
    assert gpus_from_conf(files, filename="gres.conf") == {"g1": 4}


# ------------------------------------------------------------------ item 3: parsing


def test_backslash_continuation_in_all_three_files() -> None:
    conf = "NodeName=g[1-2] \\\n    Gres=gpu:8 \\\n    CPUs=64\n"
    assert nodes_from_conf(conf)["g2"].resources == {"cpu": 64_000}
    gres = "NodeName=g1 Name=gpu \\\n  File=/dev/nvidia[0-3]\n"
    assert gpus_from_conf(gres, filename="gres.conf") == {"g1": 4}
    topology = "SwitchName=s1 \\\n Nodes=g[1-2] \\\n LinkSpeed=100\n"
    assert parse_topology_conf(topology) == ((), {"g1": (), "g2": ()})
    with pytest.raises(SlurmError, match=r"slurm.conf:1: Count=x"):
        nodes_from_conf("NodeName=g1 \\\nName=gpu Count=x\n")  # named by its first line


def test_include_with_a_tab_and_the_cluster_name(tmp_path: Path) -> None:
    (tmp_path / "nodes.gp.conf").write_text("NodeName=g1 Gres=gpu:4\n")
    text = "ClusterName=gp\nInclude\tnodes.%c.conf\n"
    assert gpus_from_conf(text, base_dir=tmp_path) == {"g1": 4}
    assert nodes_from_conf("include  nodes.%c.conf", base_dir=tmp_path, cluster_name="gp")
    with pytest.raises(SlurmError, match="%c without a ClusterName"):
        gpus_from_conf("Include nodes.%c.conf\n", base_dir=tmp_path)


def test_nodes_all_empty_values_and_comments_anywhere() -> None:
    conf = "NodeName=g[1-2] Gres=gpu:8 # two GPU nodes\nNodeName=c1 Gres= CPUs=8\n"
    nodes = nodes_from_conf(conf)
    assert (nodes["c1"].gpus, nodes["c1"].resources) == (0, {"cpu": 8000})
    cluster = cluster_from_topology_conf("SwitchName=all Nodes=ALL # every node\n", gpus=nodes)
    assert cluster.nodes() == ["c1", "g1", "g2"]
    with pytest.raises(SlurmError, match="Nodes=ALL: pass all_nodes"):
        cluster_from_topology_conf("SwitchName=all Nodes=ALL\n", gpus=8)


def test_leaf_switches_at_different_depths_keep_the_real_depth() -> None:
    """The issue: Slurm accepts leaves at different depths; gangplace refused them. A leaf
    above the deepest level stands for itself below it (docs/slurm.md)."""
    text = (REAL / "topology.conf").read_text()
    levels, paths = parse_topology_conf(text)
    assert levels == ("switch1", "switch2")
    assert paths["gpu01"] == ("spine", "r0") and paths["cpu01"] == ("cpuleaf", "cpuleaf")
    cluster = real_cluster()
    # The two CPU nodes are one domain at every level: a CPU gang of two fits there.
    cpus = GangRequest(2, 0, resources_per_pod={"cpu": 32_000}, required_level="switch2")
    placement = cluster.place_gang(cpus)
    assert placement is not None and placement.domain == ("cpuleaf", "cpuleaf")


# ------------------------------------------------------------------ item 4: CPUs, memory


def test_cpus_and_memory_come_from_slurm_conf() -> None:
    conf = (
        "NodeName=DEFAULT CPUs=64 RealMemory=512000 ThreadsPerCore=2\n"
        "NodeName=g1 Gres=gpu:8 CoreSpecCount=2 MemSpecLimit=16000\n"
        "NodeName=g2 Gres=gpu:8\n"
    )
    nodes = nodes_from_conf(conf)
    assert nodes["g1"].resources == {"cpu": 60_000, "memory": 496_000 * MIB}
    assert nodes["g2"].resources == {"cpu": 64_000, "memory": 512_000 * MIB}


def test_sbatch_args_pass_memory_so_packed_gangs_share_a_node() -> None:
    """The issue: no --mem, so with CR_Core_Memory each job got the whole node's memory."""
    cluster = real_cluster()
    cluster.reserve(GangRequest(1, 4))  # shard01
    first = cluster.reserve(GangRequest(1, 4)).placement
    second = cluster.reserve(GangRequest(1, 2)).placement
    assert first.nodes == second.nodes == ("gpu01",)
    assert sbatch_args(first, cluster=cluster)[-1] == "--mem=32000M"
    assert sbatch_args(second, cluster=cluster)[-1] == "--mem=16000M"
    asked = GangRequest(2, 4, resources_per_pod={"cpu": 8_000, "memory": 1000 * MIB})
    placement = cluster.place_gang(asked)
    assert placement is not None
    assert sbatch_args(placement, asked, cluster=cluster)[-2:] == [
        "--cpus-per-task=8",
        f"--mem={1000 * len(placement.pods) // len(set(placement.nodes))}M",
    ]


def test_powered_down_cloud_nodes_are_placeable_by_default() -> None:
    """The issue: idle~ nodes, which Slurm schedules on, were cordoned."""
    cluster = real_cluster()
    state = apply_scontrol_nodes(cluster, (REAL / "nodes_d.txt").read_text())
    assert not cluster.node("gpu02").cordoned and state.cordoned == []
    strict = real_cluster()
    state = apply_scontrol_nodes(strict, (REAL / "nodes_d.txt").read_text(), powered_down="cordon")
    assert "gpu02" in state.cordoned and "gpu01" in state.cordoned  # idle~ and booting
    for text, cordoned in (("IDLE*", True), ("IDLE~", False), ("MIXED#", False),
                           ("IDLE+DRAIN", True), ("DOWN~", True)):  # fmt: skip
        fresh = cluster_from_topology_conf("SwitchName=s Nodes=g1\n", gpus=8)
        apply_scontrol_nodes(fresh, f"NodeName=g1 Gres=gpu:8 GresUsed=gpu:0 State={text}\n")
        assert fresh.node("g1").cordoned is cordoned, text
