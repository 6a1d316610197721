"""The lesson's question with 20 seeds and the guessed factors varied (issue 49, item 6).

Usage: ``.venv/bin/python scripts/hard_soft.py [--trace T] [--seeds 0-19] [--out DIR]``
(needs ``../shared/data``; about two minutes on 2 cores; not part of the test command).

Hard (``rack-only``), soft with a ladder (``ladder``), soft at once (``best-fit``) and none
(``blind``) on Philly VC ``b436b2`` (2,000 jobs) on 64 GPUs (``tree:2,2,2,8``), paired
against ``rack-only`` over the same workload seeds, under four placement models: ``none``
(placement never changes run time) and the cited model with its GUESSED cross-level growth
``g`` (``T(spine) = 1 + g e``, ``T(wider) = 1 + g^2 e``; the cited model has ``g = 2``)
at 0.5x, 1x and 2x (``g`` = 1, 2, 4). ``e``, the node-to-rack excess, is Pollux's measured
8-GPU value (or its proxy) and is left as it is: Philly's multi-pod jobs all ask more than
8 GPUs, so their tightest span is a rack and only the guessed factors above a rack ever
apply to them. Each variant writes ``report.json`` and ``table.txt`` under ``--out``, and
the script prints the paired differences as a Markdown table (docs/simulation.md).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import tempfile
from pathlib import Path

from gangplace.sim.run import simulate
from gangplace.sim.settings import SimSettings
from gangplace.sim.speed import SPANS, cited_model
from gangplace.sim.stats import interval

TRACE = "../shared/data/philly-gavel-vc-traces/b436b2.trace"
POLICIES = ("rack-only", "ladder", "best-fit", "blind")
GROWTHS = {"g1-half": 1.0, "g2-cited": 2.0, "g4-double": 4.0}
FIGURES = (("wait_s.mean", "wait mean", 3600.0), ("completion_s.mean", "completion mean", 3600.0))


def model_file(path: Path, growth: float) -> Path:
    """The cited model with cross-level growth ``growth`` (rack factors unchanged)."""
    model = cited_model()
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["job_type", "span", "factor", "status", "source"])
        for job_type, entry in sorted(model.entries.items()):
            excess = entry.times[1] - 1.0
            times = (1.0, 1.0 + excess, 1.0 + growth * excess, 1.0 + growth * growth * excess)
            status = f"{entry.status}; cross-level growth {growth:g} (sensitivity)"
            for span, time in zip(SPANS, times, strict=True):
                writer.writerow([job_type, span, f"{time:.6f}", status, entry.source])
            writer.writerow([job_type, "numa", f"{entry.numa:.6f}", status, entry.source])
    return path


def seeds_of(text: str) -> tuple[int, ...]:
    """``0-19`` or ``1,4,7``."""
    if "-" in text:
        low, high = text.split("-", 1)
        return tuple(range(int(low), int(high) + 1))
    return tuple(int(part) for part in text.split(","))


def main() -> int:
    """Runs the four variants and prints the paired table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default=TRACE)
    parser.add_argument("--seeds", default="0-19")
    parser.add_argument("--out", default="docs/simulation/hard-soft-20")
    args = parser.parse_args()
    if not Path(args.trace).exists():
        print(f"hard_soft: {args.trace} is missing (../shared/data beside it)", file=sys.stderr)
        return 2
    out, seeds = Path(args.out), seeds_of(args.seeds)
    scratch = Path(tempfile.mkdtemp(prefix="hard-soft-"))
    out.mkdir(parents=True, exist_ok=True)
    variants = {"none": "none"}
    for name, growth in GROWTHS.items():
        variants[name] = str(model_file(out / f"model-{name}.csv", growth))
    rows = []
    common: dict[str, dict[str, dict[str, float | int | None]]] = {}
    for name, model in variants.items():
        print(f"hard_soft: {name}: {len(seeds)} seeds x {len(POLICIES)} policies", file=sys.stderr)
        done = simulate(
            args.trace, cluster="tree:2,2,2,8", policies=POLICIES, seeds=seeds,
            settings=SimSettings(placement_model=model), out=out / name, baseline="rack-only",
            jobs_out=scratch / f"{name}.csv", progress=sys.stderr.isatty(),
        )  # fmt: skip
        (out / name / "table.txt").write_text(done.table() + "\n")
        common[name] = _common_jobs_differences(scratch / f"{name}.csv")
        (scratch / f"{name}.csv").unlink()  # tens of MB: read here, not kept
        for entry in done.report["paired"]:
            for key, label, scale in FIGURES:
                if entry.get("figure") == key:
                    rows.append((name, entry, label, scale))
    print(
        "| placement model | policy | figure | minus rack-only (h), 95% interval "
        "| seeds lower / higher | decided |"
    )
    print("| --- | --- | --- | --- | ---: | --- |")
    for name, entry, label, scale in rows:
        mean, low, high = (
            entry[key] / scale if entry[key] is not None else None
            for key in ("difference", "low", "high")
        )
        decided = low is not None and high is not None and (low > 0 or high < 0)
        span = f"{mean:+.2f} [{low:+.2f}, {high:+.2f}]" if low is not None else f"{mean:+.2f}"
        print(
            f"| {name} | {entry['policy']} | {label} | {span} | {entry['lower_in']} / "
            f"{entry['higher_in']} of {entry['seeds']} | {'yes' if decided else 'no'} |"
        )
    print()
    print(
        "Over the jobs every policy ran (the jobs rack-only can never run left out): "
        "mean wait minus rack-only (h)"
    )
    print("| placement model | policy | minus rack-only (h), 95% interval | decided |")
    print("| --- | --- | --- | --- |")
    for name, by_policy in common.items():
        for policy, summary in by_policy.items():
            mean, low, high = (summary[k] for k in ("mean", "low", "high"))
            assert isinstance(mean, float)
            decided = isinstance(low, float) and isinstance(high, float) and (low > 0 or high < 0)
            span = f"{mean:+.2f} [{low:+.2f}, {high:+.2f}]" if isinstance(low, float) else ""
            print(f"| {name} | {policy} | {span} | {'yes' if decided else 'no'} |")
    return 0


def _common_jobs_differences(path: Path) -> dict[str, dict[str, float | int | None]]:
    """Per policy, the paired per-seed difference of the mean first wait against rack-only.

    Over the jobs no policy rejected or counted as admitted elsewhere (from ``--jobs-out``).
    """
    with path.open() as handle:
        rows = list(csv.DictReader(handle))
    excluded = {
        row["job"]
        for row in rows
        if row["status"] == "rejected" or row["admitted_elsewhere"] == "True"
    }
    waits: dict[tuple[str, str], list[float]] = {}
    for row in rows:
        if row["job"] in excluded or row["status"] == "not_arrived":
            continue
        waits.setdefault((row["seed"], row["policy"]), []).append(float(row["first_wait_s"]))
    seeds = sorted({seed for seed, _ in waits})
    out = {}
    for policy in POLICIES[1:]:
        differences = [
            (statistics.fmean(waits[(seed, policy)]) - statistics.fmean(waits[(seed, "rack-only")]))
            / 3600.0
            for seed in seeds
        ]
        out[policy] = interval(differences)
    return out


if __name__ == "__main__":
    sys.exit(main())
