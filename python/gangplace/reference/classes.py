"""Classes of alike jobs and their failure bounds, in the reference scheduler (S8, S10).

A mixin of :class:`gangplace.reference.scheduler.ReferenceScheduler`. The reference tries
every job one by one; what it records per class is what the engine's class walk keeps: the
failure with the smallest bound (for S10's reasons), and the bound itself, past which a job
of the class is not tried once the walk's reservations are all made (as the engine's walk
never offers it).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["ReferenceClasses"]


class ReferenceClasses:
    """S8's classes and the walk's per-class bounds for the reference scheduler."""

    grace: float
    outcomes: dict[tuple[object, ...], tuple[float, str]]
    bounds: dict[tuple[object, ...], float]

    def _failed(self, job: Any, bound: float, why: str) -> str:
        """Records a failure of ``job`` under ``bound``; returns ``"nofit"``."""
        key = self._class(job)
        if bound < self.outcomes.get(key, (math.inf, ""))[0]:
            self.outcomes[key] = (bound, why)
        self.bounds[key] = min(bound, self.bounds.get(key, math.inf))
        return "nofit"

    def _past_bound(self, job: Any, now: float) -> bool:
        """Whether the job would end after its class's least failure bound."""
        end = math.inf if job.walltime is None else now + self.grace + job.walltime
        return end > self.bounds.get(self._class(job), math.inf)

    def _class(self, job: Any) -> tuple[object, ...]:
        """S8: what makes two jobs alike to the engine (and to S10's reasons)."""
        request, (level, elastic) = job.request, job.form
        return (
            request.pods,
            request.gpus_per_pod,
            request.min_pods if elastic else None,
            level,
            tuple(sorted(request.selector.items())),
            request.affinity,  # docs/placement.md, rule 1
            request.tolerations,
            request.slices,
            request.spread,
            request.numa,
            request.spares,
            job.owner,
            job.queue,
            request.preemptible if job.queue is not None else None,
            tuple(sorted(request.resources_per_pod.items())),  # docs/resources.md
            request.gpu_milli,  # docs/resources.md, "Fractions of a GPU"
        )
