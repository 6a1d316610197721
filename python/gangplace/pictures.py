"""Pictures: a cluster as an SVG rack map (``Cluster.to_svg``, ``_repr_html_`` in notebooks).

Layout: one block per top-level domain (the whole cluster when there are no levels), the
deepest domains (racks) as columns inside it, nodes as rows of GPU cells. Colours: free
(green), reserved (amber), allocated (blue), unhealthy (red); cordoned nodes are hatched.
``highlight`` (a placement) outlines the GPUs it takes. A legend and totals sit on top.

Large clusters collapse so that the SVG stays small (under about 1 MB at 100k GPUs): above
20,000 GPUs each node is one cell coloured by its majority state, above 200,000 each rack is;
collapsed cells are ``<use href="#state">`` references, and racks wrap 50 to a row.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from html import escape
from typing import Any

__all__ = ["COLOURS", "cluster_svg", "placement_svg"]

COLOURS = {
    "free": "#59a14f",
    "reserved": "#f28e2b",
    "allocated": "#4e79a7",
    "unhealthy": "#e15759",
}
CELL = 9
GAP = 2
NODE_COLLAPSE_GPUS = 20_000
RACKS_PER_ROW = 50
RACK_COLLAPSE_GPUS = 200_000


@dataclass(frozen=True)
class _Node:
    """One row of ``Cluster.gpu_state()``: what a rack map draws of a node."""

    name: str
    gpus: int
    cordoned: bool
    reserved: int  # masks, bit i: GPU i
    allocated: int
    unhealthy: int


def _state_of(info: _Node, gpu: int) -> str:
    bit = 1 << gpu
    if info.unhealthy & bit and not info.allocated & bit:
        return "unhealthy"
    if info.allocated & bit:
        return "allocated"
    if info.reserved & bit:
        return "reserved"
    return "free"


def _nodes_by_rack(cluster: Any) -> dict[str, dict[tuple[str, ...], list[_Node]]]:
    """Top-level domain -> rack path -> nodes, from one ``gpu_state()`` read."""
    state = cluster.gpu_state()
    levels = cluster.levels
    columns = [state["domains"][level] for level in levels]
    blocks: dict[str, dict[tuple[str, ...], list[_Node]]] = {}
    for index, name in enumerate(state["node"]):
        path = tuple(str(column[index]) for column in columns)
        node = _Node(
            str(name),
            int(state["gpus"][index]),
            bool(state["cordoned"][index]),
            int(state["reserved_mask"][index]),
            int(state["allocated_mask"][index]),
            int(state["unhealthy_mask"][index]),
        )
        top = path[0] if path else "cluster"
        blocks.setdefault(top, {}).setdefault(path, []).append(node)
    return blocks


def _majority(states: Iterable[str]) -> str:
    counts: dict[str, int] = {}
    for state in states:
        counts[state] = counts.get(state, 0) + 1
    return max(sorted(counts), key=lambda state: counts[state]) if counts else "free"


def cluster_svg(cluster: Any, highlight: Any = None) -> str:
    """The rack map of ``cluster`` as an SVG document (``highlight``: a placement)."""
    total = cluster.stats().total
    mode = (
        "gpu" if total <= NODE_COLLAPSE_GPUS else "node" if total <= RACK_COLLAPSE_GPUS else "rack"
    )
    chosen = {(pod.node, gpu) for pod in highlight.pods for gpu in pod.gpus} if highlight else set()
    blocks = _nodes_by_rack(cluster)
    parts: list[str] = []
    x, height, widest = GAP, 0, 0
    y0 = 44
    for top in sorted(blocks):
        racks = blocks[top]
        block_x, rack_x, row_y, row_height = x, x + GAP, y0 + 14, 0
        for index, path in enumerate(sorted(racks)):
            if index and index % RACKS_PER_ROW == 0:  # wrap: a new row of racks
                rack_x, row_y = block_x + GAP, row_y + row_height + 14
            width, rows = _rack(parts, racks[path], rack_x, row_y, mode, chosen)
            label = escape(path[-1] if path else "")
            parts.append(f'<text x="{rack_x}" y="{row_y - 4}" font-size="8">{label}</text>')
            rack_x += max(width, 30) + GAP * 3
            widest = max(widest, rack_x)
            row_height = max(row_height, rows)
            height = max(height, row_y + rows)
        parts.append(
            f'<rect class="domain" x="{block_x}" y="{y0 - 2}" width="{widest - block_x}" '
            f'height="{height - y0 + 6}" fill="none" stroke="#999"/>'
            f'<text x="{block_x + 2}" y="{y0 - 5}" font-size="9" font-weight="bold">'
            f"{escape(top)}</text>"
        )
        x = widest + GAP * 4
    stats = cluster.stats()
    legend = [
        f'<rect class="legend" x="{4 + index * 90}" y="4" width="{CELL}" height="{CELL}" '
        f'fill="{colour}"/><text x="{16 + index * 90}" y="12" font-size="9">{state}</text>'
        for index, (state, colour) in enumerate(COLOURS.items())
    ]
    totals = (
        f'<text x="4" y="28" font-size="9">{stats.total} GPUs: {stats.free} free, '
        f"{stats.reserved} reserved, {stats.allocated} allocated, {stats.unhealthy} unhealthy"
        f"{'' if mode == 'gpu' else f' (one cell per {mode})'}</text>"
    )
    width = max(x, 380)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 8}" '
        f'font-family="sans-serif"><defs><pattern id="hatch" width="4" height="4" '
        f'patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><line x1="0" y1="0" '
        f'x2="0" y2="4" stroke="#000" stroke-width="1"/></pattern>'
        + "".join(
            f'<rect id="{state}" width="{CELL}" height="{CELL}" fill="{colour}"/>'
            for state, colour in COLOURS.items()
        )
        + "</defs>"
        + "".join(legend)
        + totals
        + "".join(parts)
        + "</svg>"
    )


def _rack(
    parts: list[str], nodes: list[_Node], x: int, y: int, mode: str, chosen: set[tuple[str, int]]
) -> tuple[int, int]:
    """Draws one rack column; returns its width and height."""
    if mode == "rack":
        states = [_state_of(info, gpu) for info in nodes for gpu in range(info.gpus)]
        parts.append(f'<use href="#{_majority(states)}" x="{x}" y="{y}"/>')
        return CELL, CELL
    row = y
    width = 0
    for info in nodes:
        states = [_state_of(info, gpu) for gpu in range(info.gpus)]
        cells = [_majority(states)] if mode == "node" else states
        for column, state in enumerate(cells):
            cx = x + column * (CELL + 1)
            if mode == "node":  # compact: a reference to the state's cell (under 1 MB at 100k)
                parts.append(f'<use href="#{state}" x="{cx}" y="{row}"/>')
                continue
            outline = (
                ' stroke="#000" stroke-width="1.5"'
                if mode == "gpu" and (info.name, column) in chosen
                else ""
            )
            parts.append(
                f'<rect class="cell" data-state="{state}" x="{cx}" y="{row}" width="{CELL}" '
                f'height="{CELL}" fill="{COLOURS[state]}"{outline}/>'
            )
        if info.cordoned:
            parts.append(
                f'<rect class="cordoned" x="{x}" y="{row}" width="{len(cells) * (CELL + 1)}" '
                f'height="{CELL}" fill="url(#hatch)" opacity="0.5"/>'
            )
        width = max(width, len(cells) * (CELL + 1))
        row += CELL + 1
    return width, row - y


def placement_svg(placement: Any) -> str:
    """A placement alone: one row per pod, its node and GPU indices."""
    rows = []
    for index, pod in enumerate(placement.pods):
        y = 16 + index * (CELL + 3)
        rows.append(f'<text x="4" y="{y + 8}" font-size="9">{escape(pod.node)}</text>')
        for column, gpu in enumerate(pod.gpus):
            rows.append(
                f'<rect class="cell" x="{120 + column * (CELL + 1)}" y="{y}" width="{CELL}" '
                f'height="{CELL}" fill="{COLOURS["allocated"]}"><title>GPU {gpu}</title></rect>'
            )
    domain = escape("/".join(placement.domain) or "the cluster")
    height = 24 + len(placement.pods) * (CELL + 3)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="320" height="{height}" '
        f'font-family="sans-serif"><text x="4" y="10" font-size="9">{len(placement.pods)} pods '
        f"at level {escape(placement.level)}: {domain}</text>" + "".join(rows) + "</svg>"
    )
