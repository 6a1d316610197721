"""One run of the FGD experiment, and the published figures it is compared with.

A run places the arrivals of one seed one by one (a pod that fits nowhere is skipped for
good: the experiment only adds pods), each on the best-scoring node (ties: the first in a
seeded random order of the nodes; Random: uniformly among the nodes that fit), and records
the cluster's GPU allocation at each percent of the cluster's GPUs asked so far.
"""

from __future__ import annotations

import csv
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gangplace.sim.errors import TraceError
from gangplace.sim.fgd.data import FgdNode, FgdPod, arrivals, typical_pods
from gangplace.sim.fgd.model import FgdCluster, NodeState, StateKey, fits
from gangplace.sim.fgd.policies import policy_named

__all__ = ["PUBLISHED_NAMES", "FgdRun", "published", "run_fgd"]

# This module's policy names -> the paper's run names (``sc_policy`` in its results).
PUBLISHED_NAMES = {
    "random": "01-Random",
    "dotprod": "02-DotProd",
    "clustering": "03-GpuClustering",
    "packing": "04-GpuPacking",
    "bestfit": "05-BestFit",
    "fgd": "06-FGD",
}  # gangplace's own has no published run


@dataclass(frozen=True)
class FgdRun:
    """One policy on one seed's arrivals.

    Attributes:
        policy: The policy's name.
        seed: The seed of the arrivals and of the tie-breaks.
        allocation: GPU allocation in percent of the cluster's GPUs at each percent of the
            cluster's GPUs asked by the arrivals so far (index = that percent): right after
            the first arrival that takes the GPUs asked to that percent.
        placed: Pods placed.
        failed: Pods that fit nowhere when they arrived (never retried).
        arrived_percent: GPUs asked by all the arrivals, in percent of the cluster's.
        final: The allocation after every arrival.

    """

    policy: str
    seed: int
    allocation: tuple[float, ...]
    placed: int
    failed: int
    arrived_percent: float
    final: float

    def at(self, percent: int) -> float:
        """The allocation once ``percent`` of the GPUs arrived.

        Past the last arrival's percent: the allocation after every arrival (the table's
        figure at 130%: the arrivals stop short of 130%).
        """
        return self.allocation[percent] if percent < len(self.allocation) else self.final


def run_fgd(
    nodes: Sequence[FgdNode],
    pods: Sequence[FgdPod],
    policy: str,
    seed: int,
    *,
    ratio: float = 1.3,
    progress: Callable[[int, int], None] | None = None,
    decisions: list[tuple[int, tuple[int, ...]] | None] | None = None,
) -> FgdRun:
    """Runs ``policy`` on the arrivals of ``seed`` (tuned to ``ratio`` of the GPUs).

    ``decisions``, when given, receives each arrival's node index and GPUs (``None``: the
    pod fit nowhere), for the differential test against :mod:`gangplace.reference.fgd`.

    Raises:
        KeyError: An unknown policy.

    """
    chosen = policy_named(policy, typical_pods(pods))
    queue = arrivals(pods, nodes, ratio, seed)
    rng = random.Random(seed * 1_000_003 + 7)
    order = list(range(len(nodes)))
    rng.shuffle(order)
    cluster = FgdCluster(nodes, order, with_affinity=chosen.uses_affinity)
    chosen.attach(cluster.nodes)
    curve, arrived, placed, failed = [0.0], 0, 0, 0
    for count, pod in enumerate(queue):
        arrived += pod.shape.total_milli
        best: list[StateKey] = []
        top: Any = None
        for key in cluster.groups:
            if not fits(key, pod.shape, pod.memory_mib):
                continue
            score = chosen.score(key, pod)
            if top is None or score > top:
                top, best = score, [key]
            elif score == top:
                best.append(key)
        if best:
            index = cluster.pick(best, rng) if chosen.random_ties else cluster.first(best)
            state = cluster.nodes[index]
            before = NodeState(state.cpu, state.memory, list(state.frees), state.model)
            gpus = chosen.gpus(state, pod, rng)
            cluster.place(index, pod, gpus)
            chosen.moved(before, state)
            placed += 1
            if decisions is not None:
                decisions.append((index, tuple(gpus)))
        else:
            failed += 1
            if decisions is not None:
                decisions.append(None)
        while len(curve) <= 100 * arrived // cluster.total_milli:
            curve.append(cluster.allocation())  # the first arrival reaching that percent
        if progress is not None and count % 1000 == 0:
            progress(count, len(queue))
    arrived_percent = 100.0 * arrived / cluster.total_milli
    return FgdRun(policy, seed, tuple(curve), placed, failed, arrived_percent, cluster.allocation())


def published(
    path: str | Path, workload: str, policy: str, percent: int = 130
) -> tuple[float, float, float, int] | None:
    """The paper's figure: mean, min and max over its seeds of the allocation at ``percent``.

    ``workload`` is a pod list's stem (``openb_pod_list_default``); ``None`` when the file
    has no run of that pair. Raises :class:`TraceError` for an unreadable file.
    """
    wanted = PUBLISHED_NAMES.get(policy)
    try:
        with Path(path).open(newline="") as handle:
            rows = [
                float(row[str(percent)])
                for row in csv.DictReader(handle)
                if row.get("workload") == workload and row.get("sc_policy") == wanted
            ]
    except (OSError, KeyError, ValueError) as error:
        raise TraceError(f"{path}: cannot read the published results ({error})") from None
    if not rows:
        return None
    return statistics.fmean(rows), min(rows), max(rows), len(rows)
