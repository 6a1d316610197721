"""Requests in the Scheduler's forms: copies of an immutable ``GangRequest`` with changes."""

from __future__ import annotations

from typing import Any

from gangplace._gangplace import GangRequest

__all__ = ["copied", "whole_gpus"]


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


def whole_gpus(request: GangRequest) -> GangRequest:
    """``request`` with whole GPUs for fractions.

    The Scheduler's reservation rules (docs/scheduler.md S5) and their checks count whole GPUs,
    so a fractional pod's reservation is a whole GPU (docs/resources.md "Fractions of a GPU": a
    reservation that holds more than the pod uses, never less), although ``place_after``
    plans shares.
    """
    if request.gpu_milli is None:
        return request
    return copied(request, gpu_milli=None)
