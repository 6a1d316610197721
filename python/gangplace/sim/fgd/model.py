"""The FGD experiment's cluster: each node's CPU, memory and per-GPU thousandths left.

Nodes in the same state score the same under every policy, so the cluster keeps them in
groups by state and a policy scores each group once per pod. A tie goes to the node that
comes first in the run's node order (a seeded random order of the nodes): the paper's
published figures are reproduced that way, and not with ties broken uniformly at random
(docs/simulation.md "The FGD experiment" shows both). The Random policy draws uniformly
among every node that fits.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from gangplace.sim.fgd.data import MILLI, FgdNode, FgdPod, PodShape

__all__ = ["FgdCluster", "NodeState", "StateKey", "affinity_tag", "fits"]

# (model, cpu left, memory left, GPU thousandths left sorted ascending, affinity tags)
StateKey = tuple[str, int, int, tuple[int, ...], tuple[str, ...]]


def affinity_tag(shape: PodShape) -> str | None:
    """The GPU-clustering tag of a pod: ``share-gpu``, ``k-gpu``, or ``None`` (CPU only)."""
    if not shape.gpus:
        return None
    return "share-gpu" if shape.shared else f"{shape.gpus}-gpu"


@dataclass(slots=True)
class NodeState:
    """One node as the experiment changes it."""

    cpu: int
    memory: int
    frees: list[int]  # thousandths left on each GPU, in device order
    model: str
    affinity: dict[str, int] = field(default_factory=dict)  # tag -> GPU pods on the node

    def key(self, with_affinity: bool) -> StateKey:
        """The node's state (affinity tags only when the policy reads them)."""
        tags = tuple(sorted(t for t, n in self.affinity.items() if n)) if with_affinity else ()
        return (self.model, self.cpu, self.memory, tuple(sorted(self.frees)), tags)


def fits(key: StateKey, shape: PodShape, memory: int) -> bool:
    """Whether a pod fits a node in state ``key`` (CPU, memory, GPU model, GPU thousandths)."""
    model, cpu, free_memory, frees, _ = key
    if cpu < shape.cpu_milli or free_memory < memory:
        return False
    if not shape.gpus:
        return True
    if shape.models and model not in shape.models:
        return False
    return sum(1 for free in frees if free >= shape.gpu_milli) >= shape.gpus


class FgdCluster:
    """The nodes, grouped by state."""

    def __init__(
        self, nodes: Sequence[FgdNode], order: Sequence[int], *, with_affinity: bool = False
    ) -> None:
        """``order``: the node indices in the run's order (a permutation of the nodes)."""
        self.nodes = [
            NodeState(node.cpu_milli, node.memory_mib, [MILLI] * node.gpus, node.model)
            for node in nodes
        ]
        if sorted(order) != list(range(len(nodes))):
            raise ValueError("order must be a permutation of the node indices")
        self.total_milli = MILLI * sum(node.gpus for node in nodes)
        self.allocated_milli = 0
        self.with_affinity = with_affinity
        self._by_rank = list(order)
        self._rank = [0] * len(nodes)
        for rank, index in enumerate(order):
            self._rank[index] = rank
        # state -> the ranks of its nodes, ascending
        self.groups: dict[StateKey, list[int]] = {}
        self._key: list[StateKey] = [self.nodes[0].key(with_affinity)] * len(nodes)
        for index in order:
            self._join(index)

    def first(self, best: Sequence[StateKey]) -> int:
        """The node of the groups ``best`` that comes first in the run's order."""
        return self._by_rank[min(self.groups[key][0] for key in best)]

    def pick(self, best: Sequence[StateKey], rng: random.Random) -> int:
        """A node drawn uniformly among all the nodes of the groups ``best``."""
        sizes = [len(self.groups[key]) for key in best]
        draw = rng.randrange(sum(sizes))
        for key, size in zip(best, sizes, strict=True):
            if draw < size:
                return self._by_rank[self.groups[key][draw]]
            draw -= size
        raise AssertionError("unreachable: the draw is below the sum of the sizes")

    def place(self, index: int, pod: FgdPod, gpus: Sequence[int]) -> None:
        """Puts ``pod`` on node ``index``, on GPUs ``gpus`` (device indices)."""
        state, shape = self.nodes[index], pod.shape
        self._leave(index)
        state.cpu -= shape.cpu_milli
        state.memory -= pod.memory_mib
        for gpu in gpus:
            if state.frees[gpu] < shape.gpu_milli:
                raise AssertionError(
                    f"GPU {gpu} has {state.frees[gpu]} left, not {shape.gpu_milli}"
                )
            state.frees[gpu] -= shape.gpu_milli
        self.allocated_milli += shape.gpu_milli * len(gpus)
        tag = affinity_tag(shape)
        if tag is not None:
            state.affinity[tag] = state.affinity.get(tag, 0) + 1
        self._join(index)

    def _leave(self, index: int) -> None:
        key, rank = self._key[index], self._rank[index]
        members = self.groups[key]
        del members[bisect.bisect_left(members, rank)]
        if not members:
            del self.groups[key]

    def _join(self, index: int) -> None:
        key = self.nodes[index].key(self.with_affinity)
        self._key[index] = key
        bisect.insort(self.groups.setdefault(key, []), self._rank[index])

    def allocation(self) -> float:
        """GPU thousandths allocated, in percent of the cluster's."""
        return 100.0 * self.allocated_milli / self.total_milli
