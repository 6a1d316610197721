"""docs/scheduler.md S15 (runs past their walltime) and S16 (one clock, events in order).

The Scheduler and the reference agree on every mode in ``test_scheduler_differential.py``;
here each mode by hand, the issue's case (EASY promises that came late when jobs overran),
and a property: calls with times drawn in any order either raise ``InvalidRequest`` and
change nothing, or leave every history in time order.
"""

from __future__ import annotations

import heapq
import random
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given

from gangplace import Cluster, GangRequest, InvalidRequest, Scheduler
from gangplace.errors import UnknownJob


def cluster(nodes: int = 4) -> Cluster:
    made = Cluster(("rack",), clock=lambda: 0.0)
    for index in range(nodes):
        made.add_node(f"n{index}", gpus=8, topology={"rack": f"r{index // 2}"})
    return made


def kinds(scheduler: Scheduler, job_id: str, now: float) -> list[tuple[float, str]]:
    return [(e.time, e.kind) for e in scheduler.history(job_id, now=now).events]


def test_end_ends_a_job_at_its_walltime_plus_the_grace() -> None:
    scheduler = Scheduler(cluster(), overrun_grace=30.0, clock=lambda: 0.0)
    scheduler.submit("long", GangRequest(1, 8), walltime=100, now=0.0)
    scheduler.cycle(0.0)
    assert scheduler.cycle(99.0).overran == ()
    decisions = scheduler.cycle(110.0)  # past its walltime, within the grace: it runs on
    assert decisions.overran == ("long",) and scheduler.status("long") == "running"
    assert scheduler.cycle(120.0).overran == ()  # reported once
    decisions = scheduler.cycle(130.0)
    assert decisions.walltime_ended == ("long",)
    assert scheduler.cluster.stats().allocated == 0
    assert kinds(scheduler, "long", 130.0)[-2:] == [(110.0, "overran"), (130.0, "timed_out")]
    assert scheduler.history("long", now=130.0).state == "timed_out"
    assert scheduler.summary(now=130.0).timed_out == 1
    with pytest.raises(UnknownJob):
        scheduler.finish("long", now=131.0)


def test_report_leaves_the_job_running_and_says_so_once() -> None:
    scheduler = Scheduler(cluster(), overrun="report", clock=lambda: 0.0)
    scheduler.submit("long", GangRequest(1, 8), walltime=100, now=0.0)
    scheduler.cycle(0.0)
    assert scheduler.cycle(100.0).overran == ("long",)
    assert scheduler.cycle(500.0).overran == () and scheduler.status("long") == "running"
    scheduler.finish("long", now=600.0)
    assert scheduler.history("long", now=600.0).state == "finished"


def test_extend_moves_the_prediction_by_whole_walltimes() -> None:
    """A blocked head's promise follows the extended end and names the overrunning job."""
    scheduler = Scheduler(cluster(2), overrun="extend", clock=lambda: 0.0)
    scheduler.submit("long", GangRequest(2, 8), walltime=100, now=0.0)
    scheduler.cycle(0.0)
    scheduler.submit("head", GangRequest(2, 8), walltime=10, now=0.0)
    assert scheduler.cycle(50.0).overran == ()
    assert scheduler.pending(now=50.0)[0].shadow.time == 100.0  # type: ignore[union-attr]
    assert scheduler.cycle(250.0).overran == ("long",)  # 100 and 200 passed: now 300
    shadow = scheduler.pending(now=250.0)[0].shadow
    assert shadow is not None and (shadow.time, shadow.overrunning) == (300.0, ("long",))
    assert kinds(scheduler, "long", 250.0)[-1] == (250.0, "overran")
    assert "predicted to end at 300" in scheduler.history("long", now=250.0).events[-1].detail


def test_the_backfill_counts_the_grace() -> None:
    """A job that could run until its walltime plus the grace must end before the head's
    reservation to pass it."""
    scheduler = Scheduler(cluster(2), overrun_grace=50.0, clock=lambda: 0.0)
    scheduler.submit("run", GangRequest(1, 8), walltime=100, now=0.0)
    scheduler.cycle(0.0)
    scheduler.submit("head", GangRequest(2, 8), walltime=10, now=0.0)
    scheduler.submit("short", GangRequest(1, 8), walltime=120, now=0.0)
    decisions = scheduler.cycle(0.0)
    assert decisions.started == ()  # 0 + 120 + 50 > the head's 150
    assert scheduler.pending(now=0.0)[0].shadow.time == 150.0  # type: ignore[union-attr]
    scheduler.submit("shorter", GangRequest(1, 8), walltime=100, now=0.0)
    assert [s.job_id for s in scheduler.cycle(0.0).started] == ["shorter"]  # 150 <= 150


def _promises(overrun: str, seed: int) -> tuple[int, int, int]:
    """The issue's case: EASY backfill, 1 job in 20 running past its walltime.

    Returns (promises kept, promises late, late ones whose slip was named).
    """
    rng = random.Random(seed)
    scheduler = Scheduler(cluster(4), overrun=overrun, clock=lambda: 0.0)  # type: ignore[arg-type]
    events: list[tuple[float, int, str, str]] = []  # (time, tie, kind, job)
    runs: dict[str, float] = {}
    for index in range(120):
        job = f"j{index}"
        limit = float(rng.choice((50, 100, 200, 400)))
        runs[job] = limit * (1.5 if index % 20 == 7 else rng.uniform(0.4, 1.0))
        count = rng.choice((1, 2, 3, 4))
        heapq.heappush(events, (index * 15.0, index, "submit", f"{job}:{count}:{limit}"))
    promised: dict[str, float] = {}
    named: set[str] = set()
    started: dict[str, float] = {}
    woken: set[float] = set()
    tie = 10_000
    while events:
        now, _, kind, what = heapq.heappop(events)
        if kind == "submit":
            job, pods, hours = what.split(":")
            scheduler.submit(job, GangRequest(int(pods), 8), walltime=float(hours), now=now)
        elif kind == "finish" and what in {job.job_id for job in scheduler.running()}:
            scheduler.finish(what, now=now)  # else it was ended at its walltime
        decisions = scheduler.cycle(now)
        for start in decisions.started:
            started[start.job_id] = now
            tie += 1
            heapq.heappush(events, (now + runs[start.job_id], tie, "finish", start.job_id))
        for pending in scheduler.pending(now=now):
            shadow = pending.shadow
            if shadow is None or shadow.placement is None:
                continue
            promised.setdefault(pending.job_id, shadow.time)
            if shadow.overrunning:
                named.add(pending.job_id)
            if shadow.time > now and shadow.time not in woken:
                woken.add(shadow.time)  # a cycle at the promised time
                tie += 1
                heapq.heappush(events, (shadow.time, tie, "wake", ""))
    late = [job for job, time in promised.items() if started[job] > time + 1e-9]
    return len(promised) - len(late), len(late), len([job for job in late if job in named])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_promises_are_kept_when_overruns_end_and_named_when_they_slip(seed: int) -> None:
    kept, late, _ = _promises("end", seed)
    assert late == 0 and kept > 0
    kept, late, named = _promises("report", seed)
    assert late > 0 and named == late  # every slipped promise named the job it waited for
    _, late_extend, named_extend = _promises("extend", seed)
    assert named_extend == late_extend


def test_calls_out_of_time_order_are_refused_and_change_nothing() -> None:
    """The issue: with the default clock, finish() after cycle(now=...) put events out of
    order (a history showed 'waited -56.0')."""
    scheduler = Scheduler(cluster(), clock=lambda: 0.0)
    scheduler.submit("a", GangRequest(1, 8), walltime=100, now=10.0)
    scheduler.cycle(20.0)
    for call in (
        lambda: scheduler.finish("a"),  # the clock says 0.0
        lambda: scheduler.submit("b", GangRequest(1, 8), now=5.0),
        lambda: scheduler.cancel("a", now=19.0),
        lambda: scheduler.requeue("a", 0.0),
        lambda: scheduler.cycle(19.9),
    ):
        with pytest.raises(InvalidRequest, match="before an earlier call"):
            call()
    assert scheduler.status("a") == "running" and scheduler.pending_ids() == []
    assert [e.time for e in scheduler.history("a", now=20.0).events] == [10.0, 20.0]


calls = st.lists(
    st.tuples(
        st.sampled_from(["submit", "finish", "cancel", "requeue", "cycle"]),
        st.integers(0, 5),
        st.floats(0, 300, allow_nan=False),
    ),
    max_size=40,
)


@given(calls, st.sampled_from(["end", "report", "extend"]))
def test_every_history_stays_in_time_order(ops: list[Any], overrun: str) -> None:
    scheduler = Scheduler(cluster(2), overrun=overrun, clock=lambda: 0.0)  # type: ignore[arg-type]
    seen: set[str] = set()
    latest = 0.0
    for name, index, now in ops:
        job = f"j{index}"
        before = (scheduler.pending_ids(), sorted(r.job_id for r in scheduler.running()))
        try:
            if name == "submit":
                scheduler.submit(job, GangRequest(1 + index % 2, 8), walltime=50.0, now=now)
                seen.add(job)
            elif name == "cycle":
                scheduler.cycle(now)
            else:
                getattr(scheduler, name)(job, now=now) if name != "requeue" else (
                    scheduler.requeue(job, now))  # fmt: skip
        except InvalidRequest:
            assert now < latest  # refused only for going back in time...
            after = (scheduler.pending_ids(), sorted(r.job_id for r in scheduler.running()))
            assert after == before  # ...and then nothing changed
            continue
        except (UnknownJob, Exception) as error:  # a duplicate or unknown job
            assert type(error).__name__ in ("UnknownJob", "DuplicateJob"), error
            continue
        latest = max(latest, now)
    for job in seen:
        times = [event.time for event in scheduler.history(job, now=latest).events]
        assert times == sorted(times), (job, times)
