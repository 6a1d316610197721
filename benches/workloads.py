"""Seeded benchmark workloads for the simulator (GUESSED durations, real GPU counts).

GPU counts are resampled from the bundled Philly sample (real); durations are drawn from the
Philly log-normal (median 874 s, mean 18,006 s) capped at Philly's maximum, as the Philly
reader draws them: synthetic. Arrivals are Poisson at the rate that offers ``load`` times the
cluster's GPUs in work, from the drawn jobs' own mean work.
"""

from __future__ import annotations

import math
import random
from importlib import resources
from pathlib import Path

from gangplace.sim.traces import PHILLY_MAX_S, PHILLY_MEAN_S, PHILLY_MEDIAN_S

__all__ = ["write_workload"]


def _philly_gpu_counts() -> list[int]:
    text = (resources.files("gangplace") / "data" / "philly-6c71a0-first400.trace").read_text()
    return [int(line.split("\t")[6]) for line in text.splitlines() if line.strip()]


def write_workload(path: Path, jobs: int, gpus: int, load: float, seed: int = 1) -> Path:
    """Writes a CSV trace (``arrival_s,duration_s,gpus``) of ``jobs`` jobs offering ``load``."""
    rng = random.Random(seed)
    counts = [min(count, gpus) for count in _philly_gpu_counts()]
    mu = math.log(PHILLY_MEDIAN_S)
    sigma = math.sqrt(2 * math.log(PHILLY_MEAN_S / PHILLY_MEDIAN_S))
    drawn = [
        (min(rng.lognormvariate(mu, sigma), PHILLY_MAX_S), rng.choice(counts)) for _ in range(jobs)
    ]
    mean_work = sum(duration * count for duration, count in drawn) / jobs
    rate = load * gpus / mean_work
    now = 0.0
    lines = ["arrival_s,duration_s,gpus"]
    for duration, count in drawn:
        now += rng.expovariate(rate)
        lines.append(f"{now:.1f},{duration:.1f},{count}")
    path.write_text("\n".join(lines) + "\n")
    return path
