"""docs/scheduler.md S5: conservative reservations hold their GPUs only for their walltimes.

A reserved job holds its reservation's GPUs from its time to that time plus its walltime
(for ever without one), so a later reservation may take the same GPUs once it is over and
gets a finite start whenever walltimes allow; a blind one names the jobs without a walltime
in its way. The Scheduler against ``gangplace.reference``'s copy-and-replay walk, on
scenarios built to queue many jobs behind each other, and by brute force.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from gangplace import Cluster, GangRequest, Scheduler, Unschedulable
from gangplace.reference.scheduler import ReferenceScheduler


def _cluster(clock: Any) -> Cluster:
    """2 racks x 2 nodes x 4 GPUs, sequential hold ids (the two sides' ids agree)."""
    cluster = Cluster(("rack",), clock=clock)
    cluster._use_sequential_ids(1)  # type: ignore[attr-defined]
    for index in range(4):
        cluster.add_node(f"n{index}", gpus=4, topology={"rack": f"r{index // 2}"})
    return cluster


jobs = st.lists(
    st.tuples(
        st.integers(1, 4),  # pods
        st.sampled_from([1, 2, 4]),  # GPUs per pod
        st.sampled_from([None, 5.0, 10.0, 20.0, 50.0]),  # walltime
        st.sampled_from([None, None, "rack", "node"]),
    ),
    min_size=2,
    max_size=14,
)


def _spans(scheduler: Scheduler, walltimes: dict[str, float | None], grace: float) -> list[Any]:
    spans = []
    for job in scheduler.pending():
        shadow = job.shadow
        if shadow is None or shadow.placement is None:
            continue
        walltime = walltimes[job.job_id]
        end = math.inf if walltime is None else shadow.time + (walltime + grace)
        gpus = {(pod.node, gpu) for pod in shadow.placement.pods for gpu in pod.gpus}
        spans.append((shadow.time, end, gpus, job.job_id))
    return spans


@settings(max_examples=1000)
@given(
    jobs,
    st.sampled_from([1, 2, 16]),
    st.sampled_from([0.0, 0.0, 3.0]),
    st.lists(st.sampled_from([0.0, 5.0, 10.0, 25.0]), min_size=1, max_size=4),
)
def test_reservations_match_the_reference_and_never_overlap(
    submitted: list[Any], depth: int, grace: float, steps: list[float]
) -> None:
    now = [0.0]
    config: dict[str, Any] = {"backfill": "conservative", "reservation_depth": depth}
    if grace:
        config |= {"overrun": "end", "overrun_grace": grace}
    fast_cluster, slow_cluster = _cluster(lambda: now[0]), _cluster(lambda: now[0])
    fast = Scheduler(fast_cluster, clock=lambda: now[0], **config)
    slow = ReferenceScheduler(slow_cluster, **config)
    walltimes: dict[str, float | None] = {}
    for index, (pods, gpus, walltime, level) in enumerate(submitted):
        request = GangRequest(pods, gpus, required_level=level)
        outcomes = []
        for submit in (fast.submit, functools.partial(slow.submit, now=0.0)):
            try:
                submit(f"j{index}", request, walltime=walltime)
                outcomes.append("queued")
            except Unschedulable:
                outcomes.append("refused")  # it can never fit (docs/scheduler.md S2)
        assert outcomes[0] == outcomes[1]
        walltimes[f"j{index}"] = walltime
    for step in steps:
        now[0] += step
        for job in fast.running():  # jobs end at their walltime, on both sides
            end = walltimes[job.job_id]
            if end is not None and job.started_at + end <= now[0]:
                fast.finish(job.job_id)
                slow.finish(job.job_id, now[0])
        got, want = fast.cycle(now[0]), slow.cycle(now[0])
        assert [s.job_id for s in got.started] == [s.job_id for s in want.started]
        assert dict(got.reasons) == dict(want.reasons)
        shadows = {job.job_id: job.shadow for job in fast.pending() if job.shadow}
        assert shadows == {job_id: kept[1] for job_id, kept in slow.kept.items()}
        assert got.reservations == want.reservations
        assert {shadow.job_id: shadow for shadow in got.reservations} == shadows
        spans = _spans(fast, walltimes, grace)
        for index, (start, end, gpus, job_id) in enumerate(spans):
            for other_start, other_end, other_gpus, other_id in spans[index + 1 :]:
                if gpus & other_gpus:
                    assert end <= other_start or other_end <= start, (job_id, other_id)
                    event("two reservations share GPUs, one after the other")
        for shadow in shadows.values():
            if shadow.placement is None:
                event("blind, blocked by " + ("untimed jobs" if shadow.blocked_by else "others"))
            elif math.isfinite(shadow.time) and shadow.time > now[0]:
                event("a finite reservation")
    assert fast_cluster.snapshot() == slow_cluster.snapshot()


def test_two_half_cluster_jobs_both_get_finite_starts() -> None:
    """Issue 50's case: once two half-cluster jobs are queued, the second's reservation
    used to be blind (the first one's GPUs counted as taken for good)."""
    scheduler = Scheduler(_cluster(lambda: 0.0), backfill="conservative", clock=lambda: 0.0)
    scheduler.submit("running", GangRequest(4, 4), walltime=100)  # the whole cluster
    scheduler.submit("half-1", GangRequest(2, 4), walltime=50)
    scheduler.submit("half-2", GangRequest(2, 4), walltime=50)
    scheduler.submit("whole", GangRequest(4, 4), walltime=10)
    scheduler.submit("half-3", GangRequest(2, 4), walltime=50)
    scheduler.cycle()
    times = {job.job_id: job.shadow.time for job in scheduler.pending() if job.shadow}
    # half-1 and half-2 on the two racks from 100; the whole cluster once both are over;
    # half-3 after it
    assert times == {"half-1": 100.0, "half-2": 100.0, "whole": 150.0, "half-3": 160.0}
