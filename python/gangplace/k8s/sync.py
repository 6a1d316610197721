"""Keeping a cluster current from Kubernetes watch events and relists (docs/kubernetes.md).

:class:`ClusterSync` owns a :class:`gangplace.Cluster` and applies node and pod events to it
(``ADDED``, ``MODIFIED``, ``DELETED``, as ``kubernetes.watch.Watch().stream`` yields them) and
relists (:meth:`ClusterSync.resync`). Pods are known by their ``uid``; every object's
``resourceVersion`` orders its events; a relist brings the cluster in one pass to the state a
new sync would build from the same lists. One lock makes every call atomic, so watch threads
for nodes and pods may share a sync. The rules are K1-K9 of the docs' page.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gangplace._gangplace import Cluster
from gangplace.k8s import read
from gangplace.k8s.fields import BadField
from gangplace.k8s.nodes import NodeBook
from gangplace.k8s.objects import Identity, identity, plain
from gangplace.k8s.read import DEFAULT_TOLERATIONS, NodeView, PodView
from gangplace.k8s.tracking import PodBook, SyncResult

__all__ = ["DEFAULT_TOLERATIONS", "ClusterSync", "SyncResult"]

EVENTS = ("ADDED", "MODIFIED", "DELETED")
TOMBSTONES = 200_000  # ended pods remembered between relists, against stale events
NAMED = 5  # pods a relist's summary line names


class ClusterSync:
    """A cluster kept current from Kubernetes node and pod events (rules K1-K9).

    Args:
        levels: Level name -> node label key, outermost first.
        gpu_resource: The extended resource that counts GPUs.
        tolerations: Tolerations every gang has (the taints they tolerate are dropped);
            every other taint is kept on the node, for the gangs whose own tolerations
            tolerate it (K10).
        pod_owner: Owner of the allocations it adopts.
        **cluster_kw: Passed to :class:`gangplace.Cluster` (``policy``, ``clock``...).

    Attributes:
        cluster: The cluster. Place, reserve and bind through it; apply every node and pod
            event here so that it stays current.

    Every method is safe to call from several threads: each holds the sync's one lock for
    its whole work, so an event or a relist is applied entirely before the next.

    """

    def __init__(
        self,
        levels: Mapping[str, str],
        *,
        gpu_resource: str = "nvidia.com/gpu",
        tolerations: Sequence[Mapping[str, Any]] = DEFAULT_TOLERATIONS,
        pod_owner: str | None = None,
        **cluster_kw: Any,
    ) -> None:
        self.levels = dict(levels)
        self.gpu_resource = gpu_resource
        self.tolerations = tuple(tolerations)
        self.pod_owner = pod_owner
        self._lock = threading.RLock()
        self._versions: dict[tuple[str, str], int] = {}  # ("node"|"pod", id) -> applied
        self._ended: OrderedDict[str, int] = OrderedDict()  # uids of ended pods -> version
        self._idle: set[str] = set()  # pods seen holding nothing (pending, or no requests)
        self._book = PodBook(Cluster(tuple(self.levels), **cluster_kw), pod_owner)
        self._nodes = NodeBook(self._book.cluster, self._book)

    @property
    def cluster(self) -> Cluster:
        """The cluster this sync keeps current."""
        return self._book.cluster

    @cluster.setter
    def cluster(self, cluster: Any) -> None:
        with self._lock:
            self._book.cluster = self._nodes.cluster = cluster

    @property
    def lock(self) -> threading.RLock:
        """The sync's lock: hold it to read ``cluster`` and the sync as one state."""
        return self._lock

    def __repr__(self) -> str:
        with self._lock:
            return (
                f"ClusterSync({len(self._nodes.views)} nodes, {len(self._book.tracked)} pods "
                f"tracked, {self._book.waiting_count()} waiting)"
            )

    # ------------------------------------------------------------------ events

    def apply(self, event_type: str, obj: Any) -> SyncResult:
        """Applies one watch event of a node or a pod; never raises for what it is sent.

        Args:
            event_type: ``"ADDED"``, ``"MODIFIED"`` or ``"DELETED"`` (``"BOOKMARK"`` is
                ignored; anything else is ignored with a warning).
            obj: A ``V1Node`` or ``V1Pod``, or its dict (``kind`` tells them apart; without
                it, a dict with ``spec.containers`` or ``spec.nodeName`` is a pod).

        Returns:
            What it did, with a warning for each thing it could not apply.

        """
        if event_type == "BOOKMARK":
            return SyncResult("ignored")
        if event_type not in EVENTS:
            return SyncResult("ignored", warnings=(f"event type {event_type!r} ignored",))
        ident = identity(obj)
        if ident.kind == "Node":
            return self.apply_node(event_type, obj, ident)
        if ident.kind == "Pod":
            return self.apply_pod(event_type, obj, ident)
        return SyncResult("ignored", warnings=(f"{ident.kind} ignored: not a node or a pod",))

    def apply_node(self, event_type: str, node: Any, ident: Identity | None = None) -> SyncResult:
        """Applies a node event (see :meth:`apply`): adds, updates or removes the node."""
        ident = ident or identity(node)
        with self._lock:
            warnings: list[str] = []
            subject = ident.name or read.name_of(node, 0)
            stale = self._stale("node", ident.name, ident, subject, warnings)
            if stale is not None:
                return stale
            if event_type == "DELETED":
                self._nodes.others.discard(ident.name)
                result = self._nodes.remove(ident.name, warnings)
            else:
                result = self._node(node, ident, warnings, relist=False)
            self._applied("node", ident.name, ident)
            return result

    def apply_pod(self, event_type: str, pod: Any, ident: Identity | None = None) -> SyncResult:
        """Applies a pod event (see :meth:`apply`): adopts, matches or releases the pod."""
        ident = ident or identity(pod)
        with self._lock:
            warnings: list[str] = []
            key = read.pod_key(ident.uid, ident.namespace, ident.name)
            subject = f"{ident.namespace}/{ident.name}" if ident.name else read.pod_name(pod, 0)
            stale = self._stale("pod", key, ident, subject, warnings)
            if stale is not None:
                return stale
            if event_type == "DELETED":
                return self._end(key, subject, warnings, ident.version)
            result = self._pod(pod, ident, key, warnings)
            if key not in self._ended:
                self._applied("pod", key, ident)
            return result

    def _stale(
        self, kind: str, name: str, ident: Identity, subject: str, warnings: list[str]
    ) -> SyncResult | None:
        """K6: an event older than the one applied is ignored (equal: nothing new)."""
        if ident.bad_version:
            warnings.append(
                f"{kind} {subject}: metadata.resourceVersion {ident.bad_version} is not a "
                "number: applied in arrival order"
            )
        if kind == "pod" and name in self._ended:  # a uid that ended: never runs again
            ended = self._ended[name]
            if ident.version is not None and ident.version < ended:
                return self._older(kind, subject, ident.version, ended, warnings)
            return SyncResult("ignored", subject, warnings=tuple(warnings))
        if ident.version is None or not name:
            return None
        seen = self._versions.get((kind, name))
        if seen is None or ident.version > seen:
            return None
        if ident.version == seen:
            return SyncResult("ignored", subject, warnings=tuple(warnings))
        return self._older(kind, subject, ident.version, seen, warnings)

    @staticmethod
    def _older(
        kind: str, subject: str, version: int, applied: int, warnings: list[str]
    ) -> SyncResult:
        message = (
            f"{kind} {subject}: resourceVersion {version} is older than {applied}, already "
            "applied: ignored"
        )
        return SyncResult("ignored", subject, warnings=(*warnings, message))

    def _applied(self, kind: str, name: str, ident: Identity) -> None:
        if ident.version is not None and name:
            self._versions[(kind, name)] = ident.version

    def _node(self, node: Any, ident: Identity, warnings: list[str], *, relist: bool) -> SyncResult:
        """A node's ADDED or MODIFIED: read, then added, updated or cordoned (K2)."""
        try:
            view = self._read_node(node, warnings)
        except (BadField, TypeError) as bad:
            subject = ident.name or read.name_of(node, 0)
            return SyncResult("ignored", subject, warnings=(f"node {subject} left out: {bad}",))
        if view is None:
            return self._nodes.not_a_gpu_node(ident.name, warnings)
        return self._nodes.put(view, warnings, relist=relist)

    def _read_node(self, node: Any, warnings: list[str]) -> NodeView | None:
        return read.node_view(
            plain(node), self.levels, self.gpu_resource, self.tolerations, warnings
        )

    def _pod(self, pod: Any, ident: Identity, key: str, warnings: list[str]) -> SyncResult:
        """A pod's ADDED or MODIFIED (K3, K5, K7)."""
        try:
            view = read.pod_view(
                plain(pod, kind="V1Pod"), 0, self.gpu_resource, warnings, ident.version
            )
        except (BadField, TypeError) as bad:
            subject = read.pod_name(pod, 0)
            return SyncResult("ignored", subject, warnings=(f"pod {subject} not adopted: {bad}",))
        if view.finished:
            return self._end(view.key, view.name, warnings, ident.version)
        if self._replaced(view, ident.version, warnings):
            return SyncResult("ignored", view.name, warnings=tuple(warnings))
        known = self._book.known(view.key)
        if known is not None and known.holding == view.holding:
            return SyncResult("ignored", view.name, warnings=tuple(warnings))
        if known is not None:  # K5: its node or requests changed: it is adopted again
            if view.key in self._book.tracked:
                warnings.append(f"pod {view.name}: what it holds changed: adopted again")
            self._end_pod(view.key, view.name, [])
        if not view.runs:
            self._idle.add(view.key)
            return SyncResult("ignored", view.name, warnings=tuple(warnings))
        self._idle.discard(view.key)
        if view.node not in self._nodes.views:
            self._book.wait(view)
            if view.node not in self._nodes.others:
                warnings.append(
                    f"pod {view.name} waits: its node {view.node} is not in the cluster"
                )
            return SyncResult("pod waiting", view.name, warnings=tuple(warnings))
        result = self._book.adopt([view], self._nodes.views)[0]
        return replace(result, warnings=(*warnings, *result.warnings)) if warnings else result

    def _replaced(self, view: PodView, version: int | None, warnings: list[str]) -> bool:
        """K5: a pod under a known name with another uid is a new pod; the old one ended.

        Returns ``True`` when the event is the stale one: an older version than the pod now
        known under the name, so of an incarnation that ended before it (K6).
        """
        old = self._book.names.get(view.ns_name)
        if old is None or old == view.key:
            return False
        current = self._versions.get(("pod", old))
        if version is not None and current is not None and version < current:
            warnings.append(
                f"pod {view.name}: resourceVersion {version} of uid {view.key} is older than "
                f"{current} of uid {old}, now under its name: ignored"
            )
            self._end(view.key, view.name, [], version)  # that incarnation never runs again
            return True
        warnings.append(
            f"pod {view.name}: a new pod (uid {view.key}) under its name replaces uid {old}"
        )
        self._end(old, view.name, [], None)
        return False

    def _end(self, key: str, subject: str, warnings: list[str], version: int | None) -> SyncResult:
        """The pod ended: its rank is released, and its uid remembered against stale events."""
        if "/" not in key:  # a uid, never used again
            applied = self._versions.pop(("pod", key), 0)
            self._ended[key] = max(version or 0, applied)
            self._ended.move_to_end(key)
            while len(self._ended) > TOMBSTONES:
                self._ended.popitem(last=False)
        self._idle.discard(key)
        return self._end_pod(key, subject, warnings)

    def _end_pod(self, key: str, subject: str, warnings: list[str]) -> SyncResult:
        """Ends the pod's rank; GPUs counted unhealthy on its node then move to free ones (K2)."""
        view = self._book.known(key)
        result = self._book.end(key, subject, warnings)
        self._nodes.settle_unhealthy(None if view is None else view.node)
        return result

    # ------------------------------------------------------------------ relists

    def resync(self, nodes: Any, pods: Any = ()) -> list[SyncResult]:
        """K4: brings the cluster to a relist, in one pass: exactly these nodes and pods.

        The state afterwards is the one a new sync builds from the same lists, except for
        a node whose rack or GPU count changed under pods of allocations the sync does not
        own, which changes once they end (docs/kubernetes.md). Objects at the version
        already applied are not read again.

        Args:
            nodes: ``V1Node`` objects, dicts, a ``V1NodeList`` or a ``NodeList`` dict.
            pods: The same for pods.

        Returns:
            One result per object that changed something or warned: pods that ended first,
            then nodes, then pods adopted, then one line of warnings about the lists.

        Raises:
            InvalidRequest: ``nodes`` or ``pods`` is not a list of objects.

        """
        node_list, pod_list = read.items(nodes, "nodes"), read.items(pods, "pods")
        with self._lock:
            listing = _Listing()
            for index, raw in enumerate(node_list):
                self._list_node(raw, index, listing)
            for index, raw in enumerate(pod_list):
                self._list_pod(raw, index, listing)
            self._end_unlisted(listing)
            self._apply_nodes(listing)
            self._adopt_listed(listing)
            self._versions = listing.versions
            self._ended = OrderedDict(
                (key, listing.finished[key]) for key in sorted(listing.finished)
            )
            self._idle = listing.idle
            return [r for r in listing.results if r.action != "ignored" or r.warnings]

    def _list_node(self, raw: Any, index: int, listing: _Listing) -> None:
        ident = identity(raw)
        name = ident.name
        if (
            name
            and ident.version is not None
            and self._versions.get(("node", name)) == (ident.version)
        ):
            if name in self._nodes.others:  # unchanged since it was applied: not read again
                listing.others.add(name)
                listing.versions[("node", name)] = ident.version
                return
            if name in self._nodes.views and name not in self._nodes.deferred:
                listing.gpu[name] = None
                listing.versions[("node", name)] = ident.version
                return
        warnings: list[str] = []
        if ident.bad_version:
            warnings.append(
                f"node {name or index}: metadata.resourceVersion {ident.bad_version} is not a "
                "number"
            )
        try:
            view = self._read_node(raw, warnings)
        except (BadField, TypeError) as bad:
            subject = name or read.name_of(raw, index)
            listing.results.append(
                SyncResult("ignored", subject, warnings=(f"node {subject} left out: {bad}",))
            )
            return
        if ident.version is not None and name:
            listing.versions[("node", name)] = ident.version
        if view is None:
            listing.others.add(name)
        else:
            listing.gpu[view.name] = view
        listing.order.append((name, view, warnings))

    def _list_pod(self, raw: Any, index: int, listing: _Listing) -> None:
        ident = identity(raw)
        key = read.pod_key(ident.uid, ident.namespace, ident.name)
        if ident.version is not None and self._versions.get(("pod", key)) == ident.version:
            known = self._book.known(key)
            if known is not None or key in self._idle:  # unchanged: not read again
                listing.versions[("pod", key)] = ident.version
                if known is not None:
                    listing.running[key] = known
                else:
                    listing.idle.add(key)
                return
        warnings: list[str] = []
        try:
            view = read.pod_view(
                plain(raw, kind="V1Pod"), index, self.gpu_resource, warnings, ident.version
            )
        except (BadField, TypeError) as bad:
            listing.warnings.append(f"pod {read.pod_name(raw, index)} not adopted: {bad}")
            return
        listing.warnings.extend(warnings)
        if view.finished:
            if "/" not in view.key:
                listing.finished[view.key] = ident.version or 0
            return
        if ident.version is not None:
            listing.versions[("pod", view.key)] = ident.version
        if view.runs:
            listing.running[view.key] = view
        else:
            listing.idle.add(view.key)

    def _end_unlisted(self, listing: _Listing) -> None:
        """Tracked and waiting pods not listed running, or holding otherwise, end first."""
        book = self._book
        known = [*book.tracked, *(key for pods in book.waiting.values() for key in pods)]
        live: dict[str, bool] = {}
        for key in sorted(known):
            view = book.known(key)
            assert view is not None
            listed = listing.running.get(key)
            tracked = book.tracked.get(key)
            if tracked is not None and tracked.allocation not in live:  # its hold may have ended
                live[tracked.allocation] = book.live(tracked.allocation) is not None
            dead = tracked is not None and not live[tracked.allocation]
            if listed is None or listed.holding != view.holding or dead:
                listing.results.append(self._end_pod(key, view.name, []))

    def _apply_nodes(self, listing: _Listing) -> None:
        """Nodes not listed as GPU nodes leave; the listed ones are added or brought up to date."""
        for name in sorted(set(self._nodes.views) - set(listing.gpu)):
            listing.results.append(self._nodes.remove(name, []))
        self._nodes.others = set(listing.others)
        for name, view, warnings in listing.order:
            if view is None:
                listing.results.append(SyncResult("ignored", name, warnings=tuple(warnings)))
            else:
                listing.results.append(self._nodes.put(view, warnings, relist=True))

    def _adopt_listed(self, listing: _Listing) -> None:
        """Listed running pods not tracked: adopted by gang where their node is, else wait."""
        book, views = self._book, self._nodes.views
        fresh = [view for key, view in listing.running.items() if key not in book.tracked]
        unknown: list[PodView] = []
        adoptable: list[PodView] = []
        for view in fresh:
            if view.node in views:
                book.unwait(view.key)
                adoptable.append(view)
                continue
            book.wait(view)
            if view.node not in self._nodes.others:
                unknown.append(view)
        listing.results.extend(self._nodes.adopt(adoptable, []))
        if unknown:
            named = ", ".join(f"{view.name} ({view.node})" for view in unknown[:NAMED])
            more = f" and {len(unknown) - NAMED} more" if len(unknown) > NAMED else ""
            listing.warnings.append(
                f"{len(unknown)} running pod(s) wait for nodes not in the cluster: {named}{more}"
            )
        quiet = sum(len(book.waiting.get(name, {})) for name in self._nodes.others)
        if quiet:
            listing.warnings.append(
                f"{quiet} running pod(s) on {len(self._nodes.others)} node(s) without GPUs "
                "not tracked"
            )
        if listing.warnings:
            listing.results.append(SyncResult("ignored", warnings=tuple(listing.warnings)))


@dataclass
class _Listing:
    """What a relist read, before it is applied."""

    gpu: dict[str, NodeView | None] = field(default_factory=dict)  # None: unchanged
    others: set[str] = field(default_factory=set)  # listed nodes without GPUs
    order: list[tuple[str, NodeView | None, list[str]]] = field(default_factory=list)
    running: dict[str, PodView] = field(default_factory=dict)
    idle: set[str] = field(default_factory=set)
    finished: dict[str, int] = field(default_factory=dict)  # uid -> version
    versions: dict[tuple[str, str], int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    results: list[SyncResult] = field(default_factory=list)
