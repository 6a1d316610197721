"""The oracle's checks of a placement or plan against the current state.

docs/transactions.md "Transactions": a pod's node must exist, be uncordoned and lie in the
placement's domain, and every GPU must exist, be named once, and be free and healthy; otherwise
``Conflict`` (texts from :mod:`gangplace.reference.texts`). A mixin of
:class:`gangplace.reference.Cluster`, used by ``reserve``, preemption and repair.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from gangplace.errors import InvalidRequest
from gangplace.reference import texts
from gangplace.reference.values import Placement, PlacementLike, PodLike, PodPlacement

if TYPE_CHECKING:
    from gangplace.reference.oracle import _Node

__all__ = ["Validation"]


class Validation:
    """Placement checks shared by every operation that holds GPUs."""

    _nodes: dict[str, _Node]

    def _pod_node(self, placement: PlacementLike, name: str) -> _Node:
        """The live, uncordoned node of a placement's pod, inside the placement's domain."""
        node = self._nodes.get(name)
        if node is None:
            raise texts.node_gone(name)
        if node.cordoned:
            raise texts.node_cordoned(name)
        path = (*node.path, node.name)
        if path[: len(placement.domain)] != tuple(placement.domain):
            raise texts.node_outside(name, placement.domain)
        return node

    def _check_pod(self, placement: PlacementLike, pod: PodLike) -> _Node:
        """Conflict unless the pod's GPUs are free and healthy on a usable node of the domain."""
        node = self._pod_node(placement, pod.node)
        if not pod.gpus:
            raise InvalidRequest(f"a pod on node {json.dumps(pod.node)} has no GPUs")
        if len(set(pod.gpus)) != len(pod.gpus) or not all(0 <= gpu < node.gpus for gpu in pod.gpus):
            bad = next(
                gpu
                for index, gpu in enumerate(pod.gpus)
                if not 0 <= gpu < node.gpus or gpu in pod.gpus[:index]
            )
            raise texts.gpu_out_of_range(bad, pod.node)
        free = set(node.free())
        taken = sorted(gpu for gpu in pod.gpus if gpu not in free)
        if taken:
            raise texts.placement_gpu_busy(taken[0], pod.node, taken[0] in node.unhealthy)
        return node

    def _check_placement(self, placement: PlacementLike) -> Placement:
        """Conflict unless every GPU of the placement is still free, healthy and usable."""
        seen: set[tuple[str, int]] = set()
        duplicate = False
        for pod in (*placement.pods, *getattr(placement, "spares", ())):
            self._check_pod(placement, pod)
            duplicate |= any((pod.node, gpu) in seen for gpu in pod.gpus)
            seen.update((pod.node, gpu) for gpu in pod.gpus)
        if not placement.pods:
            raise InvalidRequest("the placement has no pods")
        if duplicate:
            raise texts.one_gpu_two_pods("the placement")
        return Placement(
            tuple(PodPlacement(pod.node, tuple(pod.gpus)) for pod in placement.pods),
            placement.level,
            tuple(placement.domain),
            tuple(tuple(path) for path in getattr(placement, "slices", ())),
            spares=tuple(
                PodPlacement(pod.node, tuple(pod.gpus)) for pod in getattr(placement, "spares", ())
            ),
        )
