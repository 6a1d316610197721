"""Rewrites the tables of docs/simulation.md from the runs' report.json files.

Every table sits between ``<!-- table: RUN -->`` and ``<!-- /table -->``; RUN names a folder of
``docs/simulation/``. Run by ``scripts/simulation_docs.sh`` after the runs; the prose around
the tables (and the conclusions drawn from them) is written by hand.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from gangplace.sim.report import group_lines, markdown, wait_unit

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "simulation.md"
MARKER = re.compile(r"<!-- table: ([\w.-]+) -->\n.*?<!-- /table -->", re.S)


def table(run: str) -> str:
    """The Markdown table of one run, with its per-priority and per-owner lines."""
    report = json.loads((ROOT / "docs" / "simulation" / run / "report.json").read_text())
    unit, scale = wait_unit(report)
    extra = group_lines(report, scale, unit)
    text = markdown(report)
    if extra:
        text += "\n\n" + "\n".join(f"- {line}" for line in extra)
    return f"<!-- table: {run} -->\n{text}\n<!-- /table -->"


def main() -> int:
    """Rewrites the page in place."""
    page = PAGE.read_text()
    PAGE.write_text(MARKER.sub(lambda match: table(match.group(1)), page))
    print(f"simulation_tables: rewrote {len(MARKER.findall(page))} tables of {PAGE.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
