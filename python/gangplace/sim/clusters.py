"""Cluster specifications for the simulator.

A spec is a ``gangplace.synth`` shape, ``tree:S,R,N,G``, a node-list CSV (the Alibaba
``openb_node_list_*.csv`` files), or a JSON description::

    {"levels": ["spine", "rack"],
     "nodes": [{"name": "n0", "gpus": 8, "topology": {"spine": "s0", "rack": "r0"},
                "unhealthy": [3]}]}

A node-list CSV has a ``gpu`` column (GPUs per node) and a node name column (``sn`` or
``name``), and may have ``rack`` and ``spine`` columns. Nodes without GPUs are left out, nodes
with more than 64 GPUs are refused. Without ``rack``/``spine`` (the Alibaba lists give no
topology) nodes are grouped by a documented rule: in file order, every ``nodes_per_rack``
(default 8) consecutive GPU nodes form a rack and every ``racks_per_spine`` (default 8)
consecutive racks a spine.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gangplace._gangplace import Cluster
from gangplace.gpu_topology import NodeTopology
from gangplace.sim.errors import ClusterSpecError
from gangplace.sim.traces import RESOURCE_COLUMNS
from gangplace.synth import SHAPES, columns

__all__ = ["ClusterSpec", "parse_cluster"]


@dataclass(frozen=True)
class ClusterSpec:
    """Nodes and their topology paths, ready to be built as often as needed.

    Attributes:
        name: How the spec was given.
        levels: Level names, outermost first (the last is the rack level).
        names: Node names.
        paths: Per node, its domain names, outermost first.
        gpus: Per node, its GPUs.
        unhealthy: Per node, a bitmask of unhealthy GPUs.
        numa_split: Every node of an even GPU count has two NUMA halves (the NUMA-split
            scenario: GPUs ``0..g/2`` on socket 0, the rest on socket 1).
        resources: Resources besides GPUs (docs/resources.md "Node resources"): name -> one quantity
            per node, in base units (a node list's ``cpu_milli`` as ``cpu`` and
            ``memory_mib`` as ``memory`` in bytes); empty when the spec gives none.

    """

    name: str
    levels: tuple[str, ...]
    names: tuple[str, ...]
    paths: tuple[tuple[str, ...], ...]
    gpus: tuple[int, ...]
    unhealthy: tuple[int, ...]
    numa_split: bool = False
    resources: tuple[tuple[str, tuple[int, ...]], ...] = ()

    @property
    def total_gpus(self) -> int:
        """GPUs of all nodes."""
        return sum(self.gpus)

    @property
    def healthy_gpus(self) -> int:
        """GPUs not marked unhealthy."""
        return self.total_gpus - sum(bin(mask).count("1") for mask in self.unhealthy)

    @property
    def gpus_per_node(self) -> int:
        """The most GPUs of any node (the pod size jobs are split into)."""
        return max(self.gpus, default=8)

    def build(
        self,
        *,
        policy: str = "best-fit",
        clock: object = None,
        flat: Sequence[str] | None = None,
    ) -> Cluster:
        """A fresh cluster; with ``flat`` (new names in order), a cluster without levels."""
        if flat is not None:
            return Cluster.from_arrays(
                (),
                list(flat),
                [],
                np.array(self.gpus),
                np.array(self.unhealthy, dtype=np.uint64),
                policy=policy,  # type: ignore[arg-type]
                clock=clock,  # type: ignore[arg-type]
                resources=self._resource_columns(),
            )
        domains = [[path[level] for path in self.paths] for level in range(len(self.levels))]
        return Cluster.from_arrays(
            self.levels,
            list(self.names),
            domains,
            np.array(self.gpus),
            np.array(self.unhealthy, dtype=np.uint64),
            policy=policy,  # type: ignore[arg-type]
            clock=clock,  # type: ignore[arg-type]
            gpu_topology=self.halves(),
            resources=self._resource_columns(),
        )

    def _resource_columns(self) -> dict[str, Any] | None:
        """``from_arrays``'s ``resources``: one int64 column per resource name."""
        if not self.resources:
            return None
        return {name: np.array(column, dtype=np.int64) for name, column in self.resources}

    def halves(self) -> tuple[list[int], list[NodeTopology]] | None:
        """The NUMA-split scenario's GPU groups, as ``from_arrays`` codes into a table."""
        if not self.numa_split:
            return None
        sizes = sorted({gpus for gpus in self.gpus if gpus >= 2 and gpus % 2 == 0})
        table = [
            NodeTopology(("numa",), tuple((gpu * 2 // size,) for gpu in range(size)))
            for size in sizes
        ]
        codes = [sizes.index(gpus) if gpus in sizes else -1 for gpus in self.gpus]
        return codes, table


def _from_shape(name: str, *, unhealthy: float, seed: int) -> ClusterSpec:
    shape = SHAPES[name]
    data = columns(shape, unhealthy=unhealthy, seed=seed)
    paths = list(
        zip(*[[table[code] for code in codes] for codes, table in data["domains"]], strict=True)
    )
    return ClusterSpec(
        name,
        shape.levels,
        tuple(str(n) for n in data["names"]),
        tuple(tuple(path) for path in paths),
        tuple(int(g) for g in data["gpus"]),
        tuple(int(m) for m in data["unhealthy_mask"]),
    )


def _tree(text: str, spec: str) -> ClusterSpec:
    try:
        spines, racks, nodes, gpus = (int(part) for part in text.split(","))
    except ValueError:
        raise ClusterSpecError(f"cluster {spec!r}: tree: needs four integers S,R,N,G") from None
    if min(spines, racks, nodes) < 1 or not 1 <= gpus <= 64:
        raise ClusterSpecError(f"cluster {spec!r}: counts must be >= 1 and G between 1 and 64")
    names, paths = [], []
    for s in range(spines):
        for r in range(racks):
            for n in range(nodes):
                names.append(f"s{s}-r{r}-n{n}")
                paths.append((f"s{s}", f"s{s}-r{r}"))
    count = len(names)
    return ClusterSpec(
        spec, ("spine", "rack"), tuple(names), tuple(paths), (gpus,) * count, (0,) * count
    )


def _node_list(path: Path, nodes_per_rack: int, racks_per_spine: int) -> ClusterSpec:
    try:
        rows = list(csv.DictReader(path.read_text(encoding="utf-8").splitlines()))
    except (OSError, UnicodeDecodeError) as error:
        raise ClusterSpecError(f"{path}: cannot read: {error}") from None
    names, gpus, given = [], [], []
    amounts: dict[str, list[int]] = {}
    for number, row in enumerate(rows, start=2):
        name = row.get("sn") or row.get("name")
        count = row.get("gpu")
        if not name or count is None or not count.strip().isdigit():
            raise ClusterSpecError(
                f"{path}:{number}: needs a node name (sn or name) and a gpu count"
            )
        if int(count) > 64:
            raise ClusterSpecError(f"{path}:{number}: {count} GPUs on one node; the limit is 64")
        if int(count) > 0:
            names.append(name)
            gpus.append(int(count))
            given.append((row.get("spine") or "", row.get("rack") or ""))
            for column, (resource, unit) in RESOURCE_COLUMNS.items():
                if column in row:
                    amounts.setdefault(resource, []).append(
                        _amount(row[column], column, f"{path}:{number}") * unit
                    )
    if not names:
        raise ClusterSpecError(f"{path}: no node with GPUs")
    paths = []
    for index in range(len(names)):
        rack = index // nodes_per_rack
        spine = rack // racks_per_spine
        spine_name = given[index][0] or f"s{spine}"
        paths.append((spine_name, given[index][1] or f"{spine_name}-r{rack}"))
    return ClusterSpec(
        str(path),
        ("spine", "rack"),
        tuple(names),
        tuple(paths),
        tuple(gpus),
        (0,) * len(names),
        resources=tuple((name, tuple(column)) for name, column in sorted(amounts.items())),
    )


def _amount(text: str | None, column: str, where: str) -> int:
    """A node list's whole-number resource column."""
    value = (text or "").strip()
    if not value.isdigit() or len(value) > 15:
        raise ClusterSpecError(f"{where}: {column} {value!r} is not a whole number")
    return int(value)


def _json(path: Path) -> ClusterSpec:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        levels = tuple(str(level) for level in data["levels"])
        names, paths, gpus, masks = [], [], [], []
        for node in data["nodes"]:
            names.append(str(node["name"]))
            paths.append(tuple(str(node["topology"][level]) for level in levels))
            gpus.append(int(node["gpus"]))
            masks.append(sum(1 << int(gpu) for gpu in set(node.get("unhealthy", []))))
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as error:
        raise ClusterSpecError(f"{path}: not a cluster description: {error!r}") from None
    return ClusterSpec(str(path), levels, tuple(names), tuple(paths), tuple(gpus), tuple(masks))


def parse_cluster(
    spec: str,
    *,
    unhealthy: float = 0.0,
    seed: int = 0,
    nodes_per_rack: int = 8,
    racks_per_spine: int = 8,
) -> ClusterSpec:
    """A cluster from ``--cluster SPEC``: a synth shape, ``tree:S,R,N,G``, a CSV or a JSON file.

    Raises:
        TraceError: An unknown shape, a malformed tree, or an unreadable or malformed file.

    """
    if spec in SHAPES:
        return _from_shape(spec, unhealthy=unhealthy, seed=seed)
    if spec.startswith("tree:"):
        return _tree(spec.removeprefix("tree:"), spec)
    path = Path(spec)
    if path.suffix == ".json":
        return _json(path)
    if path.suffix == ".csv" or path.exists():
        return _node_list(path, nodes_per_rack, racks_per_spine)
    known = ", ".join(sorted(SHAPES))
    raise ClusterSpecError(
        f"unknown cluster {spec!r}: use one of {known}, tree:S,R,N,G or a node CSV"
    )
