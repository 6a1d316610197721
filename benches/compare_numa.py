"""Interleaved timing of plain, grouped and ``numa="single"`` placements (docs/performance.md).

pytest-benchmark runs one case after another; on a noisy machine the medians of the same
build move by more than the effects measured here. This script times the three variants of
each gang in turn, best of 7 loops of 5,000 ``place_gang`` calls each, on the clusters of
``bench_numa.py`` (release build: ``source scripts/setup.sh`` first)::

    python benches/compare_numa.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benches.bench_numa import GANGS, build
from gangplace import Cluster, GangRequest


def best_of(cluster: Cluster, request: GangRequest, loops: int = 7, calls: int = 5000) -> float:
    """The fastest loop's mean time per call, in microseconds."""
    best = float("inf")
    for _ in range(loops):
        start = time.perf_counter()
        for _ in range(calls):
            cluster.place_gang(request)
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
    return best


def main() -> None:
    plain, grouped = build(False), build(True)
    for label, (pods, gpus) in GANGS.items():
        base = best_of(plain, GangRequest(pods, gpus))
        groups = best_of(grouped, GangRequest(pods, gpus))
        single = best_of(grouped, GangRequest(pods, gpus, numa="single"))
        print(
            f"{label}: plain {base:.2f} us, grouped {groups:.2f} ({groups / base:.2f}x), "
            f'numa="single" {single:.2f} ({single / base:.2f}x)'
        )


if __name__ == "__main__":
    main()
