"""Interleaved timing of plain, grouped and ``numa="single"`` placements (docs/performance.md).

pytest-benchmark runs one case after another; on a noisy machine the medians of the same
build move by more than the effects measured here. This script times the three variants of
each gang in turn inside each of 15 loops of 2,000 ``place_gang`` calls, and prints the
fastest loop's time per call and the median over loops of each loop's ratio to the plain
variant, on the clusters of ``bench_numa.py`` (release build: ``source scripts/setup.sh``
first)::

    python benches/compare_numa.py

Then the first search after a change, as a scheduler meets it (a reservation or a commit
between two searches forgets what the search remembers of the changed domains): before every
call a one-GPU ``adopt`` and its ``release``; each loop times that mutation alone and with the
call on both clusters, and the median over loops of the calls' ratio is printed.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benches.bench_numa import GANGS, build
from gangplace import Cluster, GangRequest, PodPlacement


def time_call(cluster: Cluster, request: GangRequest, calls: int) -> float:
    """Mean time of one ``place_gang`` call over ``calls`` calls, in microseconds."""
    start = time.perf_counter()
    for _ in range(calls):
        cluster.place_gang(request)
    return (time.perf_counter() - start) / calls * 1e6


def time_after_change(
    cluster: Cluster, request: GangRequest | None, pods: list[PodPlacement], calls: int
) -> float:
    """Mean time of a one-GPU ``adopt`` and ``release``, then ``place_gang`` (unless
    ``request`` is ``None``), over ``calls`` calls, in microseconds."""
    start = time.perf_counter()
    for _ in range(calls):
        cluster.release(cluster.adopt(pods))
        if request is not None:
            cluster.place_gang(request)
    return (time.perf_counter() - start) / calls * 1e6


def after_change(plain: Cluster, grouped: Cluster, loops: int, calls: int) -> None:
    """Prints the first search after a change, plain against ``numa="single"``."""
    # The clusters' busy GPUs are the same seeded draw: a GPU free on one is free on both.
    pods = [PodPlacement("r0-n0", [plain.node("r0-n0").free[0]])]
    for label, (count, gpus) in GANGS.items():
        ratios, plain_times, single_times = [], [], []
        for _ in range(loops):
            mutation = time_after_change(plain, None, pods, calls)
            base = time_after_change(plain, GangRequest(count, gpus), pods, calls) - mutation
            mutation = time_after_change(grouped, None, pods, calls)
            request = GangRequest(count, gpus, numa="single")
            single = time_after_change(grouped, request, pods, calls) - mutation
            ratios.append(single / base)
            plain_times.append(base)
            single_times.append(single)
        print(
            f"{label} after a change: plain {statistics.median(plain_times):.2f} us, "
            f'numa="single" {statistics.median(single_times):.2f} '
            f"({statistics.median(ratios):.2f}x)"
        )


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
    after_change(plain, grouped, loops, calls)


if __name__ == "__main__":
    main()
