"""Outputs of a simulation: the terminal table, ``report.json`` and the PNG plots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gangplace.sim.replay import RunResult

__all__ = ["table", "write_json", "write_plots"]


def _hours(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 3600:.2f} h"


def table(policies: dict[str, dict[str, Any]]) -> str:
    """One row per policy: the headline figures."""
    header = (
        f"{'policy':11} {'finished':>13} {'wait mean':>10} {'wait p95':>10} {'util':>6} "
        f"{'idle held':>10} {'deadlk':>6} {'1 rack':>7} {'frag':>6} {'place/s':>9}"
    )
    lines = [header, "-" * len(header)]
    for name, figures in policies.items():
        locality = figures["locality"]
        multi = sum(locality.values())
        in_rack = (locality["node"] + locality["rack"]) / multi if multi else 0.0
        rate = figures["placements_per_s"]
        lines.append(
            f"{name:11} {figures['jobs_finished']:>6}/{figures['jobs_total']:<6} "
            f"{_hours(figures['wait_s']['mean']):>10} {_hours(figures['wait_s']['p95']):>10} "
            f"{figures['utilization']:>6.1%} {figures['idle_held_gpu_hours']:>8.1f} h "
            f"{figures['deadlocks']:>6} {in_rack:>7.0%} {figures['fragmentation_waits']:>6} "
            f"{(rate or 0):>9,.0f}"
        )
    lines.append(
        "wait: queue wait; util: GPU-time used / available until the makespan; idle held: "
        "GPU-hours held by partial gangs; 1 rack: multi-pod gangs within one rack (or node); "
        "frag: jobs that waited with enough GPUs free in total"
    )
    return "\n".join(lines)


def write_json(path: Path, report: dict[str, Any]) -> None:
    """Writes ``report`` as indented JSON."""
    path.write_text(json.dumps(report, indent=2, sort_keys=False) + "\n")


def write_plots(out: Path, results: dict[str, RunResult], figures: dict[str, Any]) -> list[Path]:
    """Utilization and queue length over time, CDF of waits, locality bars. Returns the files."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    total = max((max((s[1] for s in r.samples), default=0) for r in results.values()), default=1)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    for name, result in results.items():
        times = [s[0] / 3600 for s in result.samples]
        top.step(times, [s[1] for s in result.samples], where="post", label=name, linewidth=1)
        bottom.step(times, [s[2] for s in result.samples], where="post", label=name, linewidth=1)
    top.set_ylabel("busy GPUs")
    top.set_ylim(0, max(total, 1) * 1.05)
    bottom.set_ylabel("queued jobs")
    bottom.set_xlabel("time (hours)")
    top.legend(loc="upper right", fontsize="small")
    top.set_title("GPUs in use and queue length over time")
    fig.tight_layout()
    written.append(out / "utilization.png")
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)

    fig, axis = plt.subplots(figsize=(8, 5))
    for name, result in results.items():
        waits = sorted(
            (r.start_s - r.job.arrival_s) / 3600 for r in result.records if r.start_s is not None
        )
        if waits:
            shares = [(index + 1) / len(waits) for index in range(len(waits))]
            axis.step(waits, shares, where="post", label=name)
    axis.set_xscale("symlog", linthresh=0.01)
    axis.set_xlabel("queue wait (hours, log scale above 0.01 h)")
    axis.set_ylabel("share of started jobs")
    written.append(_save(fig, axis, "CDF of queue waits", out / "wait_cdf.png"))

    fig, axis = plt.subplots(figsize=(8, 5))
    kinds = ("node", "rack", "spine", "wider")
    names = list(figures)
    width = 0.8 / max(len(kinds), 1)
    for offset, kind in enumerate(kinds):
        counts = [figures[name]["locality"][kind] for name in names]
        positions = [index + offset * width for index in range(len(names))]
        axis.bar(
            positions,
            counts,
            width=width,
            label=f"within one {kind}" if kind != "wider" else "wider",
        )
    axis.set_xticks([index + 1.5 * width for index in range(len(names))], names)
    axis.set_ylabel("multi-pod gangs")
    written.append(_save(fig, axis, "Where multi-pod gangs ran", out / "locality.png"))
    return written


def _save(fig: Any, axis: Any, title: str, path: Path) -> Path:
    """Titles, lays out, writes and closes a figure."""
    import matplotlib.pyplot as plt

    axis.set_title(title)
    axis.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
