"""Queues against the naive reference (docs/queues.md), and brute force.

The differential test drives random queue trees, jobs and events through
:class:`gangplace.Scheduler` and :class:`gangplace.reference.scheduler.ReferenceScheduler` on
identical clusters and compares every cycle's decisions and reasons word for word; after
every cycle it checks by brute force that no queue holds more than its nominal quota plus
what its cohort tree can lend it (Q3). The brute-force test checks that a reclaim's victims
are 1-minimal among the eligible jobs (Q6-Q7), and that a reclaim fails only when even every
eligible job ended would not start the job.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st
from test_scheduler_differential import _cluster, _decisions

from gangplace import (
    Cluster,
    Cohort,
    GangRequest,
    InvalidRequest,
    PodPlacement,
    Queue,
    Scheduler,
    Unschedulable,
)
from gangplace.errors import UnknownJob
from gangplace.reference.quota import ReferenceQuotas
from gangplace.reference.scheduler import ReferenceScheduler

QUEUES = ("q0", "q1", "q2", "q3")  # q3 only once an "add_queue" made it


@st.composite
def queue_trees(draw: Any) -> tuple[list[Queue], list[Cohort]]:
    """Three queues under one or two cohorts (maybe nested), with random policies."""
    nested = draw(st.booleans())
    cohorts = [Cohort("top", nominal=draw(st.sampled_from([0, 0, 4])))]
    if nested:
        cohorts.append(
            Cohort(
                "sub",
                parent="top",
                nominal=draw(st.sampled_from([0, 0, 4, 8])),  # its own quota (KEP-79)
                borrowing_limit=draw(st.none() | st.sampled_from([0, 8])),
                lending_limit=draw(st.none() | st.sampled_from([0, 4])),
                weight=draw(st.sampled_from([0.0, 0.5, 1.0, 2.0])),  # Q8: the tournament
            )
        )
    queues = []
    for name in QUEUES[:3]:
        nominal = draw(st.sampled_from([0, 4, 8, 12, 16]))
        queues.append(
            Queue(
                name,
                cohort=draw(st.sampled_from([c.name for c in cohorts] * 3 + [None])),
                nominal=nominal,
                borrowing_limit=None,
                weight=draw(st.sampled_from([0.0, 1.0, 1.0, 2.0])),
                within_queue=draw(
                    st.sampled_from(["never", "lower_priority", "lower_or_newer_equal_priority"])
                ),
                reclaim_within_cohort=draw(
                    st.sampled_from(["never", "lower_priority", "any", "any"])
                ),
                borrow_within_cohort=(borrow := draw(st.sampled_from(["never", "lower_priority"]))),
                queueing=draw(st.sampled_from(["best_effort_fifo", "fifo"])),
                borrow_within_cohort_max_priority=(
                    draw(st.none() | st.integers(0, 1)) if borrow == "lower_priority" else None
                ),
            )
        )
    # Limits only where a cohort is set (Q1).
    limited = []
    for queue in queues:
        if queue.cohort is None:
            limited.append(queue)
            continue
        borrowing = draw(st.none() | st.sampled_from([0, 4, 8]))
        lending = draw(st.none() | st.sampled_from([0, queue.nominal["gpu"]]))
        limited.append(
            Queue(
                queue.name,
                cohort=queue.cohort,
                nominal=queue.nominal,
                borrowing_limit=borrowing,
                lending_limit=lending,
                weight=queue.weight,
                within_queue=queue.within_queue,  # type: ignore[arg-type]
                reclaim_within_cohort=queue.reclaim_within_cohort,  # type: ignore[arg-type]
                borrow_within_cohort=queue.borrow_within_cohort,  # type: ignore[arg-type]
                queueing=queue.queueing,  # type: ignore[arg-type]
                borrow_within_cohort_max_priority=queue.borrow_within_cohort_max_priority,
            )
        )
    return limited, cohorts


plain = st.builds(
    lambda pods, gpus, elastic, level, priority, zone: GangRequest(
        pods,
        gpus,
        min_pods=max(1, pods // 2) if elastic else None,
        required_level=level,
        priority=priority,
        selector={"zone": "b"} if zone else None,
    ),
    st.integers(1, 4),
    st.sampled_from([1, 2, 4]),
    st.booleans(),
    st.sampled_from([None, None, "rack", "spine", "node"]),
    st.integers(0, 2),
    st.sampled_from([False, False, False, True]),
)
jobs = st.tuples(
    st.just("submit"),
    plain,
    st.sampled_from(QUEUES),
    st.booleans(),  # preemptible
    st.sampled_from([None, 20.0, 50.0]),
)
# Q11: queues changed while jobs run (a nominal, a queue added or removed).
changes = st.tuples(
    st.sampled_from(["update_queue", "remove_queue", "add_queue"]),
    st.sampled_from([*QUEUES, "q3"]),
    st.sampled_from([0, 4, 8, 16]),
)
operations = st.lists(
    st.one_of(
        jobs,
        jobs,
        st.tuples(st.sampled_from(["finish", "cancel"]), st.integers(0, 15)),
        st.tuples(st.just("cycle"), st.sampled_from([0.0, 5.0, 30.0])),
        changes,
    ),
    min_size=8,
    max_size=50,
)
configs = st.fixed_dictionaries(
    {
        "order": st.sampled_from(["fifo", "priority"]),
        "backfill": st.sampled_from(["easy", "conservative", "none", "any"]),
        "fair_sharing": st.booleans(),
        "defrag": st.booleans(),
        "min_runtime": st.sampled_from([0.0, 0.0, 10.0]),
        "max_victims_per_cycle": st.none() | st.integers(0, 2),
        "evicted_may_preempt": st.sampled_from([False, False, True]),
        "eviction_grace": st.sampled_from([0.0, 0.0, 10.0]),  # rule S17
        "fair_sharing_strategies": st.sampled_from(  # Kueue's preemptionStrategies
            [
                ("less_than_initial_share",),
                ("less_than_or_equal_to_final_share",),
                ("less_than_or_equal_to_final_share", "less_than_initial_share"),
            ]
        ),
    }
)


def within_quotas(tree: ReferenceQuotas, fast: Scheduler, only: set[str] | None = None) -> None:
    """Q3 by brute force: no node past its nominal plus what its tree may lend it.

    ``only``: the queues to check (after a quota was changed while jobs ran, Q11 lets a
    queue stay over a lowered quota, so only queues that just started a job are checked).
    """
    used: dict[str, int] = {}
    for job in fast.running():
        assert job.queue is not None
        used[job.queue] = used.get(job.queue, 0) + job.allocation.placement.total_gpus
    running = fast._running  # S17: jobs waiting for their victims' pods hold quota too
    for job_id in running.eviction_grace.starting:
        queue = running.jobs[job_id].queue or ""
        used[queue] = used.get(queue, 0) + running.allocations[job_id].placement.total_gpus
    for name in [*tree.queues, *tree.cohorts] if only is None else sorted(only):
        usage, guaranteed = tree.usage(name, used), tree.guaranteed(name)
        spec = tree.queues.get(name) or tree.cohorts[name]
        parent = spec.cohort if isinstance(spec, Queue) else spec.parent
        if parent is None:
            assert usage <= tree.subtree(name), name
            continue
        if spec.borrowing_limit is not None:
            over = max(0, usage - guaranteed)
            assert over <= tree.subtree(name) - guaranteed + spec.borrowing_limit["gpu"], name
    for name in tree.queues if only is None else sorted(only):  # never above its reach
        assert used.get(name, 0) <= max(0, tree.available(name, {})), name


def reclaims_keep_nominals(
    tree: ReferenceQuotas,
    before: dict[str, tuple[str, int]],
    queue_of: dict[str, str],
    decisions: Any,
    cascades: bool,
) -> None:
    """Q7 (issue 46): a reclaim never takes a job of another queue that was within its nominal.

    ``before``: the running jobs at the cycle's start, job -> (queue, GPUs). Starts and
    reclaims are replayed in their order; each queue that lost jobs to another queue must
    have been borrowing before the last of them was taken, whatever their order:
    usage - (its victims' GPUs - the largest victim's) > nominal. Without ``cascades`` no
    job evicted in the cycle preempts in it.
    """
    usage: dict[str, int] = {}
    for queue, gpus in before.values():
        usage[queue] = usage.get(queue, 0) + gpus
    evicted: set[str] = set()
    for started in decisions.started:
        mine = queue_of[started.job_id]
        if started.preempted and not cascades:
            assert started.job_id not in evicted, f"{started.job_id} was evicted, then preempted"
        lost: dict[str, list[int]] = {}
        for victim in started.preempted:
            queue, gpus = before[victim]
            if queue != mine:
                lost.setdefault(queue, []).append(gpus)
        for queue, sizes in lost.items():
            nominal = tree.queues[queue].nominal["gpu"]
            assert usage.get(queue, 0) - (sum(sizes) - max(sizes)) > nominal, (queue, sizes)
        for victim in started.preempted:
            queue, gpus = before[victim]
            usage[queue] -= gpus
            evicted.add(victim)
        usage[mine] = usage.get(mine, 0) + started.allocation.placement.total_gpus


@settings(max_examples=400)
@given(queue_trees(), configs, operations)
def test_queues_match_the_reference(tree: Any, config: dict[str, Any], ops: list[Any]) -> None:
    _drive(tree, config, ops)


@st.composite
def crowded_trees(draw: Any) -> tuple[list[Queue], list[Cohort]]:
    """Two or three queues sharing the 32 GPUs in one cohort, each with a reclaim policy."""
    count = draw(st.integers(2, 3))
    nominals = draw(st.sampled_from([(16, 16, 0), (8, 16, 8), (12, 12, 8), (0, 16, 16)]))
    queues = [
        Queue(
            name,
            cohort="top",
            nominal=nominals[index],
            weight=draw(st.sampled_from([0.5, 1.0, 2.0])),
            within_queue=draw(st.sampled_from(["never", "lower_priority"])),
            reclaim_within_cohort=draw(st.sampled_from(["lower_priority", "any", "any"])),
            borrow_within_cohort=draw(st.sampled_from(["never", "lower_priority"])),
        )
        for index, name in enumerate(QUEUES[:count])
    ]
    return queues, [Cohort("top")]


crowded_jobs = st.tuples(
    st.just("submit"),
    st.builds(
        lambda pods, gpus, level, priority: GangRequest(
            pods, gpus, required_level=level, priority=priority
        ),
        st.integers(1, 4),
        st.sampled_from([2, 4, 4]),
        st.sampled_from([None, "rack", "node"]),
        st.integers(0, 2),
    ),
    st.sampled_from(QUEUES[:3]),
    st.sampled_from([True, True, True, False]),  # preemptible
    st.sampled_from([None, 50.0]),
)
borrowing = st.lists(  # q1 first fills what the others do not use yet: it borrows
    crowded_jobs.map(lambda op: (op[0], op[1], "q1", True, op[4])), min_size=3, max_size=8
).map(lambda ops: [*ops, ("cycle", 0.0)])
crowded_operations = st.tuples(
    borrowing,
    st.lists(
        st.one_of(
            crowded_jobs,
            crowded_jobs,
            crowded_jobs,
            st.tuples(st.sampled_from(["finish", "cancel"]), st.integers(0, 15)),
            st.tuples(st.just("cycle"), st.sampled_from([0.0, 5.0, 30.0])),
        ),
        min_size=6,
        max_size=40,
    ),
).map(lambda parts: parts[0] + parts[1])


crowded_configs = configs.map(lambda c: {**c, "min_runtime": 0.0, "max_victims_per_cycle": None})


@given(crowded_trees(), crowded_configs, crowded_operations)
def test_reclaims_match_the_reference(tree: Any, config: dict[str, Any], ops: list[Any]) -> None:
    """The same on a full cluster, where queues reclaim from borrowers (Q5-Q7, S17)."""
    _drive(tree, config, ops)


def _drive(tree: Any, config: dict[str, Any], ops: list[Any]) -> None:
    """Runs ``ops`` on both schedulers, comparing every cycle (and Q3, Q7 after each)."""
    queues, cohorts = tree
    now = [0.0]
    fast_cluster, slow_cluster = _cluster(lambda: now[0], []), _cluster(lambda: now[0], [])
    fast = Scheduler(fast_cluster, clock=lambda: now[0], queues=queues, cohorts=cohorts, **config)
    slow = ReferenceScheduler(slow_cluster, queues=queues, cohorts=tuple(cohorts), **config)
    naive = ReferenceQuotas(queues, cohorts)
    submitted = 0
    held: list[tuple[Any, dict[str, str]]] = []  # decisions whose reasons are read at the end
    queue_of: dict[str, str] = {}
    changed_quotas = False
    for op in ops:
        if op[0] == "submit":
            _, request, queue, preemptible, walltime = op
            request = GangRequest(
                request.pods,
                request.gpus_per_pod,
                min_pods=request.min_pods,
                required_level=request.required_level,
                priority=request.priority,
                preemptible=preemptible,
                selector=request.selector,
            )
            job_id = f"j{submitted}"
            submitted += 1
            queue_of[job_id] = queue
            outcomes = []
            for scheduler in (fast, slow):
                try:
                    if scheduler is fast:
                        fast.submit(job_id, request, queue=queue, walltime=walltime)
                    else:
                        slow.submit(job_id, request, now=now[0], queue=queue, walltime=walltime)
                    outcomes.append("queued")
                except Unschedulable:
                    outcomes.append("refused")
                except InvalidRequest:  # a queue removed, or never added
                    outcomes.append("invalid")
            assert outcomes[0] == outcomes[1], (job_id, request, outcomes)
        elif op[0] in ("update_queue", "remove_queue", "add_queue"):
            kind, name, nominal = op
            spec = next((q for q in queues if q.name == name), Queue(name, cohort=None))
            policy: Any = spec.reclaim_within_cohort
            changed = Queue(name, cohort=spec.cohort, nominal=nominal, reclaim_within_cohort=policy)
            argument: Any = name if kind == "remove_queue" else changed
            answers = []
            for scheduler in (fast, slow):
                try:
                    getattr(scheduler, kind)(argument)
                    answers.append("ok")
                except InvalidRequest:
                    answers.append("refused")
            assert answers[0] == answers[1], (op, answers)
            if answers[0] == "ok":
                naive = slow.tenancy  # type: ignore[assignment]
                changed_quotas = True
                event(f"queues changed: {kind}")
        elif op[0] in ("finish", "cancel"):
            job_id = f"j{op[1]}"
            results: list[object] = []
            for scheduler in (fast, slow):
                try:
                    if op[0] == "finish":
                        if scheduler is fast:
                            fast.finish(job_id)
                        else:
                            slow.finish(job_id, now[0])
                        results.append("finished")
                    else:
                        results.append(
                            fast.cancel(job_id)
                            if scheduler is fast
                            else slow.cancel(job_id, now[0])
                        )
                except UnknownJob:
                    results.append("unknown")
            assert results[0] == results[1], (op, results)
        else:
            now[0] += op[1]
            before = {
                j.job_id: (j.queue or "", j.allocation.placement.total_gpus) for j in fast.running()
            }
            made, slow_made = fast.cycle(now[0]), slow.cycle(now[0])
            late = now[0] % 10 == 5  # S12: some cycles' reasons are read only at the end
            got = _decisions(made, reasons=not late)
            assert got == _decisions(slow_made, reasons=not late)
            if late:
                held.append((made, dict(slow_made.reasons)))
            cascades = bool(config["evicted_may_preempt"])
            grace = config["eviction_grace"] > 0  # starts come after their evictions
            if not made.walltime_ended and not grace:  # replayed from the jobs running then
                reclaims_keep_nominals(naive, before, queue_of, made, cascades)
            if made.preempted:
                event("reclaimed" + (" (eviction grace)" if grace else ""))
            if grace and any(started[4] for started in got[1]):
                event("started after its victims' grace")
            starters = {queue_of[started.job_id] for started in made.started}
            within_quotas(naive, fast, starters if changed_quotas else None)
        fast_cluster.check_invariants()
    assert fast_cluster.snapshot() == slow_cluster.snapshot()
    for decisions, said in held:  # S12: queues' reasons sealed, read after later changes
        assert dict(decisions.reasons) == said
        event("queue reasons read after later changes")
    reasons = slow.reasons()
    waiting = slow.pending + [entry[2] for entry in slow.ending]  # S17: evicted, ending
    waiting += [job for job in slow.running if job.job_id in slow.starting]
    assert {j.job_id: (j.queue, j.reason) for j in fast.pending()} == {
        job.job_id: (job.queue, reasons[job.job_id]) for job in waiting
    }


# ------------------------------------------------------------------ brute force


@settings(max_examples=300)
@given(
    st.lists(
        st.tuples(st.sampled_from(["b", "a"]), st.integers(1, 2), st.sampled_from([1, 2, 4])),
        min_size=1,
        max_size=6,
    ),
    st.tuples(st.integers(1, 3), st.sampled_from([2, 4]), st.sampled_from([None, "rack"])),
    st.sampled_from(["lower_priority", "any"]),
    st.sampled_from(["never", "lower_priority"]),
    st.integers(0, 2),
)
def test_reclaim_victims_are_1_minimal_among_the_eligible(
    fillers: list[tuple[str, int, int]],
    gang: tuple[int, int, str | None],
    reclaim: str,
    within: str,
    priority: int,
) -> None:
    now = [0.0]
    cluster = _cluster(lambda: now[0], [])  # 8 nodes x 4 GPUs, 4 racks
    queues = [
        Queue("a", cohort="lab", nominal=16, reclaim_within_cohort=reclaim, within_queue=within),  # type: ignore[arg-type]
        Queue("b", cohort="lab", nominal=8),
    ]
    scheduler = Scheduler(
        cluster, queues=queues, cohorts=[Cohort("lab")], clock=lambda: now[0], backfill="any"
    )
    for index, (queue, pods, gpus) in enumerate(fillers):
        request = GangRequest(pods, gpus, priority=index % 3)
        scheduler.submit(f"f{index}", request, queue=queue)
    scheduler.cycle(0.0)
    for job_id in scheduler.pending_ids():
        scheduler.cancel(job_id)
    pods, gpus, level = gang
    request = GangRequest(pods, gpus, required_level=level, priority=priority)
    try:
        scheduler.submit("new", request, queue="a")
    except Unschedulable:
        return
    tenancy = scheduler._tenancy
    assert tenancy is not None
    job = scheduler._queue.by_id["new"]
    tenancy.started_now.clear()  # as the next cycle begins: every running job is older
    others, own = tenancy.candidates(job)
    eligible = others + own
    holds = {j.allocation_id or "": j.job_id for j in eligible}
    gpus_of = {j.job_id: tenancy.gpus[j.job_id] for j in eligible}
    naive = ReferenceQuotas(queues, [Cohort("lab")])
    used = {q: sum(tenancy.gpus[j] for j in tenancy.jobs[q]) for q in ("a", "b")}

    def works(subset: tuple[str, ...]) -> bool:
        left = dict(used)
        for job_id in subset:
            queue = "a" if job_id in tenancy.jobs["a"] else "b"
            left[queue] -= gpus_of[job_id]
        ids = [hold for hold, name in holds.items() if name in subset]
        fits = cluster.place_after(request, [ids] if ids else []) is not None
        return fits and max(0, naive.available("a", left)) >= request.total_gpus

    names = sorted(j.job_id for j in eligible)
    # Every subset judged before the cycle changes anything (at most 2**6 of them).
    judged = {
        subset: works(subset)
        for size in range(len(names) + 1)
        for subset in itertools.combinations(names, size)
    }
    any_works = {
        group: judged[tuple(sorted(j.job_id for j in group))]
        for group in (tuple(others), tuple(eligible))
    }
    before = Cluster.restore(cluster.snapshot(), clock=lambda: 0.0)  # for the domain check
    now[0] = 1.0
    decisions = scheduler.cycle(1.0)
    starts = {s.job_id: s for s in decisions.started}
    if "new" not in starts:
        assert not any(any_works.values())  # no group would have done it
        return
    victims = tuple(sorted(starts["new"].preempted))
    if not victims:
        return  # it fit as it was
    event("reclaimed")
    assert set(victims) <= set(names)
    # Before the reclaim, ending these victims starts the job; restoring any one does not,
    # inside the domain the plan chose (P4-P5: locality beats fewer victims, so a smaller set
    # may fit a coarser domain: docs/queues.md Q7).
    assert judged[victims]
    domain = starts["new"].allocation.placement.domain
    outside = [
        PodPlacement(name, range(4))
        for name in before.nodes()
        if (before.node(name).topology["spine"], before.node(name).topology["rack"], name)[
            : len(domain)
        ]
        != domain
    ]

    def fits_within(subset: tuple[str, ...]) -> bool:
        left = dict(used)
        for job_id in subset:
            left["a" if job_id in tenancy.jobs["a"] else "b"] -= gpus_of[job_id]
        ids = [hold for hold, name in holds.items() if name in subset]
        fits = before.place_after(request, [ids] if ids else [], avoid=outside) is not None
        return fits and max(0, naive.available("a", left)) >= request.total_gpus

    for victim in victims:
        rest = tuple(v for v in victims if v != victim)
        assert not fits_within(rest), (victims, victim, domain)
    if not all(v in {j.job_id for j in others} for v in victims):
        assert not any_works[tuple(others)]  # its own jobs only when borrowers would not do
