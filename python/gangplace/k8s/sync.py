"""Keeping a cluster current from Kubernetes watch events (docs/kubernetes.md).

:class:`ClusterSync` owns a :class:`gangplace.Cluster` and applies node and pod events to it,
as ``kubernetes.watch.Watch().stream`` yields them (``ADDED``, ``MODIFIED``, ``DELETED``),
and relists (:meth:`ClusterSync.resync`). Nodes are read as :func:`cluster_from_nodes` reads
them; running pods are adopted, the pods of one gang into one allocation whatever order their
events come in; pods that end are released by rank (``Cluster.release_pods``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gangplace._gangplace import Allocation, Cluster, PodPlacement
from gangplace.errors import Conflict, GangplaceError, InvalidRequest, ReservationError
from gangplace.k8s import read as read
from gangplace.k8s.fields import BadField
from gangplace.k8s.read import DEFAULT_TOLERATIONS, NodeView, PodView

__all__ = ["DEFAULT_TOLERATIONS", "ClusterSync", "SyncResult"]

EVENTS = ("ADDED", "MODIFIED", "DELETED")


@dataclass(frozen=True)
class SyncResult:
    """What one event (or one object of a relist) did to the cluster.

    Attributes:
        action: ``"node added"``, ``"node updated"``, ``"node removed"``, ``"pod adopted"``
            (a new allocation), ``"pod joined"`` (a new rank of its gang's allocation),
            ``"pod matched"`` (a pod gangplace bound, found in its allocation), ``"pod
            ended"`` (its rank released), ``"allocation ended"`` (its last rank released),
            ``"pod waiting"`` (its node is not in the cluster yet) or ``"ignored"``.
        subject: The node's name or the pod's ``namespace/name`` (empty when unreadable).
        allocation: The allocation the pod is a rank of, for pod actions.
        rank: Its rank there.
        warnings: What could not be applied, each naming the object and the field or reason.

    """

    action: str
    subject: str = ""
    allocation: str | None = None
    rank: int | None = None
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Tracked:
    """A running pod's place: its allocation, rank and node, and who may end it."""

    allocation: str
    rank: int
    node: str
    owner: str | None


@dataclass
class _Gang:
    """A gang's allocation and the terms its pods ask for.

    The highest priority of its pods; preemptible only if every pod is.
    """

    allocation: str
    owner: str | None
    priority: int
    preemptible: bool


class ClusterSync:
    """A cluster kept current from Kubernetes node and pod events.

    Args:
        levels: Level name -> node label key, outermost first.
        gpu_resource: The extended resource that counts GPUs.
        tolerations: Tolerations of the gangs to place (a taint they tolerate does not
            cordon the node).
        pod_owner: Owner of the allocations it adopts.
        **cluster_kw: Passed to :class:`gangplace.Cluster` (``policy``, ``clock``...).

    Attributes:
        cluster: The cluster. Place, reserve and bind through it; apply every node and pod
            event here so that it stays current.

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
        self.cluster = Cluster(tuple(self.levels), **cluster_kw)
        self._nodes: dict[str, NodeView] = {}
        self._pods: dict[tuple[str, str], _Tracked] = {}
        self._gangs: dict[tuple[str, ...], _Gang] = {}
        self._waiting: dict[tuple[str, str], PodView] = {}
        self._placements: dict[str, Allocation] = {}
        self._members: dict[str, set[tuple[str, str]]] = {}  # allocation -> its pods' keys
        self._gang_of: dict[str, tuple[str, ...]] = {}  # allocation -> its gang's key

    def __repr__(self) -> str:
        return (
            f"ClusterSync({len(self._nodes)} nodes, {len(self._pods)} pods tracked, "
            f"{len(self._waiting)} waiting)"
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
        kind = read.kind_of(obj)
        if kind == "Node":
            return self.apply_node(event_type, obj)
        if kind == "Pod":
            return self.apply_pod(event_type, obj)
        return SyncResult("ignored", warnings=(f"{kind} ignored: not a node or a pod",))

    def apply_node(self, event_type: str, node: Any) -> SyncResult:
        """Applies a node event (see :meth:`apply`): adds, updates or removes the node."""
        return self._node_event(event_type, node, 0)

    def _node_event(self, event_type: str, node: Any, index: int) -> SyncResult:
        warnings: list[str] = []
        try:
            data = read.plain(node)
            if event_type == "DELETED":
                return self._remove_node(read.node_name(data))
            view = read.node_view(data, self.levels, self.gpu_resource, self.tolerations, warnings)
        except (BadField, TypeError) as bad:
            subject = read.name_of(node, index)
            return SyncResult("ignored", subject, warnings=(f"node {subject} left out: {bad}",))
        if view is None:
            name = read.node_name(data)
            if name in self._nodes:
                warnings.append(f"node {name} kept as it was: it no longer reads as a GPU node")
            return SyncResult("ignored", name, warnings=tuple(warnings))
        try:
            if view.name in self._nodes:
                return self._update_node(view, warnings)
            return self._add_node(view, warnings)
        except GangplaceError as error:  # the cluster was changed behind the sync's back
            warnings.append(f"node {view.name}: {error}")
            return SyncResult("ignored", view.name, warnings=tuple(warnings))

    def apply_pod(self, event_type: str, pod: Any) -> SyncResult:
        """Applies a pod event (see :meth:`apply`): adopts, matches or releases the pod."""
        warnings: list[str] = []
        try:
            view = read.pod_view(read.plain(pod, kind="V1Pod"), 0, self.gpu_resource, warnings)
        except (BadField, TypeError) as bad:
            subject = read.pod_name(pod, 0)
            return SyncResult("ignored", subject, warnings=(f"pod {subject} not adopted: {bad}",))
        if event_type == "DELETED" or view.finished:
            return self._end_pod(view, warnings)
        if not view.runs or view.key in self._pods:
            return SyncResult("ignored", view.name, warnings=tuple(warnings))
        if view.node not in self._nodes:
            self._waiting[view.key] = view
            warnings.append(f"pod {view.name} waits: its node {view.node} is not in the cluster")
            return SyncResult("pod waiting", view.name, warnings=tuple(warnings))
        try:
            return self._adopt_group([view], warnings)[0]
        except GangplaceError as error:  # the cluster was changed behind the sync's back
            warnings.append(f"pod {view.name}: {error}")
            return SyncResult("ignored", view.name, warnings=tuple(warnings))

    def resync(self, nodes: Any, pods: Any = ()) -> list[SyncResult]:
        """Brings the cluster to a relist: exactly these nodes and running pods.

        Nodes not listed are removed, tracked pods not listed (or finished) are released,
        the others are applied as ``MODIFIED`` events; new running pods of one gang are
        adopted in one call (ranked by rule 6 among themselves).

        Args:
            nodes: ``V1Node`` objects, dicts, a ``V1NodeList`` or a ``NodeList`` dict.
            pods: The same for pods.

        Returns:
            One result per object that changed something or warned, nodes first.

        Raises:
            InvalidRequest: ``nodes`` or ``pods`` is not a list of objects.

        """
        node_list, pod_list = read.items(nodes, "nodes"), read.items(pods, "pods")
        results: list[SyncResult] = []
        listed: set[str] = set()
        for index, raw in enumerate(node_list):
            result = self._node_event("MODIFIED", raw, index)
            listed.add(result.subject)
            results.append(result)
        for name in sorted(set(self._nodes) - listed):
            results.append(self._remove_node(name))
        views, warnings = self._read_pods(pod_list)
        running = {view.key for view in views if view.runs}
        for key in sorted(set(self._pods) - running):
            results.append(self._end_pod(_gone(key), []))
        for key in set(self._waiting) - running:
            del self._waiting[key]
        fresh = [view for view in views if view.runs and view.key not in self._pods]
        for view in fresh:
            if view.node not in self._nodes:
                self._waiting[view.key] = view
        if warnings:
            results.append(SyncResult("ignored", warnings=tuple(warnings)))
        groups: dict[Any, list[PodView]] = {}
        for index, view in enumerate(v for v in fresh if v.node in self._nodes):
            groups.setdefault(self._group_of(view, index), []).append(view)
        for members in groups.values():
            results.extend(self._adopt_group(members, []))
        return [r for r in results if r.action != "ignored" or r.warnings]

    # ------------------------------------------------------------------ nodes

    def _add_node(self, view: NodeView, warnings: list[str]) -> SyncResult:
        try:
            self.cluster.add_node(
                view.name,
                gpus=view.gpus,
                topology=view.topology,
                labels=view.labels,
                unhealthy=list(view.unhealthy),
                resources=dict(view.resources),
            )
        except GangplaceError as error:
            warnings.append(f"node {view.name} left out: {error}")
            return SyncResult("ignored", view.name, warnings=tuple(warnings))
        if view.cordon_reason:
            self.cluster.cordon(view.name)
            warnings.append(f"node {view.name} cordoned: {view.cordon_reason}")
        self._nodes[view.name] = view
        for key, pod in sorted(self._waiting.items()):
            if pod.node == view.name:
                del self._waiting[key]
                for result in self._adopt_group([pod], []):
                    warnings.extend(result.warnings)
        return SyncResult("node added", view.name, warnings=tuple(warnings))

    def _update_node(self, view: NodeView, warnings: list[str]) -> SyncResult:
        name, old = view.name, self._nodes[view.name]
        structural = (view.gpus, view.topology) != (old.gpus, old.topology)
        try:
            if structural or view.labels != old.labels:
                self.cluster.update_node(
                    name,
                    labels=view.labels,
                    topology=view.topology if structural else None,
                    gpus=view.gpus if structural else None,
                )
        except Conflict as busy:
            warnings.append(f"node {name}: {busy}; the change waits until it holds nothing")
            unhealthy = tuple(gpu for gpu in view.unhealthy if gpu < old.gpus)
            view = replace(view, gpus=old.gpus, topology=old.topology, unhealthy=unhealthy)
            try:
                self.cluster.update_node(name, labels=view.labels)
            except GangplaceError as error:
                warnings.append(f"node {name} not updated: {error}")
                return SyncResult("ignored", name, warnings=tuple(warnings))
        except GangplaceError as error:
            warnings.append(f"node {name} not updated: {error}")
            return SyncResult("ignored", name, warnings=tuple(warnings))
        if view.resources != old.resources:
            self.cluster.update_node(name, resources=dict(view.resources))  # checked on add
        current = set(self.cluster.node(name).unhealthy)
        for gpu in sorted(set(view.unhealthy) - current):
            self.cluster.set_gpu_health(name, gpu, False)
        for gpu in sorted(current - set(view.unhealthy)):
            self.cluster.set_gpu_health(name, gpu, True)
        if view.cordon_reason and view.cordon_reason != old.cordon_reason:
            self.cluster.cordon(name)
            warnings.append(f"node {name} cordoned: {view.cordon_reason}")
        elif not view.cordon_reason and old.cordon_reason:
            self.cluster.uncordon(name)
        self._nodes[name] = view
        return SyncResult("node updated", name, warnings=tuple(warnings))

    def _remove_node(self, name: str) -> SyncResult:
        if name not in self._nodes:
            return SyncResult("ignored", name)
        del self._nodes[name]
        if name not in self.cluster:  # removed behind the sync's back: nothing left to do
            return SyncResult("node removed", name)
        holds = self.cluster.remove_node(name)
        note = () if not holds else (f"node {name} removed: {len(holds)} hold(s) lost GPUs",)
        return SyncResult("node removed", name, warnings=note)

    # ------------------------------------------------------------------ pods

    def _read_pods(self, pods: list[Any]) -> tuple[list[PodView], list[str]]:
        views: list[PodView] = []
        warnings: list[str] = []
        for index, raw in enumerate(pods):
            try:
                plain = read.plain(raw, kind="V1Pod")
                view = read.pod_view(plain, index, self.gpu_resource, warnings)
            except (BadField, TypeError) as bad:
                warnings.append(f"pod {read.pod_name(raw, index)} not adopted: {bad}")
                continue
            views.append(view)
            if view.runs and view.node not in self._nodes and view.key not in self._pods:
                warnings.append(
                    f"pod {view.name} not adopted: its node {view.node} is not in the cluster"
                )
        return views, warnings

    def _group_of(self, view: PodView, index: int) -> Any:
        """The key of the pods adopted in one call: a gang's, else the pod alone.

        Pods gangplace bound itself are each matched to their own allocation.
        """
        if view.allocation is not None and self._live(view.allocation) is not None:
            return ("own", view.key)
        return view.gang or ("pod", index)

    def _adopt_group(self, views: list[PodView], warnings: list[str]) -> list[SyncResult]:
        """Adopts running pods of one gang (or one pod).

        Each is matched to the allocation gangplace made for it, added to its gang's
        allocation, or made a new allocation.
        """
        views = [read.physical(view, self._nodes.get(view.node or "")) for view in views]
        first = views[0]
        if len(views) == 1 and first.allocation is not None:
            matched = self._match(first, warnings)
            if matched is not None:
                return [matched]
        shares = sorted({view.milli or 0 for view in views})
        if len(shares) > 1:  # one allocation has one share per pod: one per share
            warnings.append(
                f"pods {', '.join(v.name for v in views)} of one gang use different shares "
                f"of a GPU: adopted as {len(shares)} allocations"
            )
            parts = [[v for v in views if (v.milli or 0) == share] for share in shares]
            return [
                result
                for index, part in enumerate(parts)
                for result in self._adopt_alike(part, warnings if index == 0 else [])
            ]
        return self._adopt_alike(views, warnings)

    def _adopt_alike(self, views: list[PodView], warnings: list[str]) -> list[SyncResult]:
        """Adopts pods of one gang that use the same share of a GPU (or whole GPUs).

        A fraction never joins a gang's allocation, nor whole pods a fractional one (an
        allocation has one share per pod): such pods are adopted on their own.
        """
        first = views[0]
        gang = self._gangs.get(first.gang) if first.gang else None
        live = None if gang is None else self._live(gang.allocation)
        if gang is not None and live is None:
            self._forget_gang(gang.allocation)
            gang = None
        if live is not None and (first.milli, live.placement.gpu_milli) != (None, None):
            warnings.append(f"pod {first.name} adopted on its own: its gang's pods share GPUs")
            gang = None
        priority = max(view.priority for view in views)
        preemptible = all(view.preemptible for view in views)
        asks = [read.counted(view, self._nodes.get(view.node or ""), warnings) for view in views]
        kept = [(view, ask) for view, ask in zip(views, asks, strict=True) if view.gpus or ask]
        if not kept:  # pods without GPUs asking nothing the nodes count hold nothing
            return [SyncResult("ignored", first.name, warnings=tuple(warnings))]
        views, asks = [view for view, _ in kept], [ask for _, ask in kept]
        try:
            if gang is None:
                allocation, views = self._adopt(
                    views,
                    asks,
                    warnings,
                    owner=self.pod_owner,
                    priority=priority,
                    preemptible=preemptible,
                )
                start, owner, action = 0, self.pod_owner, "pod adopted"
            else:
                before = self._live(gang.allocation)
                start = 0 if before is None else len(before.placement.pods)
                allocation, views = self._adopt(
                    views,
                    asks,
                    warnings,
                    into=gang.allocation,
                    owner=gang.owner,
                    priority=max(priority, gang.priority),
                    preemptible=preemptible and gang.preemptible,
                )
                owner, action = gang.owner, "pod joined"
        except GangplaceError as error:
            what = f"pod {first.name}"
            if len(views) > 1:
                key = "/".join(first.gang[1:]) if first.gang else ""
                what = f"gang {key} (pods {', '.join(view.name for view in views)})"
            return [
                SyncResult(
                    "ignored", first.name, warnings=(*warnings, f"{what} not adopted: {error}")
                )
            ]
        self._placements[allocation.id] = allocation
        if first.gang is not None:
            entry = self._gangs.setdefault(
                first.gang, _Gang(allocation.id, owner, priority, preemptible)
            )
            entry.priority, entry.preemptible = allocation.priority, allocation.preemptible
            self._gang_of[allocation.id] = first.gang
        results = []
        for view, rank in zip(views, _ranks(allocation, start, views), strict=True):
            self._track(view.key, _Tracked(allocation.id, rank, view.node or "", owner))
            results.append(SyncResult(action, view.name, allocation.id, rank, tuple(warnings)))
            warnings = []
        return results

    def _adopt(
        self, views: list[PodView], asks: list[dict[str, int]], warnings: list[str], **kwargs: Any
    ) -> tuple[Allocation, list[PodView]]:
        """``adopt`` with the pods' resources, and the pods adopted.

        When the nodes' free resources do not hold them (gangplace's view of other pods
        differs), the GPU pods are adopted without them and pods without GPUs not at all,
        with a warning.
        """
        if views[0].milli is not None:  # docs/resources.md "Fractions of a GPU"
            kwargs["gpu_milli"] = views[0].milli
        if not any(asks):
            return self.cluster.adopt([view.entry for view in views], **kwargs), views
        try:
            return self.cluster.adopt([v.entry for v in views], resources=asks, **kwargs), views
        except (Conflict, InvalidRequest) as short:
            gpu_pods = [view for view in views if view.gpus > 0]
            if not gpu_pods:
                raise
            allocation = self.cluster.adopt([view.entry for view in gpu_pods], **kwargs)
            warnings.append(
                f"pods {', '.join(v.name for v in views)} adopted without their "
                f"CPU, memory and other resources (pods without GPUs not at all): {short}"
            )
            return allocation, gpu_pods

    def _match(self, view: PodView, warnings: list[str]) -> SyncResult | None:
        """A pod gangplace bound, found in its live allocation by its annotations.

        ``None`` otherwise (with a warning when the allocation disagrees).
        """
        assert view.allocation is not None
        allocation = self._live(view.allocation)
        if allocation is None:
            return None
        if not _has_rank(allocation, view):
            allocation = self._live(view.allocation, fresh=True)  # repaired since cached?
        if allocation is None or view.rank is None or not _has_rank(allocation, view):
            warnings.append(
                f"pod {view.name} names rank {view.rank} of allocation {view.allocation}, which "
                f"has no such rank on node {view.node}: adopted on its own"
            )
            return None
        tracked = _Tracked(allocation.id, view.rank, view.node or "", allocation.owner)
        self._track(view.key, tracked)
        return SyncResult("pod matched", view.name, allocation.id, view.rank, tuple(warnings))

    def _end_pod(self, view: PodView, warnings: list[str]) -> SyncResult:
        self._waiting.pop(view.key, None)
        tracked = self._pods.pop(view.key, None)
        if tracked is None:
            return SyncResult("ignored", view.name, warnings=tuple(warnings))
        self._members.get(tracked.allocation, set()).discard(view.key)
        try:
            after = self.cluster.release_pods(
                tracked.allocation, [tracked.rank], owner=tracked.owner
            )
        except InvalidRequest:  # someone else ended the rank already; the rest goes on
            return SyncResult(
                "pod ended", view.name, tracked.allocation, tracked.rank, tuple(warnings)
            )
        except ReservationError as error:
            if self._live(tracked.allocation, fresh=True) is not None:  # E3: under repair
                self._track(view.key, tracked)  # a later event or resync ends it
                warnings.append(f"pod {view.name} ended but stays held: {error}")
                return SyncResult("ignored", view.name, warnings=tuple(warnings))
            after = None  # the allocation had already ended (released, preempted, ...)
        if after is None:
            self._forget_gang(tracked.allocation)
            return SyncResult(
                "allocation ended", view.name, tracked.allocation, tracked.rank, tuple(warnings)
            )
        self._placements[after.id] = after
        return SyncResult("pod ended", view.name, after.id, tracked.rank, tuple(warnings))

    def _track(self, key: tuple[str, str], tracked: _Tracked) -> None:
        self._pods[key] = tracked
        self._members.setdefault(tracked.allocation, set()).add(key)

    def _forget_gang(self, allocation: str) -> None:
        """Forgets an allocation that ended: its gang and its pods."""
        self._placements.pop(allocation, None)
        gang = self._gang_of.pop(allocation, None)
        if gang is not None and gang in self._gangs and self._gangs[gang].allocation == allocation:
            del self._gangs[gang]
        for key in self._members.pop(allocation, set()):
            self._pods.pop(key, None)

    def _live(self, allocation: str, *, fresh: bool = False) -> Allocation | None:
        """The live allocation of that id, or ``None``.

        The cached copy while it is live, else (or with ``fresh``) read again.
        """
        cached = None if fresh else self._placements.get(allocation)
        if cached is not None:
            try:
                if self.cluster.hold_status(allocation, owner=cached.owner) == "allocated":
                    return cached
            except GangplaceError:
                pass
            self._placements.pop(allocation, None)
            return None
        for live in self.cluster.allocations():
            self._placements[live.id] = live
        return self._placements.get(allocation)


def _has_rank(allocation: Allocation, view: PodView) -> bool:
    """The allocation has the pod's rank, on the pod's node."""
    pods = allocation.placement.pods
    return view.rank is not None and view.rank < len(pods) and pods[view.rank].node == view.node


def _ranks(allocation: Allocation, start: int, views: list[PodView]) -> list[int]:
    """The rank each pod of ``views`` got.

    The new pods from ``start`` on, matched by node and GPUs (explicit ones exactly, counts by
    size, in order).
    """
    new = list(enumerate(allocation.placement.pods))[start:]
    ranks: list[int] = []
    for view in views:
        for position, (rank, pod) in enumerate(new):
            explicit = isinstance(view.entry, PodPlacement)
            same = (
                tuple(pod.gpus) == tuple(view.entry.gpus)
                if explicit
                else len(pod.gpus) == view.gpus
            )
            if pod.node == view.node and same:
                ranks.append(rank)
                del new[position]
                break
        else:  # not reached: adopt placed every pod
            ranks.append(-1)
    return ranks


def _gone(key: tuple[str, str]) -> PodView:
    """A pod that a relist no longer lists, as a deletion."""
    name = f"{key[0]}/{key[1]}"
    return PodView(key, name, None, True, 0, None, None, 0, True, None, None)
