"""Memory of a Scheduler: per pending job, and over a simulated day (issue 50, item 5).

Run as a script, one measurement per process so that the numbers are not blurred by
earlier work (docs/performance.md, "Memory"):

    .venv/bin/python benches/memory_scheduler.py pending [--jobs 100000]
    .venv/bin/python benches/memory_scheduler.py day [--hours 24] [--history-limit N]

``pending``: a Scheduler on a 64-node cluster (8 GPUs each, every node busy, so nothing
starts), ``--jobs`` jobs submitted (shapes 1x1 to 8x8 in turn, walltimes 1 to 10 hours),
then one cycle and one ``pending()`` (which makes every job's reason); prints the bytes per
pending job after the submits and after the cycle, as resident-set growth
(``/proc/self/status`` VmRSS, one scheduler) and as Python's allocations (tracemalloc, a
second scheduler).

``day``: a simulated day of submits and finishes on the same cluster, empty at first: jobs
arrive as a Poisson process offering about 90% of the GPUs (shapes 1x1 to 4x8, run times
log-uniform in 1 minute to 1 hour, walltime = run time), a cycle every 60 s, each job
finished at its walltime. Prints Python's allocated bytes at the end of every hour and the
jobs submitted and finished so far (and the resident set, which also holds the engine's
Rust-side memory that tracemalloc does not see). A scheduler that forgets what it should
forget grows only with what it keeps on purpose (the histories of the last
``history_limit`` ended jobs, S14), so after the first hours it stays flat;
``benches/bench_memory.py`` checks that.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import random
import sys
import tracemalloc
from pathlib import Path
from typing import Any

from gangplace import Cluster, GangRequest, Scheduler

SHAPES = ((1, 1), (1, 2), (1, 4), (1, 8), (2, 8), (4, 8), (8, 8))


def resident_bytes() -> int:
    """This process's resident set (VmRSS), bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def _cluster(now: list[float]) -> Cluster:
    cluster = Cluster(("rack",), clock=lambda: now[0])
    for node in range(64):
        cluster.add_node(f"n{node:02d}", gpus=8, topology={"rack": f"r{node // 8}"})
    return cluster


def _filled(jobs: int) -> tuple[Scheduler, list[float]]:
    """A Scheduler on a busy cluster (nothing starts) and its clock, no job yet."""
    now = [0.0]
    cluster = _cluster(now)
    cluster.commit(cluster.reserve(GangRequest(64, 8)))  # every GPU busy: nothing starts
    return Scheduler(cluster, clock=lambda: now[0]), now


def _submit_all(scheduler: Scheduler, jobs: int) -> None:
    for index in range(jobs):
        pods, gpus = SHAPES[index % len(SHAPES)]
        walltime = 3600.0 * (1 + index % 10)
        scheduler.submit(f"job{index:06d}", GangRequest(pods, gpus), walltime=walltime)


def pending(jobs: int) -> dict[str, Any]:
    """Bytes per pending job of a Scheduler holding ``jobs`` that cannot start.

    The resident set is measured on one scheduler without tracemalloc (whose own records
    would count), Python's allocations on a second one with it.
    """
    figures: dict[str, Any] = {"what": "pending", "jobs": jobs}
    for traced in (False, True):
        scheduler, now = _filled(jobs)
        gc.collect()
        resident = resident_bytes()
        if traced:
            tracemalloc.start()
        _submit_all(scheduler, jobs)
        gc.collect()
        kind = "python" if traced else "resident"
        used = tracemalloc.get_traced_memory()[0] if traced else resident_bytes() - resident
        figures[f"{kind}_bytes_per_job_submitted"] = round(used / jobs, 1)
        now[0] = 1.0
        scheduler.cycle()
        assert len(scheduler.pending()) == jobs  # makes every reason once
        gc.collect()
        used = tracemalloc.get_traced_memory()[0] if traced else resident_bytes() - resident
        figures[f"{kind}_bytes_per_job_after_cycle_and_pending"] = round(used / jobs, 1)
        if traced:
            tracemalloc.stop()
        del scheduler
    return figures


def day(hours: int, history_limit: int, seed: int = 1, progress: bool = False) -> dict[str, Any]:
    """Python's allocated bytes at the end of every simulated hour (see the module's text).

    ``progress``: a line on stderr at the end of every simulated day.
    """
    rng = random.Random(seed)
    now = [0.0]
    scheduler = Scheduler(_cluster(now), clock=lambda: now[0], history_limit=history_limit)
    mean_gpus = sum(pods * gpus for pods, gpus in SHAPES[:6]) / 6
    mean_run = (3600 - 60) / math.log(3600 / 60)  # log-uniform in 1 minute to 1 hour
    rate = 0.9 * 512 / (mean_gpus * mean_run)  # arrivals per second offering ~90%
    next_arrival, submitted, finished = 0.0, 0, 0
    ends: list[tuple[float, str]] = []  # (end, job id) of every running job
    hourly: list[dict[str, Any]] = []
    runs: dict[str, float] = {}  # pending job -> its run time (its walltime)
    tracemalloc.start()
    for tick in range(1, hours * 60 + 1):
        now[0] = tick * 60.0
        while next_arrival <= now[0]:
            pods, gpus = SHAPES[rng.randrange(6)]
            run = 60 * math.exp(rng.random() * math.log(3600 / 60))
            job_id = f"job{submitted:07d}"
            scheduler.submit(job_id, GangRequest(pods, gpus), walltime=run)
            runs[job_id] = run
            submitted += 1
            next_arrival += rng.expovariate(rate)
        for _, job_id in [entry for entry in ends if entry[0] <= now[0]]:
            scheduler.finish(job_id)
            finished += 1
        ends = [entry for entry in ends if entry[0] > now[0]]
        decisions = scheduler.cycle(now[0])
        for started in decisions.started:
            ends.append((now[0] + runs.pop(started.job_id), started.job_id))
        if tick % 60 == 0:
            gc.collect()
            allocated = tracemalloc.get_traced_memory()[0]
            hourly.append({"hour": tick // 60, "python_bytes": allocated,
                           "resident_bytes": resident_bytes(),
                           "submitted": submitted, "finished": finished})  # fmt: skip
            if progress and tick % (24 * 60) == 0:
                print(f"day {tick // 1440} of {hours / 24:g}: {finished} jobs finished",
                      file=sys.stderr, flush=True)  # fmt: skip
    tracemalloc.stop()
    return {"what": "day", "history_limit": history_limit, "hours": hourly}


def growth_per_finished_job(hours: list[dict[str, Any]], skip: int = 2) -> float:
    """Least-squares slope of Python's allocated bytes against jobs finished, after ``skip``
    hours of warming up (bytes per finished job)."""
    points = [(float(h["finished"]), float(h["python_bytes"])) for h in hours[skip:]]
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / spread


def main() -> int:
    """Runs one measurement and prints it as one JSON object."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("pending", "day"))
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--hours", type=int, default=24)
    parser.add_argument("--history-limit", type=int, default=100_000)
    args = parser.parse_args()
    if args.what == "pending":
        print(json.dumps(pending(args.jobs)))
    else:
        print(json.dumps(day(args.hours, args.history_limit, progress=args.hours > 24)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
