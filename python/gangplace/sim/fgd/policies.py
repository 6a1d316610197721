"""The FGD paper's six placement policies, restated, and gangplace's own.

Each scores a node state (an integer, higher is better, as a Kubernetes score plugin does)
and picks the GPUs a pod takes on the chosen node. Scores are integers on purpose: the
paper's simulator truncates every score to an integer in 0..100, and the ties that makes are
broken at random, which is part of what each policy measures.

- ``random``: every node that fits scores the same; a shared pod takes a random GPU that
  fits.
- ``dotprod``: Tetris' alignment, ``100 * (1 - (cpu_left * cpu + gpu_left * gpu) / 2)`` with
  CPU over 128 cores and GPU thousandths over 8 GPUs; best-fit GPU.
- ``clustering``: nodes already running pods of the same GPU shape first (only that shape:
  75-100, among others: 50-75), then idle nodes (25-50), then the rest (0-25), each band by
  ``25 * (8000 - gpu_left) // 8000``; best-fit GPU.
- ``packing``: a shared GPU that fits first (100 minus a tenth of its free percent, at least
  50), then a used node's free GPUs (50 minus those used, at least 33), then an idle node (33
  minus its GPUs); best-fit GPU.
- ``bestfit``: the least CPU and GPU left after the pod, half each, over 128 cores and 8
  GPUs; best-fit GPU.
- ``fgd``: fragmentation gradient descent: the node (and, for a shared pod, the GPU) whose
  expected fragmentation for the workload's typical pods drops most, scored
  ``int(100 * sigmoid(drop / 1000))``.
- ``gangplace``: FGD with each typical shape weighted by how many pods of it the cluster can
  still take (:mod:`gangplace.sim.fgd.room`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

from gangplace.sim.fgd.data import MILLI, FgdPod, PodShape
from gangplace.sim.fgd.model import NodeState, StateKey, affinity_tag

__all__ = [
    "FGD_ALL",
    "FGD_POLICIES",
    "FgdPolicy",
    "Fragmentation",
    "policy_named",
    "shape_fragments",
]

MAX_CPU = 128_000  # the normalisation of CPU: 128 cores
MAX_GPU = 8 * MILLI  # and of GPU: 8 GPUs
FGD_POLICIES = ("random", "dotprod", "clustering", "packing", "bestfit", "fgd")
FGD_ALL = (*FGD_POLICIES, "gangplace")  # and gangplace's own (gangplace.sim.fgd.room)


def best_fit_gpu(frees: Sequence[int], milli: int) -> int:
    """The GPU with the fewest thousandths left that still holds ``milli`` (first on ties)."""
    best = -1
    for gpu, free in enumerate(frees):
        if free >= milli and (best < 0 or free < frees[best]):
            best = gpu
    return best


def whole_gpus(frees: Sequence[int], count: int) -> list[int]:
    """The first ``count`` entirely free GPUs in device order."""
    return [gpu for gpu, free in enumerate(frees) if free == MILLI][:count]


class FgdPolicy:
    """A policy: ``score`` of a node state that fits the pod, and the GPUs it takes there."""

    name = ""
    uses_affinity = False
    random_ties = False  # True: a uniform draw among the best nodes, not the first in order

    def score(self, key: StateKey, pod: FgdPod) -> int:
        """The node state's score for ``pod`` (it fits)."""
        raise NotImplementedError

    def attach(self, nodes: Sequence[NodeState]) -> None:
        """The run's nodes at the start (a policy that reads the whole cluster keeps them)."""

    def moved(self, before: NodeState, after: NodeState) -> None:
        """A placement changed one node from ``before`` (a copy) to ``after``."""

    def gpus(self, state: NodeState, pod: FgdPod, rng: random.Random) -> list[int]:
        """The GPUs ``pod`` takes on the chosen node (best fit for a shared pod)."""
        shape = pod.shape
        if not shape.gpus:
            return []
        if shape.shared:
            return [best_fit_gpu(state.frees, shape.gpu_milli)]
        return whole_gpus(state.frees, shape.gpus)


class RandomPolicy(FgdPolicy):
    name = "random"
    random_ties = True

    def score(self, key: StateKey, pod: FgdPod) -> int:
        return 0

    def gpus(self, state: NodeState, pod: FgdPod, rng: random.Random) -> list[int]:
        shape = pod.shape
        if shape.shared:
            fitting = [gpu for gpu, free in enumerate(state.frees) if free >= shape.gpu_milli]
            return [rng.choice(fitting)]
        return super().gpus(state, pod, rng)


class DotProductPolicy(FgdPolicy):
    name = "dotprod"

    def score(self, key: StateKey, pod: FgdPod) -> int:
        _, cpu, _, frees, _ = key
        shape = pod.shape
        dot = (cpu / MAX_CPU) * (shape.cpu_milli / MAX_CPU) + (sum(frees) / MAX_GPU) * (
            shape.total_milli / MAX_GPU
        )
        return int(100 * (1 - dot / 2))


class ClusteringPolicy(FgdPolicy):
    name = "clustering"
    uses_affinity = True

    def score(self, key: StateKey, pod: FgdPod) -> int:
        _, _, _, frees, tags = key
        tag = affinity_tag(pod.shape)
        if tag is None:
            return 0
        band = 25 * (MAX_GPU - sum(frees)) // MAX_GPU
        if tag in tags:
            return band + (75 if len(tags) == 1 else 50)
        return band + (25 if not tags else 0)


class PackingPolicy(FgdPolicy):
    name = "packing"

    def score(self, key: StateKey, pod: FgdPod) -> int:
        _, _, _, frees, _ = key
        shape = pod.shape
        if not shape.gpus:
            return 0
        idle = sum(1 for free in frees if free == MILLI)
        if idle == len(frees):
            return max(33 - idle, idle)
        wanted, whole, used = shape.gpus, 0, []
        for free in frees:  # ascending: the least left first
            if wanted and free >= shape.gpu_milli:
                wanted -= 1
                used.append(free)
                whole += free == MILLI
        if whole:
            return max(50 - whole, 33)
        return max(100 - sum(free * 100 // MILLI for free in used) // 10, 50)


class BestFitPolicy(FgdPolicy):
    name = "bestfit"

    def score(self, key: StateKey, pod: FgdPod) -> int:
        _, cpu, _, frees, _ = key
        shape = pod.shape
        left = (cpu - shape.cpu_milli) / MAX_CPU * 0.5 + (
            sum(frees) - shape.total_milli
        ) / MAX_GPU * 0.5
        return int((1.0 - left) * 100)


def shape_fragments(shape: PodShape, model: str, cpu: int, frees: Sequence[int]) -> int:
    """The GPU thousandths a node leaves unusable to one typical pod shape (FGD's measure).

    If the node can run the pod (its GPU model, its CPU, enough GPUs holding its thousandths),
    the thousandths left on GPUs too small for it; otherwise (a CPU-only pod counts as such:
    its GPUs stay idle) every thousandth left.
    """
    runs = shape.gpu_milli and (not shape.models or model in shape.models)
    runs = runs and cpu >= shape.cpu_milli
    if runs and sum(1 for free in frees if free >= shape.gpu_milli) >= shape.gpus:
        return sum(free for free in frees if free < shape.gpu_milli)
    return sum(frees)


class Fragmentation:
    """The expected fragmentation of a node (memoized by node state).

    :func:`shape_fragments` of every typical pod shape, weighted by its frequency.
    """

    def __init__(self, typical: Sequence[tuple[PodShape, float]]) -> None:
        self.typical = list(typical)
        self._memo: dict[tuple[str, int, tuple[int, ...]], float] = {}

    def __call__(self, model: str, cpu: int, frees: tuple[int, ...]) -> float:
        """The fragmentation of a node of ``model`` with ``cpu`` and GPUs ``frees`` left."""
        key = (model, cpu, frees)
        known = self._memo.get(key)
        if known is None:
            known = self._memo[key] = sum(
                freq * shape_fragments(shape, model, cpu, frees) for shape, freq in self.typical
            )
        return known


def _after(frees: tuple[int, ...], shape: PodShape) -> tuple[int, ...]:
    """The GPUs left after a whole-GPU pod, packed on the smallest GPUs that hold it."""
    left, wanted = list(frees), shape.gpus
    for index, free in enumerate(left):  # ascending
        if wanted and free >= shape.gpu_milli:
            left[index] = free - shape.gpu_milli
            wanted -= 1
    return tuple(sorted(left))


def _replaced(frees: tuple[int, ...], old: int, new: int) -> tuple[int, ...]:
    left = list(frees)
    left[left.index(old)] = new
    return tuple(sorted(left))


def _sigmoid_score(drop: float) -> int:
    return int(100.0 / (1.0 + math.exp(-drop / 1000.0)))


class FgdScorePolicy(FgdPolicy):
    name = "fgd"

    def __init__(self, fragmentation: Callable[[str, int, tuple[int, ...]], float]) -> None:
        """``fragmentation(model, cpu left, GPU thousandths left sorted)``: FGD's measure."""
        self.frag = fragmentation

    def _shared_scores(self, key: StateKey, shape: PodShape) -> dict[int, int]:
        """For each distinct thousandths-left value that holds the pod, its score there."""
        model, cpu, _, frees, _ = key
        before = self.frag(model, cpu, frees)
        scores = {}
        for free in set(frees):
            if free >= shape.gpu_milli:
                after = _replaced(frees, free, free - shape.gpu_milli)
                drop = before - self.frag(model, cpu - shape.cpu_milli, after)
                scores[free] = _sigmoid_score(drop)
        return scores

    def score(self, key: StateKey, pod: FgdPod) -> int:
        model, cpu, _, frees, _ = key
        shape = pod.shape
        if shape.shared:
            return max(self._shared_scores(key, shape).values())
        before = self.frag(model, cpu, frees)
        after = _after(frees, shape) if shape.gpus else frees
        return _sigmoid_score(before - self.frag(model, cpu - shape.cpu_milli, after))

    def gpus(self, state: NodeState, pod: FgdPod, rng: random.Random) -> list[int]:
        shape = pod.shape
        if not shape.shared:
            return super().gpus(state, pod, rng)
        scores = self._shared_scores(state.key(False), shape)
        best = max(scores.values())
        return [next(g for g, free in enumerate(state.frees) if scores.get(free) == best)]


def policy_named(name: str, typical: Sequence[tuple[PodShape, float]]) -> FgdPolicy:
    """The policy called ``name`` (one of :data:`FGD_ALL`) for a workload's typical pods.

    Raises:
        KeyError: An unknown name.

    """
    if name == "gangplace":
        from gangplace.sim.fgd.room import RoomPolicy

        return RoomPolicy(typical)
    policies: dict[str, FgdPolicy] = {
        "random": RandomPolicy(),
        "dotprod": DotProductPolicy(),
        "clustering": ClusteringPolicy(),
        "packing": PackingPolicy(),
        "bestfit": BestFitPolicy(),
        "fgd": FgdScorePolicy(Fragmentation(typical)),
    }
    return policies[name]
