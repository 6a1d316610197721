"""A readable pure-Python implementation of gangplace's contract.

Two parts: :mod:`gangplace.reference.rules`, the placement rules of docs/placement.md as pure
functions (the spec, readable top to bottom), and :mod:`gangplace.reference.oracle`, a
stateful cluster with the extension's API built on them (the oracle of the differential tests
and the baseline of the benchmarks).

Example:
    >>> from gangplace import GangRequest
    >>> from gangplace.reference import Cluster
    >>> cluster = Cluster(("rack",))
    >>> cluster.add_node("a", gpus=8, topology={"rack": "r1"})
    >>> cluster.place_gang(GangRequest(1, 4)).pods
    (PodPlacement(node='a', gpus=(0, 1, 2, 3)),)

"""

from gangplace.reference.oracle import Cluster
from gangplace.reference.values import (
    Allocation,
    ClusterStats,
    NodeInfo,
    Placement,
    PodPlacement,
    Request,
    Reservation,
)

__all__ = [
    "Allocation",
    "Cluster",
    "ClusterStats",
    "NodeInfo",
    "Placement",
    "PodPlacement",
    "Request",
    "Reservation",
]
