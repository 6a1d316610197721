"""The simulation's pictures, made to be read at a glance.

- ``utilization.png``: one panel per policy on the same clipped window (first to last
  arrival, plus a tenth), busy GPUs and GPUs held idle by partial gangs as stacked shares,
  the queue length on a second axis.
- ``wait_cdf.png``: one panel per policy, its CDF over every admitted job in colour and the
  other policies in grey; jobs that never started keep the curve below 1.
- ``locality.png``: shares of multi-pod gangs per span (categories empty for every policy
  are left out), legend outside the bars.
- ``load_curve.png`` (arrival-only replays): allocated share against the arrived load.
- ``queues.png`` (with ``--queues``): one panel per policy, each queue's share of the
  cluster's GPUs over time (daily means) as a line, its nominal share of the cluster
  dashed in the same colour.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from gangplace.sim.metrics import utilization_series
from gangplace.sim.replay import RunResult

__all__ = ["plot_all"]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_all(out: Path, results: dict[str, RunResult], report: dict[str, Any]) -> list[Path]:
    """Writes every plot that applies; returns the files."""
    if not results:
        return []
    label = _label(report)
    if report.get("arrival_only"):
        return [_load_curve(out, results, report, label)]
    plots = [
        _utilization(out, results, report, label),
        _wait_cdf(out, results, label),
        _locality(out, report, label),
    ]
    if any(result.queues is not None for result in results.values()):
        plots.append(_queues(out, results, label))
    return plots


def _queues(out: Path, results: dict[str, RunResult], label: str) -> Path:
    """Each queue's share of the cluster over time (daily means) against its nominal share."""
    plt = _pyplot()
    shown = {name: result for name, result in results.items() if result.queues is not None}
    fig, axes = plt.subplots(len(shown), 1, figsize=(9, 2.6 * len(shown)), squeeze=False)
    day = 86400.0
    for axis, (policy, result) in zip(axes[:, 0], shown.items(), strict=True):
        figures = result.queues
        samples = figures.samples
        if not samples:
            continue
        end = samples[-1][0]
        days = max(1, math.ceil((end - samples[0][0]) / day))
        for index, queue in enumerate(figures.names):
            means = []
            for d in range(days):
                low = samples[0][0] + d * day
                high = low + day
                area = 0.0
                for (start, usage), (stop, _) in zip(
                    samples, [*samples[1:], (end, ())], strict=True
                ):
                    begin, finish = max(start, low), min(stop, high)
                    if finish > begin:
                        area += usage[index] * (finish - begin)
                means.append(area / day / max(result.healthy_gpus, 1))
            colour = f"C{index}"
            axis.plot(range(days), means, color=colour, label=queue)
            axis.axhline(
                figures.nominal[index] / max(result.healthy_gpus, 1),
                color=colour,
                linestyle="--",
                linewidth=0.8,
            )
        axis.set_title(f"{policy}: share of the cluster's GPUs per queue (dashed: nominal)")
        axis.set_ylabel("share")
        axis.set_xlabel("day")
        axis.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    fig.suptitle(label, fontsize="small")
    fig.tight_layout()
    return _save(fig, out / "queues.png")


def _label(report: dict[str, Any]) -> str:
    seed = report["seeds"][0]
    text = f"seed {seed}"
    if report.get("synthetic_durations"):
        text += "; SYNTHETIC durations (guessed)"
    return text


def _utilization(
    out: Path, results: dict[str, RunResult], report: dict[str, Any], label: str
) -> Path:
    plt = _pyplot()
    first = report["jobs"]["first_arrival_s"] or 0.0
    last = report["jobs"]["last_arrival_s"] or first
    window = (first, last + max(0.1 * (last - first), 1.0))
    fig, axes = plt.subplots(
        len(results), 1, figsize=(10, 1.7 * len(results) + 1), sharex=True, squeeze=False
    )
    for axis, (name, result) in zip(axes[:, 0], results.items(), strict=True):
        width, busy, held = utilization_series(result, window)
        hours = [(window[0] + (index + 0.5) * width) / 3600 for index in range(len(busy))]
        axis.stackplot(
            hours, busy, held, colors=("#2b7bba", "#e8743b"), labels=("busy", "held idle")
        )
        axis.set_ylim(0, 1)
        axis.set_ylabel(name, rotation=0, ha="right", va="center")
        queue = axis.twinx()
        times = [s[0] / 3600 for s in result.samples if window[0] <= s[0] <= window[1]]
        lengths = [s[3] for s in result.samples if window[0] <= s[0] <= window[1]]
        queue.step(times, lengths, where="post", color="#444444", linewidth=0.7)
        queue.set_ylabel("queued", fontsize="x-small")
        queue.tick_params(labelsize="x-small")
        stopped = _stop_marker(result)
        if stopped is not None:
            _mark_stop(axis, stopped[0], stopped[1], window)
    axes[0, 0].legend(loc="lower left", bbox_to_anchor=(0, 1.02), ncol=2, fontsize="small")
    axes[-1, 0].set_xlabel("time (hours); left axis: share of healthy GPUs; line: jobs queued")
    axes[-1, 0].set_xlim(window[0] / 3600, window[1] / 3600)
    fig.suptitle(f"GPU use per policy, first to last arrival ({label})", fontsize="medium")
    return _save(fig, out / "utilization.png")


def _stop_marker(result: RunResult) -> tuple[float, str] | None:
    """Where and why a run was stopped early (a standoff, a livelock, the bound), if it was."""
    if result.standoff is not None:
        return result.standoff.at_s, result.standoff.kind
    if result.cut_at_s is not None:
        return result.cut_at_s, "cut at the bound"
    return None


def _mark_stop(axis: Any, at_s: float, why: str, window: tuple[float, float]) -> None:
    """A dashed line where the run stopped, with why.

    Outside the plot's window it is drawn dotted at the window's edge with the time written
    out (issue 49: a marker far outside broke the layout or overflowed the font raster).
    """
    low, high = window[0] / 3600, window[1] / 3600
    stop = at_s / 3600
    inside = low <= stop <= high
    drawn = min(max(stop, low), high)
    text = f" run stopped: {why}" + ("" if inside else f" at {stop:,.1f} h (outside the plot)")
    axis.axvline(drawn, color="#c0392b", linewidth=1, linestyle="--" if inside else ":")
    axis.text(drawn, 0.95, text, color="#c0392b", fontsize="x-small", va="top",
              ha="left" if drawn < high else "right", clip_on=True)  # fmt: skip


def _wait_cdf(out: Path, results: dict[str, RunResult], label: str) -> Path:
    plt = _pyplot()
    curves = {}
    for name, result in results.items():
        admitted = [r for r in result.records if r.arrived and r.rejected is None]
        waits = sorted(
            (r.first_start_s - r.job.arrival_s) / 3600
            for r in admitted
            if r.first_start_s is not None
        )
        curves[name] = (waits, len(admitted))
    columns = min(3, len(curves))
    rows = math.ceil(len(curves) / columns)
    fig, axes = plt.subplots(
        rows, columns, figsize=(4 * columns, 3 * rows), sharex=True, sharey=True, squeeze=False
    )
    # The y axis starts at the lowest first step of any curve (rounded down to a tenth): the
    # jobs that started at once are often most of them, and the rest is the story.
    firsts = [waits.count(waits[0]) / total for waits, total in curves.values() if waits]
    bottom = math.floor(min(firsts, default=0.0) * 10) / 10
    for index, (name, (waits, total)) in enumerate(curves.items()):
        axis = axes[index // columns, index % columns]
        for other, (other_waits, other_total) in curves.items():
            if other != name and other_waits:
                shares = [(i + 1) / other_total for i in range(len(other_waits))]
                axis.step(other_waits, shares, where="post", color="#cccccc", linewidth=0.8)
        if waits:
            shares = [(i + 1) / total for i in range(len(waits))]
            axis.step(waits, shares, where="post", color="#2b7bba", linewidth=1.5)
        never = total - len(waits)
        axis.set_title(f"{name}: {never} never started" if never else name, fontsize="small")
        axis.set_xscale("symlog", linthresh=0.01)
        axis.set_ylim(bottom, 1.02)
        axis.grid(alpha=0.3)
    for index in range(len(curves), rows * columns):
        axes[index // columns, index % columns].axis("off")
    fig.supxlabel("queue wait (hours, log scale above 0.01 h)", fontsize="small")
    fig.supylabel(
        "share of admitted jobs started" + (f" (axis from {bottom:.1f})" if bottom else ""),
        fontsize="small",
    )
    fig.suptitle(f"Waits: each policy in colour, the others in grey ({label})", fontsize="medium")
    return _save(fig, out / "wait_cdf.png")


def _locality(out: Path, report: dict[str, Any], label: str) -> Path:
    plt = _pyplot()
    names = [n for n, e in report["policies"].items() if e["seeds_run"]]
    first_seed = next(iter(report["runs"].values()))
    kinds = [
        kind
        for kind in ("rack", "spine", "wider")
        if any((first_seed[n]["locality"].get(kind) or 0) > 0 for n in names)
    ]
    fig, axis = plt.subplots(figsize=(8, 0.5 * len(names) + 1.5))
    if not kinds:  # no multi-pod gang started: say so instead of an empty chart
        axis.set_yticks(range(len(names)), names)
        axis.set_xticks([])
        axis.text(0.5, (len(names) - 1) / 2, "no multi-pod gang started in this run",
                  ha="center", va="center", fontsize="small")  # fmt: skip
        axis.set_xlim(0, 1)
        axis.invert_yaxis()
        axis.set_title(f"Where multi-pod gangs ran ({label})", fontsize="medium")
        return _save(fig, out / "locality.png")
    colours = {"rack": "#2b7bba", "spine": "#7fb3d5", "wider": "#e8743b"}
    left = [0.0] * len(names)
    for kind in kinds:
        shares = [first_seed[n]["locality"].get(kind) or 0.0 for n in names]
        axis.barh(names, shares, left=left, color=colours[kind], label=f"within one {kind}"
                  if kind != "wider" else "wider than a spine")  # fmt: skip
        left = [a + b for a, b in zip(left, shares, strict=True)]
    counts = [first_seed[n]["locality"]["multi_pod_gangs"] for n in names]
    for row, count in enumerate(counts):
        axis.text(1.01, row, f"{count} gangs", va="center", fontsize="x-small")
    axis.set_xlim(0, 1)
    axis.invert_yaxis()
    axis.set_xlabel("share of the multi-pod gangs that started")
    axis.legend(loc="lower left", bbox_to_anchor=(0, 1.01), ncol=3, fontsize="small")
    axis.set_title(f"Where multi-pod gangs ran ({label})", fontsize="medium", pad=28)
    return _save(fig, out / "locality.png")


def _load_curve(
    out: Path, results: dict[str, RunResult], report: dict[str, Any], label: str
) -> Path:
    plt = _pyplot()
    fig, axis = plt.subplots(figsize=(7, 4.5))
    for name, result in results.items():
        if result.load_curve:
            xs, ys = zip(*result.load_curve, strict=True)
            axis.plot([x * 100 for x in xs], [y * 100 for y in ys], label=name, linewidth=1)
    axis.plot([0, 100], [0, 100], color="#cccccc", linewidth=0.8, linestyle="--")
    axis.set_xlabel("arrived load (% of healthy GPUs)")
    axis.set_ylabel("GPUs allocated (%)")
    axis.set_xlim(0, 135)
    axis.set_ylim(0, 105)
    axis.legend(loc="lower right", fontsize="small")
    axis.set_title(f"Allocation against arrived load, as the FGD paper plots it ({label})",
                   fontsize="small")  # fmt: skip
    return _save(fig, out / "load_curve.png")


def _save(fig: Any, path: Path) -> Path:
    plt = _pyplot()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
