"""Rack maps: parse the SVG as XML and count cells and colours."""

from __future__ import annotations

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


def test_large_clusters_collapse_and_stay_small() -> None:
    cluster, _ = synth.build("colossus100k", fill=0.5)
    svg = cluster.to_svg()
    assert len(svg.encode()) < 1_000_000
    uses = list(ET.fromstring(svg).iter(f"{SVG}use"))
    assert len(uses) == 12_800  # one cell per node above 20,000 GPUs
    assert {use.get("href") for use in uses} <= {f"#{state}" for state in COLOURS}
    assert "one cell per node" in svg
