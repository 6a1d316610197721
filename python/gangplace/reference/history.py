"""Job histories (docs/scheduler.md, rule S14), restated naively for the tests.

The reference scheduler only appends events; every figure is recomputed from a job's whole
list of events each time it is asked, by walking them from the start.
"""

from __future__ import annotations

import math

from gangplace.errors import UnknownJob
from gangplace.scheduler.history import EventKind, HistorySummary, JobEvent, JobHistory

__all__ = ["ReferenceHistories"]

OPENS_WAIT = ("submitted", "preempted", "requeued")
ENDS = ("finished", "cancelled", "failed", "timed_out")


class ReferenceHistories:
    """Every job's events, in lists; ended ones beyond ``limit`` forgotten oldest first."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.events: dict[str, list[JobEvent]] = {}
        self.owners: dict[str, str | None] = {}
        self.ended_order: list[str] = []

    def add(self, job_id: str, now: float, kind: EventKind, detail: str = "") -> None:
        """Appends an event (a ``"submitted"`` one starts the job's list afresh)."""
        if kind == "submitted":
            self.events[job_id] = []
            if job_id in self.ended_order:
                self.ended_order.remove(job_id)
        self.events[job_id].append(JobEvent(now, kind, detail))
        if kind in ENDS:
            self.ended_order.append(job_id)
            while len(self.ended_order) > self.limit:
                del self.events[self.ended_order.pop(0)]

    def of(self, job_id: str, as_of: float) -> JobHistory:
        """The job's history, every sum recomputed from its events."""
        if job_id not in self.events:
            raise UnknownJob(job_id, job_id)
        events = self.events[job_id]
        waited = ran = 0.0
        wait_from: float | None = None
        run_from: float | None = None
        for event in events:
            if run_from is not None and event.kind in (*OPENS_WAIT, *ENDS):
                ran += event.time - run_from
                run_from = None
            if wait_from is not None and event.kind in ("started", *ENDS):
                waited += event.time - wait_from
                wait_from = None
            if event.kind in OPENS_WAIT and wait_from is None:
                wait_from = event.time  # an open wait goes on (S17: requeued before it ran)
            if event.kind == "started":
                run_from = event.time
        waited += as_of - wait_from if wait_from is not None else 0.0
        ran += as_of - run_from if run_from is not None else 0.0
        last = events[-1].kind
        state = "pending" if last in OPENS_WAIT else "running" if last not in ENDS else last
        completion = slowdown = None
        if state == "finished":
            completion = events[-1].time - events[0].time
            slowdown = completion / ran if ran > 0 else None
        return JobHistory(
            job_id,
            self.owners.get(job_id),
            state,  # type: ignore[arg-type]
            tuple(events),
            as_of,
            waited,
            ran,
            sum(1 for event in events if event.kind == "started"),
            completion,
            slowdown,
        )

    def summary(self, as_of: float) -> HistorySummary:
        """The figures of :class:`HistorySummary`, from every job's history."""
        every = [self.of(job_id, as_of) for job_id in self.events]
        finished = [h for h in every if h.state == "finished"]
        waits = sorted(h.waited for h in finished)
        completions = sorted(h.completion for h in finished if h.completion is not None)
        slowdowns = sorted(h.slowdown for h in finished if h.slowdown is not None)
        pending = [h for h in every if h.state == "pending"]

        def current_wait(history: JobHistory) -> float:
            opened = [e.time for e in history.events if e.kind in OPENS_WAIT]
            return as_of - opened[-1]

        return HistorySummary(
            len(finished),
            sum(1 for h in every if h.state == "cancelled"),
            sum(1 for h in every if h.state == "failed"),
            len(pending),
            sum(1 for h in every if h.state == "running"),
            max((current_wait(h) for h in pending), default=0.0),
            _mean(waits),
            _percentile(waits, 50),
            _percentile(waits, 95),
            max(waits) if waits else None,
            _mean(completions),
            _percentile(completions, 95),
            _mean(slowdowns),
            _percentile(slowdowns, 95),
            sum(h.starts - 1 for h in finished),
            sum(1 for h in every if h.state == "timed_out"),
        )


def _mean(values: list[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _percentile(ordered: list[float], percent: int) -> float | None:
    """Nearest rank: the smallest value with at least ``percent``% of values at or below."""
    for value in ordered:
        if 100 * sum(1 for other in ordered if other <= value) >= percent * len(ordered):
            return value
    return None
