"""The oracle's ``place_after`` and ``reserve(avoid=...)``: docs/preemption.md (L1-L3).

A mixin of :class:`gangplace.reference.Cluster`. ``place_after`` tries every prefix of the
release groups in turn, shortest first: it frees the prefix's allocations, marks the avoided
GPUs that are then free as held, places the gang by the ordinary rules, and puts everything
back. No lower bound, no bisection: the first prefix that fits is the answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from gangplace.errors import InvalidRequest, UnknownNode
from gangplace.reference.fractions import WHOLE

if TYPE_CHECKING:
    from gangplace.reference.oracle import _Hold, _Node
    from gangplace.reference.values import Placement, Reservation

__all__ = ["Lookahead"]


class Lookahead:
    """``place_after`` and ``reserve`` with ``avoid`` for the reference cluster."""

    _nodes: dict[str, _Node]
    _holds: dict[str, _Hold]

    if TYPE_CHECKING:

        def _reclaim(self) -> float: ...
        def _plan(self, request: Any) -> Placement | None: ...
        def _reserve_now(self, request: Any, *, ttl: float, owner: str | None) -> Reservation: ...
        def _check_request(self, request: Any) -> None: ...
        def _sync_shares(self) -> None: ...

    def place_after(
        self,
        request: Any,
        releases: Iterable[Iterable[Any]] = (),
        *,
        avoid: Iterable[Any] = (),
    ) -> tuple[int, Placement] | None:
        """L1: the first prefix of ``releases`` after which the gang fits, and where."""
        groups = [[a if isinstance(a, str) else a.id for a in group] for group in releases]
        avoided = self._avoided(avoid)
        self._reclaim()
        for k in range(len(groups) + 1):
            ended = [hid for group in groups[:k] for hid in group]
            with self._looking_ahead(ended, avoided):
                placement = self._plan(request)
            if placement is not None:
                return k, placement
        return None

    def reserve(
        self,
        request: Any,
        *,
        ttl: float = 30.0,
        owner: str | None = None,
        avoid: Iterable[Any] = (),
    ) -> Reservation:
        """Holds a new placement of a request (L2: never on the GPUs of ``avoid``)."""
        avoided = self._avoided(avoid)
        if not avoided:
            return self._reserve_now(request, ttl=ttl, owner=owner)
        self._reclaim()
        with self._looking_ahead([], avoided):
            return self._reserve_now(request, ttl=ttl, owner=owner)

    def _avoided(self, avoid: Iterable[Any]) -> dict[str, set[int]]:
        """L3: every pod of ``avoid`` on an existing node, with GPUs it has."""
        avoided: dict[str, set[int]] = {}
        pods = [p for item in avoid for p in (item.pods if hasattr(item, "domain") else [item])]
        for pod in pods:
            node = self._nodes.get(pod.node)
            if node is None:
                raise UnknownNode(f"no node named {pod.node!r}", pod.node)
            for gpu in pod.gpus:
                if not 0 <= gpu < node.gpus:
                    raise InvalidRequest(f"avoid: node {pod.node!r} has no GPU {gpu}")
            avoided.setdefault(pod.node, set()).update(pod.gpus)
        return avoided

    @contextmanager
    def _looking_ahead(self, ended: list[str], avoided: dict[str, set[int]]) -> Iterator[None]:
        """The allocations ``ended`` freed and the avoided GPUs kept out of the way, for the block.

        An ended allocation is also set aside from the holds, so that the resources besides
        GPUs and the shares of GPUs its pods use count as free (docs/resources.md "Node
        resources", "Fractions of a GPU"). An avoided GPU that is then free is held; one that is
        then shared is filled up to a whole GPU, so that no pod takes part of it.
        """
        freed: list[tuple[_Node, set[int]]] = []
        aside: dict[str, _Hold] = {}
        order = list(self._holds)
        for hid in dict.fromkeys(ended):
            hold = self._holds.get(hid)
            if hold is None or not hold.committed:
                continue
            if hold.asks or hold.placement.gpu_milli is not None:
                aside[hid] = self._holds.pop(hid)
            for name, gpus in hold.gpus.items():
                node = self._nodes.get(name)
                if node is not None:
                    mine = gpus & node.allocated
                    node.allocated -= mine
                    freed.append((node, mine))
        self._sync_shares()
        blocked: list[tuple[_Node, set[int]]] = []
        for name, gpus in avoided.items():
            node = self._nodes[name]
            free = gpus & set(node.free())
            node.reserved |= free
            blocked.append((node, free))
            node.shares.update({gpu: WHOLE for gpu in gpus if gpu in node.shares})
        try:
            yield
        finally:
            for node, gpus in blocked:
                node.reserved -= gpus
            for node, gpus in freed:
                node.allocated |= gpus
            if aside:  # back in their places
                held = {**self._holds, **aside}
                self._holds.clear()
                self._holds.update((hid, held[hid]) for hid in order if hid in held)
            self._sync_shares()
