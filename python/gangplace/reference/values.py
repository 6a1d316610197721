"""The values the reference hands out: the same fields as the extension's classes.

Limits come from the extension (``gangplace._gangplace.LIMITS``), so the reference and the
core can never disagree on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from gangplace._gangplace import LIMITS
from gangplace.errors import InvalidRequest

__all__ = [
    "Allocation",
    "AnyRequest",
    "ClusterStats",
    "DefragPlan",
    "GroupLike",
    "Move",
    "NodeInfo",
    "Placement",
    "PlacementLike",
    "PodPlacement",
    "PreemptionPlan",
    "Request",
    "Reservation",
    "RolesRequest",
]

MAX_GPUS_PER_NODE = int(LIMITS["max_gpus_per_node"])
MAX_LEVELS = int(LIMITS["max_levels"])
MAX_NAME_BYTES = int(LIMITS["max_name_bytes"])
MAX_TTL_SECONDS = float(LIMITS["max_ttl_seconds"])
DEFAULT_TTL_SECONDS = float(LIMITS["default_ttl_seconds"])
DEFAULT_REPAIR_TTL_SECONDS = float(LIMITS["default_repair_ttl_seconds"])
MAX_NODES = int(LIMITS["max_nodes"])
MAX_PODS = int(LIMITS["max_gang_gpus"])  # pods of one GPU each at the most
REMEMBERED_ENDED_HOLDS = int(LIMITS["remembered_ended_holds"])
NODE, CLUSTER = "node", "cluster"

Path = tuple[str, ...]


class Request(Protocol):
    """What the reference reads of a request (``gangplace.GangRequest`` fits)."""

    @property
    def pods(self) -> int:
        """Pods wanted."""

    @property
    def gpus_per_pod(self) -> int:
        """GPUs per pod."""

    @property
    def min_pods(self) -> int | None:
        """Fewest pods accepted."""

    @property
    def required_level(self) -> str | None:
        """Coarsest level allowed."""

    @property
    def selector(self) -> dict[str, str]:
        """Labels nodes must carry."""

    @property
    def name(self) -> str:
        """Free text."""

    @property
    def slices(self) -> tuple[tuple[str, int], ...]:
        """Slice layers, outermost first."""

    @property
    def spread(self) -> str:
        """``"pack"`` or ``"balanced"``."""

    @property
    def numa(self) -> str:
        """``"none"`` or ``"single"``."""

    @property
    def priority(self) -> int:
        """Higher preempts lower."""

    @property
    def preemptible(self) -> bool:
        """Whether its holds may be preempted."""

    @property
    def movable(self) -> bool:
        """Whether its holds may be moved by defragmentation."""


class GroupLike(Protocol):
    """What the reference reads of one group of a multi-role request (``gangplace.PodGroup``)."""

    @property
    def name(self) -> str:
        """The group's name."""

    @property
    def pods(self) -> int:
        """Pods wanted."""

    @property
    def gpus_per_pod(self) -> int:
        """GPUs per pod."""

    @property
    def min_pods(self) -> int | None:
        """Fewest pods accepted."""

    @property
    def selector(self) -> dict[str, str]:
        """Labels its nodes must carry."""

    @property
    def slices(self) -> tuple[tuple[str, int], ...]:
        """Slice layers, outermost first."""


class RolesRequest(Protocol):
    """What the reference reads of a multi-role request (``gangplace.MultiGangRequest``)."""

    @property
    def groups(self) -> tuple[GroupLike, ...]:
        """The groups, in request order."""

    @property
    def required_level(self) -> str | None:
        """Coarsest level allowed."""

    @property
    def colocate(self) -> tuple[tuple[str, str, str], ...]:
        """``(group, anchor, level)`` triples."""

    @property
    def name(self) -> str:
        """Free text."""

    @property
    def spread(self) -> str:
        """``"pack"`` or ``"balanced"``."""

    @property
    def priority(self) -> int:
        """Higher preempts lower."""

    @property
    def preemptible(self) -> bool:
        """Whether its holds may be preempted."""

    @property
    def movable(self) -> bool:
        """As given (multi-role holds are never moved)."""


AnyRequest = Request | RolesRequest
"""Either kind of request."""


@dataclass(frozen=True)
class PodPlacement:
    """One pod: a node and its GPU indices."""

    node: str
    gpus: tuple[int, ...]


@dataclass(frozen=True)
class Placement:
    """Where a gang goes (see ``gangplace.Placement``)."""

    pods: tuple[PodPlacement, ...]
    level: str
    domain: Path
    slices: tuple[Path, ...] = ()
    groups_counts: tuple[tuple[str, int], ...] = ()  # multi-role gangs: (group, pods)
    spares: tuple[PodPlacement, ...] = ()  # docs/repair.md "Spares": held, not ranks
    gpu_milli: int | None = None  # docs/resources.md: each pod's share of its GPU

    @property
    def groups(self) -> dict[str, tuple[PodPlacement, ...]]:
        """Multi-role gangs: group name -> its pods in rank order (empty for a gang)."""
        out: dict[str, tuple[PodPlacement, ...]] = {}
        start = 0
        for name, count in self.groups_counts:
            out[name] = self.pods[start : start + count]
            start += count
        return out

    @property
    def nodes(self) -> tuple[str, ...]:
        """Distinct node names in order of their first rank."""
        return tuple(dict.fromkeys(pod.node for pod in self.pods))

    def __len__(self) -> int:
        return len(self.pods)


class PodLike(Protocol):
    """What ``reserve`` reads of a pod of an earlier placement."""

    @property
    def node(self) -> str:
        """The node's name."""

    @property
    def gpus(self) -> tuple[int, ...]:
        """GPU indices."""


class PlacementLike(Protocol):
    """What ``reserve`` reads of an earlier placement (both placement classes fit)."""

    @property
    def pods(self) -> Sequence[PodLike]:
        """Pods with their nodes and GPUs."""

    @property
    def level(self) -> str:
        """The level of the chosen domain."""

    @property
    def domain(self) -> tuple[str, ...]:
        """The chosen domain's path."""


@dataclass(frozen=True)
class Reservation:
    """A hold until ``expires_at``."""

    id: str
    placement: Placement
    expires_at: float
    owner: str | None = None
    priority: int = 0
    preemptible: bool = True
    movable: bool = False
    since: float = 0.0
    request: AnyRequest | None = None
    repairs: str | None = None  # docs/repair.md: a repair reservation's allocation
    repaired_ranks: tuple[int, ...] = ()  # the ranks its pods replace, in pod order

    @property
    def spares(self) -> tuple[PodPlacement, ...]:
        """Its spare pods (docs/repair.md "Spares")."""
        return self.placement.spares


@dataclass(frozen=True)
class Allocation:
    """A committed reservation."""

    id: str
    placement: Placement
    owner: str | None = None
    priority: int = 0
    preemptible: bool = True
    movable: bool = False
    since: float = 0.0
    request: AnyRequest | None = None
    lost: tuple[int, ...] = ()  # docs/repair.md: ranks with a removed node or unhealthy GPU
    ended: tuple[int, ...] = ()  # docs/transactions.md: ranks ``release_pods`` ended

    @property
    def spares(self) -> tuple[PodPlacement, ...]:
        """Its spare pods (docs/repair.md "Spares")."""
        return self.placement.spares


@dataclass(frozen=True)
class PreemptionPlan:
    """What ``plan_preemption`` proposes (see ``gangplace.PreemptionPlan``)."""

    request: AnyRequest
    placement: Placement
    victims: tuple[str, ...]
    victim_gpus: int
    max_victim_priority: int | None
    chosen_victims: bool = False  # docs/preemption.md P7


@dataclass(frozen=True)
class Move:
    """One move of a defragmentation."""

    allocation: str
    source: Placement
    target: Placement


@dataclass(frozen=True)
class DefragPlan:
    """What ``plan_defrag`` proposes (see ``gangplace.DefragPlan``)."""

    request: AnyRequest
    placement: Placement
    moves: tuple[Move, ...]
    evictions: tuple[str, ...]
    moved_gpus: int


@dataclass(frozen=True)
class NodeInfo:
    """One node's state."""

    name: str
    gpus: int
    topology: dict[str, str]
    labels: dict[str, str]
    cordoned: bool
    free: tuple[int, ...]
    reserved: tuple[int, ...]
    allocated: tuple[int, ...]
    unhealthy: tuple[int, ...]
    resources: dict[str, int] = field(default_factory=dict)
    free_resources: dict[str, int] = field(default_factory=dict)
    shared: dict[int, int] = field(default_factory=dict)  # docs/resources.md "Fractions of a GPU"
    taints: tuple[tuple[str, str, str], ...] = ()  # docs/placement.md, rule 1


@dataclass(frozen=True)
class ClusterStats:
    """GPU counts over the cluster."""

    total: int
    healthy: int
    free: int
    reserved: int
    allocated: int
    unhealthy: int
    resources: dict[str, int] = field(default_factory=dict)
    free_resources: dict[str, int] = field(default_factory=dict)
    shared: int = 0  # GPUs fractional pods share


def splitmix64(state: int) -> tuple[int, int]:
    """One step of splitmix64: the output and the next state (as the engine draws ids)."""
    mask = 2**64 - 1
    state = (state + 0x9E3779B97F4A7C15) & mask
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31), state


def check_name(what: str, name: str) -> None:
    """An empty or over-long name raises ``InvalidRequest`` naming ``what``."""
    if not name:
        raise InvalidRequest(f"{what} must not be empty")
    if len(name.encode()) > MAX_NAME_BYTES:
        raise InvalidRequest(f"{what} is longer than {MAX_NAME_BYTES} bytes")
