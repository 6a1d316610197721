"""Nodes from ``slurm.conf`` and ``gres.conf``: GPUs, MIG profiles, shards, CPUs, memory.

docs/slurm.md "Reading slurm.conf and gres.conf" is the contract; the GRES rules are
:mod:`gangplace.slurm.gres`.
"""

from __future__ import annotations

import re
import shlex
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from gangplace.slurm.gres import GresItem, gres_amounts, parse_gres
from gangplace.slurm.text import SlurmError, _hosts, logical_lines

__all__ = [
    "MAX_INCLUDE_DEPTH",
    "NodeConf",
    "SlurmConfWarning",
    "gpus_from_conf",
    "nodes_from_conf",
]

# Include files nested deeper than this are refused (a cycle, most likely).
MAX_INCLUDE_DEPTH = 16
MIB = 2**20
_INCLUDE = re.compile(r"include\s+(.*)", re.IGNORECASE)
# slurm.conf node keys gangplace reads (the rest, NodeAddr, Feature, Weight..., are ignored).
_NODE_KEYS = (
    "gres",
    "cpus",
    "realmemory",
    "memspeclimit",
    "corespeccount",
    "threadspercore",
    "state",
)


class SlurmConfWarning(UserWarning):
    """Something in a Slurm config that gangplace cannot count, named by file and line."""


@dataclass(frozen=True)
class NodeConf:
    """One node as ``slurm.conf`` (or ``gres.conf``) describes it.

    Attributes:
        gpus: Whole GPUs (MIG profiles and shards are not whole GPUs).
        resources: ``cpu`` (millicores: ``CPUs`` less ``CoreSpecCount`` cores),
            ``memory`` (bytes: ``RealMemory`` less ``MemSpecLimit``, MiB), MIG profiles
            (``nvidia.com/mig-<type>``) and ``shard``, each when given.
        state: The ``State=`` of its line (``CLOUD``, ``FUTURE``...), ``""`` when absent.

    """

    gpus: int
    resources: dict[str, int] = field(default_factory=dict)
    state: str = ""


def _conf_fields(line: str, where: str) -> dict[str, str]:
    """``Key=Value`` tokens (quotes as the shell reads them), keys lower-cased."""
    try:
        tokens = shlex.split(line)
    except ValueError as error:
        raise SlurmError(f"{where}: {error}") from None
    fields = {}
    for token in tokens:
        key, equals, value = token.partition("=")
        if not equals or not key:
            raise SlurmError(f"{where}: expected Key=Value, got {token!r}")
        fields[key.lower()] = value
    return fields


def _read(
    text: str, filename: str, base: Path | None, depth: int, cluster: list[str]
) -> list[tuple[str, str]]:
    """The config's logical lines with ``Include`` files inlined, each with ``file:line``.

    ``cluster`` holds the ``ClusterName`` seen so far (or given), for ``%c`` in paths.
    """
    lines: list[tuple[str, str]] = []
    for where, line in logical_lines(text, filename):
        include = _INCLUDE.fullmatch(line)
        if line.lower() == "include":
            raise SlurmError(f"{where}: Include without a file")
        if include is None:
            if line.lower().startswith("clustername="):
                cluster[:] = [line.partition("=")[2].strip()]
            lines.append((where, line))
            continue
        target = include.group(1).strip()
        if "%c" in target:
            if not cluster:
                raise SlurmError(f"{where}: Include {target}: %c without a ClusterName before it")
            target = target.replace("%c", cluster[0])
        if base is None and not Path(target).is_absolute():
            raise SlurmError(f"{where}: Include {target}: pass base_dir to follow it")
        if depth >= MAX_INCLUDE_DEPTH:
            raise SlurmError(f"{where}: Include {target}: nested more than {depth} deep")
        path = Path(target) if Path(target).is_absolute() else (base or Path()) / target
        try:
            included = path.read_text()
        except OSError as error:
            raise SlurmError(f"{where}: Include {target}: {error.strerror or error}") from None
        lines.extend(_read(included, str(path), path.parent, depth + 1, cluster))
    return lines


def nodes_from_conf(
    text: str,
    *,
    filename: str = "slurm.conf",
    base_dir: str | Path | None = None,
    cluster_name: str | None = None,
) -> dict[str, NodeConf]:
    r"""Every node of ``slurm.conf`` or ``gres.conf`` text (docs/slurm.md).

    - ``slurm.conf`` node lines (``NodeName=gpu[01-04] CPUs=64 RealMemory=512000
      Gres=gpu:h100:8``): GRES as :mod:`gangplace.slurm.gres` reads them, ``CPUs``,
      ``RealMemory``, ``MemSpecLimit``, ``CoreSpecCount`` (with ``ThreadsPerCore``) and
      ``State``; ``NodeName=DEFAULT`` sets what the node lines after it leave out, until the
      next ``DEFAULT`` line. A node without GPU GRES is a node of 0 GPUs (a CPU node).
    - ``gres.conf`` lines (``NodeName=... Name=gpu [Type=...] [Count=N|File=...]``,
      ``Name=shard Count=N``): ``Count``, else the devices of ``File``, else one; several
      lines for one node add up. ``AutoDetect`` finds counts at run time: a line that has it
      and neither ``Count`` nor ``File`` counts nothing, with a :class:`SlurmConfWarning`
      (take the counts from ``slurm.conf`` or ``scontrol -d show node``); so does a line
      without ``NodeName`` (the reading node's own).
    - ``Include file`` (any whitespace; ``%c`` is the ``ClusterName``): followed relative to
      ``base_dir`` (absolute paths as they are). A line ending in ``\`` continues on the
      next; ``#`` starts a comment anywhere.

    Raises:
        SlurmError: A malformed line, an unreadable or unfollowable ``Include``, or a count
            that is not a number, naming the file and line.

    """
    base = None if base_dir is None else Path(base_dir)
    nodes: dict[str, NodeConf] = {}
    defaults: dict[str, str] = {}
    gres_lines: dict[str, list[GresItem]] = {}
    cluster = [cluster_name] if cluster_name else []
    for where, line in _read(text, filename, base, 0, cluster):
        fields = _conf_fields(line, where)
        if "nodename" not in fields:
            if "autodetect" in fields:
                auto = fields["autodetect"]
                _warn(f"{where}: AutoDetect={auto}: counts found at run time are not read here")
            elif fields.get("name") in ("gpu", "shard"):
                _warn(f"{where}: a gres.conf line without NodeName (the reading node's own)")
            continue
        if fields["nodename"].upper() == "DEFAULT":
            defaults.update({k: v for k, v in fields.items() if k in _NODE_KEYS})
            continue
        if "name" in fields:  # gres.conf
            item = _gres_conf_item(fields, where)
            for node in _hosts(fields["nodename"], where):
                if item is not None:
                    gres_lines.setdefault(node, []).append(item)
            continue
        merged = {**defaults, **{k: v for k, v in fields.items() if k in _NODE_KEYS}}
        node_conf = _node_conf(merged, where)
        for node in _hosts(fields["nodename"], where):
            nodes[node] = node_conf
    for node, items in gres_lines.items():
        gpus, resources = gres_amounts(items)
        known = nodes.get(node, NodeConf(0))
        nodes[node] = NodeConf(gpus, {**known.resources, **resources}, known.state)
    return nodes


def _node_conf(fields: dict[str, str], where: str) -> NodeConf:
    gpus, resources = gres_amounts(parse_gres(fields.get("gres", ""), where))
    cpus = _count(fields, "cpus", where)
    if cpus is not None:
        threads = _count(fields, "threadspercore", where) or 1
        reserved = (_count(fields, "corespeccount", where) or 0) * threads
        resources["cpu"] = max(cpus - reserved, 0) * 1000
    memory = _count(fields, "realmemory", where)
    if memory is not None:
        resources["memory"] = max(memory - (_count(fields, "memspeclimit", where) or 0), 0) * MIB
    return NodeConf(gpus, resources, fields.get("state", "").upper())


_SPELLED = {
    "count": "Count",
    "cpus": "CPUs",
    "realmemory": "RealMemory",
    "memspeclimit": "MemSpecLimit",
    "corespeccount": "CoreSpecCount",
    "threadspercore": "ThreadsPerCore",
}


def _count(fields: dict[str, str], key: str, where: str) -> int | None:
    value = fields.get(key)
    if value is None or value == "":
        return None
    if not value.isdigit():
        raise SlurmError(f"{where}: {_SPELLED[key]}={value} is not a count")
    return int(value)


def _gres_conf_item(fields: dict[str, str], where: str) -> GresItem | None:
    """One ``gres.conf`` line as a GRES item (``None``: AutoDetect without a count)."""
    name, kind = fields["name"], fields.get("type", "")
    if "count" in fields:
        count = _count(fields, "count", where)
        assert count is not None
    elif "file" in fields or "multiplefiles" in fields:
        count = len(_hosts(fields.get("file") or fields["multiplefiles"], where))
    elif "autodetect" in fields:
        auto = fields["autodetect"]
        _warn(
            f"{where}: AutoDetect={auto} with neither Count nor File: the count comes from "
            "slurm.conf or scontrol -d show node"
        )
        return None
    else:
        count = 1
    return GresItem(name, kind, count, None)


def gpus_from_conf(
    text: str, *, filename: str = "slurm.conf", base_dir: str | Path | None = None
) -> dict[str, int]:
    """Whole GPUs per node of ``slurm.conf`` or ``gres.conf`` text (:func:`nodes_from_conf`).

    Every node of the file is listed, CPU nodes with 0; MIG profiles and shards are not
    whole GPUs.

    Raises:
        SlurmError: As :func:`nodes_from_conf`.

    """
    return {
        node: conf.gpus
        for node, conf in nodes_from_conf(text, filename=filename, base_dir=base_dir).items()
    }


def _warn(message: str) -> None:
    warnings.warn(message, SlurmConfWarning, stacklevel=3)
