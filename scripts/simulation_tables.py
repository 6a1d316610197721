"""Rewrites the tables of docs/simulation.md from the runs' report.json files.

Every table sits between ``<!-- table: RUN -->`` and ``<!-- /table -->`` (the run's table, its
completion lines and its paired differences), or ``<!-- jobtypes: RUN -->`` and
``<!-- /jobtypes -->`` (the multi-node jobs by job type and policy), or ``<!-- model: RUN -->``
and ``<!-- /model -->`` (the placement model's table); RUN names a folder of
``docs/simulation/``. Run by ``scripts/simulation_docs.sh`` after the runs; the prose around
the tables (and the conclusions drawn from them) is written by hand.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from gangplace.sim.paired import paired_table
from gangplace.sim.report import completion_lines, group_lines, markdown, seconds_unit, wait_unit
from gangplace.sim.stats import interval

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "simulation.md"
MARKER = re.compile(r"<!-- table: ([\w.-]+) -->\n.*?<!-- /table -->", re.S)
MODEL = re.compile(r"<!-- model: ([\w.-]+) -->\n.*?<!-- /model -->", re.S)
JOBTYPES = re.compile(r"<!-- jobtypes: ([\w.-]+) -->\n.*?<!-- /jobtypes -->", re.S)


def _report(run: str) -> dict:  # type: ignore[type-arg]
    return json.loads((ROOT / "docs" / "simulation" / run / "report.json").read_text())


def table(run: str) -> str:
    """The Markdown table of one run, with its completion, group and paired lines."""
    report = _report(run)
    unit, scale = wait_unit(report)
    extra = completion_lines(report, scale, unit)[1:] + group_lines(report, scale, unit)
    text = markdown(report)
    if extra:
        text += "\n\n" + "\n".join(f"- {line.strip()}" for line in extra)
    pairs = paired_table(report.get("paired", []))
    if pairs:
        text += "\n\n```text\n" + pairs + "\n```"
    return f"<!-- table: {run} -->\n{text}\n<!-- /table -->"


def _cell(values: list[float], scale: float = 1.0, form: str = "{:.1f}") -> str:
    summary = interval([v / scale for v in values if v is not None])
    if summary["mean"] is None:
        return "-"
    if summary["low"] is None:
        return form.format(summary["mean"])
    low, high = max(0.0, summary["low"]), summary["high"]
    return f"{form.format(summary['mean'])} [{form.format(low)}, {form.format(high)}]"


def model(run: str) -> str:
    """The placement model a run used, as a table: T by span, status and source."""
    rows = _report(run).get("placement_model") or []
    lines = [
        "| job type | T(node) | T(rack) | T(spine) | T(wider) | NUMA split | status | source |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for row in rows:
        spans = ("node", "rack", "spine", "wider", "numa")
        times = " | ".join(f"{row[span]:.2f}" for span in spans)
        lines.append(f"| {row['job_type']} | {times} | {row['status']} | {row['source']} |")
    return f"<!-- model: {run} -->\n" + "\n".join(lines) + "\n<!-- /model -->"


def jobtypes(run: str) -> str:
    """Multi-node jobs by job type (rows) and policy: waits, completion, slowdown, spreading."""
    report = _report(run)
    policies = [p for p, entry in report["policies"].items() if entry.get("seeds_run")]
    runs = list(report["runs"].values())
    families = sorted({f for seed in runs for p in policies for f in seed[p]["by_job_type"]})
    largest = max(
        (row[p]["by_job_type"][f]["completion_s"]["mean"] or 0.0)
        for row in runs
        for p in policies
        for f in row[p]["by_job_type"]
    )
    unit, scale = seconds_unit(largest)
    rows = [
        f"| job type | policy | multi-node jobs | never started | wait mean ({unit}) "
        f"| completion mean ({unit}) | slowdown mean | GPU-h lost to spreading |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for family in families:
        for policy in policies:
            cells = [row[policy]["by_job_type"].get(family) for row in runs]
            present = [c for c in cells if c is not None and c["multi_node_jobs"]]
            if not present:
                continue
            rows.append(
                f"| {family} | {policy} | "
                + " | ".join(
                    [
                        _cell([c["multi_node_jobs"] for c in present], form="{:.0f}"),
                        _cell([c["never_started"] for c in present], form="{:.0f}"),
                        _cell([c["wait_s"]["mean"] for c in present], scale),
                        _cell([c["completion_s"]["mean"] for c in present], scale),
                        _cell([c["slowdown"]["mean"] for c in present], form="{:.2f}"),
                        _cell([c["spread_gpu_hours"] for c in present]),
                    ]
                )
                + " |"
            )
    return f"<!-- jobtypes: {run} -->\n" + "\n".join(rows) + "\n<!-- /jobtypes -->"


def rewritten(page: str) -> str:
    """``page`` with every table rebuilt from its run's report.json."""
    text = MARKER.sub(lambda match: table(match.group(1)), page)
    text = JOBTYPES.sub(lambda match: jobtypes(match.group(1)), text)
    return MODEL.sub(lambda match: model(match.group(1)), text)


def main() -> int:
    """Rewrites the page in place."""
    page = PAGE.read_text()
    PAGE.write_text(rewritten(page))
    count = sum(len(marker.findall(page)) for marker in (MARKER, JOBTYPES, MODEL))
    print(f"simulation_tables: rewrote {count} tables of {PAGE.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
