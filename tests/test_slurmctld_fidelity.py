"""Slurm read as slurmctld runs it (issue 45, item 5), against Debian's ``slurmctld`` (22.05).

A realistic configuration: ``NodeName=DEFAULT``, an ``Include<TAB>`` with ``%c``, backslash
continuations in all three files, typed GRES, a MIG node, a shard node, CPU-only nodes, cloud
nodes, leaf switches at two depths, ``SelectTypeParameters=CR_Core_Memory``. gangplace reads
the three files into a cluster, places gangs, and Slurm runs them as placed: two gangs packed
onto one node run side by side (``--mem`` from ``sbatch_args``), the MIG node takes a MIG job
and never a whole-GPU gang; then ``scontrol show node`` in its four formats is read back:
with ``-d`` the adopted GPUs equal Slurm's ``GresUsed``, without it busy GPUs are never free.

Runs as root with the Slurm tools, in a network namespace whose only interface is lo (as
``tests/test_slurmctld.py``); otherwise skipped with the reason.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from test_slurmctld import DAEMON_CONF, SCRIPT, _missing

from gangplace import Cluster, GangRequest
from gangplace.slurm import (
    SlurmError,
    apply_scontrol_nodes,
    cluster_from_topology_conf,
    nodes_from_conf,
    sbatch_args,
)

SLURM_CONF = (
    DAEMON_CONF
    + """\
SelectTypeParameters=CR_Core_Memory  # memory is a consumable: --mem matters
GresTypes=gpu,shard
PrivateData=cloud
Include\t{dir}/nodes.%c.conf
PartitionName=p Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
)
NODES_CONF = """\
NodeName=DEFAULT CPUs=16 RealMemory=64000 \\
    State=CLOUD
NodeName=gpu[01-04] Gres=gpu:h100:8
NodeName=mig01 Gres=gpu:1g.10gb:14,gpu:3g.40gb:4
NodeName=shard01 Gres=gpu:4,shard:16
NodeName=cpu[01-02] CPUs=32  # CPU-only
"""
GRES_CONF = """\
NodeName=gpu[01-04] Name=gpu Type=h100 \\
    File=/dev/nvidia[0-7]
NodeName=mig01 Name=gpu Type=1g.10gb Count=14
NodeName=mig01 Name=gpu Type=3g.40gb Count=4
NodeName=shard01 Name=gpu File=/dev/nvidia[0-3]
NodeName=shard01 Name=shard Count=16
"""
TOPOLOGY_CONF = """\
SwitchName=top Switches=spine,cpuleaf
SwitchName=spine Switches=r[0-1]
SwitchName=r0 Nodes=gpu[01-02],mig01 \\
    LinkSpeed=100
SwitchName=r1 Nodes=gpu[03-04],shard01
SwitchName=cpuleaf Nodes=cpu[01-02]  # a leaf one level up
"""
JOB = "sbatch --parsable {args} --wrap true >> {dir}/ids.txt\n"
FORMATS = {
    "d": "-d show node",
    "do": "-d -o show node",
    "plain": "show node",
    "o": "-o show node",
}


def _cluster(directory: Path) -> Cluster:
    nodes = nodes_from_conf(
        (directory / "slurm.conf").read_text(), base_dir=directory, filename="slurm.conf"
    )
    gres = nodes_from_conf((directory / "gres.conf").read_text(), filename="gres.conf")
    for name, counted in gres.items():
        assert counted.gpus == nodes[name].gpus, name  # the two files agree
    topology = (directory / "topology.conf").read_text()
    return cluster_from_topology_conf(topology, gpus=nodes, clock=lambda: 0.0)


def _write(directory: Path) -> None:
    (directory / "state").mkdir()
    (directory / "munge.key").write_bytes(os.urandom(1024))
    (directory / "munge.key").chmod(0o600)
    (directory / "slurm.conf").write_text(SLURM_CONF.format(dir=directory))
    (directory / "nodes.gp.conf").write_text(NODES_CONF)
    (directory / "gres.conf").write_text(GRES_CONF)
    (directory / "topology.conf").write_text(TOPOLOGY_CONF)


def _run(directory: Path, jobs: list[list[str]], busy: int) -> None:
    submit = "".join(JOB.format(args=" ".join(args), dir=directory) for args in jobs)
    reads = "".join(
        f"scontrol {command} > {directory}/nodes_{key}.txt\n" for key, command in FORMATS.items()
    )
    # The wait for every job's GPUs in GresUsed, with typed GRES (gpu:h100:4).
    script = SCRIPT.format(dir=directory, jobs=submit, busy=busy).replace(
        "GresUsed=gpu:[1-9]", "GresUsed=gpu:\\(h100:\\)\\?[1-9]"
    )
    script += reads + f"squeue -h -o '%i %t' > {directory}/squeue.txt\n"
    (directory / "run.sh").write_text(script)
    done = subprocess.run(
        ["unshare", "--net", "bash", str(directory / "run.sh")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if "Operation not permitted" in done.stderr and not (directory / "nodes.txt").exists():
        pytest.skip(f"no network namespace here: {done.stderr.strip()[:200]}")
    log = directory / "slurmctld.log"
    assert (directory / "nodes_d.txt").exists(), done.stderr + (
        log.read_text() if log.exists() else ""
    )


def test_slurm_runs_what_gangplace_read_and_placed(tmp_path: Path) -> None:
    reason = _missing()
    if reason:
        pytest.skip(reason)
    _write(tmp_path)
    cluster = _cluster(tmp_path)
    assert cluster.levels == ("switch1", "switch2")
    assert cluster.node("cpu01").topology == {"switch1": "cpuleaf", "switch2": "cpuleaf"}
    mig = cluster.node("mig01")
    assert mig.gpus == 0 and mig.resources["nvidia.com/mig-1g.10gb"] == 14
    assert cluster.node("shard01").resources["shard"] == 16
    assert cluster.node("cpu01").resources == {"cpu": 32_000, "memory": 64_000 * 2**20}
    # A 1 x 4 gang fills the 4-GPU node; then two 1 x 4 gangs packed onto one 8-GPU node,
    # a 2 x 8 gang in one rack, a MIG job.
    filler = cluster.reserve(GangRequest(1, 4)).placement
    assert filler.nodes == ("shard01",)
    first = cluster.reserve(GangRequest(1, 4)).placement
    second = cluster.reserve(GangRequest(1, 4)).placement
    assert first.nodes == second.nodes == ("gpu01",)
    big = cluster.reserve(GangRequest(2, 8, required_level="switch2")).placement
    assert "mig01" not in big.nodes
    slices = GangRequest(1, 0, resources_per_pod={"nvidia.com/mig-1g.10gb": 3})
    sliced = cluster.reserve(slices).placement
    assert sliced.nodes == ("mig01",)
    whole = (filler, first, second, big)
    jobs = [sbatch_args(p, cluster=cluster) for p in whole]
    jobs.append(sbatch_args(sliced, slices, cluster=cluster))
    assert "--mem=32000M" in jobs[1] and "--gres=gpu:1g.10gb:3" in jobs[4]
    _run(tmp_path, jobs, busy=len({*filler.nodes, *first.nodes, *big.nodes}))
    states = dict(line.split() for line in (tmp_path / "squeue.txt").read_text().splitlines())
    assert len(states) == 5 and "PD" not in states.values(), states  # all running as placed
    used = {pod.node: 0 for placement in whole for pod in placement.pods}
    for placement in whole:
        for pod in placement.pods:
            used[pod.node] += len(pod.gpus)
    for key in ("d", "do"):
        fresh = _cluster(tmp_path)
        state = apply_scontrol_nodes(fresh, (tmp_path / f"nodes_{key}.txt").read_text())
        held = {name: len(fresh.node(name).allocated) for name in fresh.nodes()}
        assert {name: n for name, n in held.items() if n} == used, key
        mig = fresh.node("mig01")
        assert mig.free_resources["nvidia.com/mig-1g.10gb"] == 11 and not mig.allocated, key
        assert state.unknown == [] and state.cordoned == [], (key, state)
    for key in ("plain", "o"):
        fresh = _cluster(tmp_path)
        before = fresh.snapshot()
        with pytest.raises(SlurmError, match="without GresUsed"):
            apply_scontrol_nodes(fresh, (tmp_path / f"nodes_{key}.txt").read_text())
        assert fresh.snapshot() == before
        state = apply_scontrol_nodes(
            fresh, (tmp_path / f"nodes_{key}.txt").read_text(), missing_used="cordon"
        )
        assert set(state.cordoned) == {*used, "mig01"}, key  # never read as free
