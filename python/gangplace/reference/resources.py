"""The oracle's node resources beside GPUs: docs/resources.md, as plainly as it reads.

A mixin of :class:`gangplace.reference.Cluster`. Nodes carry integer quantities by name; a
hold's pods ask quantities (one mapping for all, or one per rank); what a node has in use is
recomputed from the live holds every time it is asked (the pods of live ranks and spares on
the nodes the hold still holds GPUs of). A node holds ``min(free GPUs // g, free r // r per
pod for every r)`` pods of a request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gangplace.errors import InvalidRequest
from gangplace.reference import rules

if TYPE_CHECKING:
    from gangplace.reference.oracle import _Hold, _Node
    from gangplace.reference.values import Placement

__all__ = ["MAX_AMOUNT", "MAX_RESOURCES", "Resources", "checked_resources"]

MAX_AMOUNT = 2**50
MAX_RESOURCES = 32
GPU_NAMES = ("nvidia.com/gpu", "gpu")


def checked_resources(what: str, given: Mapping[str, Any] | None) -> dict[str, int]:
    """Validated quantities by name, sorted, zeros dropped (as the core checks them)."""
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise TypeError(f"{what} must be a mapping of resource name to int")
    if len(given) > MAX_RESOURCES:
        raise InvalidRequest(f"{what}: {len(given)} resources named; the limit is 32")
    checked: dict[str, int] = {}
    for name, quantity in given.items():
        if not isinstance(name, str):
            raise TypeError("resource names must be str")
        if isinstance(quantity, bool) or not isinstance(quantity, int):
            raise TypeError(f"{what}[{name!r}] must be an int")
        if not name:
            raise InvalidRequest("a resource name must not be empty")
        if len(name.encode()) > 253:
            raise InvalidRequest(f"resource name {name[:16]!r}... is too long")
        if name in GPU_NAMES:
            raise InvalidRequest(f"resource {name!r}: whole GPUs are counted by gpus=")
        if not 0 <= quantity <= MAX_AMOUNT:
            raise InvalidRequest(f"{what}: resource {name!r} must be between 0 and 2**50")
        if quantity:
            checked[name] = quantity
    return dict(sorted(checked.items()))


def pods_fitting(free: Mapping[str, int], need: Mapping[str, int]) -> tuple[int, str]:
    """Pods of ``need`` that ``free`` holds, and the resource bounding them (ties: name)."""
    counts = {name: free.get(name, 0) // per_pod for name, per_pod in need.items()}
    fewest = min(counts.values())
    return fewest, min(name for name, count in counts.items() if count == fewest)


class Resources:
    """Node resources for the reference cluster."""

    _nodes: dict[str, _Node]
    _holds: dict[str, _Hold]
    _resource_names: set[str]

    if TYPE_CHECKING:

        def _end(self, hid: str, ending: str) -> None: ...
        def _hold_shares(self, hold: _Hold) -> list[tuple[str, int, int]]: ...

    def _declare(self, named: Iterable[str]) -> None:
        """Names stay known once a node declared them (also after it is removed)."""
        self._resource_names.update(named)

    def _asks(self, request: Any) -> dict[str, int]:
        """A gang's ``resources_per_pod`` (``{}`` for others), every name known."""
        asked = dict(getattr(request, "resources_per_pod", None) or {})
        for name in asked:
            if name not in self._resource_names:
                known = ", ".join(sorted(self._resource_names)) or "none"
                raise InvalidRequest(
                    f"resources_per_pod names {name!r}, which no node of the cluster offers "
                    f"(known: {known})"
                )
        return asked

    def _roles_asks(self, request: Any, placement: Placement) -> tuple[Mapping[str, int], ...]:
        """What each pod, then each spare, of a multi-role placement asks besides GPUs.

        Its group's ``resources_per_pod`` (docs/resources.md "Node resources"); spares group by
        group after the pods, as ``spares.split_groups`` lists them; ``()`` when no group asks any
        or ``request`` is ``None``.
        """
        asks = [self._asks(group) for group in request.groups] if request is not None else []
        if not any(asks):
            return ()
        counts = [count for _, count in placement.groups_counts]
        per_pod = [ask for ask, count in zip(asks, counts, strict=True) for _ in range(count)]
        for group, ask, count in zip(request.groups, asks, counts, strict=True):
            layers, spares = tuple(group.slices), getattr(group, "spares", 0)
            per_pod += [ask] * (
                (count // layers[-1][1]) * spares if layers else spares if count else 0
            )
        return tuple(per_pod)

    def _pod_asks(self, hold: _Hold) -> list[tuple[str, Mapping[str, int]]]:
        """The ``(node, asks)`` of every pod of ``hold`` that uses resources."""
        if not hold.asks:
            return []
        pods = [
            (pod.node, hold.asks[0] if len(hold.asks) == 1 else hold.asks[rank])
            for rank, pod in enumerate(hold.placement.pods)
            if rank not in hold.ended
        ]
        first_spare = len(hold.placement.pods)  # per rank: the spares' asks follow the pods'
        pods += [
            (pod.node, hold.asks[0] if len(hold.asks) == 1 else hold.asks[first_spare + index])
            for index, pod in enumerate(hold.placement.spares)
        ]
        return [(node, asks) for node, asks in pods if node in hold.gpus or node in hold.res_nodes]

    def _holds_on_node(self, hold: _Hold, name: str) -> bool:
        """Whether ``hold`` holds GPUs on node ``name`` or, by a live pod, resources there."""
        return (
            name in hold.gpus
            or any(node == name and a for node, a in self._pod_asks(hold))
            or any(node == name for node, _, _ in self._hold_shares(hold))
        )

    def _detach_resources(self, name: str) -> list[str]:
        """Node ``name`` is removed: the holds using resources there (sorted) stop using them.

        A reservation among them is revoked, as one holding GPUs there is.
        """
        using = []
        for hid, hold in sorted(self._holds.items()):
            shares = any(node == name for node, _, _ in self._hold_shares(hold))
            if shares or any(node == name and asks for node, asks in self._pod_asks(hold)):
                using.append(hid)
                if not hold.committed:
                    self._end(hid, "revoked")
            hold.res_nodes.discard(name)
        return using

    def _used(self, name: str) -> dict[str, int]:
        """What the live holds use of node ``name``'s resources."""
        used: dict[str, int] = {}
        for hold in self._holds.values():
            for node, asks in self._pod_asks(hold):
                if node == name:
                    for resource, quantity in asks.items():
                        used[resource] = used.get(resource, 0) + quantity
        return used

    def _free_resources(self, name: str) -> dict[str, int]:
        """Node ``name``'s resources no hold uses (floored at zero), by name."""
        used = self._used(name)
        node = self._nodes[name]
        return {r: max(0, q - used.get(r, 0)) for r, q in sorted(node.resources.items())}

    def _resource_stats(self) -> dict[str, dict[str, int]]:
        """``stats()``'s resources and free resources, summed over the nodes by name."""
        total: dict[str, int] = {}
        free: dict[str, int] = {}
        for name in self._nodes:
            for resource, quantity in self._nodes[name].resources.items():
                total[resource] = total.get(resource, 0) + quantity
            for resource, left in self._free_resources(name).items():
                free[resource] = free.get(resource, 0) + left
        return {
            "resources": dict(sorted(total.items())),
            "free_resources": dict(sorted(free.items())),
        }

    def _bounded(
        self, views: list[rules.NodeView], asks: Mapping[str, int], taken: Mapping[str, int]
    ) -> list[rules.NodeView]:
        """``views`` with each node's pods bounded by its free resources.

        Less ``taken`` copies of ``asks`` per node (``capacity_for``'s earlier copies).
        """
        if not asks:
            return views
        bounded = []
        for view in views:
            free = self._free_resources(view.name)
            copies = taken.get(view.name, 0)
            free = {r: q - copies * asks.get(r, 0) for r, q in free.items()}
            pods, bound = pods_fitting(free, asks)
            over = self._overused(view.name)
            bounded.append(
                replace(
                    view,
                    resource_pods=pods,
                    bound_by=bound,
                    resources=free,
                    overused=over,
                    asks=dict(asks),
                )
            )
        return bounded

    def _overused(self, name: str) -> dict[str, int]:
        """What node ``name``'s use passes its capacity by, per resource.

        Non-zero where a capacity shrank under running pods.
        """
        used, capacity = self._used(name), self._nodes[name].resources
        return {r: used.get(r, 0) - q for r, q in capacity.items() if used.get(r, 0) > q}

    def _freed_resources(self, hold: _Hold) -> dict[str, dict[str, int]]:
        """What ``hold``'s live pods use of each node's resources, by node.

        What its end gives back (docs/resources.md "Node resources").
        """
        freed: dict[str, dict[str, int]] = {}
        for node, asks in self._pod_asks(hold):
            on_node = freed.setdefault(node, {})
            for name, quantity in asks.items():
                on_node[name] = on_node.get(name, 0) + quantity
        return freed

    def _adopted_asks(
        self, resources: Any, taken: list[tuple[str, tuple[int, ...]]]
    ) -> list[dict[str, int]]:
        """What adopted pods ask, one mapping per pod (``[]``: nothing).

        Each node's free resources must hold its pods' sum (else ``Conflict``).
        """
        from gangplace.reference.texts import adopt_resources_short

        if resources is None:
            bare = next((node for node, gpus in taken if not gpus), None)
            if bare is not None:
                raise _nothing_to_hold(bare)
            return []
        if isinstance(resources, Mapping):
            asks = [checked_resources("resources", resources)] * len(taken)
        else:
            asks = [checked_resources("resources entries", entry) for entry in resources]
        if len(asks) != len(taken):
            raise InvalidRequest(f"adopt got {len(taken)} pods but resources for {len(asks)}")
        for ask, (node, gpus) in zip(asks, taken, strict=True):
            self._asks(_Asked(ask))
            if not gpus and not ask:
                raise _nothing_to_hold(node)
        by_node: dict[str, dict[str, int]] = {}
        for (node, _), ask in zip(taken, asks, strict=True):
            total = by_node.setdefault(node, {})
            for name, quantity in ask.items():
                total[name] = total.get(name, 0) + quantity
        for node, total in sorted(by_node.items()):
            free = self._free_resources(node)
            if any(quantity > free.get(name, 0) for name, quantity in total.items()):
                raise adopt_resources_short(node, free, total)
        return asks

    def _ranked_asks(
        self,
        asks: list[dict[str, int]],
        taken: list[tuple[str, tuple[int, ...]]],
        placement: Placement,
    ) -> tuple[dict[str, int], ...]:
        """Adopted pods' asks in the placement's rank order.

        Pods alike (shares of one GPU, pods without GPUs on one node) rank in the order given,
        as rule 6's sort is stable: each rank takes the first such pod not taken yet.
        """
        if not any(asks):
            return ()
        waiting: dict[tuple[str, tuple[int, ...]], list[dict[str, int]]] = {}
        for pod, ask in zip(taken, asks, strict=True):
            waiting.setdefault(pod, []).append(ask)
        return tuple(waiting[(pod.node, tuple(pod.gpus))].pop(0) for pod in placement.pods)


def _nothing_to_hold(node: str) -> InvalidRequest:
    """An adopted pod that takes no GPUs and asks no resources."""
    from gangplace.reference.texts import quoted

    return InvalidRequest(
        f"a pod on node {quoted(node)} takes no GPUs and asks no resources: there is nothing "
        "to hold"
    )


class _Asked:
    """A stand-in request naming only ``resources_per_pod`` (for the name check)."""

    def __init__(self, asks: Mapping[str, int]) -> None:
        self.resources_per_pod = asks
