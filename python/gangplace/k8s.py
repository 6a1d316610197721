"""Kubernetes: clusters from ``Node`` objects and running pods, and bindings for placements.

``nodes`` are ``kubernetes.client.V1Node`` objects or plain dicts as ``kubectl get nodes -o
json`` prints them (a ``NodeList`` with ``items`` is accepted too). The ``kubernetes`` package
is only needed for the model objects (``pip install gangplace[k8s]``).

Rules of :func:`cluster_from_nodes` (it never fails on one bad node: every node it leaves
out or cordons is named in the returned warnings):

- GPUs per node: ``status.capacity[gpu_resource]``. Nodes without it (CPU nodes) are left
  out silently; a count that is not an integer, or above 64 (time-slicing or MPS replicas
  advertise ``"128"``), leaves the node out with a warning. A node labelled
  ``nvidia.com/gpu.replicas: "k"`` (time-slicing or MPS) advertises every physical GPU k
  times: it is read as ``capacity // k`` physical GPUs, with a warning; a pod asking
  ``n < k`` replicas there uses ``1000 * n // k`` thousandths of one GPU (adopted with
  ``gpu_milli``, README "Fractions of a GPU"), one asking more holds ``ceil(n / k)`` whole
  GPUs (README "Kubernetes nodes").
- Unhealthy GPUs: the annotation ``gangplace.io/unhealthy-gpus: "3,5"`` names them exactly;
  otherwise, when ``status.allocatable`` is lower than capacity, the missing GPUs count as
  unhealthy (the device plugin withdraws dead GPUs that way), taken from the highest indices.
- Cordoned (with a warning naming the reason): ``spec.unschedulable``, a ``NoSchedule`` or
  ``NoExecute`` taint that the given ``tolerations`` do not tolerate, or a ``Ready``
  condition that is not ``True``. The default tolerations, :data:`DEFAULT_TOLERATIONS`,
  tolerate the usual GPU taint ``nvidia.com/gpu`` (GKE puts ``nvidia.com/gpu=present:
  NoSchedule`` on every GPU node and adds the toleration to GPU pods).
- Running work (``pods``): every pod bound to a node (``spec.nodeName``) and not finished
  (phase neither ``Succeeded`` nor ``Failed``) that requests GPUs is adopted
  (:meth:`gangplace.Cluster.adopt`), owned by ``pod_owner``: the pods of one gang (the
  labels and annotations of :mod:`gangplace._k8s_gangs`: coscheduling, Volcano, Kueue,
  LeaderWorkerSet, JobSet, gangplace's own) as one allocation, any other pod alone, at the
  highest ``spec.priority`` of its pods and never preemptible when one of them is of a
  system priority class. Its
  GPUs: ``limits`` (else ``requests``) of ``gpu_resource``, the larger of the sum over
  containers and the largest init container (as Kubernetes counts them); their indices
  come from the ``gangplace.io/gpus`` annotation when gangplace bound the pod, otherwise
  the lowest-indexed free GPUs are taken. A pod on a node left out, or that does not fit,
  is named in the warnings.
- Staying current afterwards: :class:`ClusterSync` applies node and pod watch events
  (``cluster_from_nodes`` is a :meth:`ClusterSync.resync` on a new one).
- ``levels`` maps each level name to a node label key, outermost first. A node missing one of
  those labels is left out and named in the returned warnings, never merged silently.

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
from gangplace._k8s_binding import (
    ALLOCATION_ANNOTATION,
    GPUS_ANNOTATION,
    RANK_ANNOTATION,
    BindResult,
    bind,
    binding_patches,
    binding_plan,
    bindings,
)
from gangplace._k8s_read import DEFAULT_TOLERATIONS, UNHEALTHY_ANNOTATION
from gangplace._k8s_sync import ClusterSync, SyncResult

__all__ = [
    "ALLOCATION_ANNOTATION",
    "DEFAULT_TOLERATIONS",
    "GPUS_ANNOTATION",
    "RANK_ANNOTATION",
    "UNHEALTHY_ANNOTATION",
    "BindResult",
    "ClusterSync",
    "SyncResult",
    "bind",
    "binding_patches",
    "binding_plan",
    "bindings",
    "cluster_from_nodes",
]


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
            of the gangs to place: a taint they tolerate does not cordon the node.
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
