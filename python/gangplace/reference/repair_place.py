"""Where a repair's lost ranks go, as readable rules: docs/repair.md "Repair after failures", R2.

Lost ranks are grouped into classes placed one after another, each seeing the GPUs and the
resources the earlier ones took: for a slice gang the lost ranks of each innermost slice,
inside that slice's domain (slices in rank order); otherwise the lost ranks of one pod size
and group, largest pods first, then group order, then slice order. Each class is split by
what its ranks ask besides GPUs (docs/resources.md "Node resources"), in the order of each ask's
lowest rank, and its pods count by the nodes' free resources as well as their free GPUs. A
fractional allocation's classes are pods of its share, placed by rules F1-F2 (docs/resources.md
"Fractions of a GPU"), each seeing the shares the earlier classes took.
:mod:`gangplace.reference.repair` builds ``plan_repair``, ``repair`` and ``reserve_spares``
on it; the Rust core (``repair/mod.rs``) must give the same answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from gangplace.reference import preemption, rules
from gangplace.reference.filters import Filter, filter_of
from gangplace.reference.fractions import WHOLE
from gangplace.reference.ranks import Ranks, asks_of
from gangplace.reference.resources import pods_fitting
from gangplace.reference.values import Path, PodPlacement

if TYPE_CHECKING:
    from gangplace.reference.oracle import _Hold, _Node

__all__ = ["Freed", "RepairClass", "RepairPlacing", "asks_of", "freed_by"]


@dataclass(frozen=True)
class RepairClass:
    """Lost ranks placed together: one pod size, selector, ask and target slice (or none)."""

    gpus_per_pod: int
    selector: Filter  # docs/placement.md, rule 1
    ranks: tuple[int, ...]
    slice: Path | None
    asks: Mapping[str, int] = field(default_factory=dict)
    milli: int | None = None  # a fractional allocation's share per pod


@dataclass(frozen=True)
class Freed:
    """What a what-if preemption's victims give back: GPUs and resources, per node.

    ``gpus`` holds the shared GPUs all of whose shares they hold too; ``shares`` their
    shares of healthy GPUs, per ``(node, GPU)`` (docs/preemption.md P8).
    """

    gpus: Mapping[str, set[int]] = field(default_factory=dict)
    resources: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    shares: Mapping[tuple[str, int], int] = field(default_factory=dict)


def _added(into: dict[str, dict[str, int]], node: str, asks: Mapping[str, int]) -> None:
    on_node = into.setdefault(node, {})
    for name, quantity in asks.items():
        on_node[name] = on_node.get(name, 0) + quantity


class RepairPlacing(Ranks):
    """The classes of a repair and their placement, on the reference cluster's state."""

    if TYPE_CHECKING:
        levels: tuple[str, ...]
        max_level: str | None
        _nodes: dict[str, _Node]

        def _views(self) -> list[rules.NodeView]: ...
        def _used(self, name: str) -> dict[str, int]: ...
        def _depth_of(self, level: str | None) -> int: ...
        def _share_views(
            self, views: list[rules.NodeView], milli: int | None
        ) -> list[rules.NodeView]: ...

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

    def _classes(self, hold: _Hold, lost: Sequence[int]) -> list[RepairClass]:
        pods = hold.placement.pods
        request = hold.request
        if request is not None and request.slices:
            inner = request.slices[-1][1]
            classes: list[RepairClass] = []
            for rank in lost:
                where = tuple(hold.placement.slices[rank // inner])
                asks = asks_of(hold, rank)
                if classes and classes[-1].slice == where and classes[-1].asks == asks:
                    last = classes[-1]
                    classes[-1] = replace(last, ranks=(*last.ranks, rank))
                else:
                    size = len(pods[rank].gpus)
                    milli = hold.placement.gpu_milli
                    found_class = RepairClass(size, filter_of(request), (rank,), where, asks, milli)
                    classes.append(found_class)
            return classes
        roles = hold.roles
        counts = hold.placement.groups_counts
        group_of = [g for g, (_, count) in enumerate(counts) for _ in range(count)]
        # Largest pods first, then group order, then (sliced groups) slice order; each key
        # split by asks, in the order of each ask's lowest rank.
        by_key: dict[tuple[int, int, int], list[tuple[Mapping[str, int], list[int]]]] = {}
        for rank in lost:
            group = group_of[rank] if rank < len(group_of) else 0
            at = self._slice_index(hold, rank)
            key = (-len(pods[rank].gpus), group, 0 if at is None else at)
            split = by_key.setdefault(key, [])
            asks = asks_of(hold, rank)
            same = next((ranks for seen, ranks in split if seen == asks), None)
            if same is None:
                split.append((asks, [rank]))
            else:
                same.append(rank)
        found = []
        for (size, group, _), split in sorted(by_key.items(), key=lambda item: item[0]):
            selector = Filter()
            if request is not None:
                selector = filter_of(request)
            elif roles is not None:
                selector = filter_of(roles.groups[group])
            for asks, ranks in split:
                inside = self._slice_of(hold, ranks[0])
                milli = hold.placement.gpu_milli
                found.append(RepairClass(-size, selector, tuple(ranks), inside, asks, milli))
        return found

    def _counted(
        self,
        views: list[rules.NodeView],
        asks: Mapping[str, int],
        taken: Mapping[str, Mapping[str, int]],
        freed: Mapping[str, Mapping[str, int]],
    ) -> list[rules.NodeView]:
        """``views`` with each node's pods of ``asks`` bounded by its free resources.

        Free: the capacity less the holds' use plus ``taken`` less ``freed`` (a use never
        below zero: freed amounts pay back a capacity that shrank under running pods first).
        """
        if not asks:
            return views
        counted = []
        for view in views:
            used, capacity = self._used(view.name), self._nodes[view.name].resources
            more, back = taken.get(view.name, {}), freed.get(view.name, {})
            free = {
                r: max(0, q - max(0, used.get(r, 0) + more.get(r, 0) - back.get(r, 0)))
                for r, q in capacity.items()
            }
            pods, bound = pods_fitting(free, asks)
            counted.append(replace(view, resource_pods=pods, bound_by=bound))
        return counted

    def _room(self, group: RepairClass, path: Path, numa: str) -> int:
        views = self._counted(self._share_views(self._views(), group.milli), group.asks, {}, {})
        usable = rules.feasible(views, group.selector, numa)
        members = [n for n in usable if n.full_path[: len(path)] == path]
        return min(rules.capacity(members, group.gpus_per_pod), len(group.ranks))

    def _place(
        self,
        classes: Sequence[RepairClass],
        target: tuple[int, Path],
        spread: str,
        numa: str,
        freed: Freed | None = None,
    ) -> tuple[tuple[int, PodPlacement], ...] | None:
        """Every class in turn, seeing the GPUs and resources the earlier ones took.

        ``freed``: what a what-if preemption's victims give back, counted free besides.
        Returns ``(rank, pod)`` pairs in rank order, or ``None`` if a class does not fit.
        """
        extra = freed or Freed()
        node_depth = len(self.levels) + 1
        taken: dict[str, set[int]] = {}
        taken_resources: dict[str, dict[str, int]] = {}
        taken_shares: dict[tuple[str, int], int] = {}
        found: list[tuple[int, PodPlacement]] = []
        for group in classes:
            depth, path = target
            if group.slice is not None:
                depth, path, whole = self._resolve(group.slice)
                if not whole:
                    return None
            views = [
                replace(
                    n,
                    free=tuple(
                        g
                        for g in sorted({*n.free, *extra.gpus.get(n.name, ())})
                        if g not in taken.get(n.name, ())
                    ),
                )
                for n in self._views()
            ]
            views = _plus_shares(self._share_views(views, group.milli), extra.shares)
            views = _less_shares(views, taken_shares)
            views = self._counted(views, group.asks, taken_resources, extra.resources)
            usable = rules.feasible(views, group.selector, numa)
            members = [n for n in usable if n.full_path[: len(path)] == path]
            pods = len(group.ranks)
            if rules.capacity(members, group.gpus_per_pod) < pods:
                return None
            placed = rules.spread(usable, node_depth, depth, path, pods, group.gpus_per_pod, spread)
            ranked = rules.ranked(placed, {n.name: n.full_path for n in usable})
            for pod in ranked:
                if group.milli is None:
                    taken.setdefault(pod.node, set()).update(pod.gpus)
                else:  # a share takes room on its GPU, not the GPU
                    for gpu in pod.gpus:
                        slot = (pod.node, gpu)
                        taken_shares[slot] = taken_shares.get(slot, 0) + group.milli
                _added(taken_resources, pod.node, group.asks)
            found.extend(zip(group.ranks, ranked, strict=True))
        return tuple(sorted(found, key=lambda pair: pair[0]))


def _less_shares(
    views: list[rules.NodeView], taken: Mapping[tuple[str, int], int]
) -> list[rules.NodeView]:
    """Share views with the room the earlier classes' shares took left out."""
    return _shifted(views, taken, -1)


def _plus_shares(
    views: list[rules.NodeView], back: Mapping[tuple[str, int], int]
) -> list[rules.NodeView]:
    """Share views with the room the victims' shares give back (P8)."""
    return _shifted(views, back, 1)


def _shifted(
    views: list[rules.NodeView], by: Mapping[tuple[str, int], int], sign: int
) -> list[rules.NodeView]:
    """Share views with each GPU's room moved by ``sign`` times its thousandths in ``by``."""
    if not by:
        return views

    def moved(view: rules.NodeView) -> rules.NodeView:
        room = tuple(
            (gpu, min(WHOLE, left + sign * by.get((view.name, gpu), 0))) for gpu, left in view.room
        )
        return replace(view, room=room)

    return [moved(view) if view.milli is not None else view for view in views]


def freed_by(removed: Sequence[Any]) -> Freed:
    """The healthy GPUs, resources and shares ``removed`` would free, per node.

    A shared GPU all of whose shares they hold is freed whole (docs/preemption.md P8).
    """
    gpus, resources = preemption.freed_totals(removed)
    shares = preemption.given_back(removed)
    for (node, gpu), (milli, used) in shares.items():
        if milli >= used:
            gpus.setdefault(node, set()).add(gpu)
    back = {at: milli for at, (milli, _) in shares.items()}
    return Freed(gpus, resources, back)
