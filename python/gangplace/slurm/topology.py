"""``topology.conf`` both ways (tree and block plugins)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gangplace._gangplace import Cluster
from gangplace.slurm.conf import NodeConf
from gangplace.slurm.text import SlurmError, _hosts, _lines, compress_hostlist

TOP_SWITCH_LABEL = "slurm.schedmd.com/top-switch"


def parse_topology_conf(
    text: str, *, filename: str = "topology.conf", all_nodes: Sequence[str] | None = None
) -> tuple[tuple[str, ...], dict[str, tuple[str, ...]]]:
    """Levels and each node's path of a ``topology.conf`` (tree or block form).

    ``Nodes=ALL`` stands for ``all_nodes`` (every node of ``slurm.conf``); without them it is
    a :class:`SlurmError`. Leaf switches may be at different depths: a leaf above the deepest
    level stands for itself at every level below it (docs/slurm.md).
    """
    lines = _lines(text, filename)
    for where, fields in lines:
        if fields.get("nodes", "").upper() == "ALL":
            if all_nodes is None:
                raise SlurmError(f"{where}: Nodes=ALL: pass all_nodes (the nodes of slurm.conf)")
            fields["nodes"] = ",".join(all_nodes)
    if any("blockname" in fields for _, fields in lines):
        return _blocks(lines)
    return _tree(lines, filename)


def _blocks(
    lines: list[tuple[str, dict[str, str]]],
) -> tuple[tuple[str, ...], dict[str, tuple[str, ...]]]:
    paths: dict[str, tuple[str, ...]] = {}
    for where, fields in lines:
        if "blocksizes" in fields and "blockname" not in fields:
            continue
        if "blockname" not in fields or "nodes" not in fields:
            raise SlurmError(f"{where}: a block line needs BlockName= and Nodes=")
        for node in _hosts(fields["nodes"], where):
            if node in paths:
                raise SlurmError(f"{where}: node {node} is already in block {paths[node][0]}")
            paths[node] = (fields["blockname"],)
    return ("block",), paths


def _tree(
    lines: list[tuple[str, dict[str, str]]], filename: str
) -> tuple[tuple[str, ...], dict[str, tuple[str, ...]]]:
    parent: dict[str, str] = {}
    leaves: dict[str, list[str]] = {}
    declared: dict[str, str] = {}
    node_leaf: dict[str, str] = {}
    children: dict[str, list[str]] = {}
    for where, fields in lines:
        name = fields.get("switchname")
        if name is None:
            raise SlurmError(f"{where}: expected SwitchName=")
        if name in declared:
            raise SlurmError(
                f"{where}: switch {name} is declared twice (first at {declared[name]})"
            )
        declared[name] = where
        for child in _hosts(fields.get("switches", ""), where) if "switches" in fields else []:
            if child in parent:
                raise SlurmError(
                    f"{where}: switch {child} is under both {parent[child]} and {name}"
                )
            parent[child] = name
            children.setdefault(name, []).append(child)
        if "nodes" in fields:
            for node in _hosts(fields["nodes"], where):
                if node in node_leaf:
                    raise SlurmError(
                        f"{where}: node {node} is under both {node_leaf[node]} and {name}"
                    )
                node_leaf[node] = name
            leaves[name] = _hosts(fields["nodes"], where)
    for child, owner in parent.items():
        if child not in declared:
            raise SlurmError(f"{declared[owner]}: switch {owner} names unknown switch {child}")

    def path_of(switch: str) -> list[str]:
        path, seen = [switch], {switch}
        while path[-1] in parent:
            above = parent[path[-1]]
            if above in seen:
                raise SlurmError(f"{declared[switch]}: switches form a cycle through {above}")
            seen.add(above)
            path.append(above)
        return path[::-1]

    paths = {node: path_of(leaf) for node, leaf in node_leaf.items()}
    for switch in declared:
        path_of(switch)  # cycles among switches without nodes are errors too
    deepest = max((len(path) for path in paths.values()), default=0)
    # A leaf above the deepest level stands for itself below: the same nodes, one domain.
    paths = {node: path + [path[-1]] * (deepest - len(path)) for node, path in paths.items()}
    tops = {path[0] for path in paths.values()}
    drop_top = len(tops) == 1
    result = {node: tuple(path[1:] if drop_top else path) for node, path in paths.items()}
    depth = deepest - (1 if drop_top else 0)
    return tuple(f"switch{index + 1}" for index in range(depth)), result


def cluster_from_topology_conf(
    text: str,
    *,
    gpus: int | Mapping[str, int] | Mapping[str, NodeConf],
    filename: str = "topology.conf",
    **cluster_kw: Any,
) -> Cluster:
    """A cluster from ``topology.conf`` text; ``gpus`` for every node, or per node.

    ``gpus`` per node is a count, or a :class:`~gangplace.slurm.NodeConf` (from
    :func:`~gangplace.slurm.nodes_from_conf`), which also gives the node's resources (CPUs,
    memory, MIG profiles, shards). A node of 0 GPUs (a CPU node, a MIG-only node) is a node
    of the cluster all the same when it has resources (from a ``NodeConf``); a bare 0 is
    left out (nothing could be placed there). ``Nodes=ALL`` means every node of a ``gpus``
    mapping.

    A single top switch is the whole cluster; its name is kept in every node's label
    :data:`TOP_SWITCH_LABEL`, so that :func:`to_topology_conf` writes it back. A tree with
    several top switches and no common parent is several fabrics that never join:
    Slurm never places a job across them ("no switch can reach all nodes"), so the cluster
    gets ``max_level="switch1"`` (pass ``max_level=None`` to join them anyway).

    Raises:
        SlurmError: A malformed or inconsistent file, or a node without a GPU count.

    """
    everyone = None if isinstance(gpus, int) else list(gpus)
    levels, paths = parse_topology_conf(text, filename=filename, all_nodes=everyone)
    tops = _top_switches(text, filename) if levels[:1] == ("switch1",) else []
    if len(tops) > 1:
        cluster_kw.setdefault("max_level", "switch1")
    labels = {TOP_SWITCH_LABEL: tops[0]} if len(tops) == 1 else {}
    cluster = Cluster(levels, **cluster_kw)
    for node in sorted(paths):
        given = gpus if isinstance(gpus, int) else gpus.get(node)
        if given is None:
            raise SlurmError(f"{filename}: no GPU count for node {node}")
        if isinstance(given, NodeConf):
            count, resources = given.gpus, given.resources
        else:
            count, resources = given, {}
        if count == 0 and not resources:
            continue  # nothing could be placed there
        topology = dict(zip(levels, paths[node], strict=True))
        cluster.add_node(
            node, gpus=count, topology=topology, labels=labels, resources=resources or None
        )
    return cluster


def _top_switches(text: str, filename: str) -> list[str]:
    """The tree's switches that no other switch lists (several: fabrics that never join)."""
    lines = _lines(text, filename)
    named = [fields["switchname"] for _, fields in lines if "switchname" in fields]
    below = {
        child
        for where, fields in lines
        if "switches" in fields
        for child in _hosts(fields["switches"], where)
    }
    return [name for name in named if name not in below]


def switch_names(paths: list[tuple[str, ...]]) -> dict[tuple[str, ...], str]:
    """A switch name per domain path: the domain's own name where no other domain has it.

    Slurm switch names are unique, so a cluster read from ``topology.conf`` gets its names
    back unchanged. Domains whose name repeats (rack ``r1`` under two spines) are qualified
    by their whole path joined with ``_`` (``s1_r1``), then by trailing ``_`` until unique.
    The root is ``cluster``.
    """
    paths = sorted(set(paths))
    counts: dict[str, int] = {}
    for path in paths:
        counts[path[-1]] = counts.get(path[-1], 0) + 1
    names: dict[tuple[str, ...], str] = {(): "cluster"}
    taken = {"cluster"} | {name for name, count in counts.items() if count == 1}
    for path in paths:
        if counts[path[-1]] == 1 and path[-1] != "cluster":
            names[path] = path[-1]
            continue
        name = "_".join(path)
        while name in taken:
            name += "_"
        taken.add(name)
        names[path] = name
    return names


def to_topology_conf(cluster: Cluster, *, top_switch: str | None = None) -> str:
    """``topology.conf`` (tree form) for ``cluster``; switch names as :func:`switch_names`.

    The switch above the outermost level is ``top_switch``; by default the name every node
    carries in :data:`TOP_SWITCH_LABEL` (set by :func:`cluster_from_topology_conf`), else
    ``cluster``. A cluster whose ``max_level`` is its outermost level (fabrics that never
    join, as :func:`cluster_from_topology_conf` reads several top switches) gets no switch
    above them, so they stay apart in Slurm too.
    """
    levels = cluster.levels
    tops = {cluster.node(name).labels.get(TOP_SWITCH_LABEL) for name in cluster.nodes()}
    labelled = tops.pop() if len(tops) == 1 else None
    top: str = top_switch or labelled or "cluster"
    lines = []
    children: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    nodes_of: dict[tuple[str, ...], list[str]] = {}
    for name in cluster.nodes():
        topology = cluster.node(name).topology
        path = tuple(topology[level] for level in levels)
        nodes_of.setdefault(path, []).append(name)
        for depth in range(len(path)):
            above, below = path[:depth], path[: depth + 1]
            if below not in children.setdefault(above, []):
                children[above].append(below)

    switch_of = switch_names([below for belows in children.values() for below in belows])

    def switch(path: tuple[str, ...]) -> str:
        return top if not path else switch_of[path]

    # Fabrics that never join (``max_level`` at the outermost level): no switch above them.
    disjoint = bool(levels) and cluster.max_level == levels[0]
    for above in sorted(children):
        if disjoint and not above:
            continue
        if len(above) < len(levels):
            names = [switch(below) for below in sorted(children[above])]
            lines.append(f"SwitchName={switch(above)} Switches={','.join(names)}")
    for path in sorted(nodes_of):
        lines.append(f"SwitchName={switch(path)} Nodes={compress_hostlist(nodes_of[path])}")
    if not levels:
        lines = [f"SwitchName={top} Nodes={compress_hostlist(cluster.nodes())}"]
    return "\n".join(lines) + "\n"
