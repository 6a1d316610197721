"""gangplace: all-or-nothing, topology-aware, health-aware GPU gang placement.

A Rust kernel places a gang (N pods of G GPUs) whole or not at all, in the smallest topology
domain that holds it, counting only healthy GPUs, deterministically, and hands out
reservations that are committed, rolled back or released as a unit.

Example:
    >>> from gangplace import Cluster, GangRequest
    >>> cluster = Cluster(("spine", "rack"))
    >>> for rack in ("r1", "r2"):
    ...     for n in range(2):
    ...         cluster.add_node(f"{rack}-n{n}", gpus=8, topology={"spine": "s1", "rack": rack})
    >>> placement = cluster.place_gang(GangRequest(2, 8))
    >>> placement.level, placement.domain, placement.nodes
    ('rack', ('s1', 'r1'), ('r1-n0', 'r1-n1'))

"""

from gangplace import synth
from gangplace._gangplace import (
    Allocation,
    Cluster,
    ClusterStats,
    Explanation,
    GangRequest,
    NodeInfo,
    Placement,
    PodPlacement,
    Reservation,
    __version__,
)
from gangplace._quick import place_gang
from gangplace.errors import (
    Conflict,
    GangplaceError,
    InternalError,
    InvalidRequest,
    InvalidSnapshot,
    LimitExceeded,
    ReservationError,
    ReservationExpired,
    ReservationRevoked,
    UnknownNode,
    UnknownReservation,
    Unschedulable,
)

__all__ = [
    "Allocation",
    "Cluster",
    "ClusterStats",
    "Conflict",
    "Explanation",
    "GangRequest",
    "GangplaceError",
    "InternalError",
    "InvalidRequest",
    "InvalidSnapshot",
    "LimitExceeded",
    "NodeInfo",
    "Placement",
    "PodPlacement",
    "Reservation",
    "ReservationError",
    "ReservationExpired",
    "ReservationRevoked",
    "UnknownNode",
    "UnknownReservation",
    "Unschedulable",
    "__version__",
    "place_gang",
    "synth",
]
