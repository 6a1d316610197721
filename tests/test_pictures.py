"""Rack maps: parse the SVG as XML and count cells and colours."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter

from helpers import tree

from gangplace import GangRequest, synth
from gangplace.pictures import COLOURS

SVG = "{http://www.w3.org/2000/svg}"


def cells(svg: str) -> list[ET.Element]:
    return [e for e in ET.fromstring(svg).iter(f"{SVG}rect") if e.get("class") == "cell"]


def test_every_gpu_is_a_cell_coloured_by_its_state() -> None:
    cluster = tree(("spine", "rack"), (2, 2, 2))  # 8 nodes x 8 GPUs
    cluster.commit(cluster.reserve(GangRequest(2, 8)))
    cluster.reserve(GangRequest(1, 4))
    cluster.set_gpu_health("s1-r1-n1", 7, False)
    cluster.cordon("s1-r1-n0")
    svg = cluster.to_svg()
    assert svg == cluster._repr_html_()
    drawn = cells(svg)
    assert len(drawn) == 64
    states = Counter(cell.get("data-state") for cell in drawn)
    assert states == {"allocated": 16, "reserved": 4, "unhealthy": 1, "free": 43}
    assert all(cell.get("fill") == COLOURS[cell.get("data-state") or ""] for cell in drawn)
    root = ET.fromstring(svg)
    hatched = [e for e in root.iter(f"{SVG}rect") if e.get("class") == "cordoned"]
    assert len(hatched) == 1
    domains = [e for e in root.iter(f"{SVG}rect") if e.get("class") == "domain"]
    assert len(domains) == 2  # one block per spine


def test_highlight_outlines_the_placement() -> None:
    cluster = tree(("rack",), (2, 2))
    placement = cluster.place_gang(GangRequest(3, 2))
    assert placement is not None
    outlined = [c for c in cells(cluster.to_svg(highlight=placement)) if c.get("stroke")]
    assert len(outlined) == placement.total_gpus == 6
    assert "3 pods at level" in placement._repr_html_()


def test_large_clusters_become_a_legible_rack_summary() -> None:
    cluster, _ = synth.build("colossus100k", fill=0.5, seed=1)
    cluster.cordon(cluster.nodes()[0])
    placement = cluster.place_gang(GangRequest(16, 8))
    assert placement is not None
    svg = cluster.to_svg(highlight=placement)
    root = ET.fromstring(svg)
    assert len(svg.encode()) < 1_500_000
    assert int(root.get("width") or 0) <= 1_608  # wrapped, not a 7,000-pixel strip
    racks = [g for g in root.iter(f"{SVG}g") if g.get("class") == "rack"]
    assert len(racks) == 1_600  # 102,400 GPUs, one cell per rack
    halls = [t.text or "" for t in root.iter(f"{SVG}text") if t.get("class") == "hall"]
    assert len(halls) == 4 and all("% of its healthy GPUs free" in hall for hall in halls)
    arrays = [t for t in root.iter(f"{SVG}text") if t.get("class") == "array"]
    assert len(arrays) == 200  # every array labelled
    legend = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
    for mark in ("free", "reserved", "allocated", "unhealthy", "cordoned", "the placement"):
        assert mark in legend
    outlined = [r for r in root.iter(f"{SVG}rect") if r.get("stroke") == "#111111"]
    assert 1 <= len(outlined) - 1 <= 2  # the legend's, and the racks the gang uses
    assert "one cell per rack" in svg


def test_a_placement_draws_its_gpus_in_their_own_colour() -> None:
    cluster = tree(("rack",), (2, 2))
    placement = cluster.place_gang(GangRequest(2, 2))
    assert placement is not None
    fills = {c.get("fill") for c in cells(placement._repr_html_())}
    assert fills == {"#b07aa1"} and COLOURS["allocated"] not in fills


def test_a_failed_gpu_is_drawn_failed_whoever_holds_it_and_totals_add_up() -> None:
    cluster = tree(("rack",), (2, 2))  # 4 nodes x 8 GPUs = 32
    allocation = cluster.commit(cluster.reserve(GangRequest(1, 8)))
    node = allocation.placement.nodes[0]
    cluster.set_gpu_health(node, 3, False)  # under the running job
    cluster.set_gpu_health(cluster.nodes()[-1], 0, False)  # free
    svg = cluster.to_svg()
    states = Counter(cell.get("data-state") for cell in cells(svg))
    assert states == {"allocated": 7, "unhealthy": 2, "free": 23}
    root = ET.fromstring(svg)
    held = [e for e in root.iter(f"{SVG}rect") if e.get("class") == "held-failed"]
    assert len(held) == 2  # the failed GPU under the job, and the legend's
    totals = next(t.text or "" for t in root.iter(f"{SVG}text") if "GPUs:" in (t.text or ""))
    assert totals == "32 GPUs: 23 free, 0 reserved, 7 allocated, 2 unhealthy (1 of them still held)"


def test_every_legend_entry_fits_and_names_sort_naturally() -> None:
    cluster = tree(("rack",), (12, 1))  # racks r0..r11
    placement = cluster.place_gang(GangRequest(1, 1))
    svg = cluster.to_svg(highlight=placement)
    root = ET.fromstring(svg)
    width = int(root.get("width") or 0)
    legend_texts = [t for t in root.iter(f"{SVG}text") if float(t.get("y") or 0) == 12]
    # Each entry's text starts inside the picture with room for its words (9 px font).
    assert all(float(t.get("x") or 0) + 5 * len(t.text or "") <= width for t in legend_texts)
    labels = [t.text or "" for t in root.iter(f"{SVG}text")]
    racks = list(dict.fromkeys(label for label in labels if re.fullmatch(r"r\d+", label)))
    assert racks == [f"r{i}" for i in range(12)]  # r2 before r10


def test_a_detailed_map_wider_than_the_limit_becomes_the_summary() -> None:
    cluster = tree(("spine", "rack"), (40, 4, 2))  # 320 nodes, far fewer than SUMMARY_NODES
    root = ET.fromstring(cluster.to_svg())
    assert int(root.get("width") or 0) <= 1_608
    assert "one cell per rack" in cluster.to_svg()


def test_summary_maps_mark_racks_with_failed_gpus() -> None:
    cluster, _ = synth.build("colossus100k", fill=0.5, seed=1, unhealthy=0.0)
    failed = {cluster.nodes()[0], cluster.nodes()[-1]}
    for name in failed:
        cluster.set_gpu_health(name, 0, False)
    root = ET.fromstring(cluster.to_svg())
    marks = [e for e in root.iter(f"{SVG}circle") if e.get("class") == "failed-mark"]
    assert len(marks) == 2 + 1  # the two racks, and the legend's


def test_a_large_placement_is_a_compact_grid() -> None:
    cluster, _ = synth.build("colossus100k", fill=0.0, seed=1)
    placement = cluster.place_gang(GangRequest(512, 8))
    assert placement is not None
    root = ET.fromstring(placement._repr_html_())
    assert len([c for c in root.iter(f"{SVG}rect") if c.get("class") == "cell"]) == 512
    assert int(root.get("height") or 0) <= 200  # not a 6,000-pixel list
