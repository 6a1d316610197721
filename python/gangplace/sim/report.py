"""Outputs of a simulation: the terminal table, ``report.json`` and the PNG plots.

The table shows every policy's row, tails beside means, the jobs that never started and
those rejected, in a unit that fits the waits; with several seeds each figure is a mean with
its 95% interval. A policy that could not run, or stopped in a standoff, says so in its row.
The assumptions (order, backfill, walltimes, synthetic durations...) are printed under it.
"""

from __future__ import annotations

import json
import math
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from gangplace.sim.replay import RunResult

__all__ = [
    "completion_lines",
    "group_lines",
    "markdown",
    "seconds_unit",
    "table",
    "wait_unit",
    "write_json",
    "write_plots",
]

UNITS = (("s", 1.0), ("min", 60.0), ("h", 3600.0))


def wait_unit(report: dict[str, Any]) -> tuple[str, float]:
    """The unit that fits the largest wait p95 of the report: s, min or h."""
    largest = 0.0
    for entry in report["policies"].values():
        value = entry["wait_s.p95"]["mean"]
        if value is not None:
            largest = max(largest, value)
    return seconds_unit(largest)


def seconds_unit(largest: float) -> tuple[str, float]:
    """``(label, seconds per unit)`` that keeps ``largest`` seconds readable: s, min or h."""
    if largest < 120:
        return UNITS[0]
    if largest < 2 * 3600:
        return UNITS[1]
    return UNITS[2]


def _cell(entry: dict[str, Any], scale: float = 1.0, form: str = "{:.1f}") -> str:
    """``mean±half`` of a symmetric interval, ``mean[low,high]`` of a clipped one."""
    mean = entry["mean"]
    if mean is None:
        return "-"
    text = form.format(mean / scale)
    low, high = entry["low"], entry["high"]
    if low is None:
        return text
    upper, lower = form.format((high - mean) / scale), form.format((mean - low) / scale)
    if upper == lower:
        return f"{text}±{upper}"
    return f"{text}[{form.format(low / scale)},{form.format(high / scale)}]"


def _share(entry: dict[str, Any]) -> str:
    """A share as a percentage, with its interval in percentage points."""
    if entry["mean"] is None:
        return "-"
    scaled = {key: None if entry[key] is None else entry[key] * 100 for key in entry}
    text = _cell(scaled)
    cut = next((index for index, char in enumerate(text) if char in "±["), len(text))
    return f"{text[:cut]}%{text[cut:]}"  # the percent sign after the mean


def table(report: dict[str, Any]) -> str:
    """One row per policy; arrival-only reports show allocation and rejections instead."""
    if report.get("arrival_only"):
        return _arrival_only_table(report)
    unit, scale = wait_unit(report)
    header = (
        f"{'policy':17} {'finished':>10} {'never':>6} {'rejct':>5} {'wait mean':>11} "
        f"{'p50':>9} {'p95':>9} {'p99':>9} {'util':>11} {'idle held':>9} {'deadlk h':>8} "
        f"{'1 rack':>7} {'w/ room':>7}  status"
    )
    lines = [header, "-" * len(header)]
    notes: list[str] = []
    for name, entry in report["policies"].items():
        if _failed(name, entry, lines, notes):
            continue
        status = _stopped(entry, "{} in {}/{} seed(s)", upper=True)
        if entry.get("ended_queued"):
            queued = f"jobs still queued at the end in {entry['ended_queued']} seed(s)"
            status = queued if status == "ok" else f"{status}; {queued}"
        if entry["errors"]:
            status += f"; failed in {len(report['seeds']) - entry['seeds_run']} seed(s)"
            notes.extend(f"{name}: {error}" for error in entry["errors"])
        finished = f"{_cell(entry['jobs_finished'], form='{:.0f}')}"
        lines.append(
            f"{name:17} {finished:>10} {_cell(entry['never_started'], form='{:.0f}'):>6} "
            f"{_cell(entry['jobs_rejected'], form='{:.0f}'):>5} "
            f"{_cell(entry['wait_s.mean'], scale):>11} {_cell(entry['wait_s.p50'], scale):>9} "
            f"{_cell(entry['wait_s.p95'], scale):>9} {_cell(entry['wait_s.p99'], scale):>9} "
            f"{_share(entry['utilization']):>11} {_share(entry['idle_held_share']):>9} "
            f"{_cell(entry['deadlock_h']):>8} {_share(entry['locality.rack']):>7} "
            f"{_cell(entry['waited_with_room.jobs'], form='{:.0f}'):>7}  {status}"
        )
    seeds = report["seeds"]
    over = f"seed {seeds[0]}" if len(seeds) == 1 else f"{len(seeds)} seeds (mean±95% interval)"
    window = _window_text(report)
    lines.append(
        f"over {over}; waits in {unit}, over every admitted job (never-started ones censored at "
        "the run's end); util and idle held: shares of healthy GPU-time in the common window "
        f"{window}; 1 rack: multi-pod gangs within one rack; w/ room: jobs that waited although "
        "enough GPUs were free in total on arrival; rejct: can never fit the cluster"
    )
    lines.extend(completion_lines(report, scale, unit))
    lines.extend(group_lines(report, scale, unit))
    lines.extend(_trace_lines(report))
    lines.extend(f"assumption: {line}" for line in report["assumptions"])
    lines.extend(f"error: {note}" for note in notes)
    return "\n".join(lines)


def completion_lines(report: dict[str, Any], scale: float, unit: str) -> list[str]:
    """Per policy: every wait summed, completion time and slowdown, with their intervals."""
    lines = [
        f"completion ({unit}; slowdown = completion / run time; total wait = every queued "
        "period, requeues included; unfinished jobs censored at the run's end in all three):"
    ]
    for name, entry in report["policies"].items():
        if not entry.get("seeds_run") or "completion_s.mean" not in entry:
            continue
        lines.append(
            f"  {name:17} total wait mean {_cell(entry['total_wait_s.mean'], scale)} "
            f"p95 {_cell(entry['total_wait_s.p95'], scale)}; completion mean "
            f"{_cell(entry['completion_s.mean'], scale)} "
            f"p50 {_cell(entry['completion_s.p50'], scale)} "
            f"p95 {_cell(entry['completion_s.p95'], scale)} p99 "
            f"{_cell(entry['completion_s.p99'], scale)}; slowdown mean "
            f"{_cell(entry['slowdown.mean'], form='{:.2f}')} p95 "
            f"{_cell(entry['slowdown.p95'], form='{:.2f}')} p99 "
            f"{_cell(entry['slowdown.p99'], form='{:.2f}')}; restarted jobs "
            f"{_cell(entry['restarted_jobs'], form='{:.0f}')}"
            + (
                f"; GPU-h lost to spreading {_cell(entry['spread_gpu_hours'], form='{:.1f}')}"
                if "spread_gpu_hours" in entry
                else ""
            )
            + (
                f"; idle held to the end {_share(entry['idle_held_share_to_end'])}"
                if "idle_held_share_to_end" in entry
                else ""
            )
            + (
                f"; util {_share(entry['utilization'])} = useful "
                f"{_share(entry['useful_utilization'])} + spreading "
                f"{_share(entry['spread_share'])}"
                if "useful_utilization" in entry
                else ""
            )
        )
    return lines if len(lines) > 1 else []


def group_lines(report: dict[str, Any], scale: float, unit: str) -> list[str]:
    """Mean waits per priority and per owner, when there is more than one of either."""
    lines = []
    groups = (("wait_by_priority_mean_s", "priority"), ("wait_by_owner_mean_s", "owner"))
    for group, title in groups:
        for name, entry in report["policies"].items():
            waits = entry.get(group, {})
            if len(waits) > 1:
                cells = ", ".join(f"{key}: {_cell(value, scale)}" for key, value in waits.items())
                lines.append(f"mean wait ({unit}) by {title}, {name}: {cells}")
        for name, entry in report["policies"].items():
            lost = entry.get("lost_gpu_hours", {}).get("mean")
            if title == "owner" and lost:
                line = (
                    f"work lost to stops, {name}: {_cell(entry['lost_gpu_hours'])} GPU-h, "
                    f"goodput {_share(entry['goodput'])}, preemptions "
                    f"{_cell(entry['preemptions'], form='{:.0f}')}"
                )
                if "preempting_starts" in entry:  # reports written before issue 46 lack it
                    line += (
                        f" by {_cell(entry['preempting_starts'], form='{:.0f}')} starts "
                        f"({_cell(entry['cascades'], form='{:.0f}')} by a job evicted in the "
                        "same cycle); victims started again at once "
                        f"{_cell(entry['restarted_at_once'], form='{:.0f}')}"
                    )
                if entry.get("repairs", {}).get("mean") or entry.get("spare_gpu_hours", {}).get(
                    "mean"
                ):
                    line += (
                        f", repairs in place {_cell(entry['repairs'], form='{:.0f}')}, useful "
                        f"{_cell(entry['useful_gpu_hours'])} GPU-h, held as spares "
                        f"{_cell(entry['spare_gpu_hours'])} GPU-h"
                    )
                lines.append(line)
    lines.extend(queue_lines(report, scale, unit))
    if report["settings"].get("numa_split"):
        for name, entry in report["policies"].items():
            if entry["seeds_run"]:
                split = _cell(entry["numa_split_pods"], form="{:.0f}")
                lines.append(
                    f"pods spanning both NUMA halves (the kubelet would reject them), {name}: "
                    f"{split}"
                )
    return lines


def queue_lines(report: dict[str, Any], scale: float, unit: str) -> list[str]:
    """With ``--queues``: one line per policy and queue (docs/queues.md)."""
    lines = []
    for name, entry in report["policies"].items():
        for queue, figures in (entry.get("queues") or {}).items():
            received, nominal = figures["share_received"], figures["share_nominal"]
            lines.append(
                f"queue {queue}, {name}: wait ({unit}) mean "
                f"{_cell(figures['wait_s.mean'], scale)} p50 {_cell(figures['wait_s.p50'], scale)}"
                f" p95 {_cell(figures['wait_s.p95'], scale)}, never started "
                f"{_cell(figures['wait_s.never_started'], form='{:.0f}')}; completion mean "
                f"{_cell(figures['completion_s.mean'], scale)}; GPUs used "
                f"{_cell(figures['mean_gpus'])}"
                f" ({_share(received)} of the cluster; nominal {_share(nominal)} of the quotas); "
                f"borrowed {_cell(figures['borrowed_gpu_h'], form='{:.0f}')} GPU-h; reclaimed "
                f"{_cell(figures['reclaimed_jobs'], form='{:.0f}')} jobs, "
                f"{_cell(figures['reclaimed_gpu_h'], form='{:.0f}')} GPU-h of their runs"
            )
    return lines


def _trace_lines(report: dict[str, Any]) -> list[str]:
    """What the trace itself recorded: its real waits and the jobs that never ran in it."""
    lines = []
    first_seed: dict[str, Any] = next(iter(report["runs"].values()), {})
    real = next((row.get("real_wait_s") for row in first_seed.values() if "error" not in row), None)
    if real:
        lines.append(
            "the trace's own waits (real, for comparison): "
            + ", ".join(f"{key} {real[key]:,.0f} s" for key in ("mean", "p50", "p95", "p99"))
        )
    never = report["jobs"].get("never_ran_in_trace")
    if never:
        lines.append(f"left out: {never} jobs that never ran in the trace (no scheduled_time)")
    fractions = report["jobs"].get("fractions")
    if fractions:
        count = report["jobs"]["count"]
        lines.append(
            f"fractions: {fractions:,} of the {count:,} GPU pods ask part of a GPU (gpu_milli < "
            "1000), placed as shares of one GPU (docs/resources.md; policies with "
            "quotas or queues give them whole GPUs); busy GPUs and arrived load count each "
            "pod's share"
        )
    modelled = report["jobs"].get("resources_per_pod")
    if modelled:
        lines.append(
            "modelled besides GPUs: each pod's " + ", ".join(modelled) + " against its "
            'node\'s (docs/resources.md "Node resources")'
        )
    unmodelled = report["jobs"].get("unmodelled_requests")
    if unmodelled:
        lines.append(
            "not modelled: the trace's " + ", ".join(unmodelled) + " requests are ignored "
            "(only GPUs are placed)"
        )
    return lines


def markdown(report: dict[str, Any]) -> str:
    """The table as Markdown (for docs), the same cells as :func:`table`."""
    unit, scale = wait_unit(report)
    rows = [
        f"| policy | finished | never started | rejected | wait mean ({unit}) | p50 | p95 | p99 "
        "| util | idle held | 1 rack | waited with room | status |",
        "| --- " + "| ---: " * 11 + "| --- |",
    ]
    for name, entry in report["policies"].items():
        if not entry["seeds_run"]:
            rows.append(f"| {name} | | | | | | | | | | | | failed: {entry['errors'][0]} |")
            continue
        status = _stopped(entry, "{} in {} of {} seeds", upper=False)
        if entry.get("ended_queued"):
            queued = f"jobs still queued at the end in {entry['ended_queued']} seeds"
            status = queued if status == "ok" else f"{status}; {queued}"
        cells = [
            _cell(entry["jobs_finished"], form="{:.0f}"),
            _cell(entry["never_started"], form="{:.0f}"),
            _cell(entry["jobs_rejected"], form="{:.0f}"),
            *(_cell(entry[f"wait_s.{key}"], scale) for key in ("mean", "p50", "p95", "p99")),
            _share(entry["utilization"]),
            _share(entry["idle_held_share"]),
            _share(entry["locality.rack"]),
            _cell(entry["waited_with_room.jobs"], form="{:.0f}"),
        ]
        rows.append(f"| {name} | " + " | ".join(cells) + f" | {status} |")
    return "\n".join(rows)


def _window_text(report: dict[str, Any]) -> str:
    jobs = report["jobs"]
    first, last = jobs["first_arrival_s"], jobs["last_arrival_s"]
    if first is None:
        return "(empty)"
    return f"{first / 3600:.1f}-{last / 3600:.1f} h (first to last arrival)"


def _failed(name: str, entry: dict[str, Any], lines: list[str], notes: list[str]) -> bool:
    """A policy that ran in no seed: its FAILED row, and its errors for under the table."""
    if entry["seeds_run"]:
        return False
    lines.append(f"{name:17} {'-':>10}  FAILED (see below)")
    notes.extend(f"{name}: {error}" for error in entry["errors"])
    return True


def _arrival_only_table(report: dict[str, Any]) -> str:
    header = f"{'policy':17} {'arrived':>8} {'rejected':>10} {'allocation at end':>18}  status"
    lines = [header, "-" * len(header)]
    notes: list[str] = []
    for name, entry in report["policies"].items():
        if _failed(name, entry, lines, notes):
            continue
        lines.append(
            f"{name:17} {_cell(entry['jobs_total'], form='{:.0f}'):>8} "
            f"{_cell(entry['jobs_rejected'], form='{:.0f}'):>10} "
            f"{_share(entry['allocation_at_end']):>18}  ok"
        )
    lines.append(
        "arrival-only replay (the trace has no times): jobs arrive in file order until "
        f"{report['settings'].get('arrival_only_until_load', 1.3):.0%} of the healthy GPUs "
        "have arrived; a job without room on arrival is rejected; allocation at end: busy "
        "share of healthy GPUs"
    )
    lines.extend(_trace_lines(report))
    lines.extend(f"assumption: {line}" for line in report["assumptions"][1:2])
    lines.extend(f"error: {note}" for note in notes)
    return "\n".join(lines)


def write_json(path: Path, report: dict[str, Any]) -> None:
    """Writes ``report`` as indented JSON (infinities as null), its provenance first."""
    stamped = {"provenance": provenance(), **report}
    path.write_text(json.dumps(_finite(stamped), indent=1, sort_keys=False) + "\n")


def provenance() -> dict[str, Any]:
    """What made a report.

    gangplace's version, the commit its extension was built from (``built_from_commit``,
    embedded at build time: also for an installed package; ``"unknown"`` when it was built
    outside a git checkout), the git commit of its source when it runs from a checkout
    (``None`` otherwise) and whether that checkout's package or Rust sources had uncommitted
    changes (``git_dirty``), the process's command line and Python's version.
    """
    import gangplace
    from gangplace import _gangplace

    source = Path(gangplace.__file__).resolve().parent
    commit = _git(source, "rev-parse", "HEAD")
    changed = _git(source, "status", "--porcelain", "--", "../../python", "../../rust")
    return {
        "gangplace_version": gangplace.__version__,
        "built_from_commit": getattr(_gangplace, "__build_commit__", "unknown"),
        "git_commit": commit or None,
        "git_dirty": None if commit is None else bool(changed),
        "command_line": list(sys.argv),
        "python": platform.python_version(),
    }


def _git(where: Path, *args: str) -> str | None:
    """``git -C where args`` stripped, or ``None`` when git fails or is missing."""
    try:
        done = subprocess.run(
            ["git", "-C", str(where), *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def write_plots(out: Path, results: dict[str, RunResult], report: dict[str, Any]) -> list[Path]:
    """The plots of the first seed's runs (see :mod:`gangplace.sim.plots`). Returns files."""
    from gangplace.sim.plots import plot_all

    return plot_all(out, results, report)


def _stopped(entry: dict[str, Any], form: str, *, upper: bool) -> str:
    """How a policy's runs were stopped early: standoffs, livelocks, the bound; or "ok"."""
    livelocks = entry.get("livelocks", 0)
    parts = [
        (entry["standoffs"] - livelocks, "standoff", ""),
        (livelocks, "livelock", ""),
        (entry.get("cut", 0), "cut", " (at the bound; unfinished jobs censored)"),
    ]
    said = [
        form.format(word.upper() if upper else word, count, entry["seeds_run"]) + more
        for count, word, more in parts
        if count
    ]
    elsewhere = (entry.get("admitted_elsewhere") or {}).get("mean")
    if elsewhere:  # issue 49: the same jobs in every row
        said.append(f"{elsewhere:g} job(s)/seed others admit counted as never started")
    return "; ".join(said) if said else "ok"
