"""The running pods a :class:`~gangplace.k8s.ClusterSync` holds GPUs for (docs/kubernetes.md).

:class:`PodBook` knows every running pod the sync adopted or matched, by its identity (its
``uid``), where it runs, and which rank of which allocation it is; and the pods it waits to
adopt, by node (their node is not in the cluster: not yet, no longer, or not a GPU node).
It adopts the pods of one gang into one allocation, matches pods gangplace bound to their
own ranks, and ends a pod's rank when the pod ends. It never raises for a pod: what it cannot
do is a warning naming the pod.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gangplace._gangplace import Allocation, Cluster, PodPlacement
from gangplace.errors import Conflict, GangplaceError, InvalidRequest, ReservationError
from gangplace.k8s import read
from gangplace.k8s.read import NodeView, PodView

__all__ = ["PodBook", "SyncResult", "Tracked"]


@dataclass(frozen=True)
class SyncResult:
    """What one event (or one object of a relist) did to the cluster.

    Attributes:
        action: ``"node added"``, ``"node updated"``, ``"node removed"``, ``"pod adopted"``
            (a new allocation), ``"pod joined"`` (a new rank of its gang's allocation),
            ``"pod matched"`` (a pod gangplace bound, found in its allocation), ``"pod
            ended"`` (its rank released), ``"allocation ended"`` (its last rank released),
            ``"pod waiting"`` (its node is not in the cluster) or ``"ignored"``.
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


@dataclass(frozen=True, slots=True)
class Tracked:
    """A running pod's place: its view, its allocation and rank, and who may end it.

    ``own``: the allocation is one the sync adopted (its owner is the sync's ``pod_owner``);
    else the pod was matched into an allocation someone else made (gangplace bound it).
    """

    view: PodView
    allocation: str
    rank: int
    owner: str | None
    own: bool


@dataclass
class _Gang:
    """A gang's allocation and the terms its pods ask for.

    The highest priority of its pods; preemptible only if every pod is.
    """

    allocation: str
    owner: str | None
    priority: int
    preemptible: bool


class PodBook:
    """Tracked and waiting pods of one sync (mutable; the sync's lock guards it)."""

    def __init__(self, cluster: Cluster, pod_owner: str | None) -> None:
        self.cluster = cluster
        self.pod_owner = pod_owner
        self.tracked: dict[str, Tracked] = {}  # pod key -> its place
        self.names: dict[tuple[str, str], str] = {}  # (namespace, name) -> pod key
        self.on_node: dict[str, set[str]] = {}  # node -> keys of tracked pods there
        self.waiting: dict[str, dict[str, PodView]] = {}  # node -> key -> pod waiting for it
        self._waiting_node: dict[str, str] = {}  # key -> the node it waits for
        self._gangs: dict[tuple[str, ...], _Gang] = {}
        self._holds: dict[str, Any] = {}  # allocation id -> its Allocation (or Reservation)
        self._members: dict[str, set[str]] = {}  # allocation -> its pods' keys
        self._gang_of: dict[str, tuple[str, ...]] = {}  # allocation -> its gang's key
        self._read_as: dict[str, PodView] = {}  # the pods of the adoption under way, as read

    # ------------------------------------------------------------------ who is known

    def known(self, key: str) -> PodView | None:
        """The pod's view if it is tracked or waiting, else ``None``."""
        tracked = self.tracked.get(key)
        if tracked is not None:
            return tracked.view
        node = self._waiting_node.get(key)
        return None if node is None else self.waiting[node][key]

    def waiting_count(self) -> int:
        """Pods waiting for their node."""
        return len(self._waiting_node)

    def wait(self, view: PodView) -> None:
        """Keeps a running pod whose node is not in the cluster, until the node comes."""
        self.unwait(view.key)
        node = view.node or ""
        self.waiting.setdefault(node, {})[view.key] = view
        self._waiting_node[view.key] = node
        self.names[view.ns_name] = view.key

    def unwait(self, key: str) -> PodView | None:
        """Forgets a waiting pod; returns its view (``None``: it was not waiting)."""
        node = self._waiting_node.pop(key, None)
        if node is None:
            return None
        pods = self.waiting[node]
        view = pods.pop(key)
        if not pods:
            del self.waiting[node]
        if self.names.get(view.ns_name) == key and key not in self.tracked:
            del self.names[view.ns_name]
        return view

    def take_waiting(self, node: str) -> list[PodView]:
        """The pods waiting for ``node``, no longer waiting (in key order)."""
        pods = self.waiting.pop(node, {})
        for key, view in pods.items():
            del self._waiting_node[key]
            if self.names.get(view.ns_name) == key:
                del self.names[view.ns_name]
        return [pods[key] for key in sorted(pods)]

    # ------------------------------------------------------------------ adopting

    def adopt(self, views: list[PodView], node_of: dict[str, NodeView]) -> list[SyncResult]:
        """Adopts running pods of one gang (or one pod) whose nodes are in the cluster.

        Each is matched to the allocation gangplace made for it, added to its gang's
        allocation, or made a new allocation.
        """
        warnings: list[str] = []
        self._read_as = {view.key: view for view in views}  # tracked as read, not as counted
        views = [read.physical(view, node_of.get(view.node or "")) for view in views]
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
                for result in self._adopt_alike(part, node_of, warnings if index == 0 else [])
            ]
        return self._adopt_alike(views, node_of, warnings)

    def group_key(self, view: PodView, index: int) -> Any:
        """The key of the pods adopted in one call: a gang's, else the pod alone.

        Pods gangplace bound itself into a live hold are each matched to it on their own.
        """
        if view.allocation is not None and self.live(view.allocation) is not None:
            return ("own", view.key)
        return view.gang or ("pod", index)

    def _adopt_alike(
        self, views: list[PodView], node_of: dict[str, NodeView], warnings: list[str]
    ) -> list[SyncResult]:
        """Adopts pods of one gang that use the same share of a GPU (or whole GPUs).

        A pod joins its gang's allocation only with the share per pod the allocation's own
        pods use (an allocation has one: docs/resources.md "Fractions of a GPU"); a pod of
        another share, or a whole pod beside shares, is adopted on its own.
        """
        first = views[0]
        gang = self._gangs.get(first.gang) if first.gang else None
        live = None if gang is None else self.live(gang.allocation)
        if gang is not None and live is None:
            self._forget_allocation(gang.allocation)
            gang = None
        if live is not None and first.milli != live.placement.gpu_milli:
            warnings.append(
                f"pod {first.name} adopted on its own: it uses {_share(first.milli)} of a GPU, "
                f"its gang's pods {_share(live.placement.gpu_milli)}"
            )
            gang = None
        priority = max(view.priority for view in views)
        preemptible = all(view.preemptible for view in views)
        asks = [read.counted(view, node_of.get(view.node or ""), warnings) for view in views]
        kept = [(view, ask) for view, ask in zip(views, asks, strict=True) if view.gpus or ask]
        if not kept:  # pods without GPUs asking nothing the nodes count hold nothing
            return [SyncResult("ignored", first.name, warnings=tuple(warnings))]
        views, asks = [view for view, _ in kept], [ask for _, ask in kept]
        try:
            if gang is None:
                allocation, views = self._adopt_call(
                    views,
                    asks,
                    warnings,
                    owner=self.pod_owner,
                    priority=priority,
                    preemptible=preemptible,
                )
                start, owner, action = 0, self.pod_owner, "pod adopted"
            else:
                before = self.live(gang.allocation)
                start = 0 if before is None else len(before.placement.pods)
                allocation, views = self._adopt_call(
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
        self._holds[allocation.id] = allocation
        if first.gang is not None:
            entry = self._gangs.setdefault(
                first.gang, _Gang(allocation.id, owner, priority, preemptible)
            )
            entry.priority, entry.preemptible = allocation.priority, allocation.preemptible
            self._gang_of[allocation.id] = first.gang
        results = []
        for view, rank in zip(views, _ranks(allocation, start, views), strict=True):
            self._track(
                Tracked(self._read_as.get(view.key, view), allocation.id, rank, owner, True)
            )
            results.append(SyncResult(action, view.name, allocation.id, rank, tuple(warnings)))
            warnings = []
        return results

    def _adopt_call(
        self, views: list[PodView], asks: list[dict[str, int]], warnings: list[str], **kwargs: Any
    ) -> tuple[Allocation, list[PodView]]:
        """``adopt`` with the pods' resources, and the pods adopted.

        When the nodes' free resources do not hold them (gangplace's view of other pods
        differs), the GPU pods are adopted without them and pods without GPUs not at all,
        with a warning.
        """
        if views[0].milli is not None:  # docs/resources.md, "Fractions of a GPU"
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
        """A pod gangplace bound, found in its live hold by its annotations.

        The hold may still be a reservation (the pod was bound before the scheduler committed
        it): the pod is matched all the same, silently. ``None`` otherwise (with a warning
        when the hold disagrees).
        """
        assert view.allocation is not None
        hold = self.live(view.allocation)
        if hold is None:
            return None
        if not _has_rank(hold, view):
            hold = self.live(view.allocation, fresh=True)  # repaired since cached?
        if hold is None or view.rank is None or not _has_rank(hold, view):
            warnings.append(
                f"pod {view.name} names rank {view.rank} of allocation {view.allocation}, which "
                f"has no such rank on node {view.node}: adopted on its own"
            )
            return None
        self._track(
            Tracked(self._read_as.get(view.key, view), hold.id, view.rank, hold.owner, False)
        )
        return SyncResult("pod matched", view.name, hold.id, view.rank, tuple(warnings))

    # ------------------------------------------------------------------ ending

    def end(self, key: str, name: str, warnings: list[str]) -> SyncResult:
        """The pod ended (finished, deleted, gone from a relist, or replaced): ends its rank.

        A waiting pod is forgotten. A matched pod whose hold is still a reservation is
        forgotten (its scheduler rolls the hold back or commits it). A pod that ends while
        a repair reservation replaces its rank stays tracked, with a warning.
        """
        if self.unwait(key) is not None:
            return SyncResult("ignored", name, warnings=tuple(warnings))
        tracked = self.tracked.get(key)
        if tracked is None:
            return SyncResult("ignored", name, warnings=tuple(warnings))
        self._untrack(key)
        try:
            after = self.cluster.release_pods(
                tracked.allocation, [tracked.rank], owner=tracked.owner
            )
        except InvalidRequest:  # someone else ended the rank already; the rest goes on
            return SyncResult("pod ended", name, tracked.allocation, tracked.rank, tuple(warnings))
        except ReservationError as error:
            status = self._status(tracked.allocation, tracked.owner)
            if status == "allocated":  # E3: under repair; a later event or relist ends it
                self._track(tracked)
                warnings.append(f"pod {name} ended but stays held: {error}")
                return SyncResult("ignored", name, warnings=tuple(warnings))
            if status == "reserved":  # bound before its commit: the scheduler decides
                return SyncResult("pod ended", name, tracked.allocation, tracked.rank)
            after = None  # the allocation had already ended (released, preempted, ...)
        if after is None:
            self._forget_allocation(tracked.allocation)
            return SyncResult(
                "allocation ended", name, tracked.allocation, tracked.rank, tuple(warnings)
            )
        self._holds[after.id] = after
        self._lower_priority(tracked, after)
        return SyncResult("pod ended", name, after.id, tracked.rank, tuple(warnings))

    def _lower_priority(self, tracked: Tracked, allocation: Allocation) -> None:
        """An adopted gang's allocation takes the highest priority of its pods still running."""
        if not tracked.own:
            return
        members = self._members.get(allocation.id, set())
        left = [self.tracked[key].view.priority for key in members if key in self.tracked]
        if left and max(left) < allocation.priority:
            self.cluster.set_priority(allocation, max(left), owner=allocation.owner)
            gang = self._gang_of.get(allocation.id)
            if gang is not None and gang in self._gangs:
                self._gangs[gang].priority = max(left)

    def off_node(self, node: str) -> list[PodView]:
        """The node left the cluster: its tracked pods stop being tracked and wait for it.

        Ranks of the sync's own allocations are ended (their pods hold nothing gangplace
        can see); ranks of others' allocations are left lost, for their owners (repair,
        requeue). Returns the pods now waiting.
        """
        moved = []
        for key in sorted(self.on_node.get(node, set())):
            tracked = self.tracked[key]
            if tracked.own:
                self.end(key, tracked.view.name, [])
            else:
                self._untrack(key)
            self.wait(tracked.view)
            moved.append(tracked.view)
        return moved

    def _status(self, allocation: str, owner: str | None) -> str | None:
        try:
            return self.cluster.hold_status(allocation, owner=owner)
        except GangplaceError:
            return None

    # ------------------------------------------------------------------ records

    def _track(self, tracked: Tracked) -> None:
        view = tracked.view
        self.unwait(view.key)
        self.tracked[view.key] = tracked
        self.names[view.ns_name] = view.key
        self.on_node.setdefault(view.node or "", set()).add(view.key)
        self._members.setdefault(tracked.allocation, set()).add(view.key)

    def _untrack(self, key: str) -> Tracked | None:
        tracked = self.tracked.pop(key, None)
        if tracked is None:
            return None
        view = tracked.view
        if self.names.get(view.ns_name) == key:
            del self.names[view.ns_name]
        on = self.on_node.get(view.node or "")
        if on is not None:
            on.discard(key)
            if not on:
                del self.on_node[view.node or ""]
        members = self._members.get(tracked.allocation)
        if members is not None:
            members.discard(key)
        return tracked

    def _forget_allocation(self, allocation: str) -> None:
        """Forgets an allocation that ended: its gang and its pods."""
        self._holds.pop(allocation, None)
        gang = self._gang_of.pop(allocation, None)
        if gang is not None and gang in self._gangs and self._gangs[gang].allocation == allocation:
            del self._gangs[gang]
        for key in sorted(self._members.pop(allocation, set())):
            self._untrack(key)

    def live(self, allocation: str, *, fresh: bool = False) -> Any:
        """The live hold of that id (an ``Allocation``, or a ``Reservation``), or ``None``.

        The cached copy while it is live, else (or with ``fresh``) read again.
        """
        cached = None if fresh else self._holds.get(allocation)
        if cached is not None:
            if self._status(allocation, cached.owner) in ("allocated", "reserved"):
                return cached
            self._holds.pop(allocation, None)
            return None
        holds: list[Any] = [*self.cluster.allocations(), *self.cluster.reservations()]
        for hold in holds:
            if hold.id == allocation:
                self._holds[hold.id] = hold
                return hold
        return None


def _has_rank(hold: Any, view: PodView) -> bool:
    """The hold has the pod's rank, on the pod's node."""
    pods = hold.placement.pods
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


def _share(milli: int | None) -> str:
    """A pod's share of a GPU in words (a warning's)."""
    return "whole GPUs" if milli is None else f"{milli} thousandths"
