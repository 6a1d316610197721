"""Repair after failures, as readable rules: README "Repair after failures", rules R1-R3.

``plan_repair`` finds where all the lost ranks of an allocation go, or says they do not fit;
``explain_repair`` counts, tier by tier, how many would fit. Lost ranks are grouped into
classes placed one after another, each seeing the GPUs the earlier ones took: for a slice gang
the lost ranks of each innermost slice, inside that slice's domain (slices in rank order);
otherwise the lost ranks of one pod size and group, largest pods first, inside the placement's
domain, or with ``widen`` the smallest enclosing domain up to the request's coarsest level
where every class fits. The Rust core (``engine/repair.rs``) must give the same answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from gangplace.errors import InvalidRequest, ReservationError, UnknownReservation
from gangplace.reference import rules
from gangplace.reference.values import Allocation, Path, PodPlacement

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


@dataclass(frozen=True)
class _Class:
    """Lost ranks placed together: one pod size, one selector, one target slice (or none)."""

    gpus_per_pod: int
    selector: Mapping[str, str]
    ranks: tuple[int, ...]
    slice: Path | None


class Repairs:
    """``plan_repair`` and ``explain_repair`` of the reference cluster."""

    if TYPE_CHECKING:
        levels: tuple[str, ...]
        max_level: str | None
        _nodes: dict[str, _Node]

        def _reclaim(self) -> float: ...
        def _views(self) -> list[rules.NodeView]: ...
        def _depth_of(self, level: str | None) -> int: ...
        def _visible(self, hid: str, owner: str | None) -> tuple[_Hold | None, str | None]: ...
        @staticmethod
        def _id(value: Any) -> str: ...

    def plan_repair(
        self, allocation: Allocation | str, *, widen: bool = False, owner: str | None = None
    ) -> RepairPlan | None:
        """Where every lost rank of the allocation goes (rules R1-R3), or ``None``."""
        hid, hold = self._repairable(allocation, owner)
        lost = hold.lost(self._nodes)
        placement = hold.placement
        if not lost:
            return RepairPlan(hid, (), (), (), placement.level, tuple(placement.domain))
        classes = self._classes(hold, lost)
        spread, numa = self._knobs(hold)
        depth, path, exact = self._resolve(tuple(placement.domain))
        sliced = any(c.slice is not None for c in classes)
        targets: list[tuple[int, Path]] = []
        if sliced:
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
            return RepairPlan(hid, lost, found, (), level, domain)
        return None

    def explain_repair(
        self, allocation: Allocation | str, *, owner: str | None = None
    ) -> dict[str, int]:
        """Per tier of rule R2, how many lost ranks would fit there (each class alone)."""
        _, hold = self._repairable(allocation, owner)
        lost = hold.lost(self._nodes)
        classes = self._classes(hold, lost)
        _, numa = self._knobs(hold)
        tiers = {"spares": 0, "slice": 0, "domain": 0, "widened": 0}
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

    # ----------------------------------------------------------------- helpers

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

    def _knobs(self, hold: _Hold) -> tuple[str, str]:
        if hold.request is not None:
            return hold.request.spread, hold.request.numa
        if hold.roles is not None:
            return hold.roles.spread, "none"
        return "pack", "none"

    def _widest(self, hold: _Hold) -> int:
        """The coarsest depth a repair may widen to (required_level, or max_level)."""
        asked = hold.request if hold.request is not None else hold.roles
        level = None if asked is None else asked.required_level
        depth = self._depth_of(level)
        if self.max_level is not None:
            depth = max(depth, self._depth_of(self.max_level))
        return depth

    def _resolve(self, path: Path) -> tuple[int, Path, bool]:
        """The deepest prefix of ``path`` that still names a domain (or node).

        Returns its depth, the prefix, and whether it is the whole path.
        """
        full = [(*node.path, node.name) for node in self._nodes.values()]
        for depth in range(len(path), -1, -1):
            if any(tuple(names[:depth]) == path[:depth] for names in full) or depth == 0:
                return depth, path[:depth], depth == len(path)
        return 0, (), not path

    def _classes(self, hold: _Hold, lost: Sequence[int]) -> list[_Class]:
        pods = hold.placement.pods
        request = hold.request
        if request is not None and request.slices:
            inner = request.slices[-1][1]
            classes: list[_Class] = []
            for rank in lost:
                where = tuple(hold.placement.slices[rank // inner])
                if classes and classes[-1].slice == where:
                    last = classes[-1]
                    classes[-1] = replace(last, ranks=(*last.ranks, rank))
                else:
                    size = len(pods[rank].gpus)
                    classes.append(_Class(size, dict(request.selector), (rank,), where))
            return classes
        roles = hold.roles
        if roles is not None and any(group.slices for group in roles.groups):
            raise InvalidRequest(
                "plan_repair does not take multi-role allocations with sliced groups yet"
            )
        counts = hold.placement.groups_counts
        group_of = [g for g, (_, count) in enumerate(counts) for _ in range(count)]
        by_key: dict[tuple[int, int], list[int]] = {}
        for rank in lost:
            group = group_of[rank] if rank < len(group_of) else 0
            by_key.setdefault((-len(pods[rank].gpus), group), []).append(rank)
        found = []
        for (size, group), ranks in sorted(by_key.items()):
            selector: Mapping[str, str] = {}
            if request is not None:
                selector = dict(request.selector)
            elif roles is not None:
                selector = dict(roles.groups[group].selector)
            found.append(_Class(-size, selector, tuple(ranks), None))
        return found

    def _room(self, group: _Class, path: Path, numa: str) -> int:
        usable = rules.feasible(self._views(), group.selector, numa)
        members = [n for n in usable if n.full_path[: len(path)] == path]
        return min(rules.capacity(members, group.gpus_per_pod), len(group.ranks))

    def _place(
        self, classes: Sequence[_Class], target: tuple[int, Path], spread: str, numa: str
    ) -> tuple[tuple[int, PodPlacement], ...] | None:
        """Every class in turn, seeing the GPUs the earlier ones took.

        Returns ``(rank, pod)`` pairs in rank order, or ``None`` if a class does not fit.
        """
        node_depth = len(self.levels) + 1
        taken: dict[str, set[int]] = {}
        found: list[tuple[int, PodPlacement]] = []
        for group in classes:
            depth, path = target
            if group.slice is not None:
                depth, path, whole = self._resolve(group.slice)
                if not whole:
                    return None
            views = [
                replace(n, free=tuple(g for g in n.free if g not in taken.get(n.name, ())))
                for n in self._views()
            ]
            usable = rules.feasible(views, group.selector, numa)
            members = [n for n in usable if n.full_path[: len(path)] == path]
            pods = len(group.ranks)
            if rules.capacity(members, group.gpus_per_pod) < pods:
                return None
            placed = rules.spread(usable, node_depth, depth, path, pods, group.gpus_per_pod, spread)
            ranked = rules.ranked(placed, {n.name: n.full_path for n in usable})
            for pod in ranked:
                taken.setdefault(pod.node, set()).update(pod.gpus)
            found.extend(zip(group.ranks, ranked, strict=True))
        return tuple(sorted(found, key=lambda pair: pair[0]))
