"""The GPU nodes a :class:`~gangplace.k8s.ClusterSync` keeps in its cluster (docs/kubernetes.md).

:class:`NodeBook` adds, updates and removes nodes as they are read (rule K2), and hands the
pods waiting for a node to the :class:`~gangplace.k8s.tracking.PodBook` when the node comes,
and the pods of a node that leaves back to it as waiting.
"""

from __future__ import annotations

from dataclasses import replace

from gangplace._gangplace import Cluster
from gangplace.errors import Conflict, GangplaceError
from gangplace.k8s.read import NodeView, PodView
from gangplace.k8s.tracking import PodBook, SyncResult

__all__ = ["NO_GPUS", "NodeBook"]

NO_GPUS = "no longer advertises GPUs"  # the cordon of a node that stopped reading as one


class NodeBook:
    """The GPU nodes in the cluster as last read, and the nodes seen without GPUs."""

    def __init__(self, cluster: Cluster, book: PodBook) -> None:
        self.cluster = cluster
        self.book = book
        self.views: dict[str, NodeView] = {}  # the GPU nodes in the cluster, as last read
        self.others: set[str] = set()  # nodes seen that are not GPU nodes (their pods wait)
        self.deferred: set[str] = set()  # nodes whose rack or GPU count waits for them to empty

    def not_a_gpu_node(self, name: str, warnings: list[str]) -> SyncResult:
        """K2: a node that does not read as a GPU node: cordoned at once if it was one."""
        if not name:
            return SyncResult("ignored", name, warnings=tuple(warnings))
        self.others.add(name)
        old = self.views.get(name)
        if old is None or old.cordon_reason == NO_GPUS:
            return SyncResult("ignored", name, warnings=tuple(warnings))
        if name in self.cluster:
            self.cluster.cordon(name)
        self.views[name] = replace(old, cordon_reason=NO_GPUS)
        warnings.append(f"node {name} cordoned: it {NO_GPUS}; a relist leaves it out")
        return SyncResult("node updated", name, warnings=tuple(warnings))

    def put(self, view: NodeView, warnings: list[str], *, relist: bool) -> SyncResult:
        """Adds the node, or brings it to ``view`` (registered again: removed and added)."""
        self.others.discard(view.name)
        old = self.views.get(view.name)
        try:
            if old is not None and old.uid and view.uid and old.uid != view.uid:
                warnings.append(
                    f"node {view.name} registered again (uid {old.uid} -> {view.uid}): "
                    "its pods are adopted again"
                )
                self.remove(view.name, [])
                old = None
            if old is None:
                return self._add(view, warnings)
            return self._update(view, old, warnings, relist=relist)
        except GangplaceError as error:  # the cluster was changed behind the sync's back
            warnings.append(f"node {view.name}: {error}")
            return SyncResult("ignored", view.name, warnings=tuple(warnings))

    def _add(self, view: NodeView, warnings: list[str]) -> SyncResult:
        try:
            self.cluster.add_node(
                view.name,
                gpus=view.gpus,
                topology=view.topology,
                labels=view.labels,
                unhealthy=list(view.unhealthy),
                resources=dict(view.resources),
                taints=list(view.taints),
            )
        except GangplaceError as error:
            warnings.append(f"node {view.name} left out: {error}")
            return SyncResult("ignored", view.name, warnings=tuple(warnings))
        if view.cordon_reason:
            self.cluster.cordon(view.name)
            warnings.append(f"node {view.name} cordoned: {view.cordon_reason}")
        self.views[view.name] = view
        self.adopt(self.book.take_waiting(view.name), warnings)
        return SyncResult("node added", view.name, warnings=tuple(warnings))

    def _update(
        self, view: NodeView, old: NodeView, warnings: list[str], *, relist: bool
    ) -> SyncResult:
        name, cluster = view.name, self.cluster
        if view.taints != old.taints:  # K10; first: a refused taint changes nothing
            cluster.update_node(name, taints=list(view.taints))
        structural = (view.gpus, view.topology) != (old.gpus, old.topology)
        moved: list[PodView] = []
        self.deferred.discard(name)
        if structural and relist:  # K4: one pass; the sync's own pods there are adopted again
            moved = self._release_own(name)
        try:
            if structural or view.labels != old.labels:
                cluster.update_node(
                    name,
                    labels=view.labels,
                    topology=view.topology if structural else None,
                    gpus=view.gpus if structural else None,
                )
        except Conflict as busy:
            self.deferred.add(name)
            warnings.append(f"node {name}: {busy}; the change waits until it holds nothing")
            unhealthy = tuple(gpu for gpu in view.unhealthy if gpu < old.gpus)
            view = replace(view, gpus=old.gpus, topology=old.topology, unhealthy=unhealthy)
            cluster.update_node(name, labels=view.labels)
        if view.resources != old.resources:
            cluster.update_node(name, resources=dict(view.resources))  # checked on add
        self._mark_unhealthy(name, view)
        if view.cordon_reason and view.cordon_reason != old.cordon_reason:
            cluster.cordon(name)
            warnings.append(f"node {name} cordoned: {view.cordon_reason}")
        elif not view.cordon_reason and old.cordon_reason:
            cluster.uncordon(name)
        self.views[name] = view
        self.adopt(moved, warnings)
        return SyncResult("node updated", name, warnings=tuple(warnings))

    def _mark_unhealthy(self, name: str, view: NodeView) -> None:
        """Marks the GPUs K2 counts unhealthy (``_unhealthy``), and only those."""
        cluster = self.cluster
        current = set(cluster.node(name).unhealthy)
        wanted = _unhealthy(cluster, name, view, current)
        for gpu in sorted(wanted - current):
            cluster.set_gpu_health(name, gpu, False)
        for gpu in sorted(current - wanted):
            cluster.set_gpu_health(name, gpu, True)

    def settle_unhealthy(self, name: str | None) -> None:
        """Moves node ``name``'s GPUs counted unhealthy onto free GPUs, after pods there ended.

        K2: their indices are unknown, so a mark a pod's GPU carried goes to a GPU now free.
        """
        if name is None or name not in self.views or name not in self.cluster:
            return
        view = self.views[name]
        if view.counted and view.unhealthy:
            self._mark_unhealthy(name, view)

    def _release_own(self, node: str) -> list[PodView]:
        """Ends the sync's own ranks on ``node`` (their pods are adopted again after)."""
        book = self.book
        views = []
        for key in sorted(book.on_node.get(node, set())):
            tracked = book.tracked[key]
            if tracked.own:
                book.end(key, tracked.view.name, [])
                views.append(tracked.view)
        return views

    def remove(self, name: str, warnings: list[str]) -> SyncResult:
        """The node left: removed from the cluster; the pods there wait for it."""
        if name not in self.views:
            return SyncResult("ignored", name, warnings=tuple(warnings))
        del self.views[name]
        self.deferred.discard(name)
        waiting = self.book.off_node(name)
        if waiting:
            warnings.append(f"node {name} removed: {len(waiting)} pod(s) there wait for it")
        if name not in self.cluster:  # removed behind the sync's back: nothing left to do
            return SyncResult("node removed", name, warnings=tuple(warnings))
        holds = self.cluster.remove_node(name)
        if holds:
            warnings.append(f"node {name} removed: {len(holds)} hold(s) lost GPUs")
        return SyncResult("node removed", name, warnings=tuple(warnings))

    def adopt(self, views: list[PodView], warnings: list[str]) -> list[SyncResult]:
        """Adopts running pods whose nodes are in the cluster, one call per gang."""
        groups: dict[object, list[PodView]] = {}
        for index, view in enumerate(views):
            groups.setdefault(self.book.group_key(view, index), []).append(view)
        results = []
        for members in groups.values():
            for result in self.book.adopt(members, self.views):
                warnings.extend(result.warnings)
                results.append(result)
        return results


def _unhealthy(cluster: Cluster, name: str, view: NodeView, current: set[int]) -> set[int]:
    """The GPUs to mark unhealthy (K2).

    Named by the annotation: exactly those. Counted from allocatable (their indices are
    unknown): they sit on GPUs no pod holds first, so that GPUs running pods use (adopted by
    count, at the lowest indices) are never counted twice: the node's marks on GPUs no pod
    holds kept while the count allows, then its free GPUs, highest index first, then its
    marks on held GPUs, then held GPUs, highest index first. A mark that had to go on a held
    GPU moves to a free one once one is free (``settle_unhealthy``), so the state is the one
    a new sync builds from the same lists.
    """
    if not view.counted:
        return set(view.unhealthy)
    count = len(view.unhealthy)
    info = cluster.node(name)
    held = set(info.allocated) | set(info.reserved)
    marks = sorted(gpu for gpu in current if gpu < view.gpus)
    idle = [gpu for gpu in marks if gpu not in held]
    free = sorted(set(info.free) - set(idle), reverse=True)
    busy = [gpu for gpu in marks if gpu in held]
    rest = sorted(set(range(view.gpus)) - set(marks) - set(free), reverse=True)
    return set((idle + free + busy + rest)[:count])
