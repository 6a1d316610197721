"""Kubernetes: clusters from nodes and running pods, watch events, gangs, and bindings.

The rules are docs/kubernetes.md. Modules: :mod:`~gangplace.k8s.build`
(:func:`cluster_from_nodes`), :mod:`~gangplace.k8s.sync` (:class:`ClusterSync`: watch
events and relists), :mod:`~gangplace.k8s.read` (nodes and pods as read),
:mod:`~gangplace.k8s.gangs` (the gang key and priority of a running pod),
:mod:`~gangplace.k8s.quantity` (resource quantities), :mod:`~gangplace.k8s.fields` (checked
field access), :mod:`~gangplace.k8s.binding` (:func:`bindings`, :func:`bind`),
:mod:`~gangplace.k8s.podgroups` (PodGroups and Kueue's annotations as requests),
:mod:`~gangplace.k8s.pending` (:func:`request_from_pods`: pending pods with their own
constraints, read by :mod:`~gangplace.k8s.constraints`) and
:mod:`~gangplace.k8s.controller` (:class:`Controller`: list, watch, schedule and bind, with
:mod:`~gangplace.k8s.watching` and :mod:`~gangplace.k8s.waiting`).

``nodes`` and ``pods`` are ``kubernetes.client`` model objects or plain dicts as ``kubectl
get -o json`` prints them; the ``kubernetes`` package is only needed for the model objects
and for :func:`bind` (``pip install gangplace[k8s]``).
"""

from gangplace.k8s.binding import (
    ALLOCATION_ANNOTATION,
    GPUS_ANNOTATION,
    RANK_ANNOTATION,
    BindResult,
    bind,
    binding_patches,
    binding_plan,
    bindings,
)
from gangplace.k8s.build import cluster_from_nodes
from gangplace.k8s.controller import Controller, GangOutcome
from gangplace.k8s.pending import (
    GANG_SIZE_ANNOTATION,
    GangIncomplete,
    PendingGang,
    request_from_pods,
)
from gangplace.k8s.podgroups import (
    HOSTNAME_LABEL,
    PREFERRED_TOPOLOGY,
    REQUIRED_TOPOLOGY,
    SLICE_REQUIRED_TOPOLOGY,
    SLICE_SIZE,
    GangSpec,
    PodGroupError,
    gang_from_podgroup,
    levels_from_kueue_topology,
    request_from_pod_template,
)
from gangplace.k8s.read import DEFAULT_TOLERATIONS, UNHEALTHY_ANNOTATION
from gangplace.k8s.sync import ClusterSync, SyncResult

__all__ = [
    "ALLOCATION_ANNOTATION",
    "DEFAULT_TOLERATIONS",
    "GANG_SIZE_ANNOTATION",
    "GPUS_ANNOTATION",
    "HOSTNAME_LABEL",
    "PREFERRED_TOPOLOGY",
    "RANK_ANNOTATION",
    "REQUIRED_TOPOLOGY",
    "SLICE_REQUIRED_TOPOLOGY",
    "SLICE_SIZE",
    "UNHEALTHY_ANNOTATION",
    "BindResult",
    "ClusterSync",
    "Controller",
    "GangIncomplete",
    "GangOutcome",
    "GangSpec",
    "PendingGang",
    "PodGroupError",
    "SyncResult",
    "bind",
    "binding_patches",
    "binding_plan",
    "bindings",
    "cluster_from_nodes",
    "gang_from_podgroup",
    "levels_from_kueue_topology",
    "request_from_pod_template",
    "request_from_pods",
]
