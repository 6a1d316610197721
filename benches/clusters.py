"""The benchmark cluster of one case: the engine, its reference twin, and the shape."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gangplace import Cluster, reference, synth


@dataclass
class Setup:
    """One benchmark cluster: the engine, its twin in the reference, and the shape."""

    shape: synth.Shape
    fill: float
    engine: Cluster
    oracle_cache: dict[str, Any]

    @property
    def oracle(self) -> reference.Cluster:
        """The reference twin, built on first use (it is slow to build)."""
        if "cluster" not in self.oracle_cache:
            self.oracle_cache["cluster"] = twin(self.engine, self.shape)
        cluster: reference.Cluster = self.oracle_cache["cluster"]
        return cluster

    @property
    def rack(self) -> str:
        """The innermost named level."""
        return self.shape.levels[-1]

    @property
    def spine(self) -> str:
        """The level above it."""
        return self.shape.levels[-2]


def twin(engine: Cluster, shape: synth.Shape) -> reference.Cluster:
    """A reference cluster in the same state as ``engine``."""
    oracle = reference.Cluster(engine.levels)
    for name in engine.nodes():
        node = engine.node(name)
        oracle.add_node(name, gpus=node.gpus, topology=node.topology, unhealthy=node.unhealthy)
    # The engine's allocations become allocated GPUs on the reference's nodes. Replaying them
    # through `reserve` would cost O(holds) each (the reference re-scans its holds on every
    # call), quadratic on the million-GPU clusters; placements only read the nodes.
    for allocation in engine.allocations():
        if allocation.placement.gpu_milli is not None:
            continue  # shares, not whole GPUs: a caller copies them (bench_fractions)
        for pod in allocation.placement.pods:
            oracle._nodes[pod.node].allocated.update(pod.gpus)
    return oracle


def assert_same_pods(theirs: Any, ours: Any) -> None:
    """The reference's placement and the engine's: both ``None``, or the same pods."""
    assert (theirs is None) == (ours is None)
    if theirs is not None and ours is not None:
        assert [(p.node, tuple(p.gpus)) for p in theirs.pods] == [
            (p.node, tuple(p.gpus)) for p in ours.pods
        ]
