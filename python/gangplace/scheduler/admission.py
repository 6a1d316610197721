"""Admission: whether a job could ever start (docs/scheduler.md, Scheduler rule S2).

A job is refused at ``submit`` when its most relaxed form (``min_pods`` if elastic, the
coarsest level its ladder reaches) cannot be placed on the cluster *as built*: every node
present, every GPU healthy, no node cordoned, nothing held; labels and taints as they are.
The check runs on an empty twin of the cluster, rebuilt when the node count or the total
GPU count changes.
"""

from __future__ import annotations

from gangplace._gangplace import Cluster, GangRequest
from gangplace.gpu_topology import NodeTopology
from gangplace.scheduler.requests import copied

__all__ = ["EmptyTwin", "every_form", "relaxed"]


def relaxed(
    request: GangRequest,
    ladder: tuple[tuple[float, str | None], ...],
    levels: tuple[str, ...],
) -> GangRequest:
    """The most relaxed form ``request`` can reach: smallest size, coarsest level."""
    candidates = [request.required_level, *(level for _, level in ladder)]
    return _smallest_at(request, _coarsest(candidates, levels))


def every_form(
    request: GangRequest, ladder: tuple[tuple[float, str | None], ...]
) -> list[GangRequest]:
    """The request at each level it can take: its own, then each ladder step's.

    A slice gang's layers must suit all of them, which placing each on the empty twin checks.
    """
    levels = [request.required_level, *(level for _, level in ladder)]
    return [_smallest_at(request, level) for level in levels]


def _smallest_at(request: GangRequest, level: str | None) -> GangRequest:
    """``request`` at its smallest size (``min_pods``) and the given required level."""
    return copied(
        request,
        pods=request.min_pods or request.pods,
        min_pods=None,
        required_level=level,
        priority=0,
        preemptible=True,
        movable=False,
    )


def _coarsest(candidates: list[str | None], levels: tuple[str, ...]) -> str | None:
    """The coarsest of level names (``None``/``"cluster"`` coarsest, ``"node"`` finest).

    Unknown names are returned as they are, so that the engine reports them.
    """
    rank = {"cluster": -1, **{name: index for index, name in enumerate(levels)}}
    rank["node"] = len(levels)
    best: str | None = candidates[0]
    for level in candidates:
        if level is None or level == "cluster":
            return None
        if level not in rank:
            return level
        if best is not None and rank[level] < rank.get(best, len(levels)):
            best = level
    return best


class EmptyTwin:
    """An empty, all-healthy, uncordoned copy of a cluster's nodes, for admission checks."""

    def __init__(self) -> None:
        self._twin: Cluster | None = None
        self._fingerprint: tuple[int, int] | None = None

    def of(self, cluster: Cluster) -> Cluster:
        """The twin of ``cluster``, rebuilt if its nodes changed in number or GPUs."""
        fingerprint = (len(cluster), cluster.stats().total)
        if self._twin is None or fingerprint != self._fingerprint:
            self._twin = _build_twin(cluster)
            self._fingerprint = fingerprint
        return self._twin

    def fits(self, cluster: Cluster, request: GangRequest) -> str | None:
        """``None`` when ``request`` fits the empty twin, else the engine's reason.

        Raises:
            InvalidRequest: The request names an unknown level.

        """
        twin = self.of(cluster)
        if twin.place_gang(request) is not None:
            return None
        return twin.explain(request).summary


def _build_twin(cluster: Cluster) -> Cluster:
    import numpy as np  # here, not at import: ``import gangplace`` stays without numpy

    state = cluster.gpu_state()
    names = [str(name) for name in state["node"]]
    labels: dict[str, list[str | None]] = {}
    table: list[NodeTopology] = []
    codes: list[int] = []
    tainted: dict[str, tuple[tuple[str, str, str], ...]] = {}
    for index, name in enumerate(names):
        info = cluster.node(name)
        if info.taints:  # taints are structure, like labels (docs/scheduler.md, S2)
            tainted[name] = info.taints
        for key, value in info.labels.items():
            labels.setdefault(key, [None] * len(names))[index] = value
        groups = info.gpu_topology  # numa="single" gangs fit the twin only as they fit here
        if groups is not None and groups not in table:
            table.append(groups)
        codes.append(-1 if groups is None else table.index(groups))
    levels = cluster.levels
    twin = Cluster.from_arrays(
        levels,
        names=names,
        domains=[[str(value) for value in state["domains"][level]] for level in levels],
        gpus=state["gpus"],
        # typed: an empty list would be float64 for numpy (a cluster with no node left)
        unhealthy_mask=np.zeros(len(names), dtype=np.uint64),
        labels=labels or None,
        policy="first-fit" if cluster.policy == "first-fit" else "best-fit",
        gpu_topology=(codes, table) if table else None,
        resources=dict(state["resources"]) or None,  # capacities: the twin holds nothing
    )
    for name, taints in tainted.items():
        twin.update_node(name, taints=taints)
    return twin
