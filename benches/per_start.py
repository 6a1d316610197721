"""The Scheduler's cost per queued job (issue 51), runnable against any build of gangplace.

Usage, from the checkout's root: ``python -m benches.per_start [--repeats 5] [--json]``. It
uses only calls that every release since a4ae26b has (``Cluster.add_node``, ``synth.fill``,
``Scheduler(clock=)``, ``submit``, ``cycle``), so that an older build can run it: put that
build's ``python/`` first on ``PYTHONPATH`` (docs/performance.md, "The Scheduler's cost per
queued job"). ``benches/bench_scheduler_per_start.py`` times the same cases with
pytest-benchmark.

Each case: a tree of nodes x 8 GPUs (192 nodes: 4 spines x 3 racks x 16 nodes; 2,048 nodes:
8 x 16 x 16), filled to 60% by ``synth.fill`` (seed 1), then 500 jobs of one shape queued
(walltime 3,600 s) and released into one EASY cycle, timed. The cost per queued job is that
cycle's time over 500; each repeat builds the state anew; the median and the range over the
repeats are printed.

``--profile`` (this build only) says where one cycle's time goes: it wraps the cycle's parts
(the engine's calls through a proxy of the cluster, the start's bookkeeping, the EASY shadow
placement) in timers and prints each part's total per cycle over ``--repeats`` cycles, for
the plain scheduler and for one configured as a platform team runs it (two queues in a
cohort, brakes, a history limit, Prometheus metrics). The timers add about half a
microsecond per wrapped call, so the parts are upper bounds.

``--walk-prototype`` (this build only) measures item 4's question for one-GPU jobs: what a
start would cost with the class walk in Rust. It times, on the same fresh states as the
table, one ``Cluster.reserve_many`` call for the class's 500 jobs (the engine's own loop
over one class: it reserves greedily in order, without a Python call per job), a
``commit`` per job, and the records every start must leave for the Python API
(``RunningJobs.started``: the queue, the running records, the history, ``Started``); it
prints each part per started job beside the real cycle's cost.

``--cold`` (any build) times one cycle on the 192-node tree after states that differ in how
much memory was written before it (docs/performance.md, "The gap is cold caches").
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
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
    """The tree of ``nodes`` nodes x 8 GPUs, filled to 60% (seed 1)."""
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


def queued(nodes: int, pods: int, gpus: int, **options: Any) -> Scheduler:
    """A case's state: the filled tree and 500 queued jobs of one shape, before the cycle."""
    scheduler = Scheduler(_cluster(nodes), clock=lambda: 0.0, **options)
    for index in range(JOBS):
        scheduler.submit(f"job{index:04d}", GangRequest(pods, gpus), walltime=3600.0)
    return scheduler


def measure(nodes: int, pods: int, gpus: int, **options: Any) -> tuple[float, int]:
    """One cycle over 500 queued jobs of one shape: (µs per queued job, jobs started)."""
    scheduler = queued(nodes, pods, gpus, **options)
    began = time.perf_counter()
    decisions = scheduler.cycle(0.0)
    seconds = time.perf_counter() - began
    return seconds / JOBS * 1e6, len(decisions.started)


def platform(nodes: int, pods: int, gpus: int) -> Scheduler:
    """A case's state with queues, brakes, histories and metrics on (this build only)."""
    from prometheus_client import CollectorRegistry

    from gangplace import Cohort, Queue

    half = nodes * 8 // 2
    scheduler = Scheduler(
        _cluster(nodes),
        clock=lambda: 0.0,
        queues=[Queue("a", cohort="c", nominal=half), Queue("b", cohort="c", nominal=half)],
        cohorts=[Cohort("c")],
        min_runtime=60.0,
        max_victims_per_cycle=4,
        history_limit=1000,
        metrics=CollectorRegistry(),
    )
    for index in range(JOBS):
        request = GangRequest(pods, gpus)
        scheduler.submit(f"job{index:04d}", request, walltime=3600.0, queue="ab"[index % 2])
    return scheduler


def profile(nodes: int, pods: int, gpus: int, repeats: int) -> None:
    """Prints where one cycle's time goes, plain and configured (see the module's text)."""
    from gangplace.scheduler import cycle, reservations, running

    spent: collections.Counter[str] = collections.Counter()
    calls: collections.Counter[str] = collections.Counter()

    def timed(function: Any, label: str) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter_ns()
            try:
                return function(*args, **kwargs)
            finally:
                spent[label] += time.perf_counter_ns() - began
                calls[label] += 1

        return wrapper

    class Engine:  # the cluster, each call timed
        def __init__(self, cluster: Cluster) -> None:
            self.cluster = cluster

        def __getattr__(self, name: str) -> Any:
            found = getattr(self.cluster, name)
            return timed(found, f"engine {name}") if callable(found) else found

    parts = [
        (cycle, "_try_start", "try a start (engine call and bookkeeping)"),
        (running.RunningJobs, "started", "bookkeeping of a start"),
        (reservations.ShadowBook, "reserve", "EASY shadow placement (all of it)"),
        (reservations, "_groups", "shadow: running jobs grouped by end"),
    ]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in parts]
    for owner, name, label in parts:
        setattr(owner, name, timed(getattr(owner, name), label))
    try:
        for label, make in (("plain", queued), ("queues, brakes, histories, metrics", platform)):
            spent.clear()
            calls.clear()
            total = 0
            for _ in range(repeats):
                scheduler = make(nodes, pods, gpus)
                parts_now = scheduler._parts
                timed_cluster: Any = Engine(parts_now.cluster)  # a stand-in of the Cluster
                scheduler._parts = dataclasses.replace(parts_now, cluster=timed_cluster)
                began = time.perf_counter_ns()
                scheduler.cycle(0.0)
                total += time.perf_counter_ns() - began
            print(f"{nodes} nodes {pods}x{gpus}, {label}: {total / repeats / 1e3:.1f} µs per cycle")
            for part, nanoseconds in spent.most_common():
                each = calls[part] / repeats
                print(f"  {nanoseconds / repeats / 1e3:8.1f} µs  {part} ({each:g} calls)")
    finally:
        for owner, name, function in saved:
            setattr(owner, name, function)


COLD_STATES = [
    ("empty queue", 0, 0, 100, 8, False),
    ("2 queued 100x8 jobs", 2, 0, 100, 8, False),
    ("500 queued 100x8 jobs", 500, 0, 100, 8, False),
    ("5 queued 16x8 jobs", 5, 0, 16, 8, False),
    ("500 queued 16x8 jobs", 500, 0, 16, 8, False),
    ("5 queued 16x8 jobs, 495 submitted to another scheduler", 5, 495, 16, 8, False),
    ("empty queue, 8 MiB written before the cycle", 0, 0, 100, 8, True),
    ("500 queued 16x8 jobs, 8 MiB written before the cycle", 500, 0, 16, 8, True),
]


def cold(repeats: int) -> None:
    """Prints one cycle's time on 192 nodes after each of ``COLD_STATES`` (gc off).

    Each repeat builds the state anew; ``other`` jobs go to a second scheduler on its own
    cluster (the memory their submission writes, without them in this queue); ``flush``
    writes 8 MiB just before the cycle (caches emptied).
    """
    import gc

    junk = bytearray(8 * 1024 * 1024)
    gc.disable()
    try:
        for label, jobs, other, pods, gpus, flush in COLD_STATES:
            costs = []
            for _ in range(repeats):
                scheduler = Scheduler(_cluster(192), clock=lambda: 0.0)
                elsewhere = Scheduler(_cluster(192), clock=lambda: 0.0) if other else None
                for index in range(max(jobs, other)):
                    request = GangRequest(pods, gpus)
                    if index < jobs:
                        scheduler.submit(f"job{index:04d}", request, walltime=3600.0)
                    if elsewhere is not None and index < other:
                        elsewhere.submit(f"job{index:04d}", request, walltime=3600.0)
                if flush:
                    for offset in range(0, len(junk), 64):
                        junk[offset] = (junk[offset] + 1) & 255
                began = time.perf_counter_ns()
                scheduler.cycle(0.0)
                costs.append((time.perf_counter_ns() - began) / 1e3)
            print(f"{statistics.median(costs):8.1f} µs per cycle  {label}", flush=True)
    finally:
        gc.enable()


def walk_prototype(nodes: int, repeats: int) -> dict[str, float]:
    """Item 4: µs per started 1x1 job of the parts a Rust class walk would leave.

    (see the module's text; this build only)
    """
    parts: dict[str, list[float]] = {"cycle": [], "reserve_many": [], "commit": [], "records": []}
    for _ in range(repeats):
        parts["cycle"].append(measure(nodes, 1, 1)[0])
        scheduler = queued(nodes, 1, 1)
        cluster, running = scheduler.cluster, scheduler._running
        jobs = scheduler._queue.in_order()
        requests = [running.waiting.queue.by_id[job.job_id].current() for job in jobs]
        began = time.perf_counter_ns()
        held = cluster.reserve_many(requests, ttl=60.0)
        reserved = time.perf_counter_ns()
        allocations = [cluster.commit(hold) for hold in held if hold is not None]
        committed = time.perf_counter_ns()
        for job, allocation in zip(jobs, allocations, strict=True):
            running.started(job, allocation, 0.0, False)
        recorded = time.perf_counter_ns()
        count = len(allocations)
        assert count == JOBS
        parts["reserve_many"].append((reserved - began) / 1e3 / count)
        parts["commit"].append((committed - reserved) / 1e3 / count)
        parts["records"].append((recorded - committed) / 1e3 / count)
    return {name: round(statistics.median(values), 2) for name, values in parts.items()}


def main() -> int:
    """Runs every case ``--repeats`` times and prints the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="one JSON object per case")
    parser.add_argument("--profile", action="store_true", help="where a cycle's time goes")
    parser.add_argument("--cold", action="store_true", help="one cycle after cold states")
    parser.add_argument("--walk-prototype", action="store_true", help="item 4's prototype")
    args = parser.parse_args()
    if args.walk_prototype:
        for nodes in TREES:
            print(json.dumps({"nodes": nodes, **walk_prototype(nodes, args.repeats)}), flush=True)
        return 0
    if args.cold:
        cold(args.repeats)
        return 0
    if args.profile:
        for nodes, pods, gpus in CASES:
            profile(nodes, pods, gpus, args.repeats)
        return 0
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
