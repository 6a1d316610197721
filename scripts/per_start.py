"""The Scheduler's cost per queued job (issue 51), runnable against any build of gangplace.

Usage: ``python scripts/per_start.py [--repeats 5] [--json]``. It uses only calls that
every release since a4ae26b has (``Cluster.add_node``, ``synth.fill``, ``Scheduler(clock=)``,
``submit``, ``cycle``), so that an older build can run it: put that build's ``python/``
first on ``PYTHONPATH`` (docs/performance.md, "The Scheduler's cost per queued job").

Each case: a tree of nodes x 8 GPUs (192 nodes: 4 spines x 3 racks x 16 nodes; 2,048 nodes:
8 x 16 x 16), filled to 60% by ``synth.fill`` (seed 1), then 500 jobs of one shape queued
(walltime 3,600 s) and released into one EASY cycle, timed. The cost per queued job is that
cycle's time over 500; each repeat builds the state anew; the median and the range over the
repeats are printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

from gangplace import Cluster, GangRequest, Scheduler, synth

TREES = {192: (4, 3, 16), 2048: (8, 16, 16)}
CASES = [(192, 1, 1), (192, 1, 8), (192, 4, 8), (192, 16, 8), (2048, 1, 1), (2048, 16, 8)]
JOBS = 500


def _cluster(nodes: int) -> Cluster:
    spines, racks, per_rack = TREES[nodes]
    cluster = Cluster(("spine", "rack"))
    for spine in range(spines):
        for rack in range(racks):
            for node in range(per_rack):
                cluster.add_node(
                    f"s{spine}-r{rack}-n{node}",
                    gpus=8,
                    topology={"spine": f"s{spine}", "rack": f"s{spine}-r{rack}"},
                )
    synth.fill(cluster, 0.6, seed=1, gpus_per_node=8)
    return cluster


def measure(nodes: int, pods: int, gpus: int, **options: Any) -> tuple[float, int]:
    """One cycle over 500 queued jobs of one shape: (µs per queued job, jobs started)."""
    scheduler = Scheduler(_cluster(nodes), clock=lambda: 0.0, **options)
    for index in range(JOBS):
        scheduler.submit(f"job{index:04d}", GangRequest(pods, gpus), walltime=3600.0)
    began = time.perf_counter()
    decisions = scheduler.cycle(0.0)
    seconds = time.perf_counter() - began
    return seconds / JOBS * 1e6, len(decisions.started)


def main() -> int:
    """Runs every case ``--repeats`` times and prints the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="one JSON object per case")
    args = parser.parse_args()
    for nodes, pods, gpus in CASES:
        runs = [measure(nodes, pods, gpus) for _ in range(args.repeats)]
        costs = [cost for cost, _ in runs]
        row = {
            "nodes": nodes,
            "shape": f"{pods}x{gpus}",
            "median_us": round(statistics.median(costs), 2),
            "min_us": round(min(costs), 2),
            "max_us": round(max(costs), 2),
            "started": runs[0][1],
        }
        if args.json:
            print(json.dumps(row), flush=True)
        else:
            print(
                f"{nodes:5d} nodes {pods}x{gpus:<2d} {row['median_us']:8.2f} µs/job "
                f"[{row['min_us']:.2f}, {row['max_us']:.2f}], {row['started']} started",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
