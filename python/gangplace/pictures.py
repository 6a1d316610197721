"""Pictures: a cluster as an SVG rack map (``Cluster.to_svg``, ``_repr_html_`` in notebooks).

Up to :data:`SUMMARY_NODES` nodes, and while it fits in :data:`MAX_WIDTH` pixels both ways,
the detailed map: one block per top-level domain (the whole cluster when there are no
levels), the deepest domains (racks) as columns inside it, nodes as rows of GPU cells.
Colours: free (green), reserved (amber), allocated (blue), unhealthy (red), shared by
fractional pods (teal; docs/resources.md "Fractions of a GPU"). A failed GPU is
red whatever holds it; a failed GPU still held by a job carries a blue centre. Cordoned nodes
are hatched. ``highlight`` (a placement) outlines the GPUs it takes. A legend (every mark the
map uses, each entry whole) and totals sit on top; the totals count each GPU once (free,
reserved, allocated and healthy, unhealthy) and say how many failed GPUs are still held.
Domains and nodes are in natural order (``r2`` before ``r10``).

Above it, the rack summary that stays legible at any size: one cell per rack, a small
stacked bar of its GPUs' shares (free, reserved, allocated, unhealthy, in the same colours),
hatched when most of its nodes are cordoned, outlined when ``highlight`` uses it, with a red
corner mark when any of its GPUs failed (however few). Racks are
grouped by their parent domain (an array), labelled, and wrapped to at most
:data:`MAX_WIDTH` pixels; top-level domains (halls) are sections, one under another, each
with its free share.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html import escape
from typing import Any

__all__ = ["COLOURS", "MAX_WIDTH", "SUMMARY_NODES", "cluster_svg", "placement_svg"]

COLOURS = {
    "free": "#59a14f",
    "reserved": "#f28e2b",
    "allocated": "#4e79a7",
    "unhealthy": "#e15759",
    "shared": "#76b7b2",  # docs/resources.md "Fractions of a GPU": held in part by fractional pods
}
CELL = 9
GAP = 2
RACKS_PER_ROW = 50
SUMMARY_NODES = 2_000  # above it, one cell per rack
MAX_WIDTH = 1_600  # pixels, the rack summary's widest row
RACK_CELL = 14
HIGHLIGHT = "#111111"
PLACED = "#b07aa1"  # a placement's own GPUs in its picture


@dataclass(frozen=True)
class _Node:
    """One row of ``Cluster.gpu_state()``: what a rack map draws of a node."""

    name: str
    gpus: int
    cordoned: bool
    reserved: int  # masks, bit i: GPU i
    allocated: int
    unhealthy: int
    shared: int = 0


def _natural(text: str) -> tuple[tuple[int, int | str], ...]:
    """A sort key that orders the numbers inside names by value (``r2`` before ``r10``)."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", text) if part
    )


def _path_key(path: tuple[str, ...]) -> tuple[tuple[tuple[int, int | str], ...], ...]:
    return tuple(_natural(name) for name in path)


def _held_failed(info: _Node, gpu: int) -> bool:
    """A failed GPU that a job (or reservation) still holds."""
    bit = 1 << gpu
    return bool(info.unhealthy & bit and (info.allocated | info.reserved) & bit)


def _state_of(info: _Node, gpu: int) -> str:
    bit = 1 << gpu
    if info.unhealthy & bit:
        return "unhealthy"
    if info.allocated & bit:
        return "allocated"
    if info.reserved & bit:
        return "reserved"
    if info.shared & bit:
        return "shared"
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
            int(state["shared_mask"][index]),
        )
        top = path[0] if path else "cluster"
        blocks.setdefault(top, {}).setdefault(path, []).append(node)
    for racks in blocks.values():
        for nodes in racks.values():
            nodes.sort(key=lambda node: _natural(node.name))
    return blocks


def cluster_svg(cluster: Any, highlight: Any = None) -> str:
    """The rack map of ``cluster`` as an SVG document (``highlight``: a placement)."""
    if len(cluster) > SUMMARY_NODES:
        return _summary_svg(cluster, highlight)
    blocks = _nodes_by_rack(cluster)
    detailed = _detailed_svg(cluster, blocks, highlight)
    if detailed is None:  # wider or taller than MAX_WIDTH: the summary instead
        return _summary_svg(cluster, highlight, blocks)
    return detailed


def _detailed_svg(
    cluster: Any, blocks: dict[str, dict[tuple[str, ...], list[_Node]]], highlight: Any
) -> str | None:
    """The detailed map, or ``None`` when it would exceed :data:`MAX_WIDTH` either way."""
    chosen = {(pod.node, gpu) for pod in highlight.pods for gpu in pod.gpus} if highlight else set()
    parts: list[str] = []
    x, height, widest = GAP, 0, 0
    y0 = 44
    for top in sorted(blocks, key=_natural):
        racks = blocks[top]
        block_x, rack_x, row_y, row_height = x, x + GAP, y0 + 14, 0
        for index, path in enumerate(sorted(racks, key=_path_key)):
            if index and index % RACKS_PER_ROW == 0:  # wrap: a new row of racks
                rack_x, row_y = block_x + GAP, row_y + row_height + 14
            width, rows = _rack(parts, racks[path], rack_x, row_y, chosen)
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
    if x > MAX_WIDTH or height > MAX_WIDTH:
        return None
    marks = ["cordoned", "held-failed"] + (["highlight"] if highlight else [])
    legend, legend_width = _legend(marks)
    width = max(x, legend_width + 8, 480)
    return _document(width, height + 8, legend + _totals(cluster, blocks, ""), parts)


def _document(width: int, height: int, header: str, parts: list[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif"><defs><pattern id="hatch" width="4" height="4" '
        f'patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><line x1="0" y1="0" '
        f'x2="0" y2="4" stroke="#000" stroke-width="1"/></pattern></defs>'
        + header
        + "".join(parts)
        + "</svg>"
    )


def _legend(marks: list[str]) -> tuple[str, int]:
    """A legend of the five states and of every other mark the map uses, and its width."""
    items = []
    for index, (state, colour) in enumerate(COLOURS.items()):
        items.append(
            f'<rect class="legend" x="{4 + index * 90}" y="4" width="{CELL}" height="{CELL}" '
            f'fill="{colour}"/><text x="{16 + index * 90}" y="12" font-size="9">{state}</text>'
        )
    x = 4 + len(COLOURS) * 90
    if "cordoned" in marks:
        items.append(
            f'<rect class="legend" x="{x}" y="4" width="{CELL}" height="{CELL}" fill="#fff" '
            f'stroke="#999"/><rect x="{x}" y="4" width="{CELL}" height="{CELL}" '
            f'fill="url(#hatch)"/><text x="{x + 12}" y="12" font-size="9">cordoned</text>'
        )
        x += 90
    if "held-failed" in marks:
        items.append(
            f'<rect class="legend" x="{x}" y="4" width="{CELL}" height="{CELL}" '
            f'fill="{COLOURS["unhealthy"]}"/>{_held_mark(x, 4)}<text x="{x + 12}" y="12" '
            f'font-size="9">failed, still held</text>'
        )
        x += 110
    if "failed-rack" in marks:
        items.append(
            f'{_failed_mark(x, 4, CELL)}<text x="{x + 12}" y="12" font-size="9">'
            "rack with failed GPUs</text>"
        )
        x += 130
    if "highlight" in marks:
        items.append(
            f'<rect class="legend" x="{x}" y="4" width="{CELL}" height="{CELL}" fill="none" '
            f'stroke="{HIGHLIGHT}" stroke-width="2"/><text x="{x + 12}" y="12" '
            f'font-size="9">the placement</text>'
        )
        x += 100
    return "".join(items), x


def _held_mark(x: float, y: float) -> str:
    """The blue centre of a failed GPU a job still holds."""
    return (
        f'<rect class="held-failed" x="{x + 3}" y="{y + 3}" width="{CELL - 6}" '
        f'height="{CELL - 6}" fill="{COLOURS["allocated"]}"/>'
    )


def _failed_mark(x: float, y: float, size: int) -> str:
    """The red corner of a rack with failed GPUs."""
    return (
        f'<circle class="failed-mark" cx="{x + size - 2}" cy="{y + 2}" r="3" '
        f'fill="{COLOURS["unhealthy"]}" stroke="#fff" stroke-width="1"/>'
    )


def _totals(cluster: Any, blocks: dict[str, dict[tuple[str, ...], list[_Node]]], note: str) -> str:
    """Every GPU counted once, by the state it is drawn in; failed GPUs still held noted."""
    nodes = [node for racks in blocks.values() for group in racks.values() for node in group]
    counts = _shares(nodes)
    held_failed = sum(_held_failed(n, gpu) for n in nodes for gpu in range(n.gpus))
    under = f" ({held_failed:,} of them still held)" if held_failed else ""
    return (
        f'<text x="4" y="28" font-size="9">{sum(counts.values()):,} GPUs: '
        f"{counts['free']:,} free, {counts['reserved']:,} reserved, "
        f"{counts['allocated']:,} allocated, {counts['unhealthy']:,} unhealthy{under}"
        f"{f', {shared:,} shared' if (shared := counts['shared']) else ''}{note}</text>"
    )


def _shares(nodes: list[_Node]) -> dict[str, int]:
    counts = {state: 0 for state in COLOURS}
    for info in nodes:
        for gpu in range(info.gpus):
            counts[_state_of(info, gpu)] += 1
    return counts


def _summary_svg(
    cluster: Any,
    highlight: Any,
    blocks: dict[str, dict[tuple[str, ...], list[_Node]]] | None = None,
) -> str:
    """One cell per rack, grouped by array and hall, wrapped to :data:`MAX_WIDTH`."""
    used = set(highlight.nodes) if highlight else set()
    blocks = _nodes_by_rack(cluster) if blocks is None else blocks
    parts: list[str] = []
    y = 44
    step = RACK_CELL + 2
    for top in sorted(blocks, key=_natural):
        racks = blocks[top]
        groups: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
        for path in sorted(racks, key=_path_key):
            groups.setdefault(path[:-1], []).append(path)
        counts = _shares([node for nodes in racks.values() for node in nodes])
        healthy = sum(counts.values()) - counts["unhealthy"]
        share = counts["free"] / healthy if healthy else 0.0
        parts.append(
            f'<text class="hall" x="4" y="{y + 10}" font-size="11" font-weight="bold">'
            f"{escape(top)}: {len(racks)} racks, {share:.0%} of its healthy GPUs free</text>"
        )
        y += 18
        x = 4
        for parent, paths in groups.items():
            width = len(paths) * step + 6
            if x + width > MAX_WIDTH and x > 4:
                x, y = 4, y + step + 14
            label = escape(parent[-1]) if len(parent) > 1 else ""
            parts.append(f'<text class="array" x="{x}" y="{y + 8}" font-size="8">{label}</text>')
            for index, path in enumerate(paths):
                nodes = racks[path]
                parts.append(
                    _rack_cell(x + index * step, y + 11, nodes, any(n.name in used for n in nodes))
                )
            x += width
        y += step + 24
    note = f" (one cell per rack: {len(cluster):,} nodes)"
    marks = ["cordoned", "failed-rack"] + (["highlight"] if highlight else [])
    legend, _ = _legend(marks)
    return _document(MAX_WIDTH + 8, y, legend + _totals(cluster, blocks, note), parts)


def _rack_cell(x: int, y: int, nodes: list[_Node], outlined: bool) -> str:
    """A rack as a stacked bar of its GPUs' states (left to right: free, reserved, ...)."""
    counts = _shares(nodes)
    total = sum(counts.values()) or 1
    bars, offset = [], 0.0
    for state, colour in COLOURS.items():
        width = RACK_CELL * counts[state] / total
        if width > 0:
            bars.append(
                f'<rect x="{x + offset:.1f}" y="{y}" width="{width:.1f}" height="{RACK_CELL}" '
                f'fill="{colour}"/>'
            )
        offset += width
    if sum(1 for node in nodes if node.cordoned) * 2 > len(nodes):
        bars.append(
            f'<rect x="{x}" y="{y}" width="{RACK_CELL}" height="{RACK_CELL}" fill="url(#hatch)"/>'
        )
    if outlined:
        bars.append(
            f'<rect x="{x - 1}" y="{y - 1}" width="{RACK_CELL + 2}" height="{RACK_CELL + 2}" '
            f'fill="none" stroke="{HIGHLIGHT}" stroke-width="2"/>'
        )
    if counts["unhealthy"]:
        bars.append(_failed_mark(x, y, RACK_CELL))
    title = ", ".join(f"{counts[state]} {state}" for state in COLOURS if counts[state])
    return f'<g class="rack"><title>{title}</title>{"".join(bars)}</g>'


def _rack(
    parts: list[str], nodes: list[_Node], x: int, y: int, chosen: set[tuple[str, int]]
) -> tuple[int, int]:
    """Draws one rack column, a row of GPU cells per node; returns its width and height."""
    row = y
    width = 0
    for info in nodes:
        cells = [_state_of(info, gpu) for gpu in range(info.gpus)]
        for column, state in enumerate(cells):
            cx = x + column * (CELL + 1)
            outline = (
                f' stroke="{HIGHLIGHT}" stroke-width="1.5"' if (info.name, column) in chosen else ""
            )
            parts.append(
                f'<rect class="cell" data-state="{state}" x="{cx}" y="{row}" width="{CELL}" '
                f'height="{CELL}" fill="{COLOURS[state]}"{outline}/>'
            )
            if _held_failed(info, column):
                parts.append(_held_mark(cx, row))
        if info.cordoned:
            parts.append(
                f'<rect class="cordoned" x="{x}" y="{row}" width="{len(cells) * (CELL + 1)}" '
                f'height="{CELL}" fill="url(#hatch)" opacity="0.5"/>'
            )
        width = max(width, len(cells) * (CELL + 1))
        row += CELL + 1
    return width, row - y


COMPACT_PODS = 32  # above it, a placement is drawn as a grid of pods
PODS_PER_ROW = 32


def placement_svg(placement: Any) -> str:
    """A placement alone: one row per pod, its node and GPU indices.

    Above :data:`COMPACT_PODS` pods, a compact grid (one square per pod, in rank order, its
    node and GPUs in the tooltip).
    """
    if len(placement.pods) > COMPACT_PODS:
        return _compact_placement_svg(placement)
    rows = []
    for index, pod in enumerate(placement.pods):
        y = 16 + index * (CELL + 3)
        rows.append(f'<text x="4" y="{y + 8}" font-size="9">{escape(pod.node)}</text>')
        for column, gpu in enumerate(pod.gpus):
            rows.append(
                f'<rect class="cell" x="{120 + column * (CELL + 1)}" y="{y}" width="{CELL}" '
                f'height="{CELL}" fill="{PLACED}"><title>GPU {gpu}</title></rect>'
            )
    domain = escape("/".join(placement.domain) or "the cluster")
    height = 24 + len(placement.pods) * (CELL + 3)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="320" height="{height}" '
        f'font-family="sans-serif"><text x="4" y="10" font-size="9">{len(placement.pods)} pods '
        f"at level {escape(placement.level)}: {domain}</text>" + "".join(rows) + "</svg>"
    )


def _compact_placement_svg(placement: Any) -> str:
    pods = placement.pods
    rows = -(-len(pods) // PODS_PER_ROW)
    cells = []
    for rank, pod in enumerate(pods):
        x = 4 + (rank % PODS_PER_ROW) * (CELL + 1)
        y = 16 + (rank // PODS_PER_ROW) * (CELL + 1)
        gpus = ",".join(str(gpu) for gpu in pod.gpus)
        cells.append(
            f'<rect class="cell" x="{x}" y="{y}" width="{CELL}" height="{CELL}" '
            f'fill="{PLACED}"><title>rank {rank}: {escape(pod.node)} GPUs {gpus}</title></rect>'
        )
    nodes = len(set(placement.nodes))
    domain = escape("/".join(placement.domain) or "the cluster")
    width = max(320, 8 + PODS_PER_ROW * (CELL + 1))
    height = 24 + rows * (CELL + 1)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif"><text x="4" y="10" font-size="9">{len(pods)} pods on '
        f"{nodes} nodes at level {escape(placement.level)}: {domain} (one square per pod, rank "
        "order)</text>" + "".join(cells) + "</svg>"
    )
