"""The oracle's bridge to the placement rules.

Its nodes as the rules see them, requests as the rules read them, and a node's GPU groups
checked as the core checks them. A mixin of :class:`gangplace.reference.Cluster` (docs/placement.md
"Placement rules", "Slices", "Inside a node").
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gangplace.errors import InvalidRequest
from gangplace.reference import roles, rules, spares
from gangplace.reference import slices as slicing
from gangplace.reference.filters import filter_of
from gangplace.reference.values import AnyRequest, Placement, Request, RolesRequest

if TYPE_CHECKING:
    from typing_extensions import TypeIs

    from gangplace.reference.oracle import _Node

__all__ = ["Planning", "gpu_groups", "is_roles"]


class Planning:
    """Requests through the rules, on the oracle's nodes."""

    _nodes: dict[str, _Node]
    levels: tuple[str, ...]
    max_level: str | None
    policy: str

    def _depth_of(self, level: str | None) -> int:
        try:
            return rules.depth_of(self.levels, level)
        except ValueError as error:
            raise InvalidRequest(str(error)) from None

    if TYPE_CHECKING:

        def _asks(self, request: Any) -> dict[str, int]: ...
        def _share_views(
            self, views: list[rules.NodeView], milli: int | None
        ) -> list[rules.NodeView]: ...
        def _bounded(
            self, views: list[rules.NodeView], asks: Any, taken: Any
        ) -> list[rules.NodeView]: ...
        def _free_resources(self, name: str) -> dict[str, int]: ...
        def _overused(self, name: str) -> dict[str, int]: ...

    def _views(self, asks: Any = None, milli: int | None = None) -> list[rules.NodeView]:
        """The picture of the nodes the rules read.

        With ``asks`` (a gang's ``resources_per_pod``), each node's pods are bounded by its
        free resources; with ``milli`` (a gang's ``gpu_milli``), counted by its GPUs' room.
        """
        views = [
            rules.NodeView(
                node.name,
                node.path,
                tuple(node.free()),
                node.cordoned,
                node.labels,
                node.gpu_paths,
                node.gpu_levels,
                taints=node.taints,
            )
            for node in self._nodes.values()
        ]
        return self._bounded(self._share_views(views, milli), asks or {}, {})

    def _gang(self, request: Request) -> rules.Gang:
        """The request as the rules read it (an unknown level is an invalid request)."""
        depth = self._depth_of(request.required_level)
        level = request.required_level
        if self.max_level is not None and self._depth_of(self.max_level) > depth:
            level = self.max_level  # no placement spans more than one max_level domain
        pods, min_pods, layers = spares.fold(
            request.pods,
            request.min_pods,
            tuple(request.slices),
            getattr(request, "spares", 0),
        )
        milli = getattr(request, "gpu_milli", None)
        gang = rules.Gang(
            pods=pods,
            gpus_per_pod=0 if milli is not None else request.gpus_per_pod,  # shares count them
            gpu_milli=milli,
            min_pods=min_pods,
            required_level=level,
            selector=filter_of(request),
            name=request.name,
            slices=layers,
            spread=request.spread,
            numa=request.numa,
        )
        try:
            slicing.resolve(gang.slices, self.levels, self._depth_of(level))
        except ValueError as error:
            raise InvalidRequest(str(error)) from None
        return gang

    def _roles(self, request: RolesRequest) -> roles.MultiGang:
        """A multi-role request as the rules read it (unknown levels are invalid requests)."""
        level = request.required_level
        depth = self._depth_of(level)
        if self.max_level is not None and self._depth_of(self.max_level) > depth:
            level = self.max_level
        folded = [
            spares.fold(
                group.pods, group.min_pods, tuple(group.slices), getattr(group, "spares", 0)
            )
            for group in request.groups
        ]
        groups = tuple(
            rules.Gang(
                pods=pods,
                gpus_per_pod=group.gpus_per_pod,
                min_pods=min_pods,
                selector=filter_of(group),
                name=group.name,
                slices=layers,
                spread=request.spread,
            )
            for group, (pods, min_pods, layers) in zip(request.groups, folded, strict=True)
        )
        try:
            for group in groups:
                slicing.resolve(group.slices, self.levels, self._depth_of(level))
        except ValueError as error:
            raise InvalidRequest(str(error)) from None
        asks = tuple(self._asks(group) for group in request.groups)  # every name known
        for _, _, at in request.colocate:
            try:
                rules.depth_of(self.levels, at)
            except ValueError:
                known = ", ".join(["node", *reversed(self.levels), "cluster"])
                raise InvalidRequest(
                    f'unknown colocate level "{at}"; the levels are {known}'
                ) from None
        asks = asks if any(asks) else ()
        return roles.MultiGang(groups, level, tuple(request.colocate), request.name, asks)

    def _roles_views(self, multi: roles.MultiGang) -> list[rules.NodeView]:
        """The nodes for a multi-role gang: with their free resources when a group asks some."""
        views = self._views()
        if not multi.asks:
            return views
        return [
            replace(
                view, resources=self._free_resources(view.name), overused=self._overused(view.name)
            )
            for view in views
        ]

    def _plan(self, request: AnyRequest) -> Placement | None:
        if is_roles(request):
            multi = self._roles(request)
            found, _ = roles.place_roles(self._roles_views(multi), self.levels, multi, self.policy)
            return None if found is None else spares.split_groups(found, request.groups)
        gang = self._gang(request)
        views = self._views(self._asks(request), gang.gpu_milli)
        placement = rules.place(views, self.levels, gang, self.policy)
        if placement is None:
            return None
        placement = replace(placement, gpu_milli=gang.gpu_milli)
        return spares.split(placement, getattr(request, "spares", 0), tuple(request.slices))

    def _reason(self, request: AnyRequest) -> str:
        """Why nothing fits: the best domain of each level tried, finest first."""
        if is_roles(request):
            multi = self._roles(request)
            views = self._roles_views(multi)
            _, trials = roles.place_roles(views, self.levels, multi, self.policy)
            return roles.roles_reason(views, self.levels, multi, trials)
        gang = self._gang(request)
        views = self._views(self._asks(request), gang.gpu_milli)
        reason = rules.unschedulable_reason(views, self.levels, gang)
        bound = self.max_level
        if bound is not None and self._depth_of(bound) >= self._depth_of(request.required_level):
            reason += (
                f"; no placement spans more than one {bound} (max_level: fabrics that never join)"
            )
        return reason


def is_roles(request: object) -> TypeIs[RolesRequest]:
    """Whether a request is a multi-role gang (``gangplace.MultiGangRequest``)."""
    return hasattr(request, "colocate")


def gpu_groups(
    name: str, topology: Any, gpus: int
) -> tuple[tuple[str, ...], tuple[tuple[int, ...], ...]]:
    """A node's GPU groups, checked as the core checks them (docs/shapes.md "Inside a node")."""
    levels = tuple(topology.levels)
    paths = tuple(tuple(path) for path in topology.paths)
    reserved = {"node", "cluster"}
    if not 1 <= len(levels) <= 4 or len(set(levels)) != len(levels):
        raise InvalidRequest(f"node {name!r}: a GPU topology names 1 to 4 unique levels")
    if any(not level or level in reserved for level in levels):
        raise InvalidRequest(f"node {name!r}: a GPU topology level is not a usable name")
    if len(paths) != gpus:
        raise InvalidRequest(
            f"node {name!r}: the GPU topology describes {len(paths)} GPUs but the node has {gpus}"
        )
    if any(len(path) != len(levels) or any(not 0 <= g <= 63 for g in path) for path in paths):
        raise InvalidRequest(f"node {name!r}: each GPU needs one group id in 0..63 per level")
    return levels, paths
