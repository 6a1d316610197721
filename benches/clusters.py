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
    for allocation in engine.allocations():
        oracle.commit(oracle.reserve(allocation.placement, ttl=3600.0))
    return oracle
