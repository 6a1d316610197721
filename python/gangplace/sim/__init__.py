"""Trace-driven simulation of gang placement (work in progress: trace readers so far).

See :mod:`gangplace.sim.traces`.
"""

from __future__ import annotations

from gangplace.sim.traces import Job, TraceError, read_trace

__all__ = ["Job", "TraceError", "read_trace"]
