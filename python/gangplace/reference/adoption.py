"""The oracle's ``adopt``: work that is already running, as one allocation.

docs/transactions.md "Adopting running work": a mixin of :class:`gangplace.reference.Cluster`. No
placement rule applies; every GPU must exist, be free and healthy, and be named once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gangplace.errors import InvalidRequest, ReservationError, UnknownNode
from gangplace.reference import texts
from gangplace.reference.fractions import WHOLE
from gangplace.reference.values import MAX_GPUS_PER_NODE, Allocation, Placement, PodPlacement

if TYPE_CHECKING:
    from gangplace.reference.oracle import _Hold, _Node

__all__ = ["Adoption"]


class Adoption:
    """``Cluster.adopt``, read top to bottom."""

    _nodes: dict[str, _Node]
    levels: tuple[str, ...]

    def adopt(
        self,
        pods: Iterable[Any],
        *,
        owner: str | None = None,
        priority: int | None = None,
        preemptible: bool | None = None,
        movable: bool | None = None,
        into: Allocation | str | None = None,
        resources: Any = None,
        gpu_milli: Any = None,
    ) -> Allocation:
        """Records ``pods`` as one allocation, or adds them to allocation ``into``.

        Each entry is a ``PodPlacement`` or a ``(node, count)`` pair (docs/transactions.md "Adopting
        running work"); with ``gpu_milli``, each pod uses that share of one GPU (docs/resources.md
        "Fractions of a GPU").
        """
        from gangplace.reference.oracle import _Hold
        from gangplace.reference.removals import check_priority

        if into is not None and not isinstance(into, str) and not hasattr(into, "id"):
            raise TypeError(f"into must be an Allocation or its id, not {type(into).__name__}")
        entries = list(_entries(pods))
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
            raise TypeError(f"priority must be an int, not {type(priority).__name__}")
        for what, flag in (("preemptible", preemptible), ("movable", movable)):
            if flag is not None and not isinstance(flag, bool):
                raise TypeError(f"{what} must be a bool, not {type(flag).__name__}")
        if isinstance(gpu_milli, bool) or not isinstance(gpu_milli, int | None):
            raise TypeError(f"gpu_milli must be an int, not {type(gpu_milli).__name__}")
        now = self._check_call(1.0, owner)  # type: ignore[attr-defined]
        if gpu_milli is not None and not 1 <= gpu_milli <= 999:
            raise InvalidRequest(
                "gpu_milli must be between 1 and 999 thousandths of a GPU (a whole GPU is "
                f"gpus_per_pod=1 without gpu_milli), got {gpu_milli}"
            )
        target = None if into is None else self._adoption_target(into, owner, gpu_milli)
        if target is None:
            check_priority(0 if priority is None else priority)
        else:
            check_priority(target[1].priority if priority is None else priority)
        if not entries:
            raise InvalidRequest("adopt needs at least one pod")
        taken: list[tuple[str, tuple[int, ...]]] = []
        for name, gpus, count in entries:
            if gpu_milli is None:
                taken.append((name, self._adopted_gpus(name, gpus, count, taken)))
            else:
                taken.append((name, self._adopted_share(name, gpus, count, gpu_milli, taken)))
        held: dict[str, set[int]] = {}
        for name, gpus in taken:
            held.setdefault(name, set()).update(gpus if gpu_milli is None else ())
        asks = self._adopted_asks(resources, taken)  # type: ignore[attr-defined]
        cap_owner = owner if target is None else target[1].owner
        self._check_cap(cap_owner, sum(len(g) for g in held.values()))  # type: ignore[attr-defined]
        for name, gpus_held in held.items():
            self._nodes[name].allocated.update(gpus_held)
        held = {name: gpus for name, gpus in held.items() if gpus}  # pods without GPUs hold none
        placement = replace(self._adopted_placement(taken), gpu_milli=gpu_milli)
        ranked = self._ranked_asks(asks, taken, placement)  # type: ignore[attr-defined]
        if target is not None:
            hid, hold = target
            hold.asks = _grown_asks(hold.asks, len(hold.placement.pods), ranked, len(taken))
            uses = hold.asks or gpu_milli is not None  # shares are used like resources
            hold.res_nodes |= {node for node, _ in taken} if uses else set()
            hold.placement = self._grown(hold.placement, placement)
            for name, gpus_held in held.items():
                hold.gpus.setdefault(name, set()).update(gpus_held)
            hold.priority = hold.priority if priority is None else priority
            hold.preemptible = hold.preemptible if preemptible is None else preemptible
            hold.movable = hold.movable if movable is None else movable
            self._sync_shares()  # type: ignore[attr-defined]
            return hold.allocation(hid, self._nodes)
        hold = _Hold(
            True,
            now,
            held,
            placement,
            owner,
            0 if priority is None else priority,
            True if preemptible is None else preemptible,
            False if movable is None else movable,
            now,
        )
        uses = ranked or gpu_milli is not None  # shares are used like resources
        hold.asks, hold.res_nodes = ranked, ({node for node, _ in taken} if uses else set())
        hid = self._new_id()  # type: ignore[attr-defined]
        self._holds[hid] = hold  # type: ignore[attr-defined]
        self._sync_shares()  # type: ignore[attr-defined]
        return hold.allocation(hid, self._nodes)

    def _adoption_target(
        self, into: Allocation | str, owner: str | None, gpu_milli: int | None
    ) -> tuple[str, _Hold]:
        """The live allocation ``into`` names, if ``owner`` may grow it by these pods.

        Pods using ``gpu_milli`` of a GPU each: its own pods' share (a placement has one).
        """
        hid = into if isinstance(into, str) else into.id
        hold, ending = self._visible(hid, owner)  # type: ignore[attr-defined]
        if hold is None:
            raise self._ended_error(hid, ending, "adopt into")  # type: ignore[attr-defined]
        if not hold.committed:
            raise ReservationError(f"cannot adopt into {hid}: it is not committed")
        held = hold.placement.gpu_milli
        if held is not None and held != gpu_milli:
            raise InvalidRequest(
                f"allocation {hid}'s pods use {held} thousandths of a GPU each: pods adopted "
                f'into it must give gpu_milli={held} (docs/resources.md "Fractions of a GPU")'
            )
        if held is None and gpu_milli is not None:
            raise InvalidRequest(
                f"allocation {hid} holds whole GPUs: pods adopted into it take whole GPUs, "
                'without gpu_milli (docs/resources.md "Fractions of a GPU")'
            )
        if hold.asked is not None:
            raise InvalidRequest(
                f"allocation {hid} was placed for a request: only adopted work (adopt, "
                "reserve(placement)) takes more pods"
            )
        return hid, hold

    def _grown(self, old: Placement, added: Placement) -> Placement:
        """``old`` with ``added``'s pods after its own.

        At the finest level whose one domain holds both domains.
        """
        common = 0
        for mine, theirs in zip(old.domain, added.domain, strict=False):
            if mine != theirs:
                break
            common += 1
        level = ["cluster", *self.levels, "node"][min(common, len(self.levels) + 1)]
        pods = (*old.pods, *added.pods)
        return replace(old, pods=pods, domain=tuple(old.domain[:common]), level=level)

    def _adopted_gpus(
        self,
        name: str,
        gpus: tuple[int, ...] | None,
        count: int | None,
        taken: list[tuple[str, tuple[int, ...]]],
    ) -> tuple[int, ...]:
        node = self._nodes.get(name)
        if node is None:
            raise UnknownNode(f"unknown node {json.dumps(name)}", name)
        earlier = {gpu for other, chosen in taken if other == name for gpu in chosen}
        if gpus is None:
            assert count is not None
            free = [gpu for gpu in node.free() if gpu not in earlier]
            if len(free) < count:
                raise texts.adopt_short(name, len(free), count)
            gpus = tuple(free[:count])
        elif any(gpu >= node.gpus for gpu in gpus):
            bad = min(gpu for gpu in gpus if gpu >= node.gpus)
            raise InvalidRequest(
                f"node {json.dumps(name)} has {node.gpus} GPUs (0 to {node.gpus - 1}); "
                f"GPU {bad} is not one of them"
            )
        twice = sorted(set(gpus) & earlier)
        if twice:
            raise texts.adopt_gpu_twice(twice[0], name)
        busy = sorted(set(gpus) - set(node.free()))
        if busy:
            raise texts.adopt_gpu_busy(busy[0], name, busy[0] in node.unhealthy)
        return tuple(sorted(gpus))

    def _adopted_share(
        self,
        name: str,
        gpus: tuple[int, ...] | None,
        count: int | None,
        milli: int,
        taken: list[tuple[str, tuple[int, ...]]],
    ) -> tuple[int, ...]:
        """The one GPU of an adopted fractional pod (docs/resources.md "Fractions of a GPU").

        A ``(node, 1)`` entry takes the GPU rule F2 would: among the healthy GPUs held by no
        whole pod, the one with the least room that still holds ``milli`` (earlier pods of
        the call counted), ties to the lowest index.
        """
        node = self._nodes.get(name)
        if node is None:
            raise UnknownNode(f"unknown node {json.dumps(name)}", name)
        named = len(gpus) if gpus is not None else count
        if named != 1 or (gpus is not None and len(set(gpus)) != 1):
            raise InvalidRequest(
                f"a fractional pod on node {json.dumps(name)} names {named} GPUs; it takes part "
                "of exactly one"
            )

        def room(gpu: int) -> int:
            earlier = sum(milli for other, chosen in taken if other == name and gpu in chosen)
            return WHOLE - node.shares.get(gpu, 0) - earlier

        if gpus is None:
            usable = [
                gpu
                for gpu in range(node.gpus)
                if gpu not in node.unhealthy | node.reserved | node.allocated
            ]
            fitting = [gpu for gpu in usable if room(gpu) >= milli]
            if not fitting:
                raise texts.adopt_no_share(name, milli)
            return (min(fitting, key=lambda gpu: (room(gpu), gpu)),)
        (gpu,) = gpus
        if not 0 <= gpu < node.gpus:
            raise InvalidRequest(
                f"node {json.dumps(name)} has {node.gpus} GPUs (0 to {node.gpus - 1}); "
                f"GPU {gpu} is not one of them"
            )
        if gpu in node.unhealthy | node.reserved | node.allocated:
            raise texts.adopt_gpu_busy(gpu, name, gpu in node.unhealthy)
        if room(gpu) < milli:
            raise texts.adopt_share_room(gpu, name, room(gpu), milli)
        return (gpu,)

    def _adopted_placement(self, taken: list[tuple[str, tuple[int, ...]]]) -> Placement:
        """Pods by rule 6, at the finest level whose one domain holds all their nodes."""
        paths = {name: (*self._nodes[name].path, name) for name, _ in taken}
        # Rule 6; a pod without GPUs counts as GPU 0, before a GPU pod there (as the engine).
        ranked = sorted(taken, key=lambda pod: (paths[pod[0]], min(pod[1], default=0), _mask(pod)))
        first = paths[ranked[0][0]]
        common = len(first)
        for name, _ in ranked:
            path = paths[name]
            common = next(
                (i for i in range(min(common, len(path))) if first[i] != path[i]),
                min(common, len(path)),
            )
        depth = min(common, len(self.levels) + 1)
        level = ["cluster", *self.levels, "node"][depth]
        pods = tuple(PodPlacement(name, gpus) for name, gpus in ranked)
        return Placement(pods, level, tuple(first[:common]))


def _entries(pods: Iterable[Any]) -> Iterable[tuple[str, tuple[int, ...] | None, int | None]]:
    """Each entry as ``(node, gpus, count)``; type and count errors first, as the binding."""
    if isinstance(pods, str):
        raise TypeError("pods must be an iterable of PodPlacement or (node, count), not a str")
    checked: list[tuple[str, tuple[int, ...] | None, int | None]] = []
    for entry in pods:
        if hasattr(entry, "gpus") and hasattr(entry, "node"):
            checked.append((entry.node, tuple(entry.gpus), None))
            continue
        if not isinstance(entry, tuple) or len(entry) != 2:
            raise TypeError(
                "each pod must be a PodPlacement or a (node, count) tuple, "
                f"not {type(entry).__name__}"
            )
        node, count = entry
        if not isinstance(node, str):
            raise TypeError(f"node must be a str, not {type(node).__name__}")
        if isinstance(count, bool) or not isinstance(count, int):
            raise TypeError(f"count must be an int, not {type(count).__name__}")
        if not 0 <= count <= MAX_GPUS_PER_NODE:
            raise InvalidRequest(
                f"a pod on node {json.dumps(node)} must take 0 to {MAX_GPUS_PER_NODE} GPUs, "
                f"not {count}"
            )
        checked.append((node, None, count))
    return checked


def _grown_asks(
    old: tuple[Mapping[str, int], ...],
    old_pods: int,
    added: tuple[Mapping[str, int], ...],
    added_pods: int,
) -> tuple[Mapping[str, int], ...]:
    """An adopted allocation's asks per rank once ``added`` pods join after its own."""
    if not old and not added:
        return ()
    before = old * old_pods if len(old) == 1 else old or ({},) * old_pods
    return (*before, *(added or ({},) * added_pods))


def _mask(pod: tuple[str, tuple[int, ...]]) -> int:
    """A pod's GPUs as the engine's bit mask (ties of rule 6 between pods of one node)."""
    return sum(1 << gpu for gpu in pod[1])
