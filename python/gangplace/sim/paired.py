"""Paired comparisons of policies, seed by seed (docs/command-line.md "Paired comparisons").

Every policy replays the same job stream per seed, so the fair comparison of two policies is
over the per-seed differences of a figure, with their own 95% interval.

For each policy other than the baseline (``--baseline``; default the first policy) and each
figure of :data:`PAIRED_FIGURES`: the mean of ``policy - baseline`` over the seeds where both
ran, its 95% t-interval, the number of seeds, and in how many seeds the policy's figure was
lower and higher than the baseline's.
"""

from __future__ import annotations

from typing import Any

from gangplace.sim.stats import figure, interval

__all__ = ["PAIRED_FIGURES", "paired", "paired_table"]

PAIRED_FIGURES = (
    "wait_s.mean",
    "wait_s.p95",
    "total_wait_s.mean",
    "completion_s.mean",
    "slowdown.mean",
    "spread_gpu_hours",
    "never_started",
    "utilization",
    "idle_held_share",
)


def paired(
    runs: dict[str, dict[str, Any]], policies: tuple[str, ...], baseline: str | None = None
) -> list[dict[str, Any]]:
    """The per-seed differences of every policy against ``baseline`` (see the module)."""
    if not policies:
        return []
    base = baseline or policies[0]
    rows: list[dict[str, Any]] = []
    for policy in policies:
        if policy == base:
            continue
        for name in PAIRED_FIGURES:
            differences = []
            for by_policy in runs.values():
                mine, theirs = by_policy.get(policy), by_policy.get(base)
                if not mine or not theirs or "error" in mine or "error" in theirs:
                    continue
                a, b = figure(mine, name), figure(theirs, name)
                if isinstance(a, (int, float)) and isinstance(b, (int, float)):
                    differences.append(float(a) - float(b))
            summary = interval(differences)
            rows.append(
                {
                    "policy": policy,
                    "baseline": base,
                    "figure": name,
                    "difference": summary["mean"],
                    "low": summary["low"],
                    "high": summary["high"],
                    "seeds": len(differences),
                    "lower_in": sum(1 for d in differences if d < 0),
                    "higher_in": sum(1 for d in differences if d > 0),
                }
            )
    return rows


def paired_table(rows: list[dict[str, Any]]) -> str:
    """One line per (policy, figure): the mean difference, its interval, the seed counts."""
    if not rows:
        return ""
    lines = [f"paired against {rows[0]['baseline']} (policy minus baseline, same seeds):"]
    for row in rows:
        seconds = row["figure"].split(".")[0].endswith("_s")  # wait_s, completion_s, ...
        scale, unit = (3600.0, " h") if seconds else (1.0, "")
        share = row["figure"] in ("utilization", "idle_held_share")
        if share:
            scale, unit = 0.01, " pts"

        def show(value: float | None, scale: float = scale) -> str:
            return "-" if value is None else f"{value / scale:+.2f}"

        bounds = f" [{show(row['low'])}, {show(row['high'])}]" if row["low"] is not None else ""
        lines.append(
            f"  {row['policy']:17} {row['figure']:18} {show(row['difference'])}{bounds}{unit}"
            f"  lower in {row['lower_in']} of {row['seeds']} seeds, higher in {row['higher_in']}"
        )
    return "\n".join(lines)
