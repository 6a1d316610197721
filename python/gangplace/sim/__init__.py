"""Trace-driven simulation of gang scheduling, honest about what it does not know.

It replays job traces on a cluster under several policies, on identical job streams, over one
or several workload seeds, and compares what happened. Gang policies run
:class:`gangplace.Scheduler` (the same code an embedder uses). Parts:
:mod:`~gangplace.sim.traces` (Philly, Alibaba and CSV readers), :mod:`~gangplace.sim.clusters`
(cluster descriptions), :mod:`~gangplace.sim.settings` (the knobs, validated),
:mod:`~gangplace.sim.policies` (one object per policy), :mod:`~gangplace.sim.replay` (the
event loop), :mod:`~gangplace.sim.metrics`, :mod:`~gangplace.sim.report` and
:mod:`~gangplace.sim.plots` (figures, tables, pictures), :mod:`~gangplace.sim.run`
(:func:`simulate`), :mod:`~gangplace.sim.sweep` (many runs in parallel). Every error it
raises on purpose is a :class:`SimError`.
"""

from __future__ import annotations

from gangplace.sim.clusters import ClusterSpec, parse_cluster
from gangplace.sim.errors import ClusterSpecError, PolicyError, SimError, TraceError
from gangplace.sim.metrics import summarize
from gangplace.sim.policies import ALL_POLICIES, POLICIES, policy_for
from gangplace.sim.replay import JobRecord, Replay, RunResult, Standoff
from gangplace.sim.run import Simulation, simulate
from gangplace.sim.settings import SimSettings
from gangplace.sim.sweep import Sweep, sweep
from gangplace.sim.traces import Job, Trace, read_trace, read_traces

__all__ = [
    "ALL_POLICIES",
    "POLICIES",
    "ClusterSpec",
    "ClusterSpecError",
    "Job",
    "JobRecord",
    "PolicyError",
    "Replay",
    "RunResult",
    "SimError",
    "SimSettings",
    "Simulation",
    "Standoff",
    "Sweep",
    "Trace",
    "TraceError",
    "parse_cluster",
    "policy_for",
    "read_trace",
    "read_traces",
    "simulate",
    "summarize",
    "sweep",
]
