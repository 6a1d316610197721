"""Queue benchmarks (docs/queues.md; figures in docs/performance.md).

``colossus100k`` (102,400 GPUs) shared by 100 queues under 10 cohorts (10 queues each, every
queue's nominal quota 1% of the cluster), filled to about 90% by the scheduler's own jobs
(half the queues bring 1.6 times their quota, so they borrow; the others 0.2 times), then
10,000 more gangs of the benchmark mix queued to random queues.

- ``cycle_10k_queues``: ``Scheduler.cycle`` with fair sharing (issue 27's goal: <= 20 ms
  median), timed from the same state every round as in ``bench_scheduler.py``; reclaims
  are off here (they change the state a round starts from), their cost is the next one's.
- ``reclaim``: choosing a reclaim's victims for a 64-GPU rack-level gang of an idle queue
  whose quota the borrowers hold (issue 27's goal: <= 2 ms); a pure query, so every round
  starts from the same state; then the reclaim chosen and applied (``Tenancy.reclaim``:
  the plan, the preemption, the start), timed once (``applied_ms`` in the extra info).
- ``*_reference``: the same on a 1,024-GPU cluster (10 queues in 2 cohorts, 500 pending
  gangs) by ``gangplace.reference.scheduler``, next to gangplace on the same state: the
  naive walk recomputes every quota from the running jobs, which cannot be timed at
  colossus100k's size.

The README's test command runs them once on a small cluster with ``--benchmark-disable``.
"""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from benches.bench_scheduler import _timed_cycles
from gangplace import Cluster, Cohort, GangRequest, Queue, Scheduler, Unschedulable, synth
from gangplace.reference.scheduler import ReferenceScheduler
from gangplace.scheduler.reclaim import _choose as choose_victims
from gangplace.scheduler.reclaim import reclaim

SMALL = synth.Shape("small", ("block", "rack"), (2, 2, 4), 8, "smoke-test size")
MID = synth.Shape("mid", ("hall", "rack"), (2, 8, 8), 8, "1,024 GPUs for the reference")


def _teams(
    cohorts: int, per_cohort: int, total: int, reclaim: str
) -> tuple[list[Queue], list[Cohort]]:
    nominal = total // (cohorts * per_cohort)
    groups = [Cohort(f"c{c}") for c in range(cohorts)]
    queues = [
        Queue(f"c{c}q{q}", cohort=f"c{c}", nominal=nominal, reclaim_within_cohort=reclaim)  # type: ignore[arg-type]
        for c in range(cohorts)
        for q in range(per_cohort)
    ]
    return queues, groups


def _cluster(shape: synth.Shape) -> Cluster:
    data = synth.columns(shape, unhealthy=0.002, seed=1)
    return Cluster.from_arrays(
        shape.levels, data["names"], data["domains"], data["gpus"], data["unhealthy_mask"]
    )


def _fill(schedulers: list[Any], queues: list[Queue], total: int, gpus_per_node: int) -> None:
    """About 90% of the GPUs: even queues bring 1.6x their quota, odd ones 0.2x."""
    rng = random.Random(5)
    demand = {q.name: q.nominal["gpu"] * (1.6 if i % 2 == 0 else 0.2) for i, q in enumerate(queues)}
    submitted = index = 0
    names = [q.name for q in queues]
    while submitted < 0.9 * total:
        queue = rng.choice(names)
        request = synth.gang_mix(rng, gpus_per_node)
        index += 1
        if demand[queue] < request.total_gpus or request.total_gpus > total // 16:
            continue
        demand[queue] -= request.total_gpus
        for scheduler in schedulers:
            _submit(scheduler, f"run{index:06d}", request, queue, rng.uniform(60.0, 86_400.0))
        submitted += request.total_gpus
        if all(value < 1 for value in demand.values()):
            break
    for scheduler in schedulers:
        scheduler.cycle(0.0)


def _submit(scheduler: Any, job_id: str, request: GangRequest, queue: str, walltime: float) -> bool:
    try:
        if isinstance(scheduler, ReferenceScheduler):
            scheduler.submit(job_id, request, now=0.0, queue=queue, walltime=walltime)
        else:
            scheduler.submit(job_id, request, queue=queue, walltime=walltime)
    except Unschedulable:
        return False
    return True


def _pending(schedulers: list[Any], queues: list[Queue], count: int, gpus_per_node: int) -> None:
    rng = random.Random(13)
    for index in range(count):
        request = synth.gang_mix(rng, gpus_per_node)
        queue = rng.choice(queues).name
        for scheduler in schedulers:
            _submit(scheduler, f"job{index:05d}", request, queue, rng.uniform(1.0, 86_400.0))


def _smoke(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("benchmark_disable", default=False))


def bench_cycle_10k_queues(benchmark: Any, request: pytest.FixtureRequest) -> None:
    """One cycle over 10,000 pending gangs in 100 queues under 10 cohorts, fair sharing."""
    smoke = _smoke(request)
    shape = SMALL if smoke else synth.SHAPES["colossus100k"]
    cluster = _cluster(shape)
    total = cluster.stats().total
    queues, cohorts = _teams(2 if smoke else 10, 5 if smoke else 10, total, "never")
    scheduler = Scheduler(
        cluster,
        clock=lambda: 0.0,
        queues=queues,
        cohorts=cohorts,
        fair_sharing=True,
        backfill="any",
    )
    _fill([scheduler], queues, total, shape.gpus_per_node)
    scheduler.backfill = "easy"
    _pending([scheduler], queues, 200 if smoke else 10_000, shape.gpus_per_node)
    decisions = _timed_cycles(benchmark, scheduler)
    benchmark.extra_info.update(
        pending=scheduler.queue_length + len(decisions.started),
        running=len(scheduler.running()),
        started=len(decisions.started),
        classes=len(scheduler._queue.classes),
        allocated=cluster.stats().allocated / total,
    )
    assert scheduler.queue_length, "jobs wait"


def _reclaim_state(shape: synth.Shape, smoke: bool) -> tuple[Scheduler, Any, GangRequest]:
    """Queue ``idle`` (nominal 64 GPUs, nothing running) and 99 other queues of one cohort
    that fill the cluster (to 90% with the mix, then a whole-node job on every empty node:
    some borrow ``idle``'s quota, and no rack is free); a 64-GPU rack-level gang of
    ``idle`` queued."""
    cluster = _cluster(shape)
    total = cluster.stats().total
    gang = GangRequest(4 if smoke else 8, 8, required_level="rack")
    borrowers = 9 if smoke else 99
    queues = [Queue("idle", cohort="c0", nominal=gang.total_gpus, reclaim_within_cohort="any")]
    share = (total - gang.total_gpus) // borrowers
    queues += [Queue(f"b{i}", cohort="c0", nominal=share) for i in range(borrowers)]
    scheduler = Scheduler(
        cluster, clock=lambda: 0.0, queues=queues, cohorts=[Cohort("c0")], backfill="any"
    )
    busy = queues[1:]
    rng = random.Random(3)
    submitted = index = 0
    while submitted < 0.9 * total:  # the borrowers fill the cluster, "idle" (queue 0) runs nothing
        request = synth.gang_mix(rng, shape.gpus_per_node)
        index += 1
        if request.total_gpus > total // 16:
            continue
        if _submit(scheduler, f"run{index:06d}", request, rng.choice(busy).name, 3600.0):
            submitted += request.total_gpus
    scheduler.cycle(0.0)
    # Then whole-node jobs on every node left empty: no rack is free, so the gang needs
    # victims for its GPUs, not only for its quota.
    empty = cluster.stats().free // shape.gpus_per_node
    for index in range(empty):
        _submit(
            scheduler, f"node{index:05d}", GangRequest(1, shape.gpus_per_node), busy[0].name, 3600.0
        )
    scheduler.cycle(0.0)
    if smoke:
        # The smoke size's racks mix too few borrowed GPUs for a rack-level reclaim that
        # takes only borrowers' jobs (docs/queues.md Q7): every borrower's quota is halved
        # (Q11) and idle's made its own (lending_limit 0), so each is well over its quota.
        tenancy = scheduler._tenancy
        assert tenancy is not None
        for queue in busy:
            usage = tenancy.tree.usage(queue.name)
            scheduler.update_queue(Queue(queue.name, cohort="c0", nominal=usage // 2))
        scheduler.update_queue(
            Queue("idle", cohort="c0", nominal=gang.total_gpus, lending_limit=0,
                  reclaim_within_cohort="any")
        )  # fmt: skip
    scheduler.submit("reclaimer", gang, queue=queues[0].name)
    return scheduler, scheduler._queue.by_id["reclaimer"], gang


def bench_reclaim(benchmark: Any, request: pytest.FixtureRequest) -> None:
    """Choosing a reclaim's victims (a pure query) on colossus100k, every node busy."""
    smoke = _smoke(request)
    scheduler, job, gang = _reclaim_state(SMALL if smoke else synth.SHAPES["colossus100k"], smoke)
    tenancy = scheduler._tenancy
    assert tenancy is not None
    tenancy.started_now.clear()

    def choose() -> Any:
        others, _ = tenancy.candidates(job)
        return choose_victims(scheduler._parts, tenancy, job, gang, others, 1.0)

    chosen = benchmark.pedantic(choose, rounds=20, iterations=1, warmup_rounds=1)
    assert chosen is not None, "the borrowers give the rack back"
    plan, extras = chosen
    assert plan.victims, "the rack is made free by preemption"
    benchmark.extra_info.update(
        victims=len(plan.victims) + len(extras),
        candidates=len(tenancy.candidates(job)[0]),
        domain="/".join(plan.placement.domain),
    )
    began = time.perf_counter()  # then the reclaim itself, chosen and applied, once
    done = reclaim(scheduler._parts, job, gang, 1.0)
    benchmark.extra_info["applied_ms"] = (time.perf_counter() - began) * 1000
    assert done is not None and done[0] is not None and done[0].job_id == "reclaimer", "started"
    assert done[1], "it preempted"


def _mid_pair(
    reclaim: str, shape: synth.Shape = MID, pending: int = 500
) -> tuple[Scheduler, ReferenceScheduler, list[Queue]]:
    total = shape.total_gpus
    queues, cohorts = _teams(2, 5, total, reclaim)
    fast = Scheduler(
        _cluster(shape),
        clock=lambda: 0.0,
        queues=queues,
        cohorts=cohorts,
        fair_sharing=True,
        backfill="any",
    )
    slow_cluster = _cluster(shape)
    slow = ReferenceScheduler(
        slow_cluster, queues=queues, cohorts=tuple(cohorts), fair_sharing=True, backfill="any"
    )
    _fill([fast, slow], queues, total, shape.gpus_per_node)
    fast.backfill = slow.backfill = "easy"
    _pending([fast, slow], queues, pending, shape.gpus_per_node)
    return fast, slow, queues


@pytest.mark.parametrize("who", ["gangplace", "reference"])
def bench_cycle_500_queues_reference(
    benchmark: Any, request: pytest.FixtureRequest, who: str
) -> None:
    """The cycle with fair sharing on 1,024 GPUs, 500 pending: gangplace and the reference
    (the smoke run: 128 GPUs, 40 pending, and both must start the same jobs)."""
    smoke = _smoke(request)
    fast, slow, _ = _mid_pair("never", SMALL, 40) if smoke else _mid_pair("never")
    if who == "gangplace":
        got = benchmark.pedantic(fast.cycle, args=(0.0,), rounds=1, iterations=1)
        other = slow.cycle(0.0)
    else:
        got = benchmark.pedantic(slow.cycle, args=(0.0,), rounds=1, iterations=1)
        other = fast.cycle(0.0)
    assert [s.job_id for s in got.started] == [s.job_id for s in other.started]
    benchmark.extra_info.update(started=len(got.started))
