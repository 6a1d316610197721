"""Where an allocation's ranks stand: its innermost slices and the spares for lost ranks.

docs/repair.md "Repair after failures" and "Spares". A mixin of :class:`gangplace.reference.Cluster`
restating the core's ``engine/ranks.rs``; :mod:`gangplace.reference.repair` builds on it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from gangplace.reference.filters import Filter, filter_of
from gangplace.reference.values import Path, PodPlacement

if TYPE_CHECKING:
    from gangplace.reference.oracle import _Hold, _Node

__all__ = ["Ranks", "asks_of", "asks_without_spares"]


def asks_of(hold: _Hold, slot: int) -> Mapping[str, int]:
    """What pod slot ``slot`` of ``hold`` asks besides GPUs (ranks, then spares in order)."""
    if not hold.asks:
        return {}
    if len(hold.asks) == 1:
        return hold.asks[0]
    return hold.asks[slot] if slot < len(hold.asks) else {}


def asks_without_spares(
    hold: _Hold, gone: Collection[PodPlacement]
) -> tuple[Mapping[str, int], ...]:
    """``hold.asks`` once its spares in ``gone`` leave it (per slot: their slots go too)."""
    if len(hold.asks) <= 1:
        return hold.asks
    first = len(hold.placement.pods)
    spares = hold.placement.spares
    kept = (ask for ask, spare in zip(hold.asks[first:], spares, strict=False) if spare not in gone)
    return (*hold.asks[:first], *kept)


class Ranks:
    """An allocation's slices and usable spares, derived from the state."""

    _nodes: dict[str, _Node]

    def _spare_matches(
        self, hold: _Hold, lost: Sequence[int]
    ) -> tuple[tuple[int, PodPlacement], ...]:
        """Rule R2's first tier: the lost ranks the allocation's own spares take.

        Lost ranks in rank order each take the first unused spare of the lost pod's GPU count
        asking what it asks besides GPUs, on an uncordoned node carrying the rank's selector,
        inside the rank's slice domain (anywhere without slices).
        """
        spares = hold.placement.spares
        taken = [False] * len(spares)
        found = []
        for rank in lost:
            within = self._slice_of(hold, rank) or ()
            size = len(hold.placement.pods[rank].gpus)
            selector = self._selector_of(hold, rank)
            asks = asks_of(hold, rank)
            for index, spare in enumerate(spares):
                node = self._nodes.get(spare.node)
                if taken[index] or node is None or node.cordoned or len(spare.gpus) != size:
                    continue
                if asks_of(hold, len(hold.placement.pods) + index) != asks:
                    continue
                if not selector.admits(node.labels, node.taints):
                    continue
                if (*node.path, node.name)[: len(within)] == within:
                    taken[index] = True
                    found.append((rank, spare))
                    break
        return tuple(found)

    @staticmethod
    def _selector_of(hold: _Hold, rank: int) -> Filter:
        """The filter ``rank``'s pods follow: the request's, or its group's.

        docs/placement.md, rule 1; a hold placed without a request: the plain filter.
        """
        if hold.request is not None:
            return filter_of(hold.request)
        if hold.roles is not None:
            end = 0
            for group, (_, count) in zip(
                hold.roles.groups, hold.placement.groups_counts, strict=False
            ):
                end += count
                if rank < end:
                    return filter_of(group)
        return Filter()

    def _slice_of(self, hold: _Hold, rank: int) -> Path | None:
        """The innermost slice domain of ``rank`` (slice gang or sliced group), else ``None``."""
        at = self._slice_index(hold, rank)
        return None if at is None else tuple(hold.placement.slices[at])

    @staticmethod
    def _slice_index(hold: _Hold, rank: int) -> int | None:
        """Where ``rank``'s innermost slice is in ``placement.slices``.

        For a multi-role gang, after the slices of the sliced groups before its group.
        """
        request = hold.request
        if request is not None:
            return rank // request.slices[-1][1] if request.slices else None
        if hold.roles is None:
            return None
        start = before = 0
        for group, (_, count) in zip(hold.roles.groups, hold.placement.groups_counts, strict=False):
            inner = group.slices[-1][1] if group.slices else None
            if rank < start + count:
                return None if inner is None else before + (rank - start) // inner
            start += count
            before += 0 if inner is None else count // inner
        return None
