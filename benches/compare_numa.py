"""Interleaved timing of plain, grouped and ``numa="single"`` placements (docs/performance.md).

pytest-benchmark runs one case after another; on a noisy machine the medians of the same
build move by more than the effects measured here. This script times the three variants of
each gang in turn inside each of 15 loops of 2,000 ``place_gang`` calls, and prints the
fastest loop's time per call and the median over loops of each loop's ratio to the plain
variant, on the clusters of ``bench_numa.py`` (release build: ``source scripts/setup.sh``
first)::

    python benches/compare_numa.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benches.bench_numa import GANGS, build
from gangplace import Cluster, GangRequest


def time_call(cluster: Cluster, request: GangRequest, calls: int) -> float:
    """Mean time of one ``place_gang`` call over ``calls`` calls, in microseconds."""
    start = time.perf_counter()
    for _ in range(calls):
        cluster.place_gang(request)
    return (time.perf_counter() - start) / calls * 1e6


def main(loops: int = 15, calls: int = 2000) -> None:
    plain, grouped = build(False), build(True)
    for label, (pods, gpus) in GANGS.items():
        variants = (
            (plain, GangRequest(pods, gpus)),
            (grouped, GangRequest(pods, gpus)),
            (grouped, GangRequest(pods, gpus, numa="single")),
        )
        times: list[list[float]] = [[], [], []]
        for _ in range(loops):
            for slot, (cluster, request) in enumerate(variants):
                times[slot].append(time_call(cluster, request, calls))
        base, groups, single = (min(slot) for slot in times)
        # The ratio of each loop's pair, whose calls ran close together in time: a slow phase
        # of the machine moves both.
        ratio_groups = statistics.median(g / p for p, g in zip(times[0], times[1], strict=True))
        ratio_single = statistics.median(s / p for p, s in zip(times[0], times[2], strict=True))
        print(
            f"{label}: plain {base:.2f} us, grouped {groups:.2f} ({ratio_groups:.2f}x), "
            f'numa="single" {single:.2f} ({ratio_single:.2f}x)'
        )


if __name__ == "__main__":
    main()
