r"""Slurm: ``topology.conf`` both ways, node state from ``scontrol``, ``sbatch`` arguments.

Clusters come from ``topology.conf`` (tree or block plugin) and go back to it;
:func:`apply_scontrol_nodes` reads the GPUs in use and the node states of
``scontrol show node``; :func:`sbatch_args` pins a job to a placement.

Tree plugin lines (``SwitchName=s1 Switches=s[2-3]``, ``SwitchName=s2 Nodes=node[01-18]``;
``LinkSpeed`` is ignored) become levels by switch depth: when one switch is at the top it is
the whole cluster and the levels below it are named ``switch1``, ``switch2``, ... from the
top; when several switches are at the top they form level ``switch1``. Every leaf switch must
be at the same depth. Block plugin lines (``BlockName=b1 Nodes=...``; ``BlockSizes=`` is
ignored) become one level, ``block``. Node names are Slurm hostlists (``node[01-18,20]``,
several bracket groups, comma-separated lists).

Errors (:class:`SlurmError`) name the file and line: unknown switches, cycles, a switch or
node under two parents, leaves at different depths, malformed lines.

Example:
    >>> from gangplace.slurm import cluster_from_topology_conf, expand_hostlist
    >>> expand_hostlist("gpu[01-02,07],cpu1")
    ['gpu01', 'gpu02', 'gpu07', 'cpu1']
    >>> text = "SwitchName=top Switches=leaf[1-2]\nSwitchName=leaf1 Nodes=n[1-2]\n"
    >>> text += "SwitchName=leaf2 Nodes=n[3-4]\n"
    >>> cluster = cluster_from_topology_conf(text, gpus=8)
    >>> cluster.levels, cluster.node("n3").topology
    (('switch1',), {'switch1': 'leaf2'})

"""

from __future__ import annotations

from gangplace.slurm.conf import NodeConf, SlurmConfWarning, gpus_from_conf, nodes_from_conf
from gangplace.slurm.sbatch import sbatch_args
from gangplace.slurm.scontrol import (
    UNUSABLE_STATES,
    USABLE_STATES,
    SlurmNodeState,
    apply_scontrol_nodes,
)
from gangplace.slurm.text import SlurmError, compress_hostlist, expand_hostlist
from gangplace.slurm.topology import (
    TOP_SWITCH_LABEL,
    cluster_from_topology_conf,
    parse_topology_conf,
    switch_names,
    to_topology_conf,
)

__all__ = [
    "TOP_SWITCH_LABEL",
    "UNUSABLE_STATES",
    "USABLE_STATES",
    "NodeConf",
    "SlurmConfWarning",
    "SlurmError",
    "SlurmNodeState",
    "apply_scontrol_nodes",
    "cluster_from_topology_conf",
    "compress_hostlist",
    "expand_hostlist",
    "gpus_from_conf",
    "nodes_from_conf",
    "parse_topology_conf",
    "sbatch_args",
    "switch_names",
    "to_topology_conf",
]
