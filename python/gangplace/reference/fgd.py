"""The FGD experiment, node by node (the readable oracle of :mod:`gangplace.sim.fgd`).

No groups of equal nodes, no memo: every node is checked and scored for every pod, the
fragmentation is recomputed from its definition each time, and a tie goes to the node first
in the run's order. The differential test runs both on random small clusters and pod lists
and asserts the same node, the same GPUs and the same curve for every pod (the Random
policy, whose draws differ by construction, is checked by its invariants only).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np

from gangplace.sim.fgd.data import MILLI, FgdNode, FgdPod, PodShape, arrivals, typical_pods
from gangplace.sim.fgd.model import NodeState, affinity_tag, fits
from gangplace.sim.fgd.policies import policy_named
from gangplace.sim.fgd.room import RoomPolicy, room_of, weights_of

__all__ = ["fragmentation", "replay"]


def fragmentation(node: NodeState, typical: Sequence[tuple[PodShape, float]]) -> float:
    """The node's expected fragmentation, from the paper's definition.

    For each typical pod: if the node can run it (GPU model, CPU left, enough GPUs with its
    thousandths left), the thousandths left on GPUs too small for it, else every thousandth
    left; weighted by the typical pods' frequencies.
    """
    left = sum(node.frees)
    total = 0.0
    for shape, frequency in typical:
        if shape.gpus == 0:
            total += frequency * left  # a CPU-only pod leaves every GPU idle
            continue
        model_ok = not shape.models or node.model in shape.models
        big_enough = [free for free in node.frees if free >= shape.gpu_milli]
        if model_ok and node.cpu >= shape.cpu_milli and len(big_enough) >= shape.gpus:
            total += frequency * sum(free for free in node.frees if free < shape.gpu_milli)
        else:
            total += frequency * left
    return total


def replay(
    nodes: Sequence[FgdNode], pods: Sequence[FgdPod], policy: str, seed: int, ratio: float = 1.3
) -> tuple[list[tuple[int, tuple[int, ...]] | None], list[NodeState]]:
    """Each arrival's node and GPUs (``None``: it fit nowhere), and the nodes at the end."""
    queue = arrivals(pods, nodes, ratio, seed)
    rng = random.Random(seed * 1_000_003 + 7)
    order = list(range(len(nodes)))
    rng.shuffle(order)
    rank = {index: position for position, index in enumerate(order)}
    typical = typical_pods(pods)
    chosen = policy_named(policy, typical)
    states = [
        NodeState(node.cpu_milli, node.memory_mib, [MILLI] * node.gpus, node.model)
        for node in nodes
    ]
    decisions: list[tuple[int, tuple[int, ...]] | None] = []
    for pod in queue:
        if isinstance(chosen, RoomPolicy):  # its weights from the whole cluster, anew
            chosen.room = np.array(
                [
                    sum(room_of(shape, s.model, s.cpu, s.frees) for s in states)
                    for shape, _ in typical
                ],
                dtype=np.int64,
            )
            chosen.weights = weights_of(chosen.frequencies, chosen.room)
        best: tuple[object, int] | None = None
        for index, state in enumerate(states):
            key = state.key(chosen.uses_affinity)
            if not fits(key, pod.shape, pod.memory_mib):
                continue
            score = chosen.score(key, pod)
            if best is None or _better(score, rank[index], best[0], rank[best[1]]):
                best = (score, index)
        if best is None:
            decisions.append(None)
            continue
        index = best[1]
        state = states[index]
        gpus = chosen.gpus(state, pod, rng)
        state.cpu -= pod.shape.cpu_milli
        state.memory -= pod.memory_mib
        for gpu in gpus:
            state.frees[gpu] -= pod.shape.gpu_milli
        tag = affinity_tag(pod.shape)
        if tag is not None:
            state.affinity[tag] = state.affinity.get(tag, 0) + 1
        decisions.append((index, tuple(gpus)))
    return decisions, states


def _better(score: object, rank: int, best_score: object, best_rank: int) -> bool:
    """A higher score, or the same score on a node earlier in the run's order."""
    if score == best_score:
        return rank < best_rank
    return bool(score > best_score)  # type: ignore[operator]
