"""Trace-driven simulation of gang placement.

It replays a job trace on a cluster under several policies, on identical job streams, and
compares what happened. Parts: :mod:`~gangplace.sim.traces` (Philly, Alibaba and CSV readers),
:mod:`~gangplace.sim.clusters` (cluster descriptions), :mod:`~gangplace.sim.policies` (one
object per policy), :mod:`~gangplace.sim.replay` (the event loop),
:mod:`~gangplace.sim.metrics` and :mod:`~gangplace.sim.report` (figures, tables, plots),
:mod:`~gangplace.sim.run` (:func:`simulate`, what ``gangplace simulate`` runs). Every error it
raises on purpose is a :class:`SimError`.
"""

from __future__ import annotations

from gangplace.sim.clusters import ClusterSpec, parse_cluster
from gangplace.sim.errors import ClusterSpecError, PolicyError, SimError, TraceError
from gangplace.sim.metrics import summarize
from gangplace.sim.policies import POLICIES, Policy, policy_for
from gangplace.sim.replay import JobRecord, Replay, RunResult
from gangplace.sim.run import Simulation, simulate
from gangplace.sim.traces import Job, read_trace

__all__ = [
    "POLICIES",
    "ClusterSpec",
    "ClusterSpecError",
    "Job",
    "JobRecord",
    "Policy",
    "PolicyError",
    "Replay",
    "RunResult",
    "SimError",
    "Simulation",
    "TraceError",
    "parse_cluster",
    "policy_for",
    "read_trace",
    "simulate",
    "summarize",
]
