"""Ray placement groups that gangplace places (docs/ray.md, rules RY4-RY6).

:func:`placement_group` reserves a gang in the :class:`~gangplace.ray.RaySync`'s cluster,
then makes one Ray placement group whose bundle ``i`` is pinned, by Ray's
``bundle_label_selector`` on the built-in ``ray.io/node-id`` label, to the node gangplace
chose for pod ``i``: Ray enforces what gangplace decided. All or nothing: if Ray refuses the
group or does not make it ready in time, the group is removed and the hold rolled back.
:func:`repair` replaces the ranks a dead node took with them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gangplace._gangplace import Allocation, GangRequest, MultiGangRequest, Placement
from gangplace.errors import GangplaceError, InvalidRequest
from gangplace.ray.errors import RayError
from gangplace.ray.nodes import NODE_ID_LABEL
from gangplace.ray.sync import RaySync

__all__ = ["RayGang", "RayRepair", "bundles_for", "placement_group", "repair"]

HOLD_SLACK = 60.0  # seconds a hold outlives the wait for Ray (commit comes right after)


def bundles_for(
    placement: Placement, request: GangRequest | MultiGangRequest
) -> tuple[list[dict[str, float]], list[dict[str, str]]]:
    """The Ray bundles and label selectors that pin ``placement``'s pods (a pure function).

    Bundle ``i`` asks pod ``i``'s GPUs (``gpu_milli / 1000`` of one for a share) and, when
    the request asks them, its CPUs (``cpu`` millicores / 1000) and ``memory`` (bytes);
    its selector is ``{"ray.io/node-id": node}``. The placement's spares follow the ranks,
    one bundle each, so that Ray holds them too.

    Raises:
        InvalidRequest: A pod that asks nothing (Ray refuses an empty bundle).

    """
    asks = _asks(placement, request)
    spares = list(placement.spares)
    asks += [asks[0] if asks else {}] * len(spares)
    return _bundles(list(placement.pods) + spares, asks, placement.gpu_milli)


def _bundles(
    pods: Sequence[Any], asks: Sequence[Mapping[str, int]], milli: int | None
) -> tuple[list[dict[str, float]], list[dict[str, str]]]:
    bundles, selectors = [], []
    for rank, (pod, asked) in enumerate(zip(pods, asks, strict=True)):
        bundle: dict[str, float] = {}
        if pod.gpus:
            bundle["GPU"] = milli / 1000 if milli else float(len(pod.gpus))
        if "cpu" in asked:
            bundle["CPU"] = asked["cpu"] / 1000
        if "memory" in asked:
            bundle["memory"] = float(asked["memory"])
        if not bundle:
            raise InvalidRequest(
                f"pod {rank} asks nothing Ray counts (GPU, cpu, memory): Ray refuses an empty "
                "bundle; give it resources_per_pod={'cpu': ...}"
            )
        bundles.append(bundle)
        selectors.append({NODE_ID_LABEL: pod.node})
    return bundles, selectors


def _asks(placement: Placement, request: GangRequest | MultiGangRequest) -> list[dict[str, int]]:
    """What each rank asks besides GPUs, in rank order."""
    if isinstance(request, MultiGangRequest):
        asks = []
        for group in request.groups:
            asked = dict(group.resources_per_pod or {})
            asks += [asked] * len(placement.groups[group.name])
        return asks
    return [dict(request.resources_per_pod or {})] * len(placement.pods)


@dataclass(frozen=True)
class RayRepair:
    """What :func:`repair` did: the ranks it replaced, their new nodes, and the new group."""

    ranks: tuple[int, ...]
    node_ids: tuple[str, ...]
    placement_group: Any


class RayGang:
    """A gang gangplace placed as Ray placement groups (made by :func:`placement_group`).

    Attributes:
        placement_group: The Ray placement group made for it (bundle ``i`` is rank ``i``).
        groups: Every group of the gang: the first, then one per :func:`repair`.
        allocation_id: Its allocation in the sync's cluster.
        owner: The allocation's owner.

    """

    def __init__(self, sync: RaySync, group: Any, allocation_id: str, owner: str | None):
        self.sync = sync
        self.placement_group = group
        self.groups: list[Any] = [group]
        self.allocation_id = allocation_id
        self.owner = owner
        self._bundles: dict[int, tuple[Any, int]] = {}  # rank -> (group, index) after repairs
        self.removed = False

    @property
    def allocation(self) -> Allocation | None:
        """Its allocation as the cluster has it now (``lost`` ranks too); ``None`` once removed."""
        if self.removed:
            return None
        mine = self.sync.cluster.allocations(self.owner)
        return next((a for a in mine if a.id == self.allocation_id), None)

    @property
    def node_ids(self) -> tuple[str, ...]:
        """The Ray node id of each rank, in rank order (``()`` once removed)."""
        allocation = self.allocation
        return () if allocation is None else tuple(pod.node for pod in allocation.placement.pods)

    def bundle(self, rank: int) -> tuple[Any, int]:
        """The placement group and bundle index that rank ``rank`` runs in.

        Pass them to ``PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=i)``.
        """
        if rank in self._bundles:
            return self._bundles[rank]
        size = len(self.node_ids)
        if not 0 <= rank < size:
            raise InvalidRequest(f"rank {rank} is not a rank of this gang (0 to {size - 1})")
        return self.placement_group, rank

    def remove(self) -> bool:
        """Removes its placement groups and releases its allocation; ``False`` the second time."""
        if self.removed:
            return False
        _remove_groups(self.groups)
        with self.sync.lock:
            self.sync.cluster.release(self.allocation_id, owner=self.owner)
            for group in self.groups:
                self.sync.gangs.pop(group.id.hex(), None)
            self.removed = True
        return True

    def __repr__(self) -> str:
        state = "removed" if self.removed else f"{len(self.node_ids)} ranks"
        return f"RayGang({self.placement_group.id.hex()}, {state})"


def placement_group(
    sync: RaySync,
    request: GangRequest | MultiGangRequest,
    *,
    name: str = "",
    lifetime: str | None = None,
    ready_timeout: float = 30.0,
    owner: str | None = None,
) -> RayGang:
    """Places ``request`` and makes the Ray placement group that pins it (docs/ray.md RY4).

    Args:
        sync: The :class:`~gangplace.ray.RaySync` of the connected Ray cluster.
        request: The gang (every rule of the engine applies: levels, slices, spread,
            resources, priorities).
        name: The group's name in Ray.
        lifetime: Ray's ``lifetime`` (``None`` or ``"detached"``).
        ready_timeout: Seconds to wait for Ray to make the group ready.
        owner: The owner of the gang's allocation.

    Returns:
        The :class:`RayGang`, its group ready and its allocation committed.

    Raises:
        Unschedulable: The gang fits nowhere now; nothing was made.
        RayError: Ray is not connected, refused the group, or did not make it ready in
            time: the group is removed and the hold rolled back (the message says which).
        InvalidRequest: A bad ``ready_timeout``, or a pod that asks nothing Ray counts.

    """
    ray = _connected()
    if isinstance(ready_timeout, bool) or not isinstance(ready_timeout, (int, float)):
        raise InvalidRequest(f"ready_timeout must be seconds, got {ready_timeout!r}")
    if not math.isfinite(ready_timeout) or ready_timeout <= 0:
        raise InvalidRequest(f"ready_timeout must be finite and > 0, got {ready_timeout!r}")
    with sync.lock:
        hold = sync.cluster.reserve(request, ttl=ready_timeout + HOLD_SLACK, owner=owner)
    try:
        bundles, selectors = bundles_for(hold.placement, request)
        group = _make_group(ray, bundles, selectors, name, lifetime)
    except BaseException:
        with sync.lock:
            sync.cluster.rollback(hold, owner=owner)
        raise
    gang = RayGang(sync, group, hold.id, owner)
    with sync.lock:
        sync.gangs[group.id.hex()] = gang  # a refresh meanwhile does not adopt it
    what = f"placement group {name or group.id.hex()}"
    try:
        _wait(ray, group, ready_timeout, what)
        with sync.lock:
            sync.cluster.commit(hold, owner=owner)
    except BaseException as error:
        _remove_groups([group])
        with sync.lock:
            sync.cluster.rollback(hold, owner=owner)
            sync.gangs.pop(group.id.hex(), None)
        if isinstance(error, GangplaceError) and not isinstance(error, RayError):
            raise RayError(f"{what}: its hold ended while Ray made it ({error})") from error
        raise
    return gang


def repair(
    sync: RaySync, gang: RayGang, *, ready_timeout: float = 30.0, widen: bool = False
) -> RayRepair:
    """Places the ranks a dead node took with it, and pins them in a new group (RY5).

    The engine's repair rules place them (docs/repair.md: the placement's domain first;
    ``widen`` allows the smallest enclosing domain). Ray cannot move the bundles of a group,
    so the replacements get a new placement group of their own (``gang.bundle(rank)`` gives
    it); every surviving rank keeps its node, its bundle and whatever runs in it. The old
    group keeps the dead bundles, which Ray cannot place again (they are pinned to a dead
    node): ``gang.remove()`` removes them with it.

    Returns:
        The repaired ranks (none when nothing was lost), their nodes and the new group.

    Raises:
        RayError: No repair fits (the message says how many ranks), or Ray refused the
            new group or did not make it ready: nothing changed.

    """
    ray = _connected()
    with sync.lock:
        allocation = gang.allocation
        if allocation is None:
            raise RayError(f"{gang!r} was removed: nothing to repair")
        lost = allocation.lost
        if not lost:
            return RayRepair((), (), None)
        plan = sync.cluster.plan_repair(allocation, widen=widen, owner=gang.owner)
        if plan is None:
            raise RayError(
                f"no repair fits the {len(lost)} lost ranks {lost} of {gang!r} "
                "(Cluster.explain_repair says where room is)"
            )
        held = sync.cluster.repair(plan, ttl=ready_timeout + HOLD_SLACK, owner=gang.owner)
    pods = list(held.placement.pods)
    request = allocation.request
    asks = _asks(allocation.placement, request) if request is not None else [{}] * (max(lost) + 1)
    bundles, selectors = _bundles(pods, [asks[rank] for rank in lost], held.placement.gpu_milli)
    try:
        group = _make_group(ray, bundles, selectors, "", None)
        with sync.lock:
            sync.gangs[group.id.hex()] = gang
        _wait(ray, group, ready_timeout, f"the repair group of {gang!r}")
        with sync.lock:
            sync.cluster.commit_repair(held, owner=gang.owner)
    except BaseException:
        with sync.lock:
            sync.cluster.rollback(held, owner=gang.owner)
        raise
    gang.groups.append(group)
    for index, rank in enumerate(lost):
        gang._bundles[rank] = (group, index)
    return RayRepair(tuple(lost), tuple(pod.node for pod in pods), group)


def _connected() -> Any:
    try:
        import ray
    except ImportError:
        raise RayError("Ray is not installed: pip install 'gangplace[ray]'") from None
    if not ray.is_initialized():
        raise RayError("Ray is not connected: call ray.init(address=...) first")
    return ray


def _make_group(
    ray: Any,
    bundles: list[dict[str, float]],
    selectors: list[dict[str, str]],
    name: str,
    lifetime: str | None,
) -> Any:
    from ray.util import placement_group as make

    try:
        return make(
            bundles,
            strategy="PACK",
            name=name,
            lifetime=lifetime,
            bundle_label_selector=selectors,
        )
    except Exception as error:  # Ray's own ValueError, TypeError or RaySystemError
        raise RayError(f"Ray refused placement group {name!r}: {error}") from error


def _wait(ray: Any, group: Any, timeout: float, what: str) -> None:
    if group.wait(timeout_seconds=timeout):
        return
    from ray.util import placement_group_table

    state = placement_group_table(group).get("state", "unknown")
    raise RayError(
        f"{what} was not ready within {timeout:g} s (Ray's state {state}): it was removed "
        "and its GPUs given back"
    )


def _remove_groups(groups: Sequence[Any]) -> None:
    try:
        import ray
        from ray.util import remove_placement_group
    except ImportError:
        return
    if not ray.is_initialized():
        return
    for group in groups:
        try:
            remove_placement_group(group)
        except Exception:  # already removed, or Ray gone: nothing left to give back
            continue
