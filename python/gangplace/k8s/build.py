"""Clusters from Kubernetes ``Node`` objects and the pods running on them.

The rules (which nodes are read, cordoned or left out; how running pods are adopted) are
docs/kubernetes.md, "Nodes"; this module implements them through
:class:`~gangplace.k8s.sync.ClusterSync`.

Example:
    >>> from gangplace.k8s import cluster_from_nodes
    >>> node = {"metadata": {"name": "n1", "labels": {"rack": "r1"}},
    ...         "status": {"capacity": {"nvidia.com/gpu": "8"},
    ...                    "allocatable": {"nvidia.com/gpu": "7"}}}
    >>> cluster, warnings = cluster_from_nodes([node], levels={"rack": "rack"})
    >>> cluster.node("n1").unhealthy, warnings
    ((7,), [])

"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gangplace._gangplace import Cluster
from gangplace.k8s.read import DEFAULT_TOLERATIONS
from gangplace.k8s.sync import ClusterSync

__all__ = ["cluster_from_nodes"]


def cluster_from_nodes(
    nodes: Iterable[Any] | Mapping[str, Any],
    *,
    levels: Mapping[str, str],
    gpu_resource: str = "nvidia.com/gpu",
    tolerations: Sequence[Mapping[str, Any]] = DEFAULT_TOLERATIONS,
    pods: Iterable[Any] | Mapping[str, Any] = (),
    pod_owner: str | None = None,
    **cluster_kw: Any,
) -> tuple[Cluster, list[str]]:
    """A cluster from Kubernetes nodes (and the pods running on them), with warnings.

    Args:
        nodes: ``V1Node`` objects, node dicts, or a ``NodeList`` dict with ``items``.
        levels: Level name -> node label key, outermost first.
        gpu_resource: The extended resource that counts GPUs.
        tolerations: Tolerations (dicts with ``key``, ``operator``, ``value``, ``effect``)
            every gang has: the taints they tolerate are dropped; every other taint is kept
            on the node for the gangs that tolerate it (K10).
            Default: :data:`DEFAULT_TOLERATIONS`.
        pods: ``V1Pod`` objects, pod dicts or a ``PodList``: running work to adopt.
        pod_owner: Owner of the adopted pods' allocations.
        **cluster_kw: Passed to :class:`gangplace.Cluster` (``policy``, ``clock``...).

    Returns:
        The cluster, and one warning per node left out or cordoned and per pod not adopted.

    """
    sync = ClusterSync(
        levels, gpu_resource=gpu_resource, tolerations=tolerations, pod_owner=pod_owner,
        **cluster_kw,
    )  # fmt: skip
    results = sync.resync(nodes, pods)
    return sync.cluster, [warning for result in results for warning in result.warnings]
