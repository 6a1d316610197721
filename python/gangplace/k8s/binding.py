"""Binding a placement's pods through the Kubernetes API (docs/kubernetes.md "Binding pods").

Re-exported by :mod:`gangplace.k8s`; the rules are docs/kubernetes.md "Binding pods":

- Pods are given in rank order as ``V1Pod`` objects, dicts in the API's JSON shape, or names
  (then in ``namespace``). Their namespace and name come from ``metadata``.
- Per rank, the annotation patch is a JSON merge patch (RFC 7386) as a **dict**: the rank,
  the GPU indices, and the allocation id when one is given. It is sent with the content type
  ``application/merge-patch+json``.
- :func:`bind` patches, then binds, rank by rank, and stops at the first failure: the pods
  after it are not tried. It never raises for what the API server answers; the result says
  which pods were bound, which one failed and why, and which were not tried.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gangplace._gangplace import Placement
from gangplace.errors import InvalidRequest

RANK_ANNOTATION = "gangplace.io/rank"
GPUS_ANNOTATION = "gangplace.io/gpus"
ALLOCATION_ANNOTATION = "gangplace.io/allocation"
GPU_MILLI_ANNOTATION = "gangplace.io/gpu-milli"  # docs/resources.md: a pod's share
MERGE_PATCH = "application/merge-patch+json"


def pod_key(pod: Any, namespace: str, index: int) -> tuple[str, str]:
    """``(namespace, name)`` of a pod given as a ``V1Pod``, a dict or a name.

    Raises:
        InvalidRequest: No usable name (naming the pod's position and the field).

    """
    name: object
    space: object
    if isinstance(pod, str):
        name, space = pod, namespace
    else:
        if isinstance(pod, Mapping):
            metadata = pod.get("metadata")
        else:
            metadata = getattr(pod, "metadata", None)
        if isinstance(metadata, Mapping):
            name, space = metadata.get("name"), metadata.get("namespace")
        else:
            name = getattr(metadata, "name", None)
            space = getattr(metadata, "namespace", None)
        space = namespace if space is None else space
    for field, value in (("metadata.name", name), ("metadata.namespace", space)):
        if not isinstance(value, str) or not value:
            raise InvalidRequest(f"pod {index}: {field} must be a non-empty string, got {value!r}")
    assert isinstance(space, str) and isinstance(name, str)
    return space, name


def binding_plan(placement: Placement, pods: Sequence[Any]) -> list[dict[str, Any]]:
    """Per rank: the pod's name, its ``nodeName`` and GPU indices.

    Args:
        placement: Where the gang goes.
        pods: One pod per placed pod, in rank order: names, ``V1Pod`` objects or dicts.

    Raises:
        InvalidRequest: Not one pod per placed pod, or a pod without a name.

    """
    if isinstance(pods, (str, bytes, Mapping)) or not isinstance(pods, Sequence):
        raise InvalidRequest(f"pods must be a sequence of pods, not {type(pods).__name__}")
    if len(pods) != len(placement.pods):
        raise InvalidRequest(f"{len(pods)} pod names for {len(placement.pods)} placed pods")
    return [
        {
            "rank": rank,
            "pod": pod_key(pod, "default", rank)[1],
            "nodeName": placed.node,
            "gpus": list(placed.gpus),
            "gpu_milli": placement.gpu_milli,
        }
        for rank, (pod, placed) in enumerate(zip(pods, placement.pods, strict=True))
    ]


def binding_patches(
    plan: Sequence[Mapping[str, Any]], *, allocation: str | None = None
) -> dict[str, dict[str, Any]]:
    """Per pod name, the JSON merge patch (RFC 7386) recording its rank and GPU indices.

    ``{"metadata": {"annotations": {"gangplace.io/rank": ..., "gangplace.io/gpus": ...}}}``,
    with ``gangplace.io/allocation`` when ``allocation`` is given: a merge patch also works on
    a pod without annotations. The pod is bound to its node through a ``Binding``
    (:func:`bindings`), not by patching ``spec.nodeName``.
    """
    patches = {}
    for entry in plan:
        annotations = {
            RANK_ANNOTATION: str(entry["rank"]),
            GPUS_ANNOTATION: ",".join(str(gpu) for gpu in entry["gpus"]),
        }
        if entry.get("gpu_milli") is not None:
            annotations[GPU_MILLI_ANNOTATION] = str(entry["gpu_milli"])
        if allocation is not None:
            annotations[ALLOCATION_ANNOTATION] = allocation
        patches[str(entry["pod"])] = {"metadata": {"annotations": annotations}}
    return patches


def bindings(
    placement: Placement,
    pods: Sequence[Any],
    *,
    namespace: str = "default",
    as_dicts: bool = False,
    allocation: str | None = None,
) -> list[tuple[Any, dict[str, Any]]]:
    """Per rank: the ``Binding`` to create and the merge patch of the pod's annotations.

    Args:
        placement: Where the gang goes.
        pods: One pod per placed pod, in rank order: ``V1Pod`` objects, dicts in the API's
            JSON shape, or names (then in ``namespace``).
        namespace: The namespace of pods given by name, or whose metadata has none.
        as_dicts: Plain dicts in the API's JSON shape instead of ``V1Binding`` objects (also
            when the ``kubernetes`` package is not installed).
        allocation: An allocation id to record in the ``gangplace.io/allocation`` annotation.

    Returns:
        Per rank, ``(binding, patch)``: the binding names the pod (namespace and name from the
        pod) and targets its node; the patch is a dict (a JSON merge patch).

    Raises:
        InvalidRequest: Not one pod per placed pod, or a pod without a usable name.

    """
    if isinstance(pods, (str, bytes, Mapping)) or not isinstance(pods, Sequence):
        raise InvalidRequest(f"pods must be a sequence of pods, not {type(pods).__name__}")
    keys = [pod_key(pod, namespace, index) for index, pod in enumerate(pods)]
    plan = binding_plan(placement, [name for _, name in keys])
    patches = binding_patches(plan, allocation=allocation)
    out: list[tuple[Any, dict[str, Any]]] = []
    for (space, name), entry in zip(keys, plan, strict=True):
        body: Any = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": space},
            "target": {"apiVersion": "v1", "kind": "Node", "name": entry["nodeName"]},
        }
        if not as_dicts:
            body = _binding_object(body)
        out.append((body, patches[name]))
    return out


def _binding_object(body: dict[str, Any]) -> Any:
    try:
        from kubernetes import client
    except ImportError:
        return body
    return client.V1Binding(
        api_version="v1",
        kind="Binding",
        metadata=client.V1ObjectMeta(**body["metadata"]),
        target=client.V1ObjectReference(api_version="v1", kind="Node", name=body["target"]["name"]),
    )


@dataclass(frozen=True)
class BindResult:
    """What :func:`bind` did, pods as ``"namespace/name"`` in rank order.

    Attributes:
        bound: Pods now bound to their placed node (by this call, or already bound there).
        failed: The pod that could not be patched or bound, with the reason (HTTP status and
            the server's message), or ``None``.
        not_tried: The pods after the failed one.

    """

    bound: tuple[str, ...]
    failed: tuple[str, str] | None
    not_tried: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """Every pod is bound."""
        return self.failed is None


def bind(
    core_v1: Any,
    placement: Placement,
    pods: Sequence[Any],
    *,
    allocation: str | None = None,
    namespace: str = "default",
) -> BindResult:
    """Patches each pod's annotations, then binds it to its node, in rank order.

    ``core_v1`` is a ``kubernetes.client.CoreV1Api``. The ``Binding`` reply (``201`` with a
    ``Status`` body) is not deserialized (the client would fail on it after the pod was
    bound). A ``409`` for a pod already bound to its placed node counts as bound (a retry);
    bound elsewhere, it fails. At the first failure the rest are not tried: the caller then
    deletes the pods in ``bound`` (a bound pod cannot be moved; its controller recreates it)
    and rolls back or releases the hold (docs/kubernetes.md "Binding").

    Args:
        core_v1: The API client.
        placement: Where the gang goes.
        pods: As for :func:`bindings`.
        allocation: The allocation id, recorded in each pod's annotations.
        namespace: As for :func:`bindings`.

    Raises:
        InvalidRequest: Not one pod per placed pod, or a pod without a usable name (nothing
            is sent).

    """
    made = bindings(placement, pods, namespace=namespace, allocation=allocation)
    names = [f"{_meta(body, 'namespace')}/{_meta(body, 'name')}" for body, _ in made]
    bound: list[str] = []
    for rank, (body, patch) in enumerate(made):
        failure = _bind_one(core_v1, body, patch)
        if failure is not None:
            return BindResult(tuple(bound), (names[rank], failure), tuple(names[rank + 1 :]))
        bound.append(names[rank])
    return BindResult(tuple(bound), None, ())


def _meta(body: Any, field: str) -> str:
    if isinstance(body, Mapping):
        return str(body["metadata"][field])
    return str(getattr(body.metadata, field))


def _target(body: Any) -> str:
    if isinstance(body, Mapping):
        return str(body["target"]["name"])
    return str(body.target.name)


def _bind_one(core_v1: Any, body: Any, patch: dict[str, Any]) -> str | None:
    """Patches then binds one pod; the reason it failed, or ``None``."""
    space, name, node = _meta(body, "namespace"), _meta(body, "name"), _target(body)
    try:
        core_v1.patch_namespaced_pod(name, space, patch, _content_type=MERGE_PATCH)
    except Exception as error:  # the API's answer: reported, never raised
        return f"annotating: {_reason(error)}"
    try:
        reply = core_v1.create_namespaced_binding(space, body, _preload_content=False)
    except Exception as error:
        if getattr(error, "status", None) == 409 and _bound_to(core_v1, space, name) == node:
            return None
        return _unannotated(core_v1, space, name, patch, f"binding to {node}: {_reason(error)}")
    status = getattr(reply, "status", 201)
    if status not in (200, 201):
        return _unannotated(core_v1, space, name, patch, f"binding to {node}: HTTP {status}")
    return None


def _unannotated(core_v1: Any, space: str, name: str, patch: dict[str, Any], failure: str) -> str:
    """Removes the annotations just written from a pod that did not bind (K9).

    So that if another scheduler binds it later, nothing reads them as gangplace's. Returns
    the failure as reported, with a note when the removal failed too.
    """
    keys = patch.get("metadata", {}).get("annotations", {})
    removal = {"metadata": {"annotations": dict.fromkeys(keys)}}  # null deletes a key
    try:
        core_v1.patch_namespaced_pod(name, space, removal, _content_type=MERGE_PATCH)
    except Exception as error:
        return f"{failure} (its annotations could not be removed: {_reason(error)})"
    return failure


def _bound_to(core_v1: Any, space: str, name: str) -> str | None:
    """The node a pod is bound to, read back (``None`` if it cannot be read)."""
    try:
        pod = core_v1.read_namespaced_pod(name, space)
    except Exception:
        return None
    node = getattr(getattr(pod, "spec", None), "node_name", None)
    return node if isinstance(node, str) else None


def _reason(error: Exception) -> str:
    """``HTTP 404 Not Found: pods "p" not found`` (the server's message when it sent one)."""
    status = getattr(error, "status", None)
    if status is None:
        return f"{type(error).__name__}: {error}"
    reason = f"HTTP {status} {getattr(error, 'reason', '') or ''}".rstrip()
    try:
        message = json.loads(getattr(error, "body", None) or "{}").get("message")
    except (ValueError, AttributeError):
        message = None
    return f"{reason}: {message}" if isinstance(message, str) and message else reason
