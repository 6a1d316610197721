"""Scheduler benchmarks (docs/scheduler.md; figures in docs/performance.md).

``colossus100k@90``: the 102,400-GPU shape filled to 90% by ``synth.fill``, then 10,000
gangs of the benchmark mix submitted (seeded, walltimes 1 s to 1 day). One cycle is timed
from the same state every round: each round's setup cancels what the previous cycle started
and submits it again at its old place in the queue (requeue keeps the position).

- ``cycle_10k[easy|any]``: ``gangplace.Scheduler.cycle`` with EASY or "any" backfill: it
  tries classes, not jobs.
- ``cycle_10k_reference[easy|any]``: the naive job-by-job walk of
  ``gangplace.reference.scheduler`` on the same state (one round).
- ``cycle_fractional_head``: an EASY cycle whose blocked head asks shares of a GPU (its
  reservation made by ``place_after`` with shares each cycle); ``..._reference``: the same on
  the small cluster by the reference, with equal decisions.

The README's test command runs them once on a small cluster with ``--benchmark-disable``.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from gangplace import Cluster, GangRequest, Scheduler, Unschedulable, synth
from gangplace.reference.scheduler import ReferenceScheduler

SMALL = synth.Shape("small", ("block", "rack"), (2, 2, 4), 8, "smoke-test size")


def _state(smoke: bool) -> tuple[Cluster, list[tuple[str, GangRequest, float]]]:
    shape = SMALL if smoke else synth.SHAPES["colossus100k"]
    data = synth.columns(shape, unhealthy=0.002, seed=1)
    cluster = Cluster.from_arrays(
        shape.levels, data["names"], data["domains"], data["gpus"], data["unhealthy_mask"]
    )
    synth.fill(cluster, 0.9, seed=1, gpus_per_node=shape.gpus_per_node)
    rng = random.Random(7)
    jobs = []
    for index in range(200 if smoke else 10_000):
        request = synth.gang_mix(rng, shape.gpus_per_node)
        jobs.append((f"job{index:05d}", request, rng.uniform(1.0, 86_400.0)))
    return cluster, jobs


def _timed_cycles(benchmark: Any, scheduler: Scheduler, *, forget: bool = False) -> Any:
    """Times ``cycle(0.0)`` over 20 rounds from the same state (each round's setup requeues
    what the previous one started, and with ``forget`` drops the kept reservations); then
    one more cycle, whose decisions are returned (the caller cancels what it started)."""
    started: list[str] = []

    def setup() -> None:
        for job_id in started:
            scheduler.requeue(job_id, 0.0)
        started.clear()
        if forget:
            scheduler._parts.book.kept.clear()

    def cycle() -> Any:
        decisions = scheduler.cycle(0.0)
        started.extend(s.job_id for s in decisions.started)
        return decisions

    benchmark.pedantic(cycle, setup=setup, rounds=20, iterations=1, warmup_rounds=1)
    setup()
    return scheduler.cycle(0.0)


@pytest.fixture(scope="module")
def loaded(request: pytest.FixtureRequest) -> tuple[Cluster, list[Any]]:
    smoke = request.config.getoption("benchmark_disable", default=False)
    return _state(smoke)


@pytest.mark.parametrize("backfill", ["easy", "any"])
def bench_cycle_10k(benchmark: Any, loaded: tuple[Cluster, list[Any]], backfill: Any) -> None:
    """One cycle over 10,000 pending gangs at 90% fill."""
    cluster, jobs = loaded
    scheduler = Scheduler(cluster, clock=lambda: 0.0, backfill=backfill)
    for job_id, request, walltime in jobs:
        scheduler.submit(job_id, request, walltime=walltime)
    decisions = _timed_cycles(benchmark, scheduler)
    benchmark.extra_info.update(
        pending=len(jobs), started=len(decisions.started), classes=len(scheduler._queue.classes)
    )
    for started_job in decisions.started:
        scheduler.cancel(started_job.job_id)
    assert decisions.started, "some gangs fit the 10% left"


@pytest.mark.parametrize("backfill", ["easy", "any"])
def bench_cycle_10k_reference(
    benchmark: Any, loaded: tuple[Cluster, list[Any]], backfill: Any
) -> None:
    """The same cycle by the naive walk of ``gangplace.reference.scheduler`` (one round)."""
    cluster, jobs = loaded
    fast = Scheduler(cluster, clock=lambda: 0.0, backfill=backfill)
    slow = ReferenceScheduler(cluster, backfill=backfill)
    for job_id, request, walltime in jobs:
        fast.submit(job_id, request, walltime=walltime)
    for job_id, request, walltime in jobs:
        slow.submit(job_id, request, now=0.0, walltime=walltime)
    want = fast.cycle(0.0)
    for started in want.started:
        fast.cancel(started.job_id)
    got = benchmark.pedantic(slow.cycle, args=(0.0,), rounds=1, iterations=1)
    assert [s.job_id for s in got.started] == [s.job_id for s in want.started]
    for started in got.started:
        slow.cancel(started.job_id, 0.0)


@pytest.mark.parametrize("backfill", ["easy", "conservative"])
def bench_pending_10k(benchmark: Any, loaded: tuple[Cluster, list[Any]], backfill: Any) -> None:
    """``Scheduler.pending()`` after a cycle over 10,000 pending gangs (rule S10: no engine
    call per job; issues 25 and 50: <= 20 ms with EASY and conservative backfill)."""
    cluster, jobs = loaded
    scheduler = Scheduler(cluster, clock=lambda: 0.0, backfill=backfill)
    for job_id, request, walltime in jobs:
        scheduler.submit(job_id, request, walltime=walltime)
    decisions = scheduler.cycle(0.0)
    reports = benchmark.pedantic(scheduler.pending, rounds=20, iterations=1, warmup_rounds=1)
    assert len(reports) == len(jobs) - len(decisions.started)
    benchmark.extra_info.update(pending=len(reports), classes=len(scheduler._queue.classes))
    for started in decisions.started:
        scheduler.cancel(started.job_id)


@pytest.mark.parametrize("kept", [False, True], ids=["drop", "keep"])
def bench_cycle_loop_keeping_decisions(
    benchmark: Any, loaded: tuple[Cluster, list[Any]], kept: bool
) -> None:
    """The natural ``d = s.cycle()`` loop over 10,000 pending gangs, after the first cycle
    started what fits (each later cycle starts nothing): keeping every ``Decisions`` (and
    so each cycle's unread reasons) or none. Issue 50: keeping them within 1.2x."""
    cluster, jobs = loaded
    scheduler = Scheduler(cluster, clock=lambda: 0.0)
    for job_id, request, walltime in jobs:
        scheduler.submit(job_id, request, walltime=walltime)
    first = scheduler.cycle(0.0)
    history: list[Any] = []

    def cycle() -> None:
        decisions = scheduler.cycle(0.0)
        if kept:
            history.append(decisions)

    benchmark.pedantic(cycle, rounds=50, iterations=1, warmup_rounds=1)
    benchmark.extra_info.update(pending=len(scheduler.pending_ids()), kept=len(history))
    if kept:  # the first kept cycle's reasons, read after every later cycle: as they were
        assert dict(history[0].reasons) == {job.job_id: job.reason for job in scheduler.pending()}
    for started in first.started:
        scheduler.cancel(started.job_id)


def _scheduled_state(smoke: bool, reference: bool = False) -> tuple[Any, list[Any]]:
    """colossus100k filled to about 90% by the scheduler itself (its jobs have walltimes, so
    blocked jobs get reservations), and 10,000 more gangs of the same mix to queue; with
    ``reference``, by ``gangplace.reference.scheduler`` instead."""
    shape = SMALL if smoke else synth.SHAPES["colossus100k"]
    data = synth.columns(shape, unhealthy=0.002, seed=1)
    cluster = Cluster.from_arrays(
        shape.levels, data["names"], data["domains"], data["gpus"], data["unhealthy_mask"]
    )
    rng = random.Random(11)
    total = cluster.stats().total
    filler: Any = (
        ReferenceScheduler(cluster, backfill="any")
        if reference
        else Scheduler(cluster, clock=lambda: 0.0, backfill="any")
    )
    at = {"now": 0.0} if reference else {}
    submitted = index = 0
    while submitted < 0.9 * total:
        request = synth.gang_mix(rng, shape.gpus_per_node)
        index += 1
        if request.total_gpus > total // 8:
            continue  # the smoke run's small cluster
        filler.submit(f"run{index:06d}", request, walltime=rng.uniform(60.0, 86_400.0), **at)
        submitted += request.total_gpus
    filler.cycle(0.0)
    jobs = []
    for index in range(200 if smoke else 10_000):
        request = synth.gang_mix(rng, shape.gpus_per_node)
        jobs.append((f"job{index:05d}", request, rng.uniform(1.0, 86_400.0)))
    return filler, jobs


@pytest.mark.parametrize("backfill", ["easy", "conservative"])
@pytest.mark.parametrize("kept", [True, False], ids=["kept", "fresh"])
def bench_cycle_10k_reservations(
    benchmark: Any, request: pytest.FixtureRequest, backfill: Any, kept: bool
) -> None:
    """One cycle over 10,000 pending gangs with reservations (docs/scheduler.md S5; issue 25's goal:
    <= 20 ms median), the cluster filled by the scheduler's own jobs. ``kept``: the
    reservations of the previous round are still valid (the usual cycle); ``fresh``: they
    are forgotten before each round, so each is made again by ``place_after``."""
    smoke = request.config.getoption("benchmark_disable", default=False)
    scheduler, jobs = _scheduled_state(smoke)
    scheduler.backfill = backfill
    for job_id, gang, walltime in jobs:
        try:
            scheduler.submit(job_id, gang, walltime=walltime)
        except Unschedulable:  # the smoke run's small cluster
            continue
    decisions = _timed_cycles(benchmark, scheduler, forget=not kept)
    reserved = [job for job in scheduler.pending() if job.shadow is not None]
    benchmark.extra_info.update(
        pending=len(jobs),
        running=len(scheduler.running()),
        started=len(decisions.started),
        reservations=len(reserved),
        classes=len(scheduler._queue.classes),
    )
    assert reserved, "the blocked jobs got reservations"


def _fractional_head(scheduler: Any, reference: bool) -> GangRequest:
    """Queues a head of shares (500 thousandths a pod) asking the room of twice the free
    GPUs, so that it is blocked and reserved the shares it will take (docs/scheduler.md S5);
    returns its request."""
    cluster = scheduler.cluster if reference else scheduler._parts.cluster
    head = GangRequest(4 * cluster.stats().free + 2, 1, gpu_milli=500)
    at = {"now": 0.0} if reference else {}
    scheduler.submit("head", head, walltime=3_600.0, **at)
    return head


def bench_cycle_fractional_head(benchmark: Any, request: pytest.FixtureRequest) -> None:
    """One EASY cycle whose head asks shares of a GPU and is blocked: its reservation is made
    by ``place_after`` with shares every cycle (never kept), the cluster filled by the
    scheduler's own jobs (colossus100k at about 90%), 1,000 more gangs queued behind."""
    smoke = request.config.getoption("benchmark_disable", default=False)
    scheduler, jobs = _scheduled_state(smoke)
    scheduler.backfill = "easy"
    _fractional_head(scheduler, reference=False)
    for job_id, gang, walltime in jobs[:1_000]:
        try:
            scheduler.submit(job_id, gang, walltime=walltime)
        except Unschedulable:  # the smoke run's small cluster
            continue
    decisions = _timed_cycles(benchmark, scheduler)
    (shadow,) = [job.shadow for job in scheduler.pending() if job.job_id == "head"]
    assert shadow is not None and shadow.placement is not None
    assert shadow.placement.gpu_milli == 500 and decisions.head == "head"
    benchmark.extra_info.update(
        running=len(scheduler.running()), started=len(decisions.started), time=shadow.time
    )


def bench_cycle_fractional_head_reference(benchmark: Any) -> None:
    """The same cycle on the small cluster (the reference's copy-and-replay reservation is
    too slow for colossus100k), 200 gangs behind the head: ``gangplace.reference.scheduler``
    timed (one round), with the Scheduler's decisions and reservation."""
    decisions, shadows = [], []
    for reference in (False, True):
        scheduler, jobs = _scheduled_state(True, reference=reference)
        scheduler.backfill = "easy"
        _fractional_head(scheduler, reference)
        at = {"now": 0.0} if reference else {}
        for job_id, gang, walltime in jobs:
            try:
                scheduler.submit(job_id, gang, walltime=walltime, **at)
            except Unschedulable:
                continue
        if reference:
            decisions.append(benchmark.pedantic(scheduler.cycle, args=(0.0,), rounds=1))
            shadows.append(scheduler.kept["head"][1])
        else:
            decisions.append(scheduler.cycle(0.0))
            shadows.append(next(j.shadow for j in scheduler.pending() if j.job_id == "head"))
    fast, slow = decisions
    assert [s.job_id for s in fast.started] == [s.job_id for s in slow.started]
    assert fast.head == slow.head == "head" and shadows[0] == shadows[1]
