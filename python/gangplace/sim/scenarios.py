"""Scenarios layered on a trace (docs/command-line.md; each one runs in the tests).

- **Priorities** (``high_priority_share``): each job of priority 0 becomes priority 1 with
  this probability, seeded by the workload seed (a GUESSED mix: the public traces carry no
  priorities). Run it with ``--order priority`` and the ``best-fit+preempt`` and
  ``best-fit+defrag`` policies to see what preemption and defragmentation buy the
  high-priority jobs and cost the others (``wait_by_priority_s``, ``lost_gpu_hours``).
- **Failures** (``failures_per_gpu_hour``): see :mod:`gangplace.sim.replay`.

- **Slices on NVL72 racks**: the ``best-fit+slices`` policy
  (:func:`gangplace.sim.policies.nvidia_slices`), run against ``best-fit`` on the same trace.

- **NUMA-split nodes** (``numa_split``, ``--numa-split``): every node of an even GPU count has
  two NUMA halves; the report counts started pods whose GPUs span both (the kubelet's
  ``single-numa-node`` policy would reject them); ``best-fit+numa`` places with
  ``numa="single"``.

Repair in place and hot spares wait for the features they exercise (issue 14).
"""

from __future__ import annotations

import random
from dataclasses import replace

from gangplace.sim.settings import SimSettings
from gangplace.sim.traces import Trace

__all__ = ["apply_scenarios"]


def apply_scenarios(trace: Trace, settings: SimSettings, seed: int) -> Trace:
    """The trace with the settings' scenarios applied (the same for every policy)."""
    share = settings.high_priority_share
    if not share:
        return trace
    rng = random.Random(seed * 104_729 + 3)
    jobs = [
        replace(job, priority=1) if job.priority == 0 and rng.random() < share else job
        for job in trace.jobs
    ]
    return replace(trace, jobs=jobs)
