"""docs/simulation.md shows what its runs' report.json files say (issue 26)."""

from __future__ import annotations

from pathlib import Path

from helpers import load_script

ROOT = Path(__file__).resolve().parent.parent


def test_every_table_of_the_page_matches_its_report() -> None:
    tables = load_script("simulation_tables")
    page = (ROOT / "docs" / "simulation.md").read_text()
    assert tables.MARKER.findall(page) and tables.JOBTYPES.findall(page)
    assert tables.rewritten(page) == page, "run python scripts/simulation_tables.py"
