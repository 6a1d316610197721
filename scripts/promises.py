"""Backfill promises kept and slipped on the bundled trace (issue 50, item 4).

Usage: ``.venv/bin/python scripts/promises.py [--seeds 0-9] [--trace T] [--cluster C]``
(about a minute on 2 cores; not part of the test command). Defaults: the bundled Philly VC
``6c71a0`` (first 400 jobs) on the bundled 64-GPU cluster, ``best-fit``, walltime = run
time (``--walltime-factor 1``).

For EASY and conservative backfill (docs/scheduler.md S5), each with no placement model
(a job runs exactly its walltime: no run passes it) and with the cited model (a gang placed
wider than its tightest span runs slower, so past its walltime; the simulator reports the
overrun and predicts it ends at any moment, S15), it replays the trace once per workload
seed and reads each job's first promise from ``--jobs-out`` (``first_promise_s``: the time
of the first reservation it got before its first start). A promise is **kept** when the job
first started at or before it, **slipped** when later (by how much: median, 95th
percentile and largest over the slipped ones), and **open** when the job had not started
when the run stopped. It prints one Markdown row per variant, summed over the seeds.

``--blind`` instead counts the conservative reservations with no finite start in one
cycle over 120 queued jobs (two of them half-cluster jobs) on 64 nodes x 8 GPUs, 20 seeds:
it uses only calls older builds have, so it runs against the build before predicted ends
too (put its ``python/`` first on ``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import csv
import math
import random
import statistics
import sys
import tempfile
from pathlib import Path

from gangplace import Cluster, GangRequest, Scheduler
from gangplace.cli import DEFAULT_CLUSTER, DEFAULT_TRACE
from gangplace.sim.run import simulate
from gangplace.sim.settings import SimSettings

VARIANTS = (
    ("easy", "none"),
    ("easy", "cited"),
    ("conservative", "none"),
    ("conservative", "cited"),
)


def seeds_of(text: str) -> tuple[int, ...]:
    """``0-9`` or ``1,4,7``."""
    if "-" in text:
        low, high = text.split("-", 1)
        return tuple(range(int(low), int(high) + 1))
    return tuple(int(part) for part in text.split(","))


def promises(path: Path) -> dict[str, object]:
    """The promise figures of one ``--jobs-out`` file (every seed of one variant)."""
    with path.open() as handle:
        rows = [row for row in csv.DictReader(handle) if row["first_promise_s"]]
    kept, slips, still_open = 0, [], 0
    for row in rows:
        promised = float(row["first_promise_s"])
        if not row["first_start_s"]:
            still_open += 1
        elif float(row["first_start_s"]) <= promised + 1e-6:
            kept += 1
        else:
            slips.append((float(row["first_start_s"]) - promised) / 3600.0)
    slips.sort()
    return {
        "jobs": sum(1 for _ in rows),
        "kept": kept,
        "slipped": len(slips),
        "open": still_open,
        "median_h": statistics.median(slips) if slips else None,
        "p95_h": slips[min(len(slips) - 1, int(0.95 * len(slips)))] if slips else None,
        "max_h": slips[-1] if slips else None,
    }


def main() -> int:
    """Runs the four variants and prints the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0-9")
    parser.add_argument("--trace", default=DEFAULT_TRACE)
    parser.add_argument("--cluster", default=DEFAULT_CLUSTER)
    parser.add_argument("--blind", action="store_true", help="count blind reservations")
    args = parser.parse_args()
    if args.blind:
        counts = [blind_reservations(seed) for seed in range(20)]
        blind, made = sum(b for b, _ in counts), sum(n for _, n in counts)
        print(f"blind (no finite start): {blind} of {made} reservations, 20 seeds")
        return 0
    seeds = seeds_of(args.seeds)
    scratch = Path(tempfile.mkdtemp(prefix="promises-"))
    print(
        "| backfill | placement model | jobs promised | kept | slipped | open at the end "
        "| slip median / p95 / max (h) | promised jobs' mean first wait (h) |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | --- | ---: |")
    for backfill, model in VARIANTS:
        print(f"promises: {backfill}, model {model}, seeds {args.seeds}", file=sys.stderr)
        rows_file = scratch / f"{backfill}-{model}.csv"
        simulate(
            args.trace, cluster=args.cluster, policies=("best-fit",), seeds=seeds,
            settings=SimSettings(backfill=backfill, placement_model=model),
            jobs_out=rows_file, progress=sys.stderr.isatty(),
        )  # fmt: skip
        figures = promises(rows_file)
        waits = _promised_waits(rows_file)
        slip = "-"
        if figures["slipped"]:
            slip = f"{figures['median_h']:.2f} / {figures['p95_h']:.2f} / {figures['max_h']:.2f}"
        print(
            f"| {backfill} | {model} | {figures['jobs']} | {figures['kept']} | "
            f"{figures['slipped']} | {figures['open']} | {slip} | {waits:.2f} |"
        )
        rows_file.unlink()
    return 0


def blind_reservations(seed: int) -> tuple[int, int]:
    """One conservative cycle over 120 queued jobs (two of half the cluster) on 64 x 8 GPUs.

    Returns how many of its reservations have no finite start, and how many it made.
    """
    rng = random.Random(seed)
    cluster = Cluster(("rack",), clock=lambda: 0.0)
    for node in range(64):
        cluster.add_node(f"n{node}", gpus=8, topology={"rack": f"r{node // 8}"})
    scheduler = Scheduler(cluster, backfill="conservative", clock=lambda: 0.0)
    for index in range(120):
        if index in (30, 31):
            request = GangRequest(32, 8)
        else:
            pods = rng.choice([1, 1, 2, 4, 8])
            request = GangRequest(pods, rng.choice([1, 2, 4, 8]) if pods == 1 else 8)
        scheduler.submit(f"j{index}", request, walltime=rng.uniform(600, 36000))
    scheduler.cycle()
    shadows = [job.shadow for job in scheduler.pending() if job.shadow is not None]
    return sum(1 for shadow in shadows if math.isinf(shadow.time)), len(shadows)


def _promised_waits(path: Path) -> float:
    """The mean first wait (censored at the run's end) of the jobs that got a promise."""
    with path.open() as handle:
        waits = [
            float(row["first_wait_s"]) / 3600.0
            for row in csv.DictReader(handle)
            if row["first_promise_s"]
        ]
    return statistics.fmean(waits) if waits else 0.0


if __name__ == "__main__":
    sys.exit(main())
