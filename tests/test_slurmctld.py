"""Slurm for real (issue 24, part 4): ``sbatch_args`` and ``apply_scontrol_nodes`` against
Debian's ``slurmctld`` (22.05).

Runs as root with ``slurmctld``, ``munged``, ``sbatch``, ``scontrol``, ``unshare`` and ``ip``
(``scripts/test.sh`` installs the Slurm and MUNGE packages with ``apt-get`` when it can);
otherwise it is skipped with the reason. Nodes are ``State=CLOUD`` with a no-op resume
program, so Slurm allocates them without any ``slurmd``.

Nothing listens outside: the daemons run in a fresh network namespace (``unshare --net``)
with only its loopback up, which carries one more address (10.254.254.1/32) because Slurm
resolves names with ``AI_ADDRCONFIG``, which wants an address other than 127.0.0.1. The
script stops both daemons by their PIDs when it exits.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gangplace import Cluster, GangRequest, Placement
from gangplace.slurm import (
    apply_scontrol_nodes,
    cluster_from_topology_conf,
    expand_hostlist,
    sbatch_args,
    to_topology_conf,
)

TOOLS = ("slurmctld", "munged", "sbatch", "scontrol", "unshare", "ip")
TOPOLOGY = "SwitchName=r0 Nodes=gpu[01-02]\nSwitchName=r1 Nodes=gpu[03-04]\n"
# The daemon's part of slurm.conf, shared with tests/test_slurmctld_fidelity.py; the
# resource selection, GRES types, nodes and partition follow it.
DAEMON_CONF = """\
ClusterName=gp
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
AuthInfo=socket={dir}/munge.sock
CredType=cred/munge
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1
TopologyPlugin=topology/tree
SuspendProgram=/bin/true
ResumeProgram=/bin/true
SuspendTime=600
ResumeTimeout=600
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
"""
SLURM_CONF = (
    DAEMON_CONF
    + """\
SelectTypeParameters=CR_Core
GresTypes=gpu
NodeName=gpu[01-04] CPUs=8 Gres=gpu:8 State=CLOUD
PartitionName=p Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
)
SCRIPT = """\
set -u
cd {dir}
ip link set lo up
ip addr add 10.254.254.1/32 dev lo
export SLURM_CONF={dir}/slurm.conf
munged --force --socket={dir}/munge.sock --key-file={dir}/munge.key \\
    --log-file={dir}/munged.log --pid-file={dir}/munged.pid --seed-file={dir}/munged.seed
slurmctld -f {dir}/slurm.conf
trap 'kill $(cat {dir}/slurmctld.pid) $(cat {dir}/munged.pid) 2>/dev/null' EXIT
for i in $(seq 1 50); do timeout 3 scontrol ping >/dev/null 2>&1 && break; sleep 0.2; done
{jobs}
# Every job's GPUs show in GresUsed before the node list is read (a loaded machine lags).
for i in $(seq 1 60); do
    scontrol -d show node -o > {dir}/nodes.txt
    [ "$(grep -c 'GresUsed=gpu:[1-9]' {dir}/nodes.txt)" -ge {busy} ] && break; sleep 0.5
done
ss -ltn > {dir}/listening.txt
ip -o addr show > {dir}/addresses.txt
"""
JOB = """\
id=$(sbatch --parsable {args} --wrap true)
for i in $(seq 1 60); do  # every component (one line each) has its nodes
    lines=$(scontrol show job -o "$id")
    [ -n "$lines" ] && ! grep -v -q ' NodeList=gpu' <<< "$lines" && break; sleep 0.5
done
scontrol show job -o "$id" > {dir}/job{number}.txt
"""


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "not root: slurmctld and its network namespace need root"
    absent = [tool for tool in TOOLS if shutil.which(tool) is None]
    if absent:
        return f"missing {', '.join(absent)} (apt-get install slurmctld slurm-client munge)"
    return None


def _cluster() -> Cluster:
    return cluster_from_topology_conf(TOPOLOGY, gpus=8)


def _run_slurm(directory: Path, placements: list[Placement], cluster: Cluster) -> None:
    (directory / "state").mkdir()
    (directory / "munge.key").write_bytes(os.urandom(1024))
    (directory / "munge.key").chmod(0o600)
    (directory / "slurm.conf").write_text(SLURM_CONF.format(dir=directory))
    (directory / "gres.conf").write_text("NodeName=gpu[01-04] Name=gpu Count=8\n")
    (directory / "topology.conf").write_text(to_topology_conf(cluster))
    jobs = "".join(
        JOB.format(args=" ".join(sbatch_args(placement)), dir=directory, number=number)
        for number, placement in enumerate(placements)
    )
    script = directory / "run.sh"
    busy = len({pod.node for placement in placements for pod in placement.pods})
    script.write_text(SCRIPT.format(dir=directory, jobs=jobs, busy=busy))
    done = subprocess.run(
        ["unshare", "--net", "bash", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if "Operation not permitted" in done.stderr and not (directory / "nodes.txt").exists():
        pytest.skip(f"no network namespace here: {done.stderr.strip()[:200]}")
    assert (directory / "nodes.txt").exists(), (
        done.stderr + (directory / "slurmctld.log").read_text()
    )


def _allocated(text: str) -> list[list[str]]:
    """Each component's nodes, from ``scontrol show job -o`` (one line per component)."""
    found = []
    for line in text.splitlines():
        match = re.search(r"(?:^|\s)NodeList=(\S+)", line)
        assert match and match.group(1) != "(null)", line
        found.append(expand_hostlist(match.group(1)))
    return found


def test_slurm_allocates_the_placements_nodes_and_scontrol_feeds_the_cluster(
    tmp_path: Path,
) -> None:
    reason = _missing()
    if reason:
        pytest.skip(reason)
    cluster = _cluster()
    even = cluster.reserve(GangRequest(2, 8, required_level="switch1")).placement
    uneven = cluster.place_gang(GangRequest(3, 4, required_level="switch1"))
    assert uneven is not None
    assert ":" in sbatch_args(uneven)  # unequal pods per node: a heterogeneous job
    _run_slurm(tmp_path, [even, uneven], cluster)
    # slurmctld listened (on the wildcard) only inside a namespace whose one interface is lo.
    assert ":16817" in (tmp_path / "listening.txt").read_text()
    interfaces = {line.split()[1] for line in (tmp_path / "addresses.txt").read_text().splitlines()}
    assert interfaces == {"lo"}
    (first,) = _allocated((tmp_path / "job0.txt").read_text())
    assert first == sorted({pod.node for pod in even.pods})
    components = _allocated((tmp_path / "job1.txt").read_text())
    by_node: dict[str, int] = {}
    for pod in uneven.pods:
        by_node[pod.node] = by_node.get(pod.node, 0) + 1
    assert sorted(node for nodes in components for node in nodes) == sorted(by_node)
    assert len(components) == len(set(by_node.values()))  # one component per pod count
    fresh = _cluster()
    state = apply_scontrol_nodes(fresh, (tmp_path / "nodes.txt").read_text())
    used = {node: len(fresh.node(node).allocated) for node in state.adopted}
    expected = {pod.node: 0 for pod in [*even.pods, *uneven.pods]}
    for pod in [*even.pods, *uneven.pods]:
        expected[pod.node] += len(pod.gpus)
    assert used == expected
    assert state.unknown == [] and state.warnings == []
    # Cloud nodes powering up are not responding yet, and Slurm schedules on them all the
    # same (issue 45): placeable by default, cordoned with powered_down="cordon".
    assert state.cordoned == []
    again = apply_scontrol_nodes(_cluster(), (tmp_path / "nodes.txt").read_text(),
                                 powered_down="cordon")  # fmt: skip
    assert sorted(again.cordoned) == sorted(expected)
