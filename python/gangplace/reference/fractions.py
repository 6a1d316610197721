"""Fractions of a GPU for the reference cluster (docs/resources.md "Fractions of a GPU").

A fractional pod (``GangRequest(n, 1, gpu_milli=m)``) uses ``m`` thousandths of one GPU. A
GPU with any share is *shared*: it is not free for a whole-GPU pod, and it is free again when
its last share ends (rule F1). A node holds ``sum(room // m)`` such pods over its usable GPUs
(free, or shared and healthy), ``room`` being ``1000`` minus the GPU's used thousandths; each
pod takes the usable GPU with the least room that still holds it, ties to the lowest index
(rule F2, best fit).

Everything here is derived from the live holds: :meth:`Fractions._sync_shares` recomputes
every node's shares after a hold begins or ends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from gangplace.errors import InvalidRequest
from gangplace.reference import texts
from gangplace.reference.values import Placement, PlacementLike, PodPlacement

if TYPE_CHECKING:
    from gangplace.reference.oracle import _Hold, _Node
    from gangplace.reference.rules import NodeView

__all__ = ["WHOLE", "Fractions", "share_pods", "take_shares", "taking_shares"]

WHOLE = 1000
"""A whole GPU, in thousandths."""

Room = tuple[tuple[int, int], ...]
"""``(gpu, room)`` for every usable GPU of a node, ascending by GPU."""


def share_pods(room: Room, milli: int) -> int:
    """Pods of ``milli`` thousandths that GPUs with this room hold."""
    return sum(left // milli for _, left in room)


def take_shares(room: Room, milli: int, pods: int) -> list[int]:
    """Rule F2: the GPU of each of ``pods`` pods, pod by pod (best fit, then lowest index)."""
    left = dict(room)
    chosen = []
    for _ in range(pods):
        gpu = min((gpu for gpu, free in left.items() if free >= milli), key=lambda g: (left[g], g))
        left[gpu] -= milli
        chosen.append(gpu)
    return chosen


def taking_shares(views: Sequence[NodeView], placement: Placement, milli: int) -> list[NodeView]:
    """The views once ``placement``'s fractional pods use their shares.

    Their GPUs leave ``free``: a shared GPU is not free.
    """
    used: dict[tuple[str, int], int] = {}
    for pod in placement.pods:
        for gpu in pod.gpus:
            used[(pod.node, gpu)] = used.get((pod.node, gpu), 0) + milli
    out = []
    for view in views:
        touched = {gpu for (node, gpu) in used if node == view.name}
        if not touched:
            out.append(view)
            continue
        room = tuple((gpu, left - used.get((view.name, gpu), 0)) for gpu, left in view.room)
        free = tuple(gpu for gpu in view.free if gpu not in touched)
        out.append(replace(view, free=free, room=room))
    return out


class Fractions:
    """GPU shares for the reference cluster (a mixin of its ``Cluster``)."""

    _nodes: dict[str, _Node]
    _holds: dict[str, _Hold]

    def _hold_shares(self, hold: _Hold) -> list[tuple[str, int, int]]:
        """``(node, gpu, thousandths)`` of each live pod of a fractional hold still on its node."""
        milli = hold.placement.gpu_milli
        if milli is None:
            return []
        return [
            (pod.node, gpu, milli)
            for rank, pod in enumerate(hold.placement.pods)
            if rank not in hold.ended and pod.node in hold.res_nodes
            for gpu in pod.gpus
        ]

    def _sync_shares(self) -> None:
        """Every node's shares recomputed from the live holds."""
        for node in self._nodes.values():
            node.shares = {}
        for hold in self._holds.values():
            for name, gpu, milli in self._hold_shares(hold):
                if name in self._nodes:
                    shares = self._nodes[name].shares
                    shares[gpu] = shares.get(gpu, 0) + milli

    def _share_views(self, views: list[NodeView], milli: int | None) -> list[NodeView]:
        """Views for a fractional request: each usable GPU's room (free, or shared and healthy)."""
        if milli is None:
            return views
        out = []
        for view in views:
            node = self._nodes[view.name]
            shared = {gpu for gpu in node.shares if gpu not in node.unhealthy}
            usable = sorted({*view.free, *shared})
            room = tuple((gpu, WHOLE - node.shares.get(gpu, 0)) for gpu in usable)
            out.append(replace(view, milli=milli, room=room))
        return out

    def _check_shares(
        self,
        placement: PlacementLike,
        milli: int,
        freed: Mapping[str, set[int]] | None = None,
        given_back: Mapping[tuple[str, int], int] | None = None,
        earlier: dict[tuple[str, int], int] | None = None,
    ) -> Placement:
        """The fractional placement as held, if it still fits (``Conflict`` otherwise).

        Each pod names one healthy GPU held by no whole pod (but those of ``freed``, a
        preemption's victims'), with room for its share beside the shares there (less those
        ``given_back``, its victims' shares; plus those ``earlier`` placements of the same
        mutation take, to which this one's are added) and the placement's other pods.
        """
        if getattr(placement, "spares", ()):
            raise InvalidRequest("a placement of fractional pods has no spares")
        asked: dict[tuple[str, int], int] = {}
        for pod in placement.pods:
            node = self._pod_node(placement, pod.node)
            if len(set(pod.gpus)) != 1 or len(pod.gpus) != 1:
                raise InvalidRequest(
                    f"a fractional pod on node {texts.quoted(pod.node)} names "
                    f"{len(set(pod.gpus))} GPUs; it takes part of exactly one"
                )
            (gpu,) = pod.gpus
            if not 0 <= gpu < node.gpus:
                raise texts.gpu_out_of_range(gpu, pod.node)
            whole = (node.reserved | node.allocated) - (freed or {}).get(pod.node, set())
            if gpu in node.unhealthy or gpu in whole:
                raise texts.placement_gpu_busy(gpu, pod.node, gpu in node.unhealthy)
            asked[(pod.node, gpu)] = asked.get((pod.node, gpu), 0) + milli
        if not placement.pods:
            raise InvalidRequest("the placement has no pods")
        for pod in placement.pods:  # the first pod (in rank order) whose GPU overflows
            name, gpu = pod.node, pod.gpus[0]
            want, used = asked[(name, gpu)], self._nodes[name].shares.get(gpu, 0)
            used -= (given_back or {}).get((name, gpu), 0)
            used += (earlier or {}).get((name, gpu), 0)
            if used + want > WHOLE:
                raise texts.share_room(gpu, name, WHOLE - used, want)
        if earlier is not None:
            for at, want in asked.items():
                earlier[at] = earlier.get(at, 0) + want
        return Placement(
            tuple(PodPlacement(pod.node, tuple(pod.gpus)) for pod in placement.pods),
            placement.level,
            tuple(placement.domain),
            gpu_milli=milli,
        )

    if TYPE_CHECKING:

        def _pod_node(self, placement: PlacementLike, name: str) -> _Node: ...
