"""The oracle's node updates: docs/transactions.md "Node updates" (N1-N3), as plainly as they read.

A mixin of :class:`gangplace.reference.Cluster`. A node's labels change at any time; its
topology, GPU count and GPU groups only while no hold sits on it, checked by adding the
changed node to an empty scratch cluster first, exactly as ``add_node`` checks a new one.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from gangplace.reference import texts
from gangplace.reference.values import ClusterStats, NodeInfo

if TYPE_CHECKING:
    from gangplace.reference.oracle import _Hold, _Node

__all__ = ["Inventory"]


class Inventory:
    """``update_node``, ``node``, ``nodes`` and ``stats`` for the reference cluster."""

    levels: tuple[str, ...]
    _nodes: dict[str, _Node]
    _holds: dict[str, _Hold]
    _resource_names: set[str]

    if TYPE_CHECKING:

        def _free_resources(self, name: str) -> dict[str, int]: ...
        def _resource_stats(self) -> dict[str, dict[str, int]]: ...
        def _holds_on_node(self, hold: _Hold, name: str) -> bool: ...
        def _reclaim(self) -> float: ...
        def _node(self, name: str) -> _Node: ...

    def update_node(
        self,
        name: str,
        *,
        labels: Mapping[str, str] | None = None,
        topology: Mapping[str, str] | None = None,
        gpus: int | None = None,
        gpu_topology: Any = None,
        resources: Mapping[str, int] | None = None,
        taints: Any = None,
    ) -> None:
        """Updates a node in place; see ``gangplace.Cluster.update_node``."""
        self._reclaim()
        node = self._node(name)
        current_topology = dict(zip(self.levels, node.path, strict=True))
        groups = None if node.gpu_paths is None else (node.gpu_levels, node.gpu_paths)
        new_groups = groups
        if gpu_topology is not None:
            new_groups = (
                tuple(gpu_topology.levels),
                tuple(tuple(path) for path in gpu_topology.paths),
            )
        new_gpus = node.gpus if gpus is None else gpus
        new_topology = current_topology if topology is None else dict(topology)
        new_labels = dict(node.labels if labels is None else labels)
        structural = (new_gpus, new_topology, new_groups) != (node.gpus, current_topology, groups)
        holds = sum(1 for hold in self._holds.values() if self._holds_on_node(hold, name))
        if structural and holds:
            raise texts.node_holds(name, holds)
        scratch = type(self)(self.levels)  # type: ignore[call-arg]
        scratch.add_node(  # type: ignore[attr-defined]
            name,
            gpus=new_gpus,
            topology=new_topology if structural else current_topology,
            labels=new_labels,
            unhealthy=[gpu for gpu in node.unhealthy if gpu < new_gpus],
            gpu_topology=gpu_topology if gpu_topology is not None else _as_topology(groups),
            resources=node.resources if resources is None else resources,
            taints=node.taints if taints is None else taints,
        )
        checked = scratch._nodes[name]
        node.labels = checked.labels
        node.taints = checked.taints  # docs/placement.md, rule 1: at any time, like labels
        node.resources = checked.resources  # docs/resources.md "Node resources": at any time
        self._resource_names.update(scratch._resource_names)
        if structural:
            node.gpus, node.path = checked.gpus, checked.path
            node.unhealthy = checked.unhealthy
            node.gpu_levels, node.gpu_paths = checked.gpu_levels, checked.gpu_paths

    def node(self, name: str) -> NodeInfo:
        """The node's state."""
        self._reclaim()
        node = self._node(name)
        return NodeInfo(
            name=node.name,
            gpus=node.gpus,
            topology=dict(zip(self.levels, node.path, strict=True)),
            labels=dict(sorted(node.labels.items())),
            taints=node.taints,
            cordoned=node.cordoned,
            free=tuple(node.free()),
            reserved=tuple(sorted(node.reserved)),
            allocated=tuple(sorted(node.allocated)),
            unhealthy=tuple(sorted(node.unhealthy)),
            resources=dict(node.resources),
            free_resources=self._free_resources(name),
            shared=dict(sorted(node.shares.items())),
        )

    def nodes(self) -> list[str]:
        """All node names, sorted."""
        return sorted(self._nodes)

    def stats(self) -> ClusterStats:
        """GPU counts over the cluster."""
        self._reclaim()
        nodes = self._nodes.values()
        total = sum(node.gpus for node in nodes)
        unhealthy = sum(len(node.unhealthy) for node in nodes)
        return ClusterStats(
            total=total,
            healthy=total - unhealthy,
            free=sum(len(node.free()) for node in nodes),
            reserved=sum(len(node.reserved) for node in nodes),
            allocated=sum(len(node.allocated) for node in nodes),
            unhealthy=unhealthy,
            shared=sum(len(node.shares) for node in nodes),
            **self._resource_stats(),
        )


def _as_topology(groups: tuple[Any, Any] | None) -> Any:
    """A node's current GPU groups in ``NodeTopology``'s shape (``None``: no groups)."""
    if groups is None:
        return None
    levels, paths = groups
    return SimpleNamespace(levels=levels, paths=paths)
