"""Requests in the Scheduler's forms: copies of an immutable ``GangRequest`` with changes."""

from __future__ import annotations

from typing import Any

from gangplace._gangplace import GangRequest

__all__ = ["copied"]


def copied(request: GangRequest, **changes: Any) -> GangRequest:
    """``request`` with the fields in ``changes`` replaced (a request is immutable)."""
    fields: dict[str, Any] = {
        "min_pods": request.min_pods,
        "required_level": request.required_level,
        "selector": request.selector,
        "affinity": request.affinity,
        "tolerations": request.tolerations,
        "name": request.name,
        "priority": request.priority,
        "preemptible": request.preemptible,
        "movable": request.movable,
        "slices": request.slices,
        "spread": request.spread,
        "numa": request.numa,
        "spares": request.spares,
        "resources_per_pod": request.resources_per_pod or None,
        "gpu_milli": request.gpu_milli,
    }
    fields.update(changes)
    pods = fields.pop("pods", request.pods)
    return GangRequest(pods, request.gpus_per_pod, **fields)
