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

from typing import TYPE_CHECKING, Any

from gangplace._gangplace import (
    LIMITS,
    Allocation,
    Cluster,
    ClusterStats,
    DefragPlan,
    Explanation,
    GangRequest,
    LevelExplanation,
    Move,
    MultiGangRequest,
    NodeInfo,
    Placement,
    PodGroup,
    PodPlacement,
    PreemptionPlan,
    RepairPlan,
    Reservation,
    __version__,
)
from gangplace._quick import place_gang
from gangplace.errors import (
    Conflict,
    DuplicateJob,
    GangplaceError,
    InternalError,
    InvalidRequest,
    InvalidSnapshot,
    LimitExceeded,
    ReservationError,
    ReservationExpired,
    ReservationRevoked,
    UnknownJob,
    UnknownNode,
    UnknownReservation,
    Unschedulable,
)
from gangplace.gpu_topology import NodeTopology
from gangplace.scheduler import (
    Cohort,
    Decisions,
    HistorySummary,
    JobEvent,
    JobHistory,
    PendingJob,
    Queue,
    Repaired,
    RunningJob,
    Scheduler,
    Shadow,
    Started,
)

if TYPE_CHECKING:
    from gangplace import synth

__all__ = [
    "LIMITS",
    "Allocation",
    "Cluster",
    "ClusterStats",
    "Cohort",
    "Conflict",
    "Decisions",
    "DefragPlan",
    "DuplicateJob",
    "Explanation",
    "GangRequest",
    "GangplaceError",
    "HistorySummary",
    "InternalError",
    "InvalidRequest",
    "InvalidSnapshot",
    "JobEvent",
    "JobHistory",
    "LevelExplanation",
    "LimitExceeded",
    "Move",
    "MultiGangRequest",
    "NodeInfo",
    "NodeTopology",
    "PendingJob",
    "Placement",
    "PodGroup",
    "PodPlacement",
    "PreemptionPlan",
    "Queue",
    "RepairPlan",
    "Repaired",
    "Reservation",
    "ReservationError",
    "ReservationExpired",
    "ReservationRevoked",
    "RunningJob",
    "Scheduler",
    "Shadow",
    "Started",
    "UnknownJob",
    "UnknownNode",
    "UnknownReservation",
    "Unschedulable",
    "__version__",
    "place_gang",
    "synth",
]


def __getattr__(name: str) -> Any:
    """Imports :mod:`gangplace.synth` (and numpy with it) on first use, not at import."""
    if name == "synth":
        import importlib

        return importlib.import_module("gangplace.synth")
    raise AttributeError(f"module 'gangplace' has no attribute {name!r}")
