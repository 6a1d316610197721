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

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gangplace._gangplace import Allocation, Cluster, Placement, PodPlacement
from gangplace.errors import GangplaceError

__all__ = [
    "TOP_SWITCH_LABEL",
    "UNUSABLE_STATES",
    "SlurmError",
    "SlurmNodeState",
    "apply_scontrol_nodes",
    "cluster_from_topology_conf",
    "compress_hostlist",
    "expand_hostlist",
    "gpus_from_conf",
    "sbatch_args",
    "to_topology_conf",
]


TOP_SWITCH_LABEL = "slurm.schedmd.com/top-switch"


class SlurmError(GangplaceError, ValueError):
    """A Slurm file is malformed or inconsistent (the message names file and line)."""


def _split_top_level(expression: str) -> list[str]:
    """Splits at commas outside brackets and parentheses (hostlists, GRES index lists)."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in expression:
        if char in "[(":
            depth += 1
        elif char in "])":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def _expand_one(pattern: str) -> list[str]:
    match = re.search(r"\[([^\[\]]*)\]", pattern)
    if match is None:
        if "[" in pattern or "]" in pattern:
            raise ValueError(f"unbalanced brackets in {pattern!r}")
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    names: list[str] = []
    for item in match.group(1).split(","):
        item = item.strip()
        low, _, high = item.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise ValueError(f"bad range {item!r} in {pattern!r}")
        width = len(low) if low.startswith("0") else 0
        for number in range(int(low), int(high or low) + 1):
            names.extend(f"{head}{number:0{width}d}{rest}" for rest in _expand_one(tail))
    return names


def expand_hostlist(expression: str) -> list[str]:
    """The node names of a Slurm hostlist expression, in order.

    Raises:
        ValueError: Unbalanced brackets or a malformed range.

    """
    return [name for part in _split_top_level(expression) for name in _expand_one(part)]


def compress_hostlist(names: list[str]) -> str:
    """A hostlist expression for ``names`` (runs of numbered names become ranges)."""
    groups: dict[tuple[str, int], list[int]] = {}
    order: list[tuple[str, int] | str] = []
    for name in names:
        match = re.fullmatch(r"(.*?)(\d+)", name)
        if match is None:
            order.append(name)
            continue
        key = (match.group(1), len(match.group(2)) if match.group(2).startswith("0") else 0)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(match.group(2)))
    parts: list[str] = []
    for entry in order:
        if isinstance(entry, str):
            parts.append(entry)
            continue
        key = entry
        prefix, width = key
        numbers = sorted(set(groups[key]))
        ranges, start = [], numbers[0]
        for previous, current in zip(numbers, [*numbers[1:], None], strict=True):
            if current != previous + 1:
                low, high = f"{start:0{width}d}", f"{previous:0{width}d}"
                ranges.append(low if start == previous else f"{low}-{high}")
                if current is not None:
                    start = current
        parts.append(f"{prefix}[{','.join(ranges)}]" if len(numbers) > 1 else prefix + ranges[0])
    return ",".join(parts)


def _fields(line: str, where: str) -> dict[str, str]:
    fields = {}
    for token in line.split():
        key, equals, value = token.partition("=")
        if not equals or not value:
            raise SlurmError(f"{where}: expected Key=Value, got {token!r}")
        fields[key.lower()] = value
    return fields


def _lines(text: str, filename: str) -> list[tuple[str, dict[str, str]]]:
    parsed = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if line:
            where = f"{filename}:{number}"
            parsed.append((where, _fields(line, where)))
    return parsed


def _hosts(expression: str, where: str) -> list[str]:
    try:
        return expand_hostlist(expression)
    except ValueError as error:
        raise SlurmError(f"{where}: {error}") from None


def parse_topology_conf(
    text: str, *, filename: str = "topology.conf"
) -> tuple[tuple[str, ...], dict[str, tuple[str, ...]]]:
    """Levels and each node's path of a ``topology.conf`` (tree or block form)."""
    lines = _lines(text, filename)
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
    depths = {len(path) for path in paths.values()}
    if len(depths) > 1:
        raise SlurmError(f"{filename}: leaf switches are at different depths {sorted(depths)}")
    for switch in declared:
        path_of(switch)  # cycles among switches without nodes are errors too
    tops = {path[0] for path in paths.values()}
    drop_top = len(tops) == 1
    result = {node: tuple(path[1:] if drop_top else path) for node, path in paths.items()}
    depth = next(iter(depths), 0) - (1 if drop_top else 0)
    return tuple(f"switch{index + 1}" for index in range(depth)), result


def gpus_from_conf(text: str, *, filename: str = "slurm.conf") -> dict[str, int]:
    """GPUs per node from ``slurm.conf`` or ``gres.conf`` lines.

    Reads ``NodeName=... Gres=gpu:N`` (``gpu:type:N`` too) and ``gres.conf``'s
    ``NodeName=... Name=gpu Count=N`` (several lines for one node add up).
    """
    gpus: dict[str, int] = {}
    for where, fields in _lines(text, filename):
        if "nodename" in fields and fields.get("name") == "gpu" and "gres" not in fields:
            count = fields.get("count", "1")
            if not count.isdigit():
                raise SlurmError(f"{where}: Count={count} is not a number")
            for node in _hosts(fields["nodename"], where):
                gpus[node] = gpus.get(node, 0) + int(count)
            continue
        if "nodename" not in fields or "gres" not in fields:
            continue
        counts = [
            int(item.split(":")[-1])
            for item in fields["gres"].split(",")
            if item.startswith("gpu") and item.split(":")[-1].isdigit()
        ]
        for node in _hosts(fields["nodename"], where):
            gpus[node] = sum(counts)
    return gpus


def cluster_from_topology_conf(
    text: str, *, gpus: int | Mapping[str, int], filename: str = "topology.conf", **cluster_kw: Any
) -> Cluster:
    """A cluster from ``topology.conf`` text; ``gpus`` for every node, or per node.

    A single top switch is the whole cluster; its name is kept in every node's label
    :data:`TOP_SWITCH_LABEL`, so that :func:`to_topology_conf` writes it back. A tree with
    several top switches and no common parent is several fabrics that never join:
    Slurm never places a job across them ("no switch can reach all nodes"), so the cluster
    gets ``max_level="switch1"`` (pass ``max_level=None`` to join them anyway).

    Raises:
        SlurmError: A malformed or inconsistent file, or a node without a GPU count.

    """
    levels, paths = parse_topology_conf(text, filename=filename)
    tops = _top_switches(text, filename) if levels[:1] == ("switch1",) else []
    if len(tops) > 1:
        cluster_kw.setdefault("max_level", "switch1")
    labels = {TOP_SWITCH_LABEL: tops[0]} if len(tops) == 1 else {}
    cluster = Cluster(levels, **cluster_kw)
    for node in sorted(paths):
        count = gpus if isinstance(gpus, int) else gpus.get(node)
        if count is None:
            raise SlurmError(f"{filename}: no GPU count for node {node}")
        if count == 0:
            continue
        topology = dict(zip(levels, paths[node], strict=True))
        cluster.add_node(node, gpus=count, topology=topology, labels=labels)
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
    ``cluster``.
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

    for above in sorted(children):
        if len(above) < len(levels):
            names = [switch(below) for below in sorted(children[above])]
            lines.append(f"SwitchName={switch(above)} Switches={','.join(names)}")
    for path in sorted(nodes_of):
        lines.append(f"SwitchName={switch(path)} Nodes={compress_hostlist(nodes_of[path])}")
    if not levels:
        lines = [f"SwitchName={top} Nodes={compress_hostlist(cluster.nodes())}"]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- node state

# Base states and flags of `scontrol show node` that take a node out of scheduling.
UNUSABLE_STATES = frozenset(
    {
        "DOWN",
        "DRAIN",
        "DRAINED",
        "DRAINING",
        "FAIL",
        "FAILING",
        "MAINT",
        "FUTURE",
        "INVAL",
        "UNKNOWN",
        "NOT_RESPONDING",
        "POWER_DOWN",
        "POWERED_DOWN",
        "POWERING_DOWN",
        "POWERING_UP",
        "REBOOT_ISSUED",
        "REBOOT_REQUESTED",
    }
)


@dataclass(frozen=True)
class SlurmNodeState:
    """What :func:`apply_scontrol_nodes` did.

    Attributes:
        adopted: Node -> the allocation recording its used GPUs (``GresUsed``).
        cordoned: Nodes cordoned because of their state (``DRAIN``, ``DOWN``, ``*``...).
        uncordoned: Nodes uncordoned because their state is usable again.
        unknown: Nodes of the output that the cluster does not have (skipped).
        warnings: Anything else worth knowing (GPU counts that disagree, missing fields).

    """

    adopted: dict[str, Allocation] = field(default_factory=dict)
    cordoned: list[str] = field(default_factory=list)
    uncordoned: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _node_records(text: str) -> list[tuple[int, str]]:
    """Each node's text (one ``-o`` line, or the indented block of the default format)."""
    records: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("NodeName="):
            records.append((number, stripped))
        elif records:
            records[-1] = (records[-1][0], records[-1][1] + " " + stripped)
        else:
            raise SlurmError(f"scontrol:{number}: expected NodeName=..., got {stripped[:40]!r}")
    return records


def _gpu_count(gres: str) -> int:
    """GPUs of a ``Gres=``/``GresUsed=`` value: ``gpu:8``, ``gpu:h100:8(S:0-1)``, several."""
    total = 0
    for part in _split_top_level(gres):
        match = re.fullmatch(r"gpu(?::[^:(]+)?:(\d+)(\(.*\))?", part.strip())
        if match:
            total += int(match.group(1))
    return total


def _used_indices(used: str, where: str) -> tuple[int, list[int] | None]:
    """``(count, indices)`` of ``GresUsed``; indices ``None`` when Slurm printed none."""
    count, named = 0, True
    indices: list[int] = []
    for part in _split_top_level(used):
        match = re.fullmatch(r"gpu(?::[^:(]+)?:(\d+)(?:\(IDX:([^)]*)\))?", part.strip())
        if match is None:
            continue
        count += int(match.group(1))
        spec = match.group(2)
        if spec is None:
            named = False
        elif spec != "N/A":
            for item in spec.split(","):
                low, _, high = item.partition("-")
                if not low.isdigit() or (high and not high.isdigit()):
                    raise SlurmError(f"{where}: bad GPU index list {spec!r} in GresUsed")
                indices.extend(range(int(low), int(high or low) + 1))
    if named and len(indices) != count:
        raise SlurmError(f"{where}: GresUsed names {len(indices)} GPUs but counts {count}")
    return count, (indices if named else None)


def apply_scontrol_nodes(cluster: Cluster, text: str, *, owner: str = "slurm") -> SlurmNodeState:
    """Reads ``scontrol -d show node`` output (``-o`` one-line or the default form).

    For every node the cluster has: the GPUs of ``GresUsed`` are adopted as one allocation of
    ``owner`` (with ``-d`` Slurm prints their indices, ``gpu:h100:4(IDX:0-3)``; without it
    only counts, and the lowest-indexed free GPUs are taken); a node whose ``State`` has a
    base state or flag of :data:`UNUSABLE_STATES` (``DRAIN``, ``DOWN``, ``DOWN*``,
    ``MIXED+DRAIN``...) or ends in ``*`` (not responding) is cordoned, any other node is
    uncordoned. Allocations ``owner`` held before are released first, so calling it again
    with fresh output brings the cluster up to date. Nodes unknown to the cluster are
    listed and skipped.

    Raises:
        SlurmError: Malformed output (the message names the line); nothing changed.
        Conflict: A used GPU is held by something else or unhealthy in the cluster; the
            nodes before it were applied (the error names the node).

    """
    parsed = []
    for number, record in _node_records(text):
        where = f"scontrol:{number}"
        fields = dict(re.findall(r"(\w+)=(\S*)", record))
        name = fields.get("NodeName", "")
        if not name:
            raise SlurmError(f"{where}: a node record without a name")
        used = _used_indices(fields.get("GresUsed", ""), where)
        parsed.append((name, fields, used))
    result = SlurmNodeState()
    for allocation in cluster.allocations(owner=owner):
        cluster.release(allocation, owner=owner)
    known = set(cluster.nodes())
    for name, fields, (count, indices) in parsed:
        if name not in known:
            result.unknown.append(name)
            continue
        info = cluster.node(name)
        configured = _gpu_count(fields.get("Gres", ""))
        if "Gres" in fields and configured != info.gpus:
            result.warnings.append(f"{name}: Slurm has {configured} GPUs, the cluster {info.gpus}")
        _apply_state(cluster, name, fields.get("State", ""), info.cordoned, result)
        if count:
            pods: list[Any] = [PodPlacement(name, indices)] if indices else [(name, count)]
            result.adopted[name] = cluster.adopt(pods, owner=owner)
    return result


def _apply_state(
    cluster: Cluster, name: str, state: str, cordoned: bool, result: SlurmNodeState
) -> None:
    if not state:
        result.warnings.append(f"{name}: no State field; left as it was")
        return
    parts = {part.rstrip("*~#!%$@^-") for part in state.split("+")}
    unusable = state.endswith("*") or bool(parts & UNUSABLE_STATES)
    if unusable and not cordoned:
        cluster.cordon(name)
        result.cordoned.append(name)
    elif not unusable and cordoned:
        cluster.uncordon(name)
        result.uncordoned.append(name)


def sbatch_args(placement: Placement) -> list[str]:
    """``sbatch``/``srun`` arguments that pin a job to ``placement``.

    ``--nodelist`` (a compressed hostlist), ``--nodes``, ``--ntasks`` (one task per pod),
    ``--ntasks-per-node`` and ``--gres=gpu:N`` per node. Slurm's ``--gres`` is per node, so a
    placement whose nodes hold different numbers of its GPUs or pods cannot be pinned exactly
    and raises :class:`SlurmError`.
    """
    per_node: dict[str, list[int]] = {}
    for pod in placement.pods:
        per_node.setdefault(pod.node, []).append(len(pod.gpus))
    gpus = {sum(counts) for counts in per_node.values()}
    tasks = {len(counts) for counts in per_node.values()}
    if len(gpus) != 1 or len(tasks) != 1:
        raise SlurmError(
            "Slurm's --gres and --ntasks-per-node are per node; this placement gives its "
            f"nodes {sorted(gpus)} GPUs and {sorted(tasks)} pods"
        )
    return [
        f"--nodelist={compress_hostlist(list(per_node))}",
        f"--nodes={len(per_node)}",
        f"--ntasks={len(placement.pods)}",
        f"--ntasks-per-node={tasks.pop()}",
        f"--gres=gpu:{gpus.pop()}",
    ]
