"""The oracle's priority, preemption and defragmentation operations.

docs/preemption.md: a mixin of
:class:`gangplace.reference.Cluster`, built on the pure rules of
:mod:`gangplace.reference.preemption`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gangplace.errors import InvalidRequest, UnknownReservation
from gangplace.reference import fractions, preemption, roles, rules, texts
from gangplace.reference.planning import is_roles
from gangplace.reference.values import (
    MAX_NAME_BYTES,
    MAX_TTL_SECONDS,
    Allocation,
    AnyRequest,
    Placement,
    PlacementLike,
    PreemptionPlan,
    Request,
    Reservation,
    RolesRequest,
)

if TYPE_CHECKING:
    from gangplace.reference.oracle import _Hold, _Node

__all__ = ["COMMITTED_ENDINGS", "Removals"]

COMMITTED_ENDINGS = ("released", "preempted", "migrated")
_PLACE_THEM = "place them with place_gang or reserve"
PRIORITY_RANGE = (-(2**31), 2**31 - 1)


def check_priority(priority: int) -> int:
    """A priority in ``-2**31..2**31-1``."""
    low, high = PRIORITY_RANGE
    if not low <= priority <= high:
        raise InvalidRequest(f"priority must be between {low} and {high}, got {priority}")
    return priority


def _limits(
    max_members: int | None, min_runtime: float, exempt: Iterable[str], what: str
) -> tuple[int | None, float, tuple[str, ...]]:
    if max_members is not None and max_members < 0:
        raise InvalidRequest(f"{what} must be >= 0, got {max_members}")
    if not (math.isfinite(min_runtime) and min_runtime >= 0):
        raise InvalidRequest(
            f"min_runtime must be a finite number of seconds >= 0, got {min_runtime}"
        )
    owners = tuple(exempt)
    for owner in owners:
        if not 0 < len(owner.encode()) <= MAX_NAME_BYTES:
            raise InvalidRequest(
                f"exempt_owners: owner {owner!r} must be 1 to {MAX_NAME_BYTES} bytes long"
            )
    return max_members, min_runtime, owners


class Removals:
    """Mixin: what the oracle offers beyond reserve/commit/rollback/release."""

    if TYPE_CHECKING:
        levels: tuple[str, ...]
        policy: str
        max_held_gpus_per_owner: int | None
        _nodes: dict[str, _Node]
        _holds: dict[str, _Hold]

        def _reclaim(self) -> float: ...
        def _views(self, asks: Any = None, milli: int | None = None) -> list[rules.NodeView]: ...
        def _asks(self, request: Any) -> dict[str, int]: ...
        def _freed_resources(self, hold: _Hold) -> dict[str, dict[str, int]]: ...
        def _roles_asks(
            self, request: Any, placement: Placement
        ) -> tuple[Mapping[str, int], ...]: ...
        def _used(self, name: str) -> dict[str, int]: ...
        def _bounded(
            self, views: list[rules.NodeView], asks: Any, taken: Any
        ) -> list[rules.NodeView]: ...
        def _gang(self, request: Request) -> rules.Gang: ...
        def _roles(self, request: RolesRequest) -> roles.MultiGang: ...
        def _roles_views(self, multi: roles.MultiGang) -> list[rules.NodeView]: ...
        def _plan(self, request: AnyRequest) -> Placement | None: ...
        def _visible(self, hid: str, owner: str | None) -> tuple[_Hold | None, str | None]: ...
        def _end(self, hid: str, ending: str) -> None: ...
        def _new_id(self) -> str: ...
        def _held_by(self, owner: str | None) -> int: ...
        def _check_placement(self, placement: PlacementLike) -> Placement: ...
        def _pod_node(self, placement: PlacementLike, name: str) -> _Node: ...
        @staticmethod
        def _id(value: Any) -> str: ...
        @staticmethod
        def _ended_error(hid: str, ending: str | None, doing: str) -> Exception: ...

    # ----------------------------------------------------------------- holds

    def hold_status(self, hold: Reservation | Allocation | str, *, owner: str | None = None) -> str:
        """``"reserved"``, ``"allocated"``, or how the hold ended."""
        self._reclaim()
        hid = self._id(hold)
        live, ending = self._visible(hid, owner)
        if live is not None:
            return "allocated" if live.committed else "reserved"
        if ending is None:
            raise UnknownReservation(f"unknown reservation {hid!r}")
        return ending

    def set_priority(
        self, hold: Reservation | Allocation | str, priority: int, *, owner: str | None = None
    ) -> Reservation | Allocation:
        """Changes a live hold's priority; returns it as it is now."""
        check_priority(priority)
        self._reclaim()
        hid = self._id(hold)
        live, ending = self._visible(hid, owner)
        if live is None:
            raise self._ended_error(hid, ending, "change the priority of")
        live.priority = priority
        return live.allocation(hid, self._nodes) if live.committed else live.reservation(hid)

    # ----------------------------------------------------------------- preemption

    def _candidates(
        self,
        request: AnyRequest,
        kind: str,
        min_runtime: float,
        exempt: tuple[str, ...],
        now: float,
        spared: frozenset[str] = frozenset(),
        chosen: frozenset[str] | None = None,
    ) -> list[preemption.Candidate]:
        found = []
        preempt = kind == "preempt"
        for hid, hold in sorted(self._holds.items()):
            if hid in spared or (chosen is not None and hid not in chosen):
                continue
            if preempt and chosen is not None:  # P7: the caller chose them
                eligible = hold.preemptible
            elif preempt:
                eligible = hold.preemptible and hold.priority < request.priority
            else:
                # docs/transactions.md E4: a hold with ended ranks no longer matches its request.
                eligible = hold.movable and hold.priority <= request.priority and not hold.ended
                eligible = eligible and not hold.asks  # moves re-place GPUs only
            # Removal sets count the shares a fractional victim or mover gives back (P8, D5).
            if not hold.committed or not eligible or now - hold.since < min_runtime:
                continue
            if hold.owner is not None and hold.owner in exempt:
                continue
            freed = {
                name: tuple(sorted(gpus - self._nodes[name].unhealthy))
                for name, gpus in hold.gpus.items()
            }
            # docs/resources.md "Node resources": a request asking resources counts what victims
            # free.
            counted = preempt and _asks_resources(request)
            given = self._freed_resources(hold) if counted else {}
            shares, shared_milli = self._shares_back(hold)
            found.append(
                preemption.Candidate(
                    hid,
                    hold.priority,
                    hold.since,
                    hold.gpu_count(),
                    freed,
                    given,
                    shares,
                    shared_milli,
                )
            )
        return found

    def _given_back(self, hids: Iterable[str]) -> dict[tuple[str, int], int]:
        """The shares the live holds ``hids`` have of healthy GPUs, per ``(node, GPU)``."""
        back: dict[tuple[str, int], int] = {}
        for hid in hids:
            for name, shares in self._shares_back(self._holds[hid])[0].items():
                for gpu, share, _ in shares:
                    back[(name, gpu)] = back.get((name, gpu), 0) + share
        return back

    def _freed_whole(self, freed: dict[str, set[int]], back: Mapping[tuple[str, int], int]) -> None:
        """Adds to ``freed`` every shared GPU all of whose shares ``back`` gives back (P8)."""
        for (name, gpu), share in back.items():
            if share >= self._nodes[name].shares.get(gpu, 0):
                freed.setdefault(name, set()).add(gpu)

    def _shares_back(self, hold: _Hold) -> tuple[dict[str, tuple[tuple[int, int, int], ...]], int]:
        """A fractional hold's shares of healthy GPUs, and the thousandths of all its shares.

        Per node, ``(GPU, thousandths, thousandths used there in all)`` (docs/preemption.md P8).
        """
        by_gpu: dict[tuple[str, int], int] = {}
        for name, gpu, milli in self._hold_shares(hold):  # type: ignore[attr-defined]
            by_gpu[(name, gpu)] = by_gpu.get((name, gpu), 0) + milli
        shares: dict[str, list[tuple[int, int, int]]] = {}
        for (name, gpu), milli in sorted(by_gpu.items()):
            node = self._nodes[name]
            if gpu not in node.unhealthy:
                shares.setdefault(name, []).append((gpu, milli, node.shares.get(gpu, 0)))
        return {name: tuple(on) for name, on in shares.items()}, sum(by_gpu.values())

    def plan_preemption(
        self,
        request: AnyRequest,
        *,
        max_victims: int | None = None,
        min_runtime: float = 0.0,
        exempt_owners: Iterable[str] = (),
        exempt_allocations: Iterable[Any] = (),
        candidates: Iterable[Any] | None = None,
    ) -> PreemptionPlan | None:
        """Which allocations to end, and where the gang (or whole unit) then goes (P1-P7)."""
        most, min_runtime, exempt = _limits(max_victims, min_runtime, exempt_owners, "max_victims")
        spared = frozenset(a if isinstance(a, str) else a.id for a in exempt_allocations)
        chosen = None
        if candidates is not None:
            chosen = frozenset(a if isinstance(a, str) else a.id for a in candidates)
        if not is_roles(request):
            _refuse_unsupported_shapes(request, "plan_preemption")
        else:
            _refuse_unsupported_roles(request, "plan_preemption")
        now = self._reclaim()
        placement = self._plan(request)
        if placement is not None:
            return PreemptionPlan(request, placement, (), 0, None)
        found_candidates = self._candidates(
            request, "preempt", min_runtime, exempt, now, spared, chosen
        )
        if is_roles(request):
            unit = self._roles(request)
            views = self._roles_views(unit)  # with free resources when a group asks some
            found = preemption.find_roles(views, self.levels, unit, found_candidates, most)
        else:
            gang = self._gang(request)
            views = self._views(self._asks(request), gang.gpu_milli)  # P8: shares by their room
            found = preemption.find(views, self.levels, gang, found_candidates, most)
        if found is None:
            return None
        choice, placement = found
        victims = tuple(sorted(member.id for member in choice.members))
        held = sum(member.held for member in choice.members)
        highest = max(m.priority for m in choice.members)
        return PreemptionPlan(request, placement, victims, held, highest, chosen is not None)

    def _check_victims(
        self, victims: Iterable[str], allowed: Any
    ) -> tuple[dict[str, set[int]], dict[str | None, int]]:
        freed: dict[str, set[int]] = {}
        returned: dict[str | None, int] = {}
        for hid in victims:
            hold = self._holds.get(hid)
            if hold is None or not hold.committed or not allowed(hold):
                raise texts.victim_changed(hid)
            for name, gpus in hold.gpus.items():
                freed.setdefault(name, set()).update(gpus - self._nodes[name].unhealthy)
            returned[hold.owner] = returned.get(hold.owner, 0) + hold.gpu_count()
        return freed, returned

    def _check_target(
        self, placement: Placement, freed: Mapping[str, set[int]]
    ) -> dict[str, set[int]]:
        held: dict[str, set[int]] = {}
        duplicate = False
        for pod in placement.pods:
            node = self._pod_node(placement, pod.node)
            usable = set(node.free()) | freed.get(pod.node, set())
            taken = sorted(gpu for gpu in pod.gpus if gpu not in usable)
            if taken:
                raise texts.plan_gpu_taken(taken[0], pod.node)
            duplicate |= bool(held.get(pod.node, set()) & set(pod.gpus))
            held.setdefault(pod.node, set()).update(pod.gpus)
        if duplicate:
            raise texts.one_gpu_two_pods("the plan")
        return held

    def _check_target_resources(
        self, request: AnyRequest, placement: Placement, victims: Iterable[str]
    ) -> None:
        """Each node's free resources, once the victims end, hold the plan's pods there."""
        per_pod: tuple[Mapping[str, int], ...]
        if is_roles(request):
            per_pod = self._roles_asks(request, placement)
        else:
            single = self._asks(request)
            per_pod = (single,) * len(placement.pods) if single else ()
        self._check_pod_asks(
            [(pod.node, asks) for pod, asks in zip(placement.pods, per_pod, strict=False)],
            victims,
        )

    def _check_pod_asks(
        self, pods: Sequence[tuple[str, Mapping[str, int]]], victims: Iterable[str]
    ) -> None:
        """Each node's free resources, once the victims end, hold what ``pods`` ask there."""
        asked: dict[str, dict[str, int]] = {}
        for node, asks in pods:
            on_node = asked.setdefault(node, {})
            for name, quantity in asks.items():
                on_node[name] = on_node.get(name, 0) + quantity
        given: dict[str, dict[str, int]] = {}
        for hid in victims:
            for node, amounts in self._freed_resources(self._holds[hid]).items():
                on_node = given.setdefault(node, {})
                for name, quantity in amounts.items():
                    on_node[name] = on_node.get(name, 0) + quantity
        for node, want in sorted(asked.items()):  # by name, as the engine reports
            capacity, used = self._nodes[node].resources, self._used(node)
            back = given.get(node, {})
            free = {
                r: max(0, q - max(0, used.get(r, 0) - back.get(r, 0)))
                for r, q in sorted(capacity.items())
            }
            if any(quantity > free.get(name, 0) for name, quantity in want.items()):
                shown = {r: q for r, q in free.items() if q}
                raise texts.plan_resources_short(node, shown, dict(sorted(want.items())))

    def _check_cap_after(self, owner: str | None, gpus: int, released: int) -> None:
        cap = self.max_held_gpus_per_owner
        if cap is None:
            return
        held = max(self._held_by(owner) - released, 0)
        if held + gpus > cap:
            raise texts.owner_cap(owner, held + gpus, cap, held)

    def _check_call(self, ttl: float, owner: str | None) -> float:
        """Refuses a bad ``ttl`` or owner name, then reclaims expired holds; returns now."""
        if not (math.isfinite(ttl) and 0 < ttl <= MAX_TTL_SECONDS):
            raise InvalidRequest(f"ttl must be in (0, {MAX_TTL_SECONDS}], got {ttl}")
        if owner is not None and not 0 < len(owner.encode()) <= MAX_NAME_BYTES:
            raise InvalidRequest(f"owner must be 1 to {MAX_NAME_BYTES} bytes long")
        return self._reclaim()

    def _hold_new(
        self,
        placement: Placement,
        held: Mapping[str, set[int]],
        now: float,
        ttl: float,
        owner: str | None,
        terms: tuple[int, bool, bool],
        request: AnyRequest | None,
    ) -> Reservation:
        from gangplace.reference.oracle import _Hold

        hid = self._new_id()
        for name, gpus in held.items():
            self._nodes[name].reserved.update(gpus)
        single: Request | None = None
        unit: RolesRequest | None = None
        if is_roles(request):
            unit = request
        else:
            single = request
        hold = _Hold(
            False,
            now + ttl,
            {n: set(g) for n, g in held.items() if g},  # pods without GPUs hold none
            placement,
            owner,
            *terms,
            now,
            single,
            unit,
        )
        asks = self._asks(single) if single is not None else {}
        per_pod = (asks,) if asks else self._roles_asks(unit, placement)
        if per_pod:  # docs/resources.md "Node resources": the new hold uses what its pods ask
            every_pod = (*placement.pods, *placement.spares)
            hold.asks, hold.res_nodes = per_pod, {pod.node for pod in every_pod}
        if placement.gpu_milli is not None:  # its shares are used like resources
            hold.res_nodes |= {pod.node for pod in placement.pods}
        self._holds[hid] = hold
        self._sync_shares()  # type: ignore[attr-defined]
        return hold.reservation(hid)

    def preempt(
        self, plan: PreemptionPlan, *, ttl: float = 30.0, owner: str | None = None
    ) -> Reservation:
        """Ends the plan's victims and holds its placement, or raises ``Conflict``."""
        now = self._check_call(ttl, owner)
        request = plan.request
        freed, returned = self._check_victims(
            plan.victims,
            lambda hold: (
                hold.preemptible and (plan.chosen_victims or hold.priority < request.priority)
            ),
        )
        milli = plan.placement.gpu_milli
        back = self._given_back(plan.victims)  # the victims' shares of healthy GPUs (P8)
        if milli is None:  # a GPU all of whose shares are victims' is free
            self._freed_whole(freed, back)
            held = self._check_target(plan.placement, freed)
        else:  # shares hold no whole GPU; a victim's GPUs and shares count free (P8)
            self._check_shares(plan.placement, milli, freed, back)  # type: ignore[attr-defined]
            held = {}
        self._check_target_resources(request, plan.placement, plan.victims)
        self._check_cap_after(owner, sum(len(g) for g in held.values()), returned.get(owner, 0))
        for victim in plan.victims:
            self._end(victim, "preempted")
        terms = (request.priority, request.preemptible, request.movable)
        return self._hold_new(plan.placement, held, now, ttl, owner, terms, request)

    def capacity_for(self, request: AnyRequest) -> int:
        """How many disjoint copies of ``request`` ``reserve_many`` would place now."""
        self._reclaim()
        if is_roles(request):
            unit = self._roles(request)
            views = self._roles_views(unit)
            copies = 0
            while (
                found := roles.place_roles(views, self.levels, unit, self.policy)[0]
            ) is not None:
                views = roles.taking_resources(preemption.taking(views, found), unit, found)
                copies += 1
            return copies
        gang = self._gang(request)
        asks = self._asks(request)
        views = self._views(asks, gang.gpu_milli)
        copies = 0
        taken: dict[str, int] = {}  # pods of earlier copies per node (their resources)
        while (placement := rules.place(views, self.levels, gang, self.policy)) is not None:
            if gang.gpu_milli is None:
                views = preemption.taking(views, placement)
            else:  # docs/resources.md "Fractions of a GPU": the copies use shares
                views = fractions.taking_shares(views, placement, gang.gpu_milli)
            for pod in placement.pods:
                taken[pod.node] = taken.get(pod.node, 0) + 1
            views = self._bounded(views, asks, taken)
            copies += 1
        return copies


def _asks_resources(request: AnyRequest) -> bool:
    """Whether a gang, or some group of a multi-role unit, asks resources besides GPUs."""
    if is_roles(request):
        return any(getattr(group, "resources_per_pod", None) for group in request.groups)
    return bool(getattr(request, "resources_per_pod", None))


def _refuse_unsupported_roles(request: RolesRequest, call: str) -> None:
    """Removal sets do not count a unit's spares yet (its groups' resources they do)."""
    if any(getattr(group, "spares", 0) for group in request.groups):
        raise InvalidRequest(f"{call} does not take gangs with spares yet; {_PLACE_THEM}")


def _refuse_unsupported_shapes(request: AnyRequest, call: str) -> None:
    """Preemption and defragmentation plan for single gangs of pods (no slices, no NUMA).

    Both count resources besides GPUs (docs/resources.md "Node resources").
    """
    if is_roles(request):
        raise InvalidRequest(
            f"{call} plans for single gangs; a MultiGangRequest is placed by place_gang, "
            "reserve, the batches and plan_preemption (docs/roles.md)"
        )
    if request.slices:
        raise InvalidRequest(
            f"{call} does not take slice gangs yet; place them with place_gang or reserve"
        )
    if getattr(request, "spares", 0):
        raise InvalidRequest(
            f"{call} does not take gangs with spares yet; place them with place_gang or reserve"
        )
    if request.numa == "single":
        raise InvalidRequest(
            f"{call} does not take numa='single' gangs yet; place them with place_gang or reserve"
        )
