"""The stateful oracle: a pure-Python cluster that behaves as ``gangplace.Cluster``.

Same constructor, methods, answers, errors and reasons. It keeps nodes and holds in plain
dicts and sets, and asks :mod:`gangplace.reference.rules` for every placement, recomputing
everything from the nodes on every call: no aggregates and no cleverness, so that it can
serve as the oracle of the differential tests and as the baseline of the benchmarks. Only
ids differ (both are random).
"""

from __future__ import annotations

import math
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gangplace.errors import (
    InvalidRequest,
    ReservationError,
    ReservationExpired,
    ReservationRevoked,
    UnknownNode,
    UnknownReservation,
    Unschedulable,
)
from gangplace.reference import snapshots, spares, texts
from gangplace.reference.adoption import Adoption
from gangplace.reference.defrags import Defrags
from gangplace.reference.filters import checked_taints
from gangplace.reference.fractions import Fractions
from gangplace.reference.inventory import Inventory
from gangplace.reference.lookahead import Lookahead
from gangplace.reference.planning import Planning, gpu_groups, is_roles
from gangplace.reference.pods import PodEndings
from gangplace.reference.ranks import asks_without_spares
from gangplace.reference.removals import COMMITTED_ENDINGS
from gangplace.reference.repair import Repairs
from gangplace.reference.resources import Resources, checked_resources
from gangplace.reference.validation import Validation
from gangplace.reference.values import (
    CLUSTER,
    DEFAULT_TTL_SECONDS,
    MAX_GPUS_PER_NODE,
    MAX_LEVELS,
    MAX_NAME_BYTES,
    MAX_NODES,
    NODE,
    REMEMBERED_ENDED_HOLDS,
    Allocation,
    AnyRequest,
    Path,
    Placement,
    PlacementLike,
    PodPlacement,
    Request,
    Reservation,
    RolesRequest,
    check_name,
    splitmix64,
)

__all__ = ["Cluster"]


@dataclass
class _Node:
    name: str
    gpus: int
    path: Path  # domain names, outermost first
    labels: dict[str, str]
    cordoned: bool = False
    unhealthy: set[int] = field(default_factory=set)
    reserved: set[int] = field(default_factory=set)
    allocated: set[int] = field(default_factory=set)
    gpu_levels: tuple[str, ...] = ()
    gpu_paths: tuple[tuple[int, ...], ...] | None = None
    resources: dict[str, int] = field(default_factory=dict)  # docs/resources.md "Node resources"
    shares: dict[int, int] = field(default_factory=dict)  # docs/resources.md "Fractions of a GPU"
    taints: tuple[tuple[str, str, str], ...] = ()  # docs/placement.md, rule 1

    def free(self) -> list[int]:
        held = self.unhealthy | self.reserved | self.allocated | self.shares.keys()
        return [gpu for gpu in range(self.gpus) if gpu not in held]


@dataclass
class _Hold:
    committed: bool
    expires_at: float
    gpus: dict[str, set[int]]
    placement: Placement
    owner: str | None = None
    priority: int = 0
    preemptible: bool = True
    movable: bool = False
    since: float = 0.0
    request: Request | None = None
    roles: RolesRequest | None = None  # a multi-role hold's request (then ``request`` is None)
    repairs: str | None = None  # a repair reservation: the allocation it repairs
    repaired_ranks: tuple[int, ...] = ()  # and the ranks its pods replace, in pod order
    repair_spares: tuple[tuple[int, PodPlacement], ...] = ()  # and the spares it takes
    ended: tuple[int, ...] = ()  # docs/transactions.md: ranks ``release_pods`` ended
    asks: tuple[Mapping[str, int], ...] = ()  # what pods ask besides GPUs: all, or per rank
    res_nodes: set[str] = field(default_factory=set)  # nodes it uses resources on, not removed

    @property
    def asked(self) -> AnyRequest | None:
        """The request it was placed for, of either kind."""
        return self.request if self.request is not None else self.roles

    def reservation(self, hid: str) -> Reservation:
        return Reservation(
            hid,
            self.placement,
            self.expires_at,
            self.owner,
            self.priority,
            self.preemptible,
            self.movable,
            self.since,
            self.asked,
            self.repairs,
            self.repaired_ranks,
        )

    def allocation(self, hid: str, nodes: Mapping[str, _Node]) -> Allocation:
        return Allocation(
            hid,
            self.placement,
            self.owner,
            self.priority,
            self.preemptible,
            self.movable,
            self.since,
            self.asked,
            self.lost(nodes),
            self.ended,
        )

    def lost(self, nodes: Mapping[str, _Node]) -> tuple[int, ...]:
        """docs/repair.md: ranks whose node was removed or that have an unhealthy GPU.

        A removed node's GPUs are no longer in the hold, even if a node of its name returns.
        An ended rank is never lost.
        """
        return tuple(
            rank
            for rank, pod in enumerate(self.placement.pods)
            if rank not in self.ended
            and (
                pod.node
                not in (self.gpus if pod.gpus and not self.placement.gpu_milli else self.res_nodes)
                or pod.node not in nodes
                or set(pod.gpus) & nodes[pod.node].unhealthy
            )
        )

    def gpu_count(self) -> int:
        return sum(len(gpus) for gpus in self.gpus.values())


class Cluster(
    Planning,
    Defrags,  # and its base, Removals (preemption)
    Adoption,
    Repairs,
    Validation,
    Inventory,
    PodEndings,
    Lookahead,
    Resources,
    Fractions,
):
    """The reference cluster: same constructor and methods as ``gangplace.Cluster``."""

    def __init__(
        self,
        levels: Iterable[str],
        *,
        policy: str = "best-fit",
        clock: Callable[[], float] | None = None,
        max_held_gpus_per_owner: int | None = None,
        max_level: str | None = None,
    ) -> None:
        levels = tuple(levels)
        if len(levels) > MAX_LEVELS:
            raise InvalidRequest(f"{len(levels)} levels given; the limit is {MAX_LEVELS}")
        for index, level in enumerate(levels):
            check_name("a level name", level)
            if level in (NODE, CLUSTER):
                raise InvalidRequest(f"level {level!r} is implicit and cannot be declared")
            if level in levels[:index]:
                raise InvalidRequest(f"level {level!r} is given twice")
        if policy not in ("best-fit", "first-fit", "best-fit-path"):
            raise InvalidRequest(
                f"policy must be 'best-fit', 'first-fit' or 'best-fit-path', not {policy!r}"
            )
        if max_held_gpus_per_owner is not None and max_held_gpus_per_owner < 0:
            raise InvalidRequest(
                f"max_held_gpus_per_owner must be >= 0, got {max_held_gpus_per_owner}"
            )
        self.levels = levels
        self.policy = policy
        self.max_held_gpus_per_owner = max_held_gpus_per_owner
        if max_level is not None and max_level not in ("cluster", "node", *levels):
            raise InvalidRequest(f"max_level {max_level!r} is not a level of this cluster")
        self.max_level = None if max_level in (None, "cluster") else max_level
        self._clock = clock or time.monotonic
        self._nodes: dict[str, _Node] = {}
        self._holds: dict[str, _Hold] = {}
        self._ended: OrderedDict[str, tuple[str, str | None]] = OrderedDict()
        self._next_id: int | None = None
        self._id_state: int | None = None
        self._resource_names: set[str] = set()

    # ----------------------------------------------------------------- inventory

    def add_node(
        self,
        name: str,
        *,
        gpus: int,
        topology: Mapping[str, str],
        labels: Mapping[str, str] | None = None,
        unhealthy: Iterable[int] | None = None,
        gpu_topology: Any = None,
        resources: Mapping[str, int] | None = None,
        taints: Iterable[tuple[str, str, str]] | None = None,
    ) -> None:
        """Adds a node; see ``gangplace.Cluster.add_node``."""
        check_name("a node name", name)
        if len(self._nodes) >= MAX_NODES:
            raise texts.node_limit()
        if name in self._nodes:
            raise InvalidRequest(f"node {name!r} already exists")
        fewest = 0 if any(quantity for quantity in (resources or {}).values()) else 1
        if not fewest <= gpus <= MAX_GPUS_PER_NODE:  # 0: a node of MIG slices only
            raise InvalidRequest(f"node {name!r}: gpus must be between 1 and {MAX_GPUS_PER_NODE}")
        for level, domain in topology.items():
            if level not in self.levels:
                raise InvalidRequest(f"node {name!r}: topology names unknown level {level!r}")
            check_name(f"node {name!r}: the {level} name", domain)
        for level in self.levels:
            if level not in topology:
                raise InvalidRequest(f"node {name!r}: topology must give level {level!r}")
        labels = dict(labels or {})
        for key, value in labels.items():
            check_name("a label key", key)
            if len(value.encode()) > MAX_NAME_BYTES:
                raise InvalidRequest(f"label {key!r} is longer than {MAX_NAME_BYTES} bytes")
        bad = set()
        for gpu in unhealthy or ():
            if not 0 <= gpu < gpus:
                raise InvalidRequest(f"node {name!r}: unhealthy GPU index {gpu} out of range")
            bad.add(gpu)
        groups = None if gpu_topology is None else gpu_groups(name, gpu_topology, gpus)
        path = tuple(topology[level] for level in self.levels)
        amounts = checked_resources(f"node {name!r}", resources)
        tainted = checked_taints(taints or (), MAX_NAME_BYTES)
        self._declare(resources or {})  # a name given at 0 is known too
        self._nodes[name] = _Node(name, gpus, path, labels, unhealthy=bad, resources=amounts)
        self._nodes[name].taints = tainted
        if groups is not None:
            self._nodes[name].gpu_levels, self._nodes[name].gpu_paths = groups

    def _node(self, name: str) -> _Node:
        try:
            return self._nodes[name]
        except KeyError:
            raise UnknownNode(f"unknown node {name!r}", name) from None

    def set_gpu_health(self, node: str, gpu: int, healthy: bool) -> list[str]:
        """Marks a GPU healthy or not; revokes a reservation holding it."""
        self._reclaim()
        target = self._node(node)
        if not 0 <= gpu < target.gpus:
            raise InvalidRequest(f"node {node!r} has no GPU {gpu}")
        holders = sorted(
            hid
            for hid, hold in self._holds.items()
            if gpu in hold.gpus.get(node, ())
            or (node, gpu) in {(n, g) for n, g, _ in self._hold_shares(hold)}
        )
        if not healthy:
            for hid in holders:
                if not self._holds[hid].committed:
                    self._end(hid, "revoked")
                else:
                    self._drop_spares(hid, node, {gpu})
            target.unhealthy.add(gpu)
        else:
            target.unhealthy.discard(gpu)
        return holders

    def remove_node(self, name: str) -> list[str]:
        """Removes a node, revoking reservations and detaching allocations; their ids, sorted."""
        self._reclaim()
        self._node(name)
        touched = []
        for hid in sorted(self._holds):
            hold = self._holds[hid]
            if name not in hold.gpus:
                continue
            if hold.committed:
                del hold.gpus[name]
                self._drop_spares(hid, name, set(range(self._nodes[name].gpus)))
            else:
                self._end(hid, "revoked")
            touched.append(hid)
        touched = sorted({*touched, *self._detach_resources(name)})
        del self._nodes[name]
        self._sync_shares()
        return touched

    def _drop_spares(self, hid: str, node: str, gpus: set[int]) -> None:
        """docs/repair.md "Spares": an allocation's spares on ``node`` with a GPU in ``gpus`` end.

        They stop being spares; the GPUs it still holds for them go back to the pool.
        """
        hold = self._holds[hid]
        hit = [s for s in hold.placement.spares if s.node == node and set(s.gpus) & gpus]
        if not hit:
            return
        kept = tuple(s for s in hold.placement.spares if s not in hit)
        hold.asks = asks_without_spares(hold, hit)
        hold.placement = replace(hold.placement, spares=kept)
        freed = {gpu for spare in hit for gpu in spare.gpus} & hold.gpus.get(node, set())
        if freed:
            hold.gpus[node] -= freed
            if not hold.gpus[node]:
                del hold.gpus[node]
            self._nodes[node].allocated -= freed

    def cordon(self, node: str) -> None:
        """No new placements on the node."""
        self._reclaim()
        self._node(node).cordoned = True

    def uncordon(self, node: str) -> None:
        """Undoes ``cordon``."""
        self._reclaim()
        self._node(node).cordoned = False

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._nodes

    # ----------------------------------------------------------------- transactions

    def _now(self) -> float:
        now = float(self._clock())
        if not math.isfinite(now):
            raise InvalidRequest(f"the clock returned {now}")
        return now

    def _reclaim(self) -> float:
        now = self._now()
        for hid, hold in list(self._holds.items()):
            if not hold.committed and hold.expires_at <= now:
                self._end(hid, "expired")
        return now

    def _end(self, hid: str, ending: str) -> None:
        """Ends a hold; an allocation takes its repair reservations with it (rolled back)."""
        hold = self._holds.pop(hid)
        for name, gpus in hold.gpus.items():
            node = self._nodes[name]
            (node.allocated if hold.committed else node.reserved).difference_update(gpus)
        self._remember(hid, ending, hold.owner)
        if hold.committed:
            for repair in sorted(r for r, h in self._holds.items() if h.repairs == hid):
                self._end(repair, "rolled-back")
        self._sync_shares()

    def _remember(self, hid: str, ending: str, owner: str | None) -> None:
        if len(self._ended) >= REMEMBERED_ENDED_HOLDS:
            self._ended.popitem(last=False)
        self._ended[hid] = (ending, owner)

    def place_gang(self, request: AnyRequest) -> Placement | None:
        """Where the gang would go now; holds nothing."""
        self._reclaim()
        return self._plan(request)

    def _held_by(self, owner: str | None) -> int:
        return sum(hold.gpu_count() for hold in self._holds.values() if hold.owner == owner)

    def _check_cap(self, owner: str | None, gpus: int) -> None:
        cap = self.max_held_gpus_per_owner
        if cap is None:
            return
        held = self._held_by(owner)
        if held + gpus > cap:
            raise texts.owner_cap(owner, held + gpus, cap, held)

    def _reserve_now(
        self,
        request: AnyRequest | PlacementLike,
        *,
        ttl: float = DEFAULT_TTL_SECONDS,
        owner: str | None = None,
    ) -> Reservation:
        """Holds a new placement of a request, or exactly an earlier placement's GPUs."""
        now = self._check_call(ttl, owner)
        is_request = hasattr(request, "gpus_per_pod") or is_roles(request)
        milli = getattr(request, "gpu_milli", None)  # docs/resources.md "Fractions of a GPU"
        if is_request:
            placement = self._reserve_plan(request, owner)  # type: ignore[arg-type]
        elif milli is not None:
            placement = self._check_shares(request, milli)  # type: ignore[arg-type]
        else:
            placement = self._check_placement(request)  # type: ignore[arg-type]
        roles = request if is_roles(request) else None
        gpus: dict[str, set[int]] = {}
        every_pod = (*placement.pods, *placement.spares)
        for pod in every_pod if milli is None else ():  # fractions hold shares, not GPUs
            gpus.setdefault(pod.node, set()).update(pod.gpus)
        self._check_cap(owner, sum(len(held) for held in gpus.values()))
        for name, held in gpus.items():
            self._nodes[name].reserved.update(held)
        hid = self._new_id()
        hold = _Hold(
            False,
            now + ttl,
            gpus,
            placement,
            owner,
            getattr(request, "priority", 0),
            getattr(request, "preemptible", True),
            getattr(request, "movable", False),
            now,
            request if is_request and roles is None else None,  # type: ignore[arg-type]
            roles,
        )
        asks = self._asks(request) if is_request and roles is None else {}
        per_pod = (asks,) if asks else self._roles_asks(roles, placement)
        hold.gpus = {name: held for name, held in gpus.items() if held}  # GPU-less pods: none
        hold.asks, hold.res_nodes = (
            (per_pod, {p.node for p in every_pod}) if per_pod else ((), set())
        )
        hold.res_nodes |= {p.node for p in every_pod} if milli is not None else set()
        self._holds[hid] = hold
        self._sync_shares()
        return hold.reservation(hid)

    def _new_id(self) -> str:
        if self._next_id is not None:
            self._next_id += 1
            return f"gp-{self._next_id - 1:032x}"
        while True:
            if self._id_state is None:
                hid = "gp-" + secrets.token_hex(16)
            else:
                high, self._id_state = splitmix64(self._id_state)
                low, self._id_state = splitmix64(self._id_state)
                hid = f"gp-{high:016x}{low:016x}"
            if hid not in self._holds and hid not in self._ended:
                return hid

    def seed_ids(self, seed: int | None) -> None:
        """Hold ids from a splitmix64 generator seeded with ``seed`` (``None``: random)."""
        self._id_state = None if seed is None else seed % 2**64

    def _use_sequential_ids(self, start: int) -> None:
        """Testing only: ids count up from ``start``, as the engine's test build can."""
        self._next_id = start

    def _reserve_plan(self, request: AnyRequest, owner: str | None) -> Placement:
        if is_roles(request):
            self._check_cap(owner, self._roles(request).min_gpus)  # levels checked first
        else:
            self._gang(request)  # an unknown level is invalid, whatever the cap
            self._asks(request)  # so is an unknown resource name
            smallest = request.min_pods if request.min_pods is not None else request.pods
            layers = tuple(request.slices)
            smallest = spares.placed_pods(smallest, getattr(request, "spares", 0), layers)
            whole = 0 if getattr(request, "gpu_milli", None) is not None else request.gpus_per_pod
            self._check_cap(owner, smallest * whole)  # shares count no whole GPU
        placement = self._plan(request)
        if placement is None:
            raise Unschedulable(self._reason(request))
        return placement

    @staticmethod
    def _id(value: Reservation | Allocation | str) -> str:
        return value if isinstance(value, str) else value.id

    def _visible(self, hid: str, owner: str | None) -> tuple[_Hold | None, str | None]:
        """The live hold and the ending as ``owner`` may see them."""
        hold = self._holds.get(hid)
        if hold is not None:
            return (hold, None) if hold.owner in (None, owner) else (None, None)
        ended = self._ended.get(hid)
        if ended is not None and ended[1] in (None, owner):
            return None, ended[0]
        return None, None

    @staticmethod
    def _ended_error(hid: str, ending: str | None, doing: str) -> ReservationError:
        if ending == "expired":
            return ReservationExpired(f"reservation {hid} expired")
        if ending == "revoked":
            return ReservationRevoked(f"reservation {hid} was revoked")
        if ending == "rolled-back":
            return ReservationError(f"cannot {doing} {hid}: it was rolled back")
        if ending in (*COMMITTED_ENDINGS, "merged"):
            return ReservationError(f"cannot {doing} {hid}: it was {ending}")
        return UnknownReservation(f"unknown reservation {hid!r}")

    def commit(self, reservation: Reservation | str, *, owner: str | None = None) -> Allocation:
        """Turns a reservation into an allocation; idempotent."""
        now = self._reclaim()
        hid = self._id(reservation)
        hold, ending = self._visible(hid, owner)
        if hold is None:
            raise self._ended_error(hid, ending, "commit")
        if hold.repairs is not None:
            raise ReservationError(
                f"cannot commit {hid}: it repairs allocation {hold.repairs}; use commit_repair"
            )
        if not hold.committed:
            hold.committed = True
            hold.since = now
            for name, gpus in hold.gpus.items():
                self._nodes[name].reserved.difference_update(gpus)
                self._nodes[name].allocated.update(gpus)
        return hold.allocation(hid, self._nodes)

    def rollback(self, reservation: Reservation | str, *, owner: str | None = None) -> bool:
        """Frees a reservation; False if it had already ended."""
        self._reclaim()
        hid = self._id(reservation)
        hold, ending = self._visible(hid, owner)
        if (hold is not None and hold.committed) or ending in (*COMMITTED_ENDINGS, "merged"):
            raise ReservationError(
                f"cannot roll back {hid}: it was committed; release the allocation instead"
            )
        if hold is not None:
            self._end(hid, "rolled-back")
            return True
        if ending is None:
            raise UnknownReservation(f"unknown reservation {hid!r}")
        return False

    def release(self, allocation: Allocation | str, *, owner: str | None = None) -> bool:
        """Frees an allocation; False after the first time."""
        self._reclaim()
        hid = self._id(allocation)
        hold, ending = self._visible(hid, owner)
        if hold is not None and hold.committed:
            self._end(hid, "released")
            return True
        if hold is not None:
            raise ReservationError(
                f"cannot release {hid}: it is not committed; roll it back instead"
            )
        if ending in COMMITTED_ENDINGS:
            return False
        raise self._ended_error(hid, ending, "release")

    def reservations(self, owner: str | None = None) -> list[Reservation]:
        """Live reservations sorted by id; only ``owner``'s when given."""
        self._reclaim()
        return [
            hold.reservation(hid)
            for hid, hold in sorted(self._holds.items())
            if not hold.committed and (owner is None or hold.owner == owner)
        ]

    def allocations(self, owner: str | None = None, *, lost: bool = False) -> list[Allocation]:
        """Live allocations sorted by id; only ``owner``'s when given; ``lost``: with lost ranks."""
        self._reclaim()
        every = [
            hold.allocation(hid, self._nodes)
            for hid, hold in sorted(self._holds.items())
            if hold.committed and (owner is None or hold.owner == owner)
        ]
        return [allocation for allocation in every if allocation.lost or not lost]

    def check_invariants(self) -> None:
        """Nothing to check: the reference keeps no aggregates."""

    # ----------------------------------------------------------------- snapshots

    def snapshot(self) -> bytes:
        """The state as JSON bytes (the reference's own format, not the engine's)."""
        return snapshots.dump(self)

    @classmethod
    def restore(cls, data: bytes, *, clock: Callable[[], float] | None = None) -> Cluster:
        """Rebuilds a reference cluster from its own ``snapshot`` bytes."""
        return snapshots.load(cls, data, clock)
