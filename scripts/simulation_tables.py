"""Rewrites the tables of docs/simulation.md from the runs' report.json files.

Every table sits between ``<!-- table: RUN -->`` and ``<!-- /table -->`` (the run's table, its
completion lines and its paired differences), or ``<!-- jobtypes: RUN -->`` and
``<!-- /jobtypes -->`` (the multi-node jobs by job type and policy), or ``<!-- model: RUN -->``
and ``<!-- /model -->`` (the placement model's table), or ``<!-- fgd: RUN -->`` and
``<!-- /fgd -->`` (the FGD comparison of ``gangplace fgd``, its ``fgd.md``); RUN names a folder of
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
QUEUES = re.compile(r"<!-- queues: ([\w.,-]+) -->\n.*?<!-- /queues -->", re.S)
FGD = re.compile(r"<!-- fgd: ([\w.-]+) -->\n.*?<!-- /fgd -->", re.S)


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


def queues(runs: str) -> str:
    """Each owner's mean wait per run, and its difference from the first run's, per seed.

    The runs differ only in their queues file, on the same seeds (docs/queues.md "Queues and
    quotas"); the differences are paired seed by seed.
    """
    names = runs.split(",")
    reports = [_report(name) for name in names]
    policy = next(iter(reports[0]["policies"]))
    seeds = sorted(reports[0]["runs"], key=int)
    owners = sorted(reports[0]["runs"][seeds[0]][policy]["wait_by_owner_s"])

    def waits(report: dict, owner: str) -> list[float]:  # type: ignore[type-arg]
        return [report["runs"][s][policy]["wait_by_owner_s"][owner]["mean"] for s in seeds]

    def overall(report: dict) -> list[float]:  # type: ignore[type-arg]
        return [report["runs"][s][policy]["wait_s"]["mean"] for s in seeds]

    header = " | ".join(f"{o}: wait mean (h) | vs {names[0].rsplit('-', 1)[-1]}" for o in owners)
    rows = [
        f"| queues | all jobs: wait mean (h) | {header} |",
        "| --- | ---: |" + " ---: | ---: |" * len(owners),
    ]
    for name, report in zip(names, reports, strict=True):
        cells = [_cell(overall(report), 3600.0)]
        for owner in owners:
            mine, base = waits(report, owner), waits(reports[0], owner)
            cells.append(_cell(mine, 3600.0))
            diff = [(a - b) for a, b in zip(mine, base, strict=True)]
            cells.append("-" if report is reports[0] else _cell_signed(diff, 3600.0))
        rows.append(f"| {name.rsplit('-', 1)[-1]} | " + " | ".join(cells) + " |")
    table_text = "\n".join(rows)
    return f"<!-- queues: {runs} -->\n{table_text}\n<!-- /queues -->"


def _cell_signed(values: list[float], scale: float) -> str:
    summary = interval([v / scale for v in values])
    mean, low, high = summary["mean"], summary["low"], summary["high"]
    if mean is None:
        return "-"
    if low is None:
        return f"{mean:+.1f}"
    return f"{mean:+.1f} [{low:+.1f}, {high:+.1f}]"


def fgd(run: str) -> str:
    """The FGD comparison table ``gangplace fgd`` wrote (``fgd.md``)."""
    text = (ROOT / "docs" / "simulation" / run / "fgd.md").read_text().strip()
    return f"<!-- fgd: {run} -->\n{text}\n<!-- /fgd -->"


def rewritten(page: str) -> str:
    """``page`` with every table rebuilt from its run's report.json."""
    text = MARKER.sub(lambda match: table(match.group(1)), page)
    text = FGD.sub(lambda match: fgd(match.group(1)), text)
    text = JOBTYPES.sub(lambda match: jobtypes(match.group(1)), text)
    text = QUEUES.sub(lambda match: queues(match.group(1)), text)
    return MODEL.sub(lambda match: model(match.group(1)), text)


def main() -> int:
    """Rewrites the page in place."""
    page = PAGE.read_text()
    PAGE.write_text(rewritten(page))
    count = sum(len(marker.findall(page)) for marker in (MARKER, JOBTYPES, MODEL, QUEUES, FGD))
    print(f"simulation_tables: rewrote {count} tables of {PAGE.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
