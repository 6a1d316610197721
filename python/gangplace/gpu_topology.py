"""Inside a node: which GPUs share a NUMA socket or a PCIe switch (docs/shapes.md "Inside a node").

:class:`NodeTopology` names intra-node levels, outermost first (``("numa", "pcie")``), and
gives each GPU index its group at every level (GPU 5 -> ``(1, 2)``: NUMA group 1, PCIe group
2). Groups are identified by their whole path, as domains are: ``(0, 1)`` and ``(1, 1)`` are
two PCIe groups. Pass one to ``Cluster.add_node(..., gpu_topology=...)``; the engine then
gives each pod the GPUs of the finest group that holds it (docs/placement.md, rule 5).

:meth:`NodeTopology.from_nvidia_smi` reads the matrix ``nvidia-smi topo -m`` prints.

Example:
    >>> topology = NodeTopology(("numa",), ((0,), (0,), (1,), (1,)))
    >>> topology.levels, topology.gpus
    (('numa',), 4)

"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from gangplace.errors import InvalidRequest

__all__ = ["MAX_GPU_LEVELS", "NodeTopology"]

MAX_GPU_LEVELS = 4
"""Intra-node levels a topology may name (NUMA, PCIe switch, ... : a handful in practice)."""

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_GPU_ROW = re.compile(r"^GPU(\d+)$")
_JOINED = ("PIX", "PXB")


@dataclass(frozen=True)
class NodeTopology:
    """The groups a node's GPUs belong to, level by level (outermost first).

    Attributes:
        levels: Level names, outermost first, unique, non-empty, at most 4, none of them
            ``"node"`` or ``"cluster"``.
        paths: For each GPU index (0, 1, ...), its group id at each level, ints in 0..63.

    Raises:
        InvalidRequest: Bad names, a path of the wrong length, a group id out of range, or
            no GPUs. A topology whose GPU count differs from its node's is refused by
            ``add_node``.

    """

    levels: tuple[str, ...]
    paths: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        levels = tuple(self.levels)
        paths = tuple(tuple(path) for path in self.paths)
        object.__setattr__(self, "levels", levels)
        object.__setattr__(self, "paths", paths)
        if not 1 <= len(levels) <= MAX_GPU_LEVELS:
            raise InvalidRequest(
                f"a GPU topology names 1 to {MAX_GPU_LEVELS} levels, got {len(levels)}"
            )
        for level in levels:
            if not isinstance(level, str) or not level or level in ("node", "cluster"):
                raise InvalidRequest(f"GPU topology level {level!r} is not a usable name")
        if len(set(levels)) != len(levels):
            raise InvalidRequest("a GPU topology names a level twice")
        if not paths or len(paths) > 64:
            raise InvalidRequest(f"a GPU topology covers 1 to 64 GPUs, got {len(paths)}")
        for index, path in enumerate(paths):
            if len(path) != len(levels):
                raise InvalidRequest(
                    f"GPU {index} has {len(path)} group ids for {len(levels)} levels"
                )
            if any(isinstance(group, bool) or not isinstance(group, int) for group in path):
                raise InvalidRequest(f"GPU {index}'s group ids must be ints, got {path!r}")
            if any(not 0 <= group <= 63 for group in path):
                raise InvalidRequest(f"GPU {index}'s group ids must be in 0..63, got {path!r}")

    @property
    def gpus(self) -> int:
        """GPUs it describes."""
        return len(self.paths)

    @classmethod
    def from_nvidia_smi(cls, text: str) -> NodeTopology:
        """Reads ``nvidia-smi topo -m`` into levels ``("numa", "pcie")``.

        NUMA groups come from the ``NUMA Affinity`` column (distinct values in order of
        first appearance; ``N/A`` is one group). PCIe groups are the GPUs joined by ``PIX``
        or ``PXB`` cells within one NUMA group (a GPU joined to none is its own group),
        numbered by their lowest GPU. NIC rows and columns, the legend and ANSI colours are
        ignored.

        Raises:
            InvalidRequest: No GPU rows, no ``NUMA Affinity`` column, a row of the wrong
                width, or GPUs not numbered 0, 1, ...; the message names the line.

        """
        lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
        header_at = next((i for i, line in enumerate(lines) if "GPU0" in line), None)
        if header_at is None:
            raise InvalidRequest("nvidia-smi topo -m output: no header line with GPU0")
        header = _cells(lines[header_at])
        if "NUMA Affinity" not in header:
            raise InvalidRequest(
                f"nvidia-smi topo -m output, line {header_at + 1}: no NUMA Affinity column"
            )
        rows: list[list[str]] = []
        for number, line in enumerate(lines[header_at + 1 :], start=header_at + 2):
            cells = _cells(line)
            if not cells or not _GPU_ROW.match(cells[0]):
                if cells and cells[0].startswith("Legend"):
                    break
                continue
            if len(cells) != len(header) + 1:
                raise InvalidRequest(
                    f"nvidia-smi topo -m output, line {number}: {len(cells) - 1} cells for "
                    f"{len(header)} columns"
                )
            if cells[0] != f"GPU{len(rows)}":
                raise InvalidRequest(
                    f"nvidia-smi topo -m output, line {number}: expected GPU{len(rows)}, "
                    f"got {cells[0]}"
                )
            rows.append(cells[1:])
        if not rows:
            raise InvalidRequest("nvidia-smi topo -m output: no GPU rows")
        return _from_matrix(header, rows)


def _cells(line: str) -> list[str]:
    """A line's cells: tab-separated, else separated by two or more spaces."""
    parts = line.split("\t") if "\t" in line else re.split(r" {2,}", line)
    return [part.strip() for part in parts if part.strip()]


def _from_matrix(header: Sequence[str], rows: Sequence[Sequence[str]]) -> NodeTopology:
    numa_column = list(header).index("NUMA Affinity")
    numa_names: dict[str, int] = {}
    numa = [numa_names.setdefault(row[numa_column], len(numa_names)) for row in rows]
    count = len(rows)
    parent = list(range(count))

    def root(gpu: int) -> int:
        while parent[gpu] != gpu:
            parent[gpu] = parent[parent[gpu]]
            gpu = parent[gpu]
        return gpu

    for gpu, row in enumerate(rows):
        for other in range(count):
            if other != gpu and row[other] in _JOINED and numa[other] == numa[gpu]:
                parent[max(root(gpu), root(other))] = min(root(gpu), root(other))
    roots = sorted({root(gpu) for gpu in range(count)})
    pcie = [roots.index(root(gpu)) for gpu in range(count)]
    return NodeTopology(("numa", "pcie"), tuple(zip(numa, pcie, strict=True)))
