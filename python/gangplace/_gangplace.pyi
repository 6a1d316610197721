"""Type stubs of the native module. Import these names from ``gangplace``."""

from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal, final

import numpy.typing as npt

from gangplace.gpu_topology import NodeTopology

# docs/placement.md, rule 1: ``(key, operator, values)``, or ``(key, operator)`` for
# ``Exists``/``DoesNotExist``; ``(key, operator, value, effect)``.
_AffinityRequirement = tuple[str, str, Sequence[str]] | tuple[str, str]
_TolerationSpec = tuple[str, str, str, str | None]

__all__ = [
    "LIMITS",
    "Allocation",
    "Cluster",
    "ClusterStats",
    "DefragPlan",
    "Explanation",
    "GangRequest",
    "LevelExplanation",
    "Move",
    "MultiGangRequest",
    "NodeInfo",
    "Placement",
    "PodGroup",
    "PodPlacement",
    "PreemptionPlan",
    "RepairPlan",
    "Reservation",
    "__build_commit__",
    "__version__",
    "_unpickle",
]
__version__: str
# The git commit the extension was built from ("unknown" outside a git checkout).
__build_commit__: str
LIMITS: MappingProxyType[str, int | float]
"""The hard limits and defaults of the core, as the docs/errors.md "Limits" table states them.

Keys: ``max_gpus_per_node``, ``max_nodes``, ``max_levels``, ``max_name_bytes``,
``max_gang_gpus``, ``max_slice_layers``, ``max_groups``, ``max_ttl_seconds``,
``default_ttl_seconds``, ``default_repair_ttl_seconds``, ``remembered_ended_holds``.
"""

@final
class GangRequest:
    """A gang: ``pods`` pods of ``gpus_per_pod`` GPUs each, placed whole or not at all.

    Validated when built: ``pods`` >= 1, ``gpus_per_pod`` in 1..64 (0 for pods without
    GPUs, which must ask ``resources_per_pod``), ``pods * gpus_per_pod`` at most 2**28 (the
    most GPUs a cluster at its limits holds), ``min_pods`` in 1..pods, slice sizes (below).
    Out-of-range values raise ``InvalidRequest`` (also for huge ints), wrong types
    ``TypeError``. An unknown ``required_level`` or slice level is reported when the request
    is placed.

    Args:
        pods: Pods wanted.
        gpus_per_pod: GPUs per pod; a pod never spans nodes. 0: pods without GPUs (CPU-only
            launchers, MIG slices as named resources), counted by ``resources_per_pod``
            alone; they take neither ``numa="single"`` nor spares.
        min_pods: Elastic gangs: the fewest pods accepted when ``pods`` do not fit.
        required_level: The coarsest level the gang may span: ``"node"``, a level name, or
            ``"cluster"`` (the same as ``None``).
        selector: Labels every chosen node must carry (all of them).
        affinity: Required node affinity, Kubernetes' ``nodeSelectorTerms``: a sequence of
            terms, each a sequence of ``(key, operator, values)`` requirements; a node must
            meet every requirement of at least one term. Operators ``"In"``, ``"NotIn"``,
            ``"Exists"``, ``"DoesNotExist"``, ``"Gt"``, ``"Lt"`` (docs/placement.md, rule 1).
        tolerations: The node taints it tolerates: ``(key, operator, value, effect)`` with
            operator ``"Equal"`` or ``"Exists"`` and effect ``None`` (any), ``"NoSchedule"``,
            ``"PreferNoSchedule"`` or ``"NoExecute"``. A node with a ``NoSchedule`` or
            ``NoExecute`` taint the request does not tolerate is never used.
        name: Free text shown in reasons and reprs.
        priority: In -2**31..2**31-1 (a Kubernetes PriorityClass value fits). Higher
            preempts lower; equal priorities never preempt each other.
        preemptible: ``False``: its allocations are never victims of preemption.
        movable: ``True``: its allocations can be checkpointed and restarted elsewhere
            (candidates of ``Cluster.plan_defrag``).
        slices: ``((level, pods_per_slice), ...)``, outermost first, at most 3 layers: ranks
            ``j*k`` to ``(j+1)*k - 1`` of every layer lie in one domain of its level (docs/shapes.md
            "Slices"). Each size divides ``pods`` and the outer size; levels strictly nested
            and none coarser than ``required_level``; ``min_pods`` a multiple of the
            outermost size.
        spread: ``"pack"`` (rule 4: as few children as possible, the largest filled first) or
            ``"balanced"`` (as many children as pack uses, the largest, split as evenly as
            their capacities allow; docs/shapes.md "Balanced spread").
        numa: ``"none"`` or ``"single"``: every pod's GPUs in one NUMA group of its node (the
            level named ``numa`` of its ``NodeTopology``, else the outermost; a node without
            one is one group), and capacities count pods per group (docs/shapes.md "Inside a node").
        spares: Extra pods of the gang's pod size held next to it, part of the all-or-nothing
            placement (docs/repair.md "Spares"): the last ``spares`` pods of the gang of
            ``pods + spares``, or with slices ``spares`` more in every innermost slice domain.
        resources_per_pod: Resources besides GPUs each pod asks, name -> integer quantity in
            base units: ``"cpu"`` in millicores, ``"memory"`` in bytes, any other name in
            units (docs/resources.md "Node resources"). A node then holds ``min(free GPUs // g, free
            r // r per pod for every r)`` pods. Quantities 0..2**50, names unique, at most 32; a
            name no node of the cluster offers raises ``InvalidRequest`` when placed.
            Preemption, defragmentation, repair, spares and ``place_after`` count them too.
        gpu_milli: Thousandths of one GPU each pod asks, 1..999, with ``gpus_per_pod=1``
            (docs/resources.md "Fractions of a GPU"): each pod takes a share of one GPU, chosen best
            fit among the node's partly used GPUs, and a shared GPU never goes to a whole-GPU
            pod. No spares or ``numa="single"``; preemption ends and defragmentation moves
            whole-GPU allocations for them (docs/preemption.md P8, D5).
            ``None``: whole GPUs.

    Example:
        >>> GangRequest(4, 8, required_level="rack")
        GangRequest(4, 8, required_level='rack')
        >>> GangRequest(64, 4, slices=(("rack", 16),)).slices
        (('rack', 16),)

    """

    def __new__(
        cls,
        pods: int,
        gpus_per_pod: int = 1,
        *,
        min_pods: int | None = None,
        required_level: str | None = None,
        selector: Mapping[str, str] | None = None,
        name: str = "",
        priority: int = 0,
        preemptible: bool = True,
        movable: bool = False,
        slices: Sequence[tuple[str, int]] = (),
        spread: Literal["pack", "balanced"] = "pack",
        numa: Literal["none", "single"] = "none",
        spares: int = 0,
        resources_per_pod: Mapping[str, int] | None = None,
        gpu_milli: int | None = None,
        affinity: Sequence[Sequence[_AffinityRequirement]] = (),
        tolerations: Sequence[_TolerationSpec] = (),
    ) -> GangRequest: ...
    @property
    def pods(self) -> int:
        """Pods wanted."""
    @property
    def gpus_per_pod(self) -> int:
        """GPUs per pod (1 to 64); a pod never spans nodes."""
    @property
    def spares(self) -> int:
        """Spare pods held next to the gang (per innermost slice domain with slices)."""
    @property
    def min_pods(self) -> int | None:
        """Elastic gangs: the fewest pods accepted; ``None`` for a rigid gang."""
    @property
    def required_level(self) -> str | None:
        """The coarsest level the gang may span; ``None``: the whole cluster."""
    @property
    def selector(self) -> dict[str, str]:
        """A fresh dict, sorted by key."""
    @property
    def affinity(self) -> tuple[tuple[tuple[str, str, tuple[str, ...]], ...], ...]:
        """Required node affinity: ``((key, operator, values), ...)`` terms, sorted."""
    @property
    def tolerations(self) -> tuple[tuple[str, str, str, str | None], ...]:
        """The taints it tolerates: ``(key, operator, value, effect)``, sorted."""
    @property
    def name(self) -> str:
        """Free text shown in reasons and reprs."""
    @property
    def slices(self) -> tuple[tuple[str, int], ...]:
        """Slice layers, outermost first: ``(level, pods_per_slice)`` pairs (docs/shapes.md)."""
    @property
    def spread(self) -> Literal["pack", "balanced"]:
        """``"pack"`` (rule 4) or ``"balanced"`` (docs/shapes.md "Balanced spread")."""
    @property
    def numa(self) -> Literal["none", "single"]:
        """``"none"`` or ``"single"`` (docs/shapes.md "Inside a node")."""
    @property
    def resources_per_pod(self) -> dict[str, int]:
        """Resources besides GPUs each pod asks: a fresh dict, sorted by name."""
    @property
    def gpu_milli(self) -> int | None:
        """Thousandths of one GPU each pod asks (docs/resources.md); ``None``: whole."""
    @property
    def total_gpus(self) -> int:
        """Whole GPUs of the gang and its spares (with slices, ``spares`` per innermost slice).

        0 for fractional pods, which hold shares.
        """
    @property
    def priority(self) -> int:
        """Higher preempts lower; equal priorities never preempt each other."""
    @property
    def preemptible(self) -> bool:
        """``False``: its allocations are never victims of preemption."""
    @property
    def movable(self) -> bool:
        """``True``: its allocations can be moved by defragmentation."""
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __getnewargs_ex__(self) -> tuple[tuple[int, int], dict[str, Any]]: ...

@final
class PodGroup:
    """One role of a multi-role gang: ``pods`` pods of ``gpus_per_pod`` GPUs.

    docs/roles.md. Validated when built like a ``GangRequest`` (sizes,
    ``min_pods``, selector, slice sizes); ``name`` must be 1 to 253 bytes. Its level rules
    come from the ``MultiGangRequest``.

    Args:
        name: The group's name, unique within its request (``Placement.groups`` key).
        pods: Pods wanted.
        gpus_per_pod: GPUs per pod; a pod never spans nodes.
        min_pods: Elastic groups: when the full unit fits nowhere, the unit is tried again
            with this group at ``min_pods``.
        selector: Labels every node of this group must carry.
        affinity: The group's required node affinity, as ``GangRequest``'s.
        tolerations: The node taints the group tolerates, as ``GangRequest``'s.
        slices: ``((level, pods_per_slice), ...)`` as on ``GangRequest``, for this group.
        spares: Spare pods of this group's pod size held with the unit, as on
            ``GangRequest`` (docs/repair.md "Spares"); listed in ``Placement.spares`` group by
            group.
        resources_per_pod: Resources besides GPUs each pod of the group asks, as on
            ``GangRequest`` (docs/resources.md "Node resources"): every count of the group's pods is
            bounded by the nodes' free resources less what the earlier groups took; with
            them ``gpus_per_pod`` may be 0 (a launcher, a MIG slice).

    Example:
        >>> PodGroup("workers", 16, 8)
        PodGroup('workers', 16, 8)
        >>> PodGroup("launcher", 1, 0, resources_per_pod={"cpu": 4_000})
        PodGroup('launcher', 1, 0, resources_per_pod={'cpu': 4000})

    """

    def __new__(
        cls,
        name: str,
        pods: int,
        gpus_per_pod: int = 1,
        *,
        min_pods: int | None = None,
        selector: Mapping[str, str] | None = None,
        slices: Iterable[tuple[str, int]] = (),
        spares: int = 0,
        resources_per_pod: Mapping[str, int] | None = None,
        affinity: Sequence[Sequence[_AffinityRequirement]] = (),
        tolerations: Sequence[_TolerationSpec] = (),
    ) -> PodGroup: ...
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
        """Elastic groups: the fewest pods accepted; ``None`` for a rigid group."""
    @property
    def selector(self) -> dict[str, str]:
        """A fresh dict, sorted by key."""
    @property
    def affinity(self) -> tuple[tuple[tuple[str, str, tuple[str, ...]], ...], ...]:
        """The group's required node affinity, as ``GangRequest.affinity``."""
    @property
    def tolerations(self) -> tuple[tuple[str, str, str, str | None], ...]:
        """The node taints the group tolerates, as ``GangRequest.tolerations``."""
    @property
    def slices(self) -> tuple[tuple[str, int], ...]:
        """Slice layers, outermost first."""
    @property
    def spares(self) -> int:
        """Spare pods of this group held with the unit."""
    @property
    def resources_per_pod(self) -> dict[str, int]:
        """Resources besides GPUs each pod asks (docs/resources.md); sorted by name."""
    @property
    def total_gpus(self) -> int:
        """GPUs of the group and its spares."""
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __getnewargs_ex__(self) -> tuple[tuple[str, int, int], dict[str, Any]]: ...

@final
class MultiGangRequest:
    """Several pod groups placed as one all-or-nothing unit in one domain.

    docs/roles.md: a leader and its workers, workers of different sizes.
    Validated when built: 1 to 16 groups with unique names, at most 2**28 GPUs in total,
    colocations naming two different groups. Level names (``required_level``, colocation
    levels, slice levels) are checked when placed. ``place_gang``, ``reserve``, ``explain``,
    ``place_many``, ``reserve_many`` and ``capacity_for`` take it; ``plan_preemption`` and
    ``plan_defrag`` refuse it with ``InvalidRequest``.

    Args:
        groups: The ``PodGroup`` objects; ``Placement.pods`` lists their pods in this order.
        required_level: The coarsest level the whole unit may span.
        colocate: ``((group, anchor, level), ...)``: every pod of ``group`` lies in the
            domain of ``level`` that holds rank 0 of ``anchor``.
        name: Free text shown in reasons and reprs.
        spread: ``"pack"`` or ``"balanced"``, for every group.
        priority: As on ``GangRequest``.
        preemptible: As on ``GangRequest``.
        movable: As on ``GangRequest`` (``plan_defrag`` does not move multi-role holds).

    Example:
        >>> leader = PodGroup("leader", 1, 1)
        >>> workers = PodGroup("workers", 4, 8)
        >>> request = MultiGangRequest((leader, workers), colocate=(("leader", "workers", "rack"),))
        >>> request.groups
        (PodGroup('leader', 1, 1), PodGroup('workers', 4, 8))

    """

    def __new__(
        cls,
        groups: Iterable[PodGroup],
        *,
        required_level: str | None = None,
        colocate: Iterable[tuple[str, str, str]] = (),
        name: str = "",
        spread: Literal["pack", "balanced"] = "pack",
        priority: int = 0,
        preemptible: bool = True,
        movable: bool = False,
    ) -> MultiGangRequest: ...
    @property
    def groups(self) -> tuple[PodGroup, ...]:
        """The ``PodGroup`` objects, in request order."""
    @property
    def required_level(self) -> str | None:
        """The coarsest level the unit may span; ``None``: the whole cluster."""
    @property
    def colocate(self) -> tuple[tuple[str, str, str], ...]:
        """``((group, anchor, level), ...)``, as given."""
    @property
    def name(self) -> str:
        """Free text shown in reasons and reprs."""
    @property
    def spread(self) -> Literal["pack", "balanced"]:
        """``"pack"`` or ``"balanced"``."""
    @property
    def priority(self) -> int:
        """Higher preempts lower; equal priorities never preempt each other."""
    @property
    def preemptible(self) -> bool:
        """``False``: its allocations are never victims of preemption."""
    @property
    def movable(self) -> bool:
        """As given; ``plan_defrag`` never moves multi-role allocations."""
    @property
    def total_gpus(self) -> int:
        """GPUs of every group at full size."""
    @property
    def pods(self) -> int:
        """Pods of every group at full size."""
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __getnewargs_ex__(self) -> tuple[tuple[tuple[PodGroup, ...]], dict[str, Any]]: ...

@final
class PodPlacement:
    """One pod of a placement: a node and the GPU indices it takes there."""

    def __new__(cls, node: str, gpus: Iterable[int]) -> PodPlacement: ...
    @property
    def node(self) -> str:
        """The node's name."""
    @property
    def gpus(self) -> tuple[int, ...]:
        """GPU indices, ascending."""
    @property
    def affinity(self) -> str:
        """The finest intra-node level holding all its GPUs, or ``"node"``.

        Set by the engine for the pods it places, adopts or restores on nodes with a
        ``NodeTopology`` (docs/shapes.md "Inside a node"); a pod you build says ``"node"``. Not part
        of equality.
        """
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    @staticmethod
    def _rebuild(node: str, gpus: Sequence[int], affinity: str | None = None) -> PodPlacement: ...
    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]: ...

@final
class Placement:
    """Where a gang goes.

    ``len(placement)`` is the number of pods placed (fewer than asked only for elastic gangs).
    """

    @property
    def pods(self) -> tuple[PodPlacement, ...]:
        """Pods in rank order: sorted by (node's domain path, node name, first GPU)."""
    @property
    def level(self) -> str:
        """``"node"``, a level name, or ``"cluster"``: the finest level that held the gang."""
    @property
    def domain(self) -> tuple[str, ...]:
        """Path of the chosen domain.

        The node name is appended at level ``node``; the path is ``()`` at ``cluster``.
        """
    @property
    def nodes(self) -> tuple[str, ...]:
        """Distinct node names in order of their first rank (a repair keeps ranks in place)."""
    @property
    def slices(self) -> tuple[tuple[str, ...], ...]:
        """Slice gangs: the domain path of every innermost slice, in rank order."""
    @property
    def spares(self) -> tuple[PodPlacement, ...]:
        """Spare pods held next to the gang (docs/repair.md), in the order they were placed.

        Not ranks of the gang.
        """
    @property
    def groups(self) -> dict[str, tuple[PodPlacement, ...]]:
        """Multi-role gangs: group name -> its pods in rank order, in request order.

        A fresh dict; empty for a single gang.
        """
    @property
    def total_gpus(self) -> int:
        """Whole GPUs of all pods (0 for fractional pods, which hold shares: ``gpu_milli``)."""
    @property
    def gpu_milli(self) -> int | None:
        """Thousandths of its GPU each pod uses (docs/resources.md); ``None``: whole."""
    def __len__(self) -> int: ...
    def _repr_html_(self) -> str:
        """Notebooks show the pods and their GPUs."""
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    @staticmethod
    def _rebuild(
        pods: Sequence[PodPlacement],
        level: str,
        domain: Sequence[str],
        slices: Sequence[Sequence[str]] = ...,
        groups: Sequence[tuple[str, int]] = ...,
        spares: Sequence[PodPlacement] = ...,
        gpu_milli: int | None = None,
    ) -> Placement: ...
    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]: ...

@final
class Reservation:
    """A hold on a placement's GPUs until ``expires_at``, in seconds of the cluster's clock."""

    @property
    def id(self) -> str:
        """Unguessable: ``"gp-"`` and 32 hex digits (128 random bits)."""
    @property
    def request(self) -> GangRequest | MultiGangRequest | None:
        """The request it was placed for; ``None`` for ``reserve(placement)``."""
    @property
    def placement(self) -> Placement:
        """Where its GPUs are."""
    @property
    def spares(self) -> tuple[PodPlacement, ...]:
        """Its spare pods (``placement.spares``): held, never free, not ranks."""
    @property
    def expires_at(self) -> float:
        """Clock time at which it expires unless committed."""
    @property
    def owner(self) -> str | None:
        """Who holds it; ``None`` when reserved without an owner."""
    @property
    def priority(self) -> int:
        """Priority (from the request; ``Cluster.set_priority`` changes it)."""
    @property
    def preemptible(self) -> bool:
        """``False``: never a victim of preemption."""
    @property
    def movable(self) -> bool:
        """``True``: a defragmentation candidate once committed."""
    @property
    def since(self) -> float:
        """Clock time of ``reserve``."""
    @property
    def repairs(self) -> str | None:
        """A repair reservation (``Cluster.repair``): the id of the allocation it repairs.

        ``None`` for other reservations.
        """
    @property
    def repaired_ranks(self) -> tuple[int, ...]:
        """A repair reservation: the ranks its pods replace, one per pod in pod order.

        Empty for other reservations.
        """
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]: ...

@final
class Allocation:
    """A committed reservation. Its id is the reservation's id."""

    @property
    def id(self) -> str:
        """Its id (``gp-`` and 32 hex digits), the same as its reservation's."""
    @property
    def request(self) -> GangRequest | MultiGangRequest | None:
        """The request it was placed for; ``None`` for ``reserve(placement)`` and ``adopt``."""
    @property
    def lost(self) -> tuple[int, ...]:
        """Ranks that lost hardware, sorted (docs/repair.md "Repair after failures").

        A rank is lost when its pod's node was removed (even if a node of that name came
        back) or one of its GPUs is unhealthy; a GPU marked healthy again un-loses it. As of
        when this value was made: ``allocations()`` and ``commit`` give current ones.
        """
    @property
    def ended(self) -> tuple[int, ...]:
        """Ranks whose pods ``release_pods`` ended, sorted (docs/transactions.md).

        They stay listed in ``placement.pods`` (every other rank keeps its number), hold no
        GPU, and are never lost nor repaired.
        """
    @property
    def placement(self) -> Placement:
        """The placement as reserved (a removed node's pods and ended ranks stay listed)."""
    @property
    def spares(self) -> tuple[PodPlacement, ...]:
        """Its spare pods (``placement.spares``): held, never free, not ranks."""
    @property
    def owner(self) -> str | None:
        """Who holds it; ``None`` when reserved without an owner."""
    @property
    def priority(self) -> int:
        """Priority (from the request; ``Cluster.set_priority`` changes it)."""
    @property
    def preemptible(self) -> bool:
        """``False``: never a victim of preemption."""
    @property
    def movable(self) -> bool:
        """``True``: a defragmentation candidate."""
    @property
    def since(self) -> float:
        """Clock time of ``commit`` (``min_runtime`` counts from it)."""
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]: ...

@final
class PreemptionPlan:
    """What ``Cluster.plan_preemption`` proposes: allocations to end, and where the gang goes."""

    @property
    def request(self) -> GangRequest | MultiGangRequest:
        """The request planned for: a ``GangRequest`` or a ``MultiGangRequest``."""
    @property
    def placement(self) -> Placement:
        """Exactly what ``Cluster.preempt`` will hold."""
    @property
    def victims(self) -> tuple[str, ...]:
        """Ids of the allocations to end, sorted (empty when the gang fits as it is)."""
    @property
    def victim_gpus(self) -> int:
        """Whole GPUs the victims hold in total, healthy or not (a share counts none)."""
    @property
    def max_victim_priority(self) -> int | None:
        """The highest victim priority; ``None`` without victims."""
    @property
    def chosen_victims(self) -> bool:
        """Whether the victims came from ``plan_preemption(candidates=...)`` (P7)."""
    def __eq__(self, value: object, /) -> bool: ...
    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]: ...

@final
class RepairPlan:
    """What ``Cluster.plan_repair`` proposes: where each lost rank of an allocation goes."""

    @property
    def allocation(self) -> str:
        """Id of the allocation repaired."""
    @property
    def lost(self) -> tuple[int, ...]:
        """Its lost ranks when planned, sorted; every one is repaired."""
    @property
    def replacements(self) -> tuple[tuple[int, PodPlacement], ...]:
        """``(rank, PodPlacement)`` for every lost rank, in rank order."""
    @property
    def from_spares(self) -> tuple[int, ...]:
        """Ranks the allocation's own spares take (their replacements are those spares)."""
    @property
    def level(self) -> str:
        """Level of the domain searched: the placement's, or the enclosing one when widened."""
    @property
    def domain(self) -> tuple[str, ...]:
        """That domain's path (plus the node name at level ``node``; empty for the cluster)."""
    @property
    def victims(self) -> tuple[str, ...]:
        """Ids of the allocations ``repair`` ends to make room (rule R6), sorted."""
    def __eq__(self, value: object, /) -> bool: ...
    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]: ...

@final
class Move:
    """One move of a defragmentation: an allocation, where it is, where it goes."""

    @property
    def allocation(self) -> str:
        """Id of the allocation that moves."""
    @property
    def source(self) -> Placement:
        """Where it is now."""
    @property
    def target(self) -> Placement:
        """Where it goes."""
    def __eq__(self, value: object, /) -> bool: ...
    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]: ...

@final
class DefragPlan:
    """What ``Cluster.plan_defrag`` proposes: moves (and evictions) that make room."""

    @property
    def request(self) -> GangRequest | MultiGangRequest:
        """The request planned for: a ``GangRequest`` or a ``MultiGangRequest``."""
    @property
    def placement(self) -> Placement:
        """Exactly what ``Cluster.apply_defrag`` will hold for the gang."""
    @property
    def moves(self) -> tuple[Move, ...]:
        """Sorted by allocation id."""
    @property
    def evictions(self) -> tuple[str, ...]:
        """Allocations preempted because they could not move (``evict_unplaceable``)."""
    @property
    def moved_gpus(self) -> int:
        """Whole GPUs the moved allocations hold in total (a share counts none)."""
    def __eq__(self, value: object, /) -> bool: ...
    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]: ...

@final
class NodeInfo:
    """One node's description and GPU state.

    ``free``, ``reserved`` and ``allocated`` are disjoint. ``unhealthy`` lists every unhealthy
    GPU: it may overlap ``allocated`` (a GPU that failed after commit stays allocated), never
    ``reserved`` or ``free``.
    """

    @property
    def name(self) -> str:
        """The node's name."""
    @property
    def gpu_topology(self) -> NodeTopology | None:
        """Its GPU groups (a ``gangplace.NodeTopology``), or ``None``."""
    @property
    def gpus(self) -> int:
        """Its GPUs, healthy or not."""
    @property
    def topology(self) -> dict[str, str]:
        """Level -> domain name, outermost first."""
    @property
    def taints(self) -> tuple[tuple[str, str, str], ...]:
        """Its taints: ``(key, value, effect)`` tuples, sorted (docs/placement.md, rule 1)."""
    @property
    def labels(self) -> dict[str, str]:
        """Its labels (a fresh dict)."""
    @property
    def cordoned(self) -> bool:
        """Whether it takes no new placements."""
    @property
    def free(self) -> tuple[int, ...]:
        """Healthy GPUs nothing holds."""
    @property
    def reserved(self) -> tuple[int, ...]:
        """GPU indices held by reservations."""
    @property
    def allocated(self) -> tuple[int, ...]:
        """GPU indices held by allocations (possibly unhealthy since)."""
    @property
    def unhealthy(self) -> tuple[int, ...]:
        """GPU indices that are never placed on (held or not)."""
    @property
    def resources(self) -> dict[str, int]:
        """Its resources besides GPUs (docs/resources.md): a fresh dict, sorted by name."""
    @property
    def free_resources(self) -> dict[str, int]:
        """What of them no live hold uses (every resource of ``resources``, zeros kept)."""
    @property
    def shared(self) -> dict[int, int]:
        """Shared GPUs (docs/resources.md "Fractions of a GPU"): GPU index -> used thousandths.

        A fresh dict by index. A shared GPU is in none of ``free``, ``reserved``, ``allocated``.
        """
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]: ...

@final
class ClusterStats:
    """GPU counts over the whole cluster.

    ``healthy == total - unhealthy``; ``free`` counts cordoned nodes too; ``unhealthy`` counts
    held unhealthy GPUs too.
    """

    @property
    def total(self) -> int:
        """All GPUs."""
    @property
    def healthy(self) -> int:
        """``total - unhealthy``."""
    @property
    def free(self) -> int:
        """Healthy GPUs nothing holds (cordoned nodes included)."""
    @property
    def reserved(self) -> int:
        """GPUs held by reservations."""
    @property
    def allocated(self) -> int:
        """GPUs held by allocations."""
    @property
    def unhealthy(self) -> int:
        """Unhealthy GPUs, held or not."""
    @property
    def resources(self) -> dict[str, int]:
        """Resources besides GPUs over every node (docs/resources.md): a fresh dict."""
    @property
    def free_resources(self) -> dict[str, int]:
        """What of them no hold uses, summed over the nodes: a fresh dict."""
    @property
    def shared(self) -> int:
        """GPUs fractional pods share (docs/resources.md): neither free nor held whole."""
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]: ...

@final
class LevelExplanation:
    """One level tried by ``Cluster.explain``: its best domain and what freeing would take.

    ``str()`` gives the line ``str(Explanation)`` prints for it.
    """

    @property
    def level(self) -> str:
        """``"node"``, a level name, or ``"cluster"``."""
    @property
    def domain(self) -> tuple[str, ...] | None:
        """Path of the domain holding the most pods, or ``None`` when none holds a pod.

        The node name comes last at level ``node``; the cluster's path is ``()``.
        """
    @property
    def capacity(self) -> int:
        """Pods that domain can hold now."""
    @property
    def needed(self) -> int:
        """Pods the gang needs."""
    @property
    def gpus_to_free(self) -> int | None:
        """Fewest held GPUs to free there for the gang to fit.

        0 if it fits, ``None`` if it cannot fit even emptied.
        """
    @property
    def preemption_victims(self) -> int | None:
        """When the gang does not fit: victims ``plan_preemption`` would take here alone.

        ``None`` when it fits, or when no preemption at this level makes room.
        """
    @property
    def preemption_max_priority(self) -> int | None:
        """The highest priority among those victims."""
    @property
    def cheapest_domain(self) -> tuple[str, ...] | None:
        """The domain of this level needing the fewest held GPUs freed for the gang to fit."""
    @property
    def cheapest_gpus_to_free(self) -> int | None:
        """How many held GPUs must be freed there (0 when the gang fits there now)."""
    @property
    def limited_by(self) -> str | None:
        """The resource keeping the most nodes of that domain below their free GPUs' pods.

        ``None`` when the request asks no resources besides GPUs, or none binds there.
        """
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]: ...

@final
class Explanation:
    """Why a gang fits where it does, or does not fit (see ``Cluster.explain``).

    ``str()`` gives the summary line, one line per level tried, and the excluded nodes.
    """

    @property
    def fits(self) -> bool:
        """Whether the gang fits now."""
    @property
    def placement(self) -> Placement | None:
        """Where it would go (what ``place_gang`` answers)."""
    @property
    def summary(self) -> str:
        """One line: where it fits, or ``Unschedulable.reason`` and the cheapest domain.

        The cheapest domain is the one needing the fewest held GPUs freed, when any would do.
        """
    @property
    def failed_group(self) -> tuple[str, str] | None:
        """Multi-role gangs that do not fit: ``(group, why)`` of the first failing group.

        The first group that failed in the first candidate of the coarsest level tried. When
        that level had no domain with the unit's GPUs free, the first group (placing order)
        that no domain of that level holds even alone, with ``why`` reading ``cannot fit even
        alone: the cluster holds 2 of its 3 pods``; ``None`` when the unit fits or every group
        fits alone (docs/roles.md, rule 6).
        """
    @property
    def levels(self) -> tuple[LevelExplanation, ...]:
        """Levels tried, finest first."""
    @property
    def excluded(self) -> dict[str, int]:
        """Nodes that cannot take one pod, by the first reason that applies.

        Keys: ``cordoned``, ``selector_mismatch`` (a selector label missing, or outside the
        required affinity), ``untolerated_taints``, ``unhealthy`` (too few healthy GPUs even if
        all were free), ``too_few_free``, ``numa_split`` (``numa="single"``: free GPUs enough,
        but no NUMA group holds a pod), ``resources`` (free GPUs enough, too few free
        resources besides GPUs for one pod).
        """
    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]: ...

@final
class Cluster:
    """A GPU cluster: its topology, the health of every GPU, and the holds on them.

    Safe to share between threads: every method is atomic. Searches run without the GIL.

    Args:
        levels: Topology level names, outermost first, e.g. ``("spine", "rack")``; may be
            empty. ``node`` (finest) and ``cluster`` (root) are implicit and may not be named.
        policy: ``"best-fit"`` (default), ``"first-fit"``, or ``"best-fit-path"`` (best-fit
            with ties broken by path alone, the rule before the ancestor tie-break; kept to
            measure it).
        clock: Zero-argument callable returning seconds (default ``time.monotonic``); used
            only for reservation lifetimes.
        max_held_gpus_per_owner: Cap on the GPUs one owner may hold at once (reserved plus
            allocated); reservations made without an owner share one cap. ``None``: no cap.
        max_level: No placement spans more than one domain of this level (fabrics that
            never join, such as Slurm switch trees without a common top); ``"node"``, a
            level name, or ``None``/``"cluster"``: no bound. Kept in snapshots.

    Raises:
        InvalidRequest: Bad levels, policy, cap or max_level.

    """

    def __new__(
        cls,
        levels: Iterable[str],
        *,
        policy: Literal["best-fit", "first-fit", "best-fit-path"] = "best-fit",
        clock: Callable[[], float] | None = None,
        max_held_gpus_per_owner: int | None = None,
        max_level: str | None = None,
    ) -> Cluster: ...
    @staticmethod
    def from_arrays(
        levels: Iterable[str],
        names: Sequence[str] | npt.NDArray[Any],
        domains: Sequence[Sequence[str] | npt.NDArray[Any] | tuple[npt.ArrayLike, Sequence[str]]],
        gpus: npt.ArrayLike,
        unhealthy_mask: npt.ArrayLike,
        labels: Mapping[str, Sequence[str | None]] | None = None,
        *,
        policy: Literal["best-fit", "first-fit", "best-fit-path"] = "best-fit",
        clock: Callable[[], float] | None = None,
        max_held_gpus_per_owner: int | None = None,
        max_level: str | None = None,
        gpu_topology: NodeTopology | tuple[Sequence[int], Sequence[NodeTopology]] | None = None,
        resources: Mapping[str, npt.ArrayLike] | None = None,
    ) -> Cluster:
        """Builds a cluster from columns, one entry per node, in one call.

        Args:
            levels: Level names, outermost first.
            names: Node names.
            domains: One column per level: the domain name of every node, either as names or
                as ``(codes, table)`` with integer codes into a table of names.
            gpus: GPUs per node (integers, 1..64).
            unhealthy_mask: Per node, a bitmask of unhealthy GPUs (bit i = GPU i), uint64.
            labels: Label key -> one value per node (``None``: the node lacks that label).
            policy: As for ``Cluster``.
            clock: As for ``Cluster``.
            max_held_gpus_per_owner: As for ``Cluster``.
            max_level: As for ``Cluster``.
            gpu_topology: GPU groups (docs/shapes.md "Inside a node"): one ``NodeTopology`` for
            every
                node, or ``(codes, table)`` with one code per node into a table of
                topologies (-1: the node has none).
            resources: Resource name -> one integer quantity per node (0: the node lacks
                it), as ``add_node``'s ``resources`` (docs/resources.md "Node resources").

        Raises:
            InvalidRequest: Columns of different lengths, codes outside their table, or any
                node ``add_node`` would refuse; no cluster is built.
            TypeError: Non-integer ``gpus`` or masks, non-str names.

        """
    @staticmethod
    def restore(data: bytes | bytearray, *, clock: Callable[[], float] | None = None) -> Cluster:
        """Rebuilds a cluster from ``snapshot()`` bytes.

        Reservations keep their remaining lifetimes: each deadline moves by the difference
        between ``clock()`` now and the snapshot's clock reading. The restored cluster answers
        every query and operation as the original did.

        Raises:
            InvalidSnapshot: Truncated, corrupted, foreign or inconsistent bytes; no cluster
                is built.
            TypeError: ``data`` is not bytes.

        """
    def snapshot(self) -> bytes:
        """The whole state as versioned, checksummed bytes.

        Levels, policy, cap, nodes, labels, health, cordons, reservations with their
        remaining lifetimes, allocations, owners, and the remembered ended ids. Equal states
        give equal bytes.
        """
    @property
    def levels(self) -> tuple[str, ...]:
        """Level names, outermost first."""
    @property
    def policy(self) -> str:
        """``"best-fit"``, ``"first-fit"`` or ``"best-fit-path"``."""
    @property
    def max_held_gpus_per_owner(self) -> int | None:
        """The cap on GPUs one owner may hold at once; ``None``: no cap."""
    @property
    def max_level(self) -> str | None:
        """No placement spans more than one domain of this level; ``None``: no bound."""
    def add_node(
        self,
        name: str,
        *,
        gpus: int,
        topology: Mapping[str, str],
        labels: Mapping[str, str] | None = None,
        unhealthy: Iterable[int] | None = None,
        gpu_topology: NodeTopology | None = None,
        resources: Mapping[str, int] | None = None,
        taints: Iterable[tuple[str, str, str]] | None = None,
    ) -> None:
        """Adds a node with ``gpus`` GPUs (1..64) under the domains ``topology`` names.

        Args:
            name: Unique, non-empty.
            gpus: Number of GPUs, 1..64; 0 for a node offering only ``resources`` (every
                GPU partitioned into MIG slices).
            topology: Every level -> its domain name, and no other keys.
            labels: Labels selectors match against.
            unhealthy: GPU indices that must never be placed on.
            gpu_topology: Its GPU groups (a ``gangplace.NodeTopology``: NUMA sockets, PCIe
                switches); pods then take the GPUs of the tightest finest group that holds
                them (docs/shapes.md "Inside a node").
            resources: Resources besides GPUs, name -> integer quantity in base units
                (``"cpu"`` in millicores, ``"memory"`` in bytes, any other name in units;
                docs/resources.md "Node resources"): 0..2**50 each, at most 32 names, not
                ``"nvidia.com/gpu"`` (GPUs are ``gpus``).
            taints: ``(key, value, effect)`` tuples, effect ``"NoSchedule"``,
                ``"PreferNoSchedule"`` or ``"NoExecute"`` (at most 32): a request that does
                not tolerate a ``NoSchedule`` or ``NoExecute`` taint never uses the node
                (docs/placement.md, rule 1).

        Raises:
            InvalidRequest: Duplicate or empty names, missing or extra levels, out-of-range
                counts, indices or quantities, a GPU topology of another GPU count. The
                cluster is left exactly as it was.
            LimitExceeded: The cluster already has 4,194,304 nodes.

        """
    def update_node(
        self,
        name: str,
        *,
        labels: Mapping[str, str] | None = None,
        topology: Mapping[str, str] | None = None,
        gpus: int | None = None,
        gpu_topology: NodeTopology | None = None,
        resources: Mapping[str, int] | None = None,
        taints: Iterable[tuple[str, str, str]] | None = None,
    ) -> None:
        """Updates a node in place (docs/transactions.md "Node updates", N1-N3).

        ``labels`` and ``taints`` replace every label or taint of the node, at any time
        (selector pools follow; holds already on the node stay).
        ``topology``, ``gpus`` and ``gpu_topology`` change only while no reservation or
        allocation holds a GPU of the node; a value equal to the current one is no change.
        The node keeps its cordon and its unhealthy GPUs (those past a smaller count are
        dropped).

        Args:
            name: The node.
            labels: Every label, replacing the old ones; ``None``: unchanged.
            topology: Every level -> its domain name; ``None``: unchanged.
            gpus: The GPU count, 1..64 (0 with resources); ``None``: unchanged.
            gpu_topology: Its GPU groups; ``None``: unchanged (a node with groups that
                changes its GPU count needs new groups).
            resources: Every resource besides GPUs, replacing the old ones, at any time
                (pods already holding more than a smaller capacity keep it; the node is full
                for that resource until they end); ``None``: unchanged.
            taints: Every taint, replacing the old ones (as ``add_node``); ``None``:
                unchanged.

        Raises:
            UnknownNode: No such node.
            Conflict: A change of topology, GPU count or groups while holds sit on the node.
            InvalidRequest: Bad names, levels, counts or groups (as ``add_node``).

        On any error the cluster is left exactly as it was.

        """
    def set_priority(
        self, hold: Reservation | Allocation | str, priority: int, *, owner: str | None = None
    ) -> Reservation | Allocation:
        """Changes a live hold's priority; returns the hold as it is now.

        Raises:
            UnknownReservation: Unknown id (or another owner's).
            ReservationError: The hold has ended.
            InvalidRequest: ``priority`` out of -2**31..2**31-1.

        """
    def hold_status(self, hold: Reservation | Allocation | str, *, owner: str | None = None) -> str:
        """``"reserved"``, ``"allocated"``, or how the hold ended.

        Endings: ``"released"``, ``"rolled-back"``, ``"expired"``, ``"revoked"``,
        ``"preempted"``, ``"migrated"``, ``"merged"`` (a repair reservation after
        ``commit_repair``). Snapshots keep them.

        Raises:
            UnknownReservation: Unknown id, another owner's, or ended too long ago.

        """
    def plan_preemption(
        self,
        request: GangRequest | MultiGangRequest,
        *,
        max_victims: int | None = None,
        min_runtime: float = 0.0,
        exempt_owners: Iterable[str] = (),
        exempt_allocations: Iterable[Allocation | str] = (),
        candidates: Iterable[Allocation | str] | None = None,
    ) -> PreemptionPlan | None:
        """Which allocations to end so that the gang fits, and where it then goes.

        A pure query (docs/preemption.md, rules P1-P6): a gang that fits as it is gets a plan
        without victims. Victims are whole live allocations, preemptible, of a strictly lower
        priority, committed at least ``min_runtime`` seconds ago, of owners not in
        ``exempt_owners``, not in ``exempt_allocations`` (allocations or ids; ids of no live
        allocation are ignored); the plan is 1-minimal among those, and the finest level that
        yields one wins. With ``candidates`` (rule P7), victims come only from those
        allocations, whatever their priority (the caller's policy chose them, as the
        Scheduler's queues do); the other filters still apply, and ``preempt`` accepts them.
        A ``MultiGangRequest`` is planned for as one unit: it fits a domain when every group
        and colocation succeeds there (docs/roles.md). A request asking
        resources besides GPUs counts them: victims give back their resources with their
        GPUs, and a job holding only resources can be one (docs/resources.md "Node resources").
        Shares count (docs/preemption.md P8): a fractional allocation may be a victim,
        giving back its shares (a shared GPU is free once all its shares are given back),
        and a fractional gang's pods count by the room of the GPUs; P4-P5 count what
        victims hold in thousandths of a GPU (for a ``MultiGangRequest`` too).

        Returns:
            The plan, or ``None`` when no set within ``max_victims`` makes room.

        Raises:
            InvalidRequest: Negative ``max_victims``, bad ``min_runtime``, or an unknown level.
            UnknownReservation: A string in ``exempt_allocations`` or ``candidates`` that is
                no hold id.

        """
    def plan_repair(
        self,
        allocation: Allocation | str,
        *,
        widen: bool = False,
        preempt: bool = False,
        owner: str | None = None,
    ) -> RepairPlan | None:
        """Where the lost ranks of an allocation go: all of them, or ``None``.

        A pure query (docs/repair.md "Repair after failures", rules R1-R3, R6). Lost ranks take the
        allocation's spares first; then a slice gang's (or a sliced group's) go to free
        healthy GPUs in their own innermost slice's domain; other gangs' to the placement's
        domain, or with ``widen`` to the smallest enclosing domain, up to the request's
        coarsest level, where all fit. With
        ``preempt``, when nothing else fits, the fewest lower-priority preemptible allocations
        inside the placement's domain become ``victims`` (ended by ``repair``). Pods follow
        the placement rules and are counted by the nodes' free resources too when they ask
        some (docs/resources.md "Node resources"; victims give theirs back); ranks keep their
        numbers. Without lost ranks, a plan with no replacements. A fractional allocation's
        lost ranks get pods of its share by rules F1-F2 (docs/repair.md R7); victims may be
        fractional allocations, their shares given back (docs/preemption.md P8).

        Raises:
            UnknownReservation: No such id, or another owner's.
            ReservationError: A reservation (commit it first), or an ended allocation.

        """
    def explain_repair(
        self, allocation: Allocation | str, *, owner: str | None = None
    ) -> dict[str, int]:
        """For each tier of rule R2, how many of the allocation's lost ranks would fit there.

        Keys ``"spares"``, ``"slice"``, ``"domain"``, ``"widened"`` (docs/repair.md "Repair after
        failures"): each group of lost ranks counted alone by capacity, so the numbers say
        where room is, not that a plan exists.

        Raises:
            UnknownReservation: No such id, or another owner's.
            ReservationError: A reservation, or an ended allocation.

        """
    def repair(
        self, plan: RepairPlan, *, ttl: float = 60.0, owner: str | None = None
    ) -> Reservation:
        """Reserves a repair plan's replacement GPUs, tied to its allocation.

        Re-validates (docs/repair.md "Repair after failures", R4): the allocation is live, its lost
        ranks are the plan's, every target GPU is still free, healthy and inside its domain
        (its slice's for a slice gang), and every target node's free resources still hold
        what its new pods ask; for a fractional allocation, every target GPU still has room
        for its shares (docs/repair.md R7). The reservation's pods are the replacements in
        rank order, holding what their ranks ask besides GPUs (and their shares);
        ``.repairs`` names the allocation. Commit it with ``commit_repair``.

        Args:
            plan: From ``plan_repair``.
            ttl: Lifetime in seconds; ``commit_repair`` before it runs out.
            owner: Who holds the repair reservation (and may see the allocation).

        Raises:
            Conflict: The plan is stale (lost ranks changed, a target GPU is taken or has
                no room for its shares, or a target node's resources no longer hold its
                pods); nothing is held.
            UnknownReservation: No such allocation, or another owner's.
            ReservationError: The allocation ended, or is a reservation.
            LimitExceeded: The owner would exceed ``max_held_gpus_per_owner``.
            InvalidRequest: Bad ``ttl`` or ``owner``, or a plan that repairs nothing.

        """
    def reserve_spares(
        self, allocation: Allocation | str, count: int, *, owner: str | None = None
    ) -> Allocation:
        """Holds more spares for an allocation (docs/repair.md "Spares", S5).

        ``count`` pods of its pod size inside its placement's domain, or ``count`` in every
        innermost slice domain of a slice gang, by the placement rules with its selector,
        spread and NUMA policy, each asking (and holding) what a pod asks besides GPUs;
        appended to ``Allocation.spares``. All or nothing.

        Raises:
            Unschedulable: Not all of them fit; nothing changes.
            UnknownReservation: No such id, or another owner's.
            ReservationError: A reservation, or an ended allocation.
            LimitExceeded: Its owner would exceed ``max_held_gpus_per_owner``.
            InvalidRequest: ``count`` below 1 or past the gang limit, an allocation not placed
                from a ``GangRequest``, one whose pods hold no GPU, or a fractional one.

        """
    def commit_repair(
        self, reservation: Reservation | str, *, owner: str | None = None
    ) -> Allocation:
        """Merges a repair reservation into its allocation, which keeps its id.

        docs/repair.md "Repair after failures", R5: the lost ranks point at the new pods, the lost
        pods' healthy GPUs and their resources go back to the pool, ``lost`` becomes empty,
        and the domain widens only if a replacement lies outside it.

        Raises:
            Conflict: The allocation's lost ranks changed since ``repair``; the repair
                reservation is rolled back.
            ReservationExpired: It ran out.
            ReservationRevoked: One of its GPUs became unhealthy or its node was removed.
            UnknownReservation: No such id, or another owner's.
            ReservationError: Not a repair reservation, rolled back (also when its allocation
                ended) or already merged.
            LimitExceeded: The allocation's owner would exceed ``max_held_gpus_per_owner``.

        """
    def preempt(
        self, plan: PreemptionPlan, *, ttl: float = 30.0, owner: str | None = None
    ) -> Reservation:
        """Ends the plan's victims and reserves its placement, in one atomic mutation.

        The reservation carries the request's priority and flags. The victims'
        ``hold_status`` becomes ``"preempted"``; releasing them returns ``False``. The caller
        stops their pods before binding; the ttl covers their grace period.

        Raises:
            Conflict: Anything moved since the plan (a victim ended or changed priority, a
                GPU of the placement was taken, a node was cordoned or removed). Nothing
                changed.
            LimitExceeded: The owner's cap.

        """
    def plan_defrag(
        self,
        request: GangRequest | MultiGangRequest,
        *,
        max_moves: int = 16,
        allow_downgrade: bool = False,
        evict_unplaceable: bool = False,
        min_runtime: float = 0.0,
        exempt_owners: Iterable[str] = (),
    ) -> DefragPlan | None:
        """Which movable jobs to move where so that the gang fits (docs/preemption.md, rules D1-D4).

        A pure query. Candidates are movable allocations of a priority at most the
        request's; a set is chosen per domain as for preemption and accepted only if every
        member can be placed again outside the gang's domain by its own request (biggest
        first, best-fit sends them to the fullest domains), never at a coarser level than it
        has unless ``allow_downgrade``. With ``evict_unplaceable`` a member that cannot move
        is preempted instead, if it is a preemption candidate. A ``MultiGangRequest`` is
        planned for as one unit (docs/roles.md). Shares
        count (docs/preemption.md D5): a fractional gang is placed by the room of the GPUs,
        and a fractional allocation may move, keeping its share (its GPUs' room given back,
        its new pods placed by rules F1-F2); sets and moves are ranked in thousandths of a
        GPU; ``moved_gpus`` counts whole GPUs.

        Returns:
            The plan (no moves when the gang fits), or ``None``.

        """
    def apply_defrag(
        self, plan: DefragPlan, *, ttl: float = 300.0, owner: str | None = None
    ) -> tuple[Reservation, dict[str, Reservation]]:
        """Moves and evicts in one atomic mutation.

        Returns the gang's reservation and, per moved allocation id, its new reservation
        (same owner, priority and flags). Moved allocations end as ``"migrated"``, evicted
        ones as ``"preempted"``. A moved job that does not commit its new reservation before
        its ttl loses it: it has then in effect been preempted.

        Raises:
            Conflict: Anything moved since the plan. Nothing changed.
            LimitExceeded: The owner's cap (for the gang's reservation).

        """
    def adopt(
        self,
        pods: Iterable[PodPlacement | tuple[str, int]],
        *,
        owner: str | None = None,
        priority: int | None = None,
        preemptible: bool | None = None,
        movable: bool | None = None,
        into: Allocation | str | None = None,
        resources: Mapping[str, int] | Sequence[Mapping[str, int]] | None = None,
        gpu_milli: int | None = None,
    ) -> Allocation:
        """Records pods that already run as one allocation; no placement rule applies.

        For a scheduler that starts up and finds work bound to nodes (Kubernetes pods, Slurm
        ``GresUsed``). Each entry is a ``PodPlacement`` (exactly those GPUs) or a
        ``(node, count)`` pair (that many of the node's lowest-indexed free healthy GPUs).
        Every GPU must exist, be free and healthy, and be named once; cordoned nodes are
        accepted. The result is an ordinary allocation (release, snapshots, caps, owners,
        preemption), at the finest level whose one domain holds all of its nodes; priority,
        preemptible and movable default to 0, True and False.

        With ``into`` (docs/transactions.md "Adopting running work"), the pods join that live
        allocation instead, as new ranks after its others (ranked among themselves by rule
        6; every earlier rank keeps its number), for a pod of a running gang that shows up
        later. Only an allocation placed without a request (``adopt``,
        ``reserve(placement)``) grows; ``owner`` is then the caller (as for ``release``) and
        the allocation keeps its owner; a priority or flag given replaces the allocation's,
        one left ``None`` keeps it.

        ``resources`` (docs/resources.md "Node resources"): what the pods use besides GPUs, one
        mapping for every pod or one per pod in the order given; each node must have them free. A
        ``(node, 0)`` entry is a pod without GPUs, adopted when it asks resources.

        ``gpu_milli`` (docs/resources.md "Fractions of a GPU"): each pod uses that many thousandths
        of one GPU (1 to 999), for pods sharing GPUs (time-slicing, MPS, Alibaba's
        ``gpu_milli``). Each entry is then a ``(node, 1)`` pair, whose GPU rule F2 chooses
        (the least room that holds the share, ties to the lowest index), or a
        ``PodPlacement`` of exactly one GPU, which must be healthy, held by no whole pod and
        have room. With ``into``, the pods of a fractional allocation give its share (an
        allocation has one share per pod).

        Raises:
            Conflict: A GPU is held, unhealthy, named twice, or a node has too few free GPUs
                for a count or too few free resources for its pods; for fractions, a GPU or
                node without room for a share. Nothing changed.
            UnknownNode: No node has an entry's name.
            InvalidRequest: No pods, a GPU index or count out of range, a bad priority or
                owner, ``into`` an allocation placed for a request, ``gpu_milli`` out of
                range or other than ``into``'s share per pod (``None`` for whole GPUs), or a
                fractional pod of other than one GPU.
            LimitExceeded: The owner's cap.
            ReservationError: ``into`` a reservation or an allocation that ended.
            UnknownReservation: ``into`` an unknown id, or another owner's.

        """
    def capacity_for(self, request: GangRequest | MultiGangRequest) -> int:
        """How many disjoint copies of ``request`` ``reserve_many`` would place now.

        The fragmentation figure to track before and after a decision (owner caps aside).
        Costs one placement per copy. A ``MultiGangRequest`` counts whole units.
        """
    def remove_node(self, name: str) -> list[str]:
        """Removes a node, as a node failure would.

        Every reservation touching the node is revoked (all its GPUs are freed, ``commit``
        raises ``ReservationRevoked``). Allocations touching it lose the GPUs there and stay
        until released; ``release`` still works.

        Returns:
            The ids of every hold that had GPUs (or, for pods without GPUs, resources) on the
            node, sorted: the reservations it revoked and the allocations it detached (as
            ``set_gpu_health`` names the holds of a GPU). ``reservations()`` and
            ``allocations()`` tell them apart.

        Raises:
            UnknownNode: No such node.

        """
    def set_gpu_health(self, node: str, gpu: int, healthy: bool) -> list[str]:
        """Marks one GPU healthy or unhealthy.

        A reservation holding a GPU that turns unhealthy is revoked whole (all its GPUs are
        freed; ``commit`` raises ``ReservationRevoked``). An allocation stays; after its
        release the GPU stays out of the pool while unhealthy.

        Returns:
            The ids of the reservations and allocations that hold that GPU, sorted, whether
            it is marked healthy or unhealthy.

        Raises:
            UnknownNode: No such node.
            InvalidRequest: ``gpu`` out of range.

        """
    def cordon(self, node: str) -> None:
        """No new placements on ``node``; its reservations and allocations stay valid."""
    def uncordon(self, node: str) -> None:
        """Undoes ``cordon``."""
    def node(self, name: str) -> NodeInfo:
        """The node's state. Raises ``UnknownNode`` (a ``KeyError``)."""
    def nodes(self) -> list[str]:
        """All node names, sorted."""
    def stats(self) -> ClusterStats:
        """GPU counts over the cluster."""
    def place_gang(self, request: GangRequest | MultiGangRequest) -> Placement | None:
        """Where the gang would go now, or ``None``. A pure query: it holds nothing.

        Rules (deterministic; ties always broken by domain path, then node name):

        1. Feasible nodes are uncordoned and carry every selector label. A node holds
           floor(free healthy GPUs / gpus_per_pod) pods; a domain the sum over its nodes.
        2. Levels are tried finest first (node, the levels innermost first, cluster), none
           coarser than ``required_level``; the first level with a domain holding all pods wins.
        3. best-fit picks the domain with the fewest free healthy GPUs, then the fullest
           parent, grandparent, ..., then smallest path; first-fit the smallest path.
        4. Inside it, pods go to as few children as possible at every level: a child that can
           hold all remaining pods takes them (smallest capacity, then path); otherwise the
           largest child (then smallest path) is filled and the rest continues.
        5. On a node, pods take the lowest-indexed free healthy GPUs.
        6. Pods are ranked by (node's domain path, node name, first GPU).
        7. Elastic gangs: if nothing holds ``pods`` but one domain of the coarsest allowed
           level holds at least ``min_pods``, the largest such number of pods is placed by
           the same rules.

        A ``MultiGangRequest`` is placed as one unit by docs/roles.md.

        Raises:
            InvalidRequest: Unknown ``required_level``.

        """
    def reserve(
        self,
        request: GangRequest | MultiGangRequest | Placement,
        *,
        ttl: float = 30.0,
        owner: str | None = None,
        avoid: Iterable[PodPlacement | Placement] = (),
    ) -> Reservation:
        """Holds GPUs for ``ttl`` seconds (0 < ttl <= 7 days).

        Given a ``GangRequest`` or a ``MultiGangRequest``, places the gang now (as
        ``place_gang``) and holds all of it. Given a ``Placement`` from an earlier
        ``place_gang``, holds exactly those GPUs if every one is still free, healthy, on an
        uncordoned node inside the placement's domain; otherwise raises ``Conflict``. That
        closes the race between deciding and binding.

        Args:
            request: What to hold.
            ttl: Lifetime in seconds; ``commit`` before it runs out.
            owner: Who holds it. Only calls with the same ``owner`` can commit, roll back or
                release it; to anyone else its id looks unknown.
            avoid: Pods whose GPUs the gang must not take, or placements standing for all
                their pods (a ``GangRequest`` only; docs/preemption.md "Looking ahead", L2, L3): it
                is placed as if they were held, and they stay as they were.

        Raises:
            Unschedulable: No placement; ``.reason`` tells what each level could hold.
            Conflict: The placement is stale.
            LimitExceeded: The owner would exceed ``max_held_gpus_per_owner``.
            InvalidRequest: Bad ``ttl``, ``owner`` or ``required_level``, or a GPU of
                ``avoid`` its node does not have; nothing is held.
            UnknownNode: A node of ``avoid`` that does not exist.

        """
    def place_after(
        self,
        request: GangRequest,
        releases: Iterable[Iterable[Allocation | str]] = (),
        *,
        avoid: Iterable[PodPlacement | Placement] = (),
    ) -> tuple[int, Placement] | None:
        """Where a gang would go once some allocations have ended: the first moment it fits.

        A pure query (docs/preemption.md "Looking ahead", L1-L3). ``releases`` lists groups of
        allocations (or ids) in the order they are expected to end; the answer is the
        smallest ``k`` such that the gang fits once the allocations of ``releases[:k]`` have
        ended (their healthy GPUs free, and the resources besides GPUs and the shares of GPUs
        their pods use), with the GPUs of ``avoid`` kept out of its way (a shared one takes
        no share either), and its placement then, by the placement rules (rules F1-F2 for a
        fractional gang, docs/resources.md "Fractions of a GPU"). ``k = 0``: it fits now. Ids
        of no live allocation are ignored.

        Returns:
            ``(k, placement)``, or ``None`` when it does not fit even with every group ended.

        Raises:
            InvalidRequest: An unknown level, or a GPU of ``avoid`` its node does not have.
            UnknownNode: A node of ``avoid`` that does not exist.
            UnknownReservation: A string in ``releases`` that is no hold id.
            TypeError: ``request`` is not a ``GangRequest``; malformed ``releases``/``avoid``.

        """
    def commit(self, reservation: Reservation | str, *, owner: str | None = None) -> Allocation:
        """Turns a reservation into an allocation. Idempotent.

        Raises:
            ReservationExpired: Its lifetime ran out.
            ReservationRevoked: One of its GPUs became unhealthy or its node was removed.
            UnknownReservation: No such id, or it belongs to another owner.
            ReservationError: It was rolled back or released.

        """
    def rollback(self, reservation: Reservation | str, *, owner: str | None = None) -> bool:
        """Frees a reservation, restoring every node exactly.

        Returns:
            True if it freed something; False if it had already expired, been revoked or
            rolled back.

        Raises:
            ReservationError: It was committed (release the allocation instead).
            UnknownReservation: No such id, or it belongs to another owner.

        """
    def release(self, allocation: Allocation | str, *, owner: str | None = None) -> bool:
        """Frees an allocation.

        Returns:
            True the first time, False after.

        Raises:
            ReservationError: The id was never committed.
            UnknownReservation: No such id, or it belongs to another owner.

        """
    def reservations(self, owner: str | None = None) -> list[Reservation]:
        """Live reservations, sorted by id; only ``owner``'s when given, else all."""
    def release_pods(
        self,
        allocation: Allocation | str,
        ranks: Iterable[int],
        *,
        owner: str | None = None,
    ) -> Allocation | None:
        """Ends some pods of an allocation (docs/transactions.md "Ending some pods", E1-E4).

        For a worker that completed or a pod that was deleted while the rest of the gang runs.
        The GPUs the ended pods still hold go back to the pool (unhealthy ones stay out of it);
        the ranks are listed in ``Allocation.ended`` and keep their places in
        ``placement.pods``, so every other rank keeps its number. An ended rank is never lost
        nor repaired, and an allocation with an ended rank is no longer moved by
        defragmentation.

        Args:
            allocation: The allocation or its id.
            ranks: The ranks to end (ints, each once).
            owner: The caller (as for ``release``).

        Returns:
            The allocation as it is now, or ``None`` when no rank is left: then it ended as
            released (``hold_status`` says ``"released"``) and its spares' GPUs are freed too.

        Raises:
            InvalidRequest: No ranks, a rank out of range, named twice or already ended.
            ReservationError: A reservation (not committed), an allocation that ended, or a
                rank that a live repair reservation replaces.
            UnknownReservation: No such id, or it belongs to another owner.

        """
    def holds_on(self, name: str) -> list[tuple[str, tuple[int, ...]]]:
        """The live holds with GPUs on a node (docs/transactions.md "Transactions").

        Reservations and allocations, spares included, each once and sorted by id, with the
        GPU indices it holds on the node, ascending (an allocation keeps the GPUs that failed
        under it); a fractional hold with the GPUs it holds shares of (docs/resources.md F1),
        so several holds may name one shared GPU. Expired reservations are reclaimed first.
        A pure query: one pass over the node's holds, not over the cluster's.

        Raises:
            UnknownNode: No such node (a ``KeyError``).

        """
    def allocations(self, owner: str | None = None, *, lost: bool = False) -> list[Allocation]:
        """Live allocations, sorted by id; only ``owner``'s when given, else all.

        With ``lost=True``, only those with lost ranks (docs/repair.md "Repair after failures"):
        the others are skipped inside the engine, so a scheduler finds its damaged jobs
        each cycle without reading every allocation.
        """
    def to_svg(self, highlight: Placement | None = None) -> str:
        """The rack map as an SVG document (see ``gangplace.pictures``).

        One block per top-level domain, racks as columns, nodes as rows of GPU cells coloured
        free / reserved / allocated / unhealthy, cordoned nodes hatched; ``highlight``
        outlines a placement's GPUs. Large clusters collapse to a cell per node or rack.
        """
    def _repr_html_(self) -> str:
        """Notebooks show the rack map."""
    def explain(self, request: GangRequest | MultiGangRequest) -> Explanation:
        """Why the gang fits where it does, or does not fit.

        For every level tried (finest first): the domain that could hold the most pods, how
        many, and the held GPUs that would have to be freed there for the gang to fit; the
        nodes that cannot take even one pod, by reason. Its ``summary`` is the text of
        ``Unschedulable.reason``, followed, when freeing held GPUs would make room, by the
        domain needing the fewest (``; freeing 4 held GPUs in rack b would fit it``). Visits
        every node: a diagnostic, not a scheduling-loop call. For a ``MultiGangRequest``, each
        level's first candidate and the first group that failed there (``failed_group``).

        Raises:
            InvalidRequest: Unknown ``required_level``.

        """
    def _allocate(
        self,
        request: GangRequest,
        *,
        ttl: float = 30.0,
        owner: str | None = None,
        avoid: Iterable[PodPlacement | Placement] = (),
    ) -> Allocation:
        """Reserves and commits a ``GangRequest`` in one call under one lock.

        ``commit(reserve(request, ttl=ttl, owner=owner, avoid=avoid), owner=owner)``: the same
        rules, errors and ids as the two calls (docs/transactions.md "Transactions", "Looking ahead"
        L2), without the reservation in between. Private: the Scheduler's start of a job (one
        crossing instead of two per start).

        Raises:
            Unschedulable: No placement. LimitExceeded: the owner's cap.
            InvalidRequest, UnknownNode, TypeError: as ``reserve``.

        """
    def place_many(
        self, requests: Iterable[GangRequest | MultiGangRequest]
    ) -> list[Placement | None]:
        """``place_gang`` for each request on the current state, in one call.

        Raises:
            InvalidRequest: Any request names an unknown level (nothing is answered).

        """
    def reserve_many(
        self,
        requests: Iterable[GangRequest | MultiGangRequest],
        *,
        ttl: float = 30.0,
        owner: str | None = None,
    ) -> list[Reservation | None]:
        """Reserves the gangs greedily in order, each seeing the previous ones' holds.

        A gang that does not fit, or would take ``owner`` past its cap, gets ``None``.

        Raises:
            InvalidRequest: Bad ``ttl``/``owner``, or a request names an unknown level;
                checked before anything is held.

        """
    def gpu_state(self) -> dict[str, Any]:
        """Per-node GPU state as numpy arrays, nodes in name order: one read for a picture.

        Keys: ``node`` (names), ``gpus``, ``free``, ``reserved``, ``allocated``,
        ``unhealthy`` (uint8 counts), ``cordoned`` (bool), ``free_mask``, ``reserved_mask``,
        ``allocated_mask``, ``unhealthy_mask``, ``shared_mask`` (uint64, bit i: GPU i; a
        shared GPU, docs/resources.md "Fractions of a GPU", is in none of the other masks),
        ``domains``: a dict of level name -> the domain name of every node at that level, and
        ``resources`` / ``free_resources``: dicts of resource name -> every node's capacity /
        unused amount (uint64; 0 where a node lacks it; docs/resources.md "Node resources").
        """
    def check_invariants(self) -> None:
        """Recomputes every aggregate and cross-checks holds.

        Raises:
            InternalError: On any mismatch (a bug in gangplace).

        """
    def __len__(self) -> int:
        """Number of nodes."""
    def seed_ids(self, seed: int | None) -> None:
        """Hold ids from now on come from a generator seeded with ``seed``.

        For repeatable runs (simulations, tests): preemption and defragmentation break their
        last ties by id, so random ids make such runs differ. The ids stay 128-bit and
        unique but become predictable: never seed a cluster that serves several tenants.
        ``None`` returns to the operating system's randomness. Snapshots do not keep it.

        Raises:
            TypeError: ``seed`` is not an int or ``None``.

        """
    def __reduce__(self) -> tuple[Any, tuple[bytes]]: ...
    def __copy__(self) -> Cluster: ...
    def __deepcopy__(self, memo: Any, /) -> Cluster: ...
    def __contains__(self, name: object, /) -> bool:
        """``"n0" in cluster``: whether a node has that name (``False`` for anything not a str)."""

def _unpickle(kind: str, data: bytes) -> Any:
    """Rebuilds a value pickled by its ``__reduce__`` (``kind``: its class name)."""
