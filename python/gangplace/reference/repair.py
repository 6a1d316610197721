"""Repair after failures, as readable rules: docs/repair.md "Repair after failures", rules R1-R5.

``plan_repair`` finds where all the lost ranks of an allocation go, or says they do not fit;
``explain_repair`` counts, tier by tier, how many would fit; ``repair`` holds a plan's
replacement GPUs as a repair reservation and ``commit_repair`` merges it into the allocation.
Lost ranks are grouped into classes placed one after another, each seeing the GPUs the
earlier ones took: for a slice gang the lost ranks of each innermost slice, inside that
slice's domain (slices in rank order); otherwise the lost ranks of one pod size and group,
largest pods first, inside the placement's domain, or with ``widen`` the smallest enclosing
domain up to the request's coarsest level where every class fits. The Rust core
(``repair/mod.rs``, ``repair/commit.rs``) must give the same answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from gangplace.errors import (
    InvalidRequest,
    ReservationError,
    UnknownReservation,
)
from gangplace.reference import preemption, rules, texts
from gangplace.reference.filters import filter_of
from gangplace.reference.ranks import asks_without_spares
from gangplace.reference.repair_place import RepairClass, RepairPlacing, asks_of, freed_by
from gangplace.reference.values import (
    DEFAULT_REPAIR_TTL_SECONDS,
    MAX_PODS,
    Allocation,
    Path,
    Placement,
    PodPlacement,
    Reservation,
)

if TYPE_CHECKING:
    from gangplace.reference.oracle import _Hold, _Node

__all__ = ["RepairPlan", "Repairs"]


@dataclass(frozen=True)
class RepairPlan:
    """What ``plan_repair`` proposes (see ``gangplace.RepairPlan``)."""

    allocation: str
    lost: tuple[int, ...]
    replacements: tuple[tuple[int, PodPlacement], ...]
    from_spares: tuple[int, ...]
    level: str
    domain: Path
    victims: tuple[str, ...] = ()


class Repairs(RepairPlacing):
    """``plan_repair`` and ``explain_repair`` of the reference cluster."""

    if TYPE_CHECKING:
        levels: tuple[str, ...]
        max_level: str | None
        _nodes: dict[str, _Node]

        _holds: dict[str, _Hold]

        def _reclaim(self) -> float: ...
        def _check_call(self, ttl: float, owner: str | None) -> float: ...
        def _check_cap(self, owner: str | None, gpus: int) -> None: ...
        def _held_by(self, owner: str | None) -> int: ...
        def _check_pod(self, placement: Any, pod: Any) -> _Node: ...
        def _asks(self, request: Any) -> dict[str, int]: ...
        def _check_pod_asks(
            self, pods: Sequence[tuple[str, Mapping[str, int]]], victims: Any
        ) -> None: ...
        def _pod_node(self, placement: Any, name: str) -> _Node: ...
        def _new_id(self) -> str: ...
        def _end(self, hid: str, ending: str) -> None: ...
        def _remember(self, hid: str, ending: str, owner: str | None) -> None: ...
        @staticmethod
        def _ended_error(hid: str, ending: str | None, doing: str) -> Exception: ...
        def _views(self) -> list[rules.NodeView]: ...
        def _now(self) -> float: ...
        def _candidates(
            self, request: Any, kind: str, min_runtime: float, exempt: Any, now: float
        ) -> list[preemption.Candidate]: ...
        def _depth_of(self, level: str | None) -> int: ...
        def _visible(self, hid: str, owner: str | None) -> tuple[_Hold | None, str | None]: ...
        @staticmethod
        def _id(value: Any) -> str: ...

    def plan_repair(
        self,
        allocation: Allocation | str,
        *,
        widen: bool = False,
        preempt: bool = False,
        owner: str | None = None,
    ) -> RepairPlan | None:
        """Where every lost rank of the allocation goes (rules R1-R3, R6), or ``None``."""
        hid, hold = self._repairable(allocation, owner)
        lost = hold.lost(self._nodes)
        placement = hold.placement
        spared = self._spare_matches(hold, lost)
        served = tuple(rank for rank, _ in spared)

        def plan(
            level: str, domain: Path, found: tuple[tuple[int, PodPlacement], ...]
        ) -> RepairPlan:
            pairs = tuple(sorted((*found, *spared), key=lambda pair: pair[0]))
            return RepairPlan(hid, lost, pairs, served, level, domain)

        classes = self._classes(hold, [rank for rank in lost if rank not in served])
        if not classes:
            return plan(placement.level, tuple(placement.domain), ())
        spread, numa = self._knobs(hold)
        depth, path, exact = self._resolve(tuple(placement.domain))
        sliced = any(c.slice is not None for c in classes)
        targets: list[tuple[int, Path]] = []
        if sliced:
            # Classes without a slice (another group's) need the placement's own domain.
            if exact or all(c.slice is not None for c in classes):
                targets = [(depth, path)]
        else:
            if exact:
                targets.append((depth, path))
            if widen:
                widest = self._widest(hold)
                if not exact and depth >= widest:
                    targets.append((depth, path))
                targets.extend((d, path[:d]) for d in range(depth - 1, widest - 1, -1))
        for target in targets:
            found = self._place(classes, target, spread, numa)
            if found is None:
                continue
            if sliced:
                level, domain = placement.level, tuple(placement.domain)
            else:
                level, domain = rules.level_name(self.levels, target[0]), target[1]
            return plan(level, domain, found)
        if not preempt:
            return None
        preempted = self._repair_by_preemption(hold, classes, spread, numa)
        if preempted is None:
            return None
        victims, found = preempted
        return replace(plan(placement.level, tuple(placement.domain), found), victims=victims)

    def _repair_by_preemption(
        self, hold: _Hold, classes: Sequence[Any], spread: str, numa: str
    ) -> tuple[tuple[str, ...], tuple[tuple[int, PodPlacement], ...]] | None:
        """Rule R6: the fewest victims, in P4's order, inside the placement's domain.

        Candidates free healthy GPUs inside it or, when the lost pods ask resources besides
        GPUs, some of those resources there.
        """
        depth, path, exact = self._resolve(tuple(hold.placement.domain))
        if not exact:
            return None
        asks: Mapping[str, int] = next((c.asks for c in classes if c.asks), {})
        asking = _Priority(hold.priority, asks)
        candidates = self._candidates(asking, "preempt", 0.0, (), self._now())  # R6, P8
        inside = [n for n in self._views() if n.full_path[: len(path)] == path]
        touching = [
            c
            for c in candidates
            if preemption.freed_milli_inside(c, inside) > 0
            or any(c.freed_resources.get(n.name) for n in inside)
        ]

        def fits(removed: Sequence[preemption.Candidate]) -> bool:
            return self._place(classes, (depth, path), spread, numa, freed_by(removed)) is not None

        if not fits(touching):
            return None
        choice = preemption.choose(inside, depth, path, touching, fits)
        found = self._place(classes, (depth, path), spread, numa, freed_by(choice.members))
        assert found is not None
        return tuple(sorted(c.id for c in choice.members)), found

    def explain_repair(
        self, allocation: Allocation | str, *, owner: str | None = None
    ) -> dict[str, int]:
        """Per tier of rule R2, how many lost ranks would fit there (each class alone)."""
        _, hold = self._repairable(allocation, owner)
        lost = hold.lost(self._nodes)
        served = {rank for rank, _ in self._spare_matches(hold, lost)}
        classes = self._classes(hold, [rank for rank in lost if rank not in served])
        _, numa = self._knobs(hold)
        tiers = {"spares": len(served), "slice": 0, "domain": 0, "widened": 0}
        depth, path, exact = self._resolve(tuple(hold.placement.domain))
        widest = self._widest(hold)
        for group in classes:
            if group.slice is not None:
                _, where, whole = self._resolve(group.slice)
                tiers["slice"] += self._room(group, where, numa) if whole else 0
                continue
            tiers["domain"] += self._room(group, path, numa) if exact else 0
            if depth - 1 >= widest:
                tiers["widened"] += self._room(group, path[:widest], numa)
            elif exact:
                tiers["widened"] += self._room(group, path, numa)
        return tiers

    def repair(
        self,
        plan: RepairPlan,
        *,
        ttl: float = DEFAULT_REPAIR_TTL_SECONDS,
        owner: str | None = None,
    ) -> Reservation:
        """Rule R4: re-validates the plan and holds its replacement GPUs, tied to the allocation."""
        now = self._check_call(ttl, owner)
        hid, hold = self._repairable(plan.allocation, owner)
        if tuple(rank for rank, _ in plan.replacements) != tuple(plan.lost):
            raise InvalidRequest("the plan's replacements do not match its lost ranks")
        for rank, pod in plan.replacements:
            if rank >= len(hold.placement.pods):
                raise InvalidRequest(f"the plan replaces rank {rank}; the allocation is smaller")
            if len(pod.gpus) != len(hold.placement.pods[rank].gpus):
                raise InvalidRequest(f"the plan gives rank {rank} the wrong number of GPUs")
        lost = hold.lost(self._nodes)
        if lost != tuple(plan.lost):
            raise texts.repair_plan_stale(hid, lost, plan.lost)
        if not plan.replacements:
            raise InvalidRequest(f"the plan repairs nothing: allocation {hid} has no lost ranks")
        freed = self._victims_freed(plan, hold)
        milli = hold.placement.gpu_milli  # docs/resources.md "Fractions of a GPU"
        gpus: dict[str, set[int]] = {}
        asks: list[Mapping[str, int]] = []
        fresh: list[tuple[int, PodPlacement]] = []
        taken: list[tuple[int, PodPlacement]] = []
        for rank, pod in plan.replacements:
            within = self._slice_of(hold, rank) or tuple(plan.domain)
            if rank in plan.from_spares:
                self._pod_node(replace(hold.placement, domain=within), pod.node)
                self._check_spare(hold, pod)
                taken.append((rank, PodPlacement(pod.node, tuple(pod.gpus))))
                continue
            if milli is not None:  # a share: its GPU's room is checked below
                self._pod_node(replace(hold.placement, domain=within), pod.node)
                fresh.append((rank, pod))
                asks.append(asks_of(hold, rank))
                continue
            if pod.node in freed:
                node = self._pod_node(replace(hold.placement, domain=within), pod.node)
                busy = set(pod.gpus) - (set(node.free()) | freed[pod.node])
                if busy:
                    raise texts.repair_gpu_taken(min(busy), pod.node)
            elif pod.gpus:
                self._check_pod(replace(hold.placement, domain=within), pod)
            else:  # a pod without GPUs holds only its resources (checked below)
                self._pod_node(replace(hold.placement, domain=within), pod.node)
            if gpus.get(pod.node, set()) & set(pod.gpus):
                raise texts.one_gpu_two_pods("the plan")
            gpus.setdefault(pod.node, set()).update(pod.gpus)
            fresh.append((rank, pod))
            asks.append(asks_of(hold, rank))
        pods = tuple(PodPlacement(pod.node, tuple(pod.gpus)) for _, pod in fresh)
        placement = Placement(pods, plan.level, tuple(plan.domain), gpu_milli=milli)
        if milli is not None:  # the victims' GPUs and shares count free (P8)
            back = self._given_back(plan.victims)  # type: ignore[attr-defined]
            self._check_shares(placement, milli, freed, back)  # type: ignore[attr-defined]
        self._check_pod_asks(
            [(pod.node, ask) for (_, pod), ask in zip(fresh, asks, strict=True)], plan.victims
        )
        self._check_cap(owner, sum(len(g) for g in gpus.values()))
        for victim in plan.victims:
            self._end(victim, "preempted")
        for name, held in gpus.items():
            self._nodes[name].reserved.update(held)
        from gangplace.reference.oracle import _Hold

        new = _Hold(
            committed=False,
            expires_at=now + ttl,
            gpus=gpus,
            placement=placement,
            owner=owner,
            priority=hold.priority,
            preemptible=hold.preemptible,
            movable=hold.movable,
            since=now,
            repairs=hid,
            repaired_ranks=tuple(rank for rank, _ in fresh),
            repair_spares=tuple(taken),
        )
        if any(asks):  # docs/resources.md "Node resources": the replacements hold what they ask
            new.gpus = {name: held for name, held in gpus.items() if held}
            new.asks = (asks[0],) if all(a == asks[0] for a in asks) else tuple(asks)
            new.res_nodes = {pod.node for _, pod in fresh}
        if milli is not None:  # shares are held like resources
            new.res_nodes = {pod.node for _, pod in fresh}
        rid = self._new_id()
        self._holds[rid] = new
        self._sync_shares()  # type: ignore[attr-defined]
        return new.reservation(rid)

    def commit_repair(
        self, reservation: Reservation | str, *, owner: str | None = None
    ) -> Allocation:
        """Rule R5: merges a repair reservation into its allocation, which keeps its id."""
        self._reclaim()
        rid = self._id(reservation)
        repair, ending = self._visible(rid, owner)
        if repair is None:
            raise self._ended_error(rid, ending, "commit_repair")
        if repair.committed or repair.repairs is None:
            raise ReservationError(f"cannot commit_repair {rid}: not a repair reservation")
        hid = repair.repairs
        hold = self._holds[hid]
        lost = hold.lost(self._nodes)
        spared = repair.repair_spares
        replaces = tuple(sorted((*repair.repaired_ranks, *(rank for rank, _ in spared))))
        gone = [spare for _, spare in spared if spare not in hold.placement.spares]
        why = None
        if lost != replaces:
            why = texts.lost_ranks_changed(hid, lost, replaces)
        elif gone:
            why = str(texts.spare_gone(gone[0].node))
        if why is not None:
            self._end(rid, "rolled-back")
            raise texts.repair_rolled_back(why, rid)
        released: dict[str, set[int]] = {}
        for rank in lost:
            pod = hold.placement.pods[rank]
            if pod.node in hold.gpus and pod.node in self._nodes:
                released.setdefault(pod.node, set()).update(set(pod.gpus) & hold.gpus[pod.node])
        if hold.owner != repair.owner:
            freed = sum(len(g) for g in released.values())
            self._check_cap(hold.owner, repair.gpu_count() - freed)
        for name, gpus in released.items():
            self._nodes[name].allocated.difference_update(gpus)
            hold.gpus[name] -= gpus
            if not hold.gpus[name]:
                del hold.gpus[name]
        for name, gpus in repair.gpus.items():
            self._nodes[name].reserved.difference_update(gpus)
            self._nodes[name].allocated.update(gpus)
            hold.gpus.setdefault(name, set()).update(gpus)
        pods = list(hold.placement.pods)
        domain = tuple(hold.placement.domain)
        moved = (*zip(repair.repaired_ranks, repair.placement.pods, strict=True), *spared)
        for rank, pod in moved:
            pods[rank] = pod
            node = self._nodes[pod.node]
            path = (*node.path, node.name)
            shared = 0
            while shared < min(len(domain), len(path)) and domain[shared] == path[shared]:
                shared += 1
            domain = domain[:shared]
        level = hold.placement.level
        if len(domain) != len(hold.placement.domain):
            level = rules.level_name(self.levels, len(domain))
        used = {pod for _, pod in spared}
        left = tuple(s for s in hold.placement.spares if s not in used)
        hold.asks = asks_without_spares(hold, used)
        uses = hold.asks or hold.placement.gpu_milli is not None  # shares, like resources
        hold.res_nodes |= {pod.node for pod in repair.placement.pods} if uses else set()
        hold.placement = replace(
            hold.placement, pods=tuple(pods), level=level, domain=domain, spares=left
        )
        del self._holds[rid]
        self._remember(rid, "merged", repair.owner)
        self._sync_shares()  # type: ignore[attr-defined]
        return hold.allocation(hid, self._nodes)

    def reserve_spares(
        self, allocation: Allocation | str, count: int, *, owner: str | None = None
    ) -> Allocation:
        """docs/repair.md "Spares", S5: ``count`` more spares, all or nothing.

        In the placement's domain, or ``count`` in every innermost slice domain.
        """
        if not 1 <= count <= MAX_PODS:
            raise InvalidRequest(f"count must be between 1 and {MAX_PODS}, got {count}")
        hid, hold = self._repairable(allocation, owner)
        if hold.placement.gpu_milli is not None:  # fractional gangs take no spares
            raise InvalidRequest(
                "reserve_spares does not take fractions of a GPU; this placement's pods use "
                f'gpu_milli={hold.placement.gpu_milli} (docs/resources.md "Fractions of a GPU")'
            )
        request = hold.request
        if request is None:
            raise InvalidRequest("reserve_spares takes allocations placed from a GangRequest")
        if request.gpus_per_pod == 0:
            raise InvalidRequest("pods without GPUs take no spares")
        domains: list[Path | None] = [None]
        if request.slices:
            domains = [tuple(path) for path in hold.placement.slices]
        if count * len(domains) > MAX_PODS:
            raise InvalidRequest("that many spares exceed the gang limit")
        asks = self._asks(request)
        classes = [
            RepairClass(
                request.gpus_per_pod,
                filter_of(request),
                tuple(range(i * count, (i + 1) * count)),
                where,
                asks,
            )
            for i, where in enumerate(domains)
        ]
        spread, numa = self._knobs(hold)
        depth, path, exact = self._resolve(tuple(hold.placement.domain))
        found = self._place(classes, (depth, path), spread, numa) if exact else None
        if found is None:
            raise texts.no_room_for_spares(count, request.gpus_per_pod, bool(request.slices))
        self._check_cap(hold.owner, len(found) * request.gpus_per_pod)
        added = tuple(PodPlacement(pod.node, tuple(pod.gpus)) for _, pod in found)
        for pod in added:
            hold.gpus.setdefault(pod.node, set()).update(pod.gpus)
            self._nodes[pod.node].allocated.update(pod.gpus)
        hold.placement = replace(hold.placement, spares=(*hold.placement.spares, *added))
        if len(hold.asks) > 1:  # per slot: each new spare asks what a pod asks
            hold.asks = (*hold.asks, *([asks] * len(added)))
        elif asks and not hold.asks:
            hold.asks = (asks,)
        hold.res_nodes |= {pod.node for pod in added} if hold.asks else set()
        return hold.allocation(hid, self._nodes)

    # ----------------------------------------------------------------- helpers

    def _victims_freed(self, plan: RepairPlan, hold: _Hold) -> dict[str, set[int]]:
        """R6's victims re-validated, and the healthy GPUs they free per node.

        With the shared GPUs all of whose shares they hold (docs/preemption.md P8).
        """
        freed: dict[str, set[int]] = {}
        for victim in plan.victims:
            other = self._holds.get(victim)
            if (
                other is None
                or not other.committed
                or not other.preemptible
                or other.priority >= hold.priority
            ):
                raise texts.repair_victim_changed(victim)
            for name, gpus in other.gpus.items():
                freed.setdefault(name, set()).update(gpus - self._nodes[name].unhealthy)
        back = self._given_back(plan.victims)  # type: ignore[attr-defined]
        self._freed_whole(freed, back)  # type: ignore[attr-defined]
        return freed

    def _check_spare(self, hold: _Hold, pod: Any) -> None:
        if PodPlacement(pod.node, tuple(pod.gpus)) not in hold.placement.spares:
            raise texts.spare_gone(pod.node)

    def _repairable(self, allocation: Allocation | str, owner: str | None) -> tuple[str, _Hold]:
        self._reclaim()
        hid = self._id(allocation)
        hold, ending = self._visible(hid, owner)
        if hold is None:
            if ending is None:
                raise UnknownReservation(f"unknown reservation {hid!r}")
            raise ReservationError(f"cannot repair {hid}: it was {ending}")
        if not hold.committed:
            raise ReservationError(f"cannot repair {hid}: it is a reservation; commit it first")
        return hid, hold


@dataclass(frozen=True)
class _Priority:
    """What ``_candidates`` reads of a request.

    The priority victims must be below, and whether the lost pods ask resources (then the
    victims give theirs back).
    """

    priority: int
    resources_per_pod: Mapping[str, int]
