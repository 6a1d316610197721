"""The oracle's ``release_pods`` (docs/transactions.md "Ending some pods", E1-E4) and ``holds_on``.

``holds_on`` (docs/transactions.md "Transactions") looks at every live hold's GPUs on the node, and
at the GPUs of the node its live pods hold shares of, one hold by one. A mixin of
:class:`gangplace.reference.Cluster`. The ended ranks are recorded on the hold; their pods'
GPUs that the hold still holds go back to the pool, except a GPU that a remaining rank or a
spare on a node of that name names (a removed node's old pods never free the GPUs of a node
that came back under the same name).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from gangplace.errors import InvalidRequest, ReservationError

if TYPE_CHECKING:
    from gangplace.reference.oracle import _Hold, _Node
    from gangplace.reference.values import Allocation

__all__ = ["PodEndings"]


class PodEndings:
    """``release_pods`` for the reference cluster."""

    _nodes: dict[str, _Node]
    _holds: dict[str, _Hold]

    if TYPE_CHECKING:

        def _reclaim(self) -> float: ...
        def _sync_shares(self) -> None: ...
        def _hold_shares(self, hold: _Hold) -> list[tuple[str, int, int]]: ...
        @staticmethod
        def _id(value: Allocation | str) -> str: ...
        def _visible(self, hid: str, owner: str | None) -> tuple[_Hold | None, str | None]: ...
        @staticmethod
        def _ended_error(hid: str, ending: str | None, doing: str) -> ReservationError: ...
        def _end(self, hid: str, ending: str) -> None: ...
        def _node(self, name: str) -> _Node: ...

    def holds_on(self, name: str) -> list[tuple[str, tuple[int, ...]]]:
        """The live holds with GPUs, or shares of GPUs, on the node; see ``Cluster.holds_on``."""
        self._reclaim()
        self._node(name)
        listed = []
        for hid, hold in sorted(self._holds.items()):
            gpus = set(hold.gpus.get(name, ()))
            gpus.update(gpu for on, gpu, _ in self._hold_shares(hold) if on == name)
            if gpus:
                listed.append((hid, tuple(sorted(gpus))))
        return listed

    def release_pods(
        self, allocation: Allocation | str, ranks: Iterable[int], *, owner: str | None = None
    ) -> Allocation | None:
        """Ends some pods of an allocation; see ``gangplace.Cluster.release_pods``."""
        ranks = list(ranks)
        self._reclaim()
        hid = self._id(allocation)
        hold, ending = self._visible(hid, owner)
        if hold is None:
            raise self._ended_error(hid, ending, "release pods of")
        if not hold.committed:
            raise ReservationError(
                f"cannot release pods of {hid}: it is not committed; roll it back instead"
            )
        chosen = _checked(hid, hold, ranks)
        for repair_id, repair in sorted(self._holds.items()):
            if repair.repairs != hid:
                continue
            replaced = {*repair.repaired_ranks, *(rank for rank, _ in repair.repair_spares)}
            hit = [rank for rank in chosen if rank in replaced]
            if hit:
                raise ReservationError(
                    f"cannot end rank {hit[0]} of {hid}: repair reservation {repair_id} "
                    "replaces it; commit or roll back the repair first"
                )
        if len(hold.ended) + len(chosen) == len(hold.placement.pods):
            self._end(hid, "released")
            return None
        kept: dict[str, set[int]] = {}
        for rank, pod in enumerate(hold.placement.pods):
            if rank not in chosen and rank not in hold.ended:
                kept.setdefault(pod.node, set()).update(pod.gpus)
        for spare in hold.placement.spares:
            kept.setdefault(spare.node, set()).update(spare.gpus)
        for rank in chosen:
            pod = hold.placement.pods[rank]
            if pod.node not in hold.gpus:
                continue  # its node was removed: nothing held there
            gone = hold.gpus[pod.node] & set(pod.gpus) - kept.get(pod.node, set())
            hold.gpus[pod.node] -= gone
            if not hold.gpus[pod.node]:
                del hold.gpus[pod.node]
            self._nodes[pod.node].allocated -= gone
        hold.ended = tuple(sorted({*hold.ended, *chosen}))
        self._sync_shares()  # docs/resources.md "Fractions of a GPU": ended pods' shares go back
        return hold.allocation(hid, self._nodes)


def _checked(hid: str, hold: _Hold, ranks: list[int]) -> list[int]:
    """E2 (docs/transactions.md): at least one rank, each of the placement, not ended, once."""
    if not ranks:
        raise InvalidRequest("ranks is empty: name at least one rank to end")
    count = len(hold.placement.pods)
    for rank in ranks:
        if not 0 <= rank < count:
            raise InvalidRequest(
                f"rank {rank} is out of range: allocation {hid} has ranks 0 to {max(count - 1, 0)}"
            )
        if rank in hold.ended:
            raise InvalidRequest(f"rank {rank} of {hid} has already ended")
    repeated = sorted(rank for rank in set(ranks) if ranks.count(rank) > 1)
    if repeated:
        raise InvalidRequest(f"rank {repeated[0]} is named twice")
    return sorted(ranks)
