"""A Cluster kept equal to a Ray cluster (docs/ray.md, rules RY1-RY3).

:class:`RaySync` reads Ray's node table and placement-group table at each ``refresh()``:
nodes that join, die or change; placement groups that others made, adopted as allocations so
that gangplace never places onto GPUs they hold; and the lost ranks of the gangs gangplace
placed (:func:`gangplace.ray.placement_group`). Everything read is untrusted: a record that is
not what Ray defines is left out with a warning naming it and the field.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gangplace._gangplace import Cluster
from gangplace.errors import GangplaceError, InvalidRequest
from gangplace.ray.errors import RayError
from gangplace.ray.nodes import RayNode, read_node

if TYPE_CHECKING:
    from gangplace.ray.groups import RayGang

__all__ = ["RayChanges", "RaySync", "cluster_from_ray"]

LIVE_GROUP_STATES = ("CREATED", "RESCHEDULING")
# (node, GPUs, resources) of each placed bundle: a group is adopted again when it changes
# (node, whole GPUs, resources, thousandths of one GPU for a bundle asking less than one)
Bundles = tuple[tuple[str, int, tuple[tuple[str, int], ...], int | None], ...]


@dataclass
class RayChanges:
    """What one :meth:`RaySync.refresh` changed.

    Attributes:
        added: Nodes now in the cluster (Ray node ids), sorted.
        updated: Nodes whose labels, topology, GPUs or resources changed, sorted.
        removed: Nodes gone from the cluster (dead, left, or now unreadable), sorted.
        adopted: Placement groups of others adopted as allocations (hex ids), sorted.
        released: Placement groups of others whose allocations were released, sorted.
        lost: For each gang gangplace placed (placement group hex id), its ranks lost
            with a dead node: give the gang to :func:`gangplace.ray.repair`.
        warnings: One per record left out or change not applied, naming it and the field.

    """

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    lost: dict[str, tuple[int, ...]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


class RaySync:
    """A :class:`~gangplace.Cluster` kept equal to a Ray cluster's GPU nodes.

    Args:
        levels: Level name -> Ray node label key, outermost first (``{"rack": "rack"}``).
        owner: The owner of the allocations that stand for others' placement groups.
        **cluster_kw: Passed to :class:`gangplace.Cluster` (``policy``, ``clock``...).

    Calls from several threads are safe: each refresh and each placement changes the
    cluster and the sync's records under one lock.

    """

    def __init__(self, levels: Mapping[str, str], *, owner: str = "ray", **cluster_kw: Any):
        if not isinstance(levels, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in levels.items()
        ):
            raise TypeError("levels must map level names to Ray node label keys (str -> str)")
        self.levels = dict(levels)
        self.owner = owner
        self.cluster = Cluster(tuple(levels), **cluster_kw)
        self.lock = threading.RLock()
        self.nodes: dict[str, RayNode] = {}
        # group -> (its allocations: one for whole GPUs, one per share; its bundles)
        self.foreign: dict[str, tuple[tuple[str, ...], Bundles]] = {}
        self.gangs: dict[str, RayGang] = {}  # the groups gangplace made, by hex id

    def refresh(
        self, nodes: Iterable[Any] | None = None, groups: Mapping[str, Any] | None = None
    ) -> RayChanges:
        """Reads the node and placement-group tables and brings the cluster up to date.

        Args:
            nodes: Node records as ``ray.nodes()`` returns them; ``None``: read them from the
                connected Ray (``ray.init`` first).
            groups: Placement-group records as ``ray.util.placement_group_table()`` returns
                them (hex id -> record); ``None``: read them from Ray when ``nodes`` was read
                from Ray, else leave the adopted groups as they are.

        Raises:
            RayError: Ray is not connected and ``nodes`` was not given.
            InvalidRequest: ``nodes`` is not a list, or ``groups`` not a dict.

        """
        from_ray = nodes is None
        if from_ray:
            nodes, read = _read_ray(groups is None)
            groups = read if groups is None else groups
        if isinstance(nodes, (str, bytes, Mapping)) or not isinstance(nodes, Iterable):
            raise InvalidRequest(f"nodes must be a list of Ray node records, got {nodes!r:.60}")
        if groups is not None and not isinstance(groups, Mapping):
            raise InvalidRequest(f"groups must map placement group ids to records: {groups!r:.60}")
        changes = RayChanges()
        with self.lock:
            self._nodes(list(nodes), changes)
            if groups is not None:
                self._groups(groups, changes)
            self._lost(changes)
        return changes

    # ------------------------------------------------------------------ nodes

    def _nodes(self, records: list[Any], changes: RayChanges) -> None:
        seen: dict[str, RayNode] = {}
        for record in records:
            node, warning = read_node(record, self.levels)
            if warning is not None:
                changes.warnings.append(warning)
            if node is not None and node.node_id in seen:
                changes.warnings.append(f"node {node.node_id} listed twice: the first kept")
            elif node is not None:
                seen[node.node_id] = node
        for gone in sorted(set(self.nodes) - set(seen)):
            self.cluster.remove_node(gone)
            del self.nodes[gone]
            changes.removed.append(gone)
        for node_id in sorted(seen):
            node = seen[node_id]
            known = self.nodes.get(node_id)
            if known is None:
                self._add(node, changes)
            elif known != node:
                self._update(known, node, changes)

    def _add(self, node: RayNode, changes: RayChanges) -> None:
        try:
            self.cluster.add_node(
                node.node_id,
                gpus=node.gpus,
                topology=node.topology,
                labels=node.labels,
                resources=node.resources or None,
            )
        except GangplaceError as error:
            changes.warnings.append(f"node {node.node_id} left out: {error}")
            return
        self.nodes[node.node_id] = node
        changes.added.append(node.node_id)

    def _update(self, known: RayNode, node: RayNode, changes: RayChanges) -> None:
        name = node.node_id
        kept = node
        try:
            if node.labels != known.labels:
                self.cluster.update_node(name, labels=node.labels)
            if node.resources != known.resources:
                self.cluster.update_node(name, resources=node.resources)
            if node.topology != known.topology or node.gpus != known.gpus:
                self.cluster.update_node(name, topology=node.topology, gpus=node.gpus)
        except GangplaceError as error:  # holds sit on it: tried again at the next refresh
            changes.warnings.append(f"node {name}: not changed yet: {error}")
            kept = RayNode(name, known.gpus, known.topology, node.labels, node.resources)
        self.nodes[name] = kept
        changes.updated.append(name)

    # ------------------------------------------------------------------ groups

    def _groups(self, groups: Mapping[str, Any], changes: RayChanges) -> None:
        live: dict[str, Bundles] = {}
        for group_id, record in groups.items():
            if not isinstance(group_id, str) or group_id in self.gangs:
                continue  # gangplace's own (or not a group id)
            bundles = self._bundles(group_id, record, changes.warnings)
            if bundles:
                live[group_id] = bundles
        for group_id in sorted(self.foreign):
            allocations, bundles = self.foreign[group_id]
            if live.get(group_id) != bundles:
                for allocation in allocations:
                    self.cluster.release(allocation, owner=self.owner)
                del self.foreign[group_id]
                changes.released.append(group_id)
        for group_id in sorted(live):
            if group_id not in self.foreign:
                self._adopt(group_id, live[group_id], changes)

    def _bundles(self, group_id: str, record: Any, warnings: list[str]) -> Bundles:
        """The group's placed bundles on known nodes, or ``()`` (not live, or unreadable)."""
        where = f"placement group {group_id}"
        if not isinstance(record, Mapping):
            warnings.append(f"{where} not adopted: expected a dict, got {type(record).__name__}")
            return ()
        if record.get("state") not in LIVE_GROUP_STATES:
            return ()
        asked, placed = record.get("bundles"), record.get("bundles_to_node_id")
        if not isinstance(asked, Mapping) or not isinstance(placed, Mapping):
            warnings.append(f"{where} not adopted: bundles or bundles_to_node_id is not a dict")
            return ()
        found = []
        for index in sorted(placed, key=lambda i: int(i) if str(i).isdigit() else -1):
            node, bundle = placed[index], asked.get(index, asked.get(str(index)))
            if node not in self.nodes:
                continue  # on a node without GPUs, or one not read
            if not isinstance(bundle, Mapping):
                warnings.append(f"{where}: bundle {index}: expected a dict of resources")
                continue
            gpus = bundle.get("GPU", 0)
            if isinstance(gpus, bool) or not isinstance(gpus, (int, float)) or gpus < 0:
                warnings.append(f"{where}: bundle {index}: GPU: got {gpus!r}")
                continue
            # A share of one GPU (docs/resources.md "Fractions of a GPU"), rounded up to a
            # thousandth (never less); above 0.999 GPU, the whole GPU.
            milli = math.ceil(round(gpus * 1000, 6)) if 0 < gpus < 1 else None
            if milli is not None and milli >= 1000:
                milli, gpus = None, 1
            elif milli is None and gpus != int(gpus):
                warnings.append(
                    f"{where}: bundle {index} asks {gpus} GPU: counted as {math.ceil(gpus)} "
                    "whole GPUs"
                )
            resources = _bundle_resources(bundle)
            if gpus or resources:
                whole = 0 if milli is not None else math.ceil(gpus)
                found.append((node, whole, tuple(sorted(resources.items())), milli))
        return tuple(found)

    def _adopt(self, group_id: str, bundles: Bundles, changes: RayChanges) -> None:
        """Adopts the group: all of its allocations, or none.

        One for its whole-GPU bundles and one per share asked (an allocation has one share per
        pod: docs/resources.md "Fractions of a GPU").
        """
        held: list[str] = []
        shares = sorted({milli for *_, milli in bundles}, key=lambda m: (m is not None, m or 0))
        for milli in shares:
            part = tuple(bundle for bundle in bundles if bundle[3] == milli)
            allocation = self._adopt_part(group_id, part, milli, changes)
            if allocation is None:
                for done in held:
                    self.cluster.release(done, owner=self.owner)
                return
            held.append(allocation)
        self.foreign[group_id] = (tuple(held), bundles)
        changes.adopted.append(group_id)

    def _adopt_part(
        self, group_id: str, bundles: Bundles, milli: int | None, changes: RayChanges
    ) -> str | None:
        """The bundles of one share (``None``: whole GPUs) adopted as one allocation."""
        pods = [(node, 1 if milli is not None else gpus) for node, gpus, _, _ in bundles]
        resources = [dict(asked) for _, _, asked, _ in bundles]
        options: dict[str, Any] = {"owner": self.owner, "preemptible": False, "gpu_milli": milli}
        try:
            return self.cluster.adopt(pods, resources=resources, **options).id
        except GangplaceError as error:
            try:  # as Kubernetes' pods are: with their GPUs only (docs/ray.md RY3)
                held = self.cluster.adopt(pods, **options)
            except GangplaceError:
                changes.warnings.append(f"placement group {group_id} not adopted: {error}")
                return None
            changes.warnings.append(
                f"placement group {group_id} adopted with its GPUs only: {error}"
            )
            return held.id

    def _lost(self, changes: RayChanges) -> None:
        for group_id in sorted(self.gangs):
            allocation = self.gangs[group_id].allocation
            if allocation is not None and allocation.lost:
                changes.lost[group_id] = allocation.lost


def _bundle_resources(bundle: Mapping[str, Any]) -> dict[str, int]:
    """A bundle's CPU (millicores) and memory (bytes), as the node's are counted."""
    held = {}
    for name, key, scale in (("cpu", "CPU", 1000), ("memory", "memory", 1)):
        amount = bundle.get(key)
        if isinstance(amount, (int, float)) and not isinstance(amount, bool) and amount > 0:
            held[name] = round(amount * scale)
    return held


def _read_ray(groups: bool) -> tuple[list[Any], Mapping[str, Any] | None]:
    """The connected Ray's node table (and placement-group table)."""
    try:
        import ray
        from ray.util import placement_group_table
    except ImportError:
        raise RayError("Ray is not installed: pip install 'gangplace[ray]'") from None
    if not ray.is_initialized():
        raise RayError("Ray is not connected: call ray.init(address=...) first, or pass nodes=")
    nodes = ray.nodes()  # type: ignore[no-untyped-call]
    return list(nodes), dict(placement_group_table()) if groups else None


def cluster_from_ray(
    levels: Mapping[str, str],
    *,
    nodes: Iterable[Any] | None = None,
    groups: Mapping[str, Any] | None = None,
    **cluster_kw: Any,
) -> tuple[Cluster, list[str]]:
    """A cluster from Ray's node table (docs/ray.md RY1), with warnings.

    Args:
        levels: Level name -> Ray node label key, outermost first.
        nodes: Node records as ``ray.nodes()`` returns them; ``None``: the connected Ray's.
        groups: Placement groups to adopt (``placement_group_table()``'s records); ``None``:
            the connected Ray's when ``nodes`` is ``None``, else none.
        **cluster_kw: Passed to :class:`gangplace.Cluster`.

    Returns:
        The cluster (one node per alive Ray node with GPUs, named by its node id), and one
        warning per node or group left out.

    Example:
        >>> from gangplace.ray import cluster_from_ray
        >>> record = {"NodeID": "ab12", "Alive": True, "Resources": {"GPU": 8.0, "CPU": 64.0},
        ...           "Labels": {"rack": "r1"}}
        >>> cluster, warnings = cluster_from_ray({"rack": "rack"}, nodes=[record])
        >>> cluster.node("ab12").topology, warnings
        ({'rack': 'r1'}, [])

    """
    sync = RaySync(levels, **cluster_kw)
    changes = sync.refresh(nodes, groups if nodes is not None else None)
    return sync.cluster, changes.warnings
