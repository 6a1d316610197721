"""Queues and quotas (docs/queues.md, Q1-Q10): scenarios for every policy value,
bad inputs, and the quota arithmetic against the naive reference."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import pytest
import test_scheduler_stateful as scheduler_machine
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant

from gangplace import (
    Cluster,
    Cohort,
    GangRequest,
    InvalidRequest,
    Queue,
    Scheduler,
    Unschedulable,
)
from gangplace.reference.quota import ReferenceQuotas
from gangplace.scheduler.quota import QuotaTree

NOW = [0.0]  # the clusters' clock: allocations' ``since`` for the brakes


def racks(count: int = 2, nodes: int = 2, gpus: int = 8) -> Cluster:
    NOW[0] = 0.0
    cluster = Cluster(("rack",), clock=lambda: NOW[0])
    for rack in range(count):
        for node in range(nodes):
            cluster.add_node(f"r{rack}-n{node}", gpus=gpus, topology={"rack": f"r{rack}"})
    return cluster


def lab(cluster: Cluster, *queues: Queue, **kwargs: Any) -> Scheduler:
    return Scheduler(
        cluster, queues=list(queues), cohorts=[Cohort("lab")], clock=lambda: 0.0, **kwargs
    )


def started(scheduler: Scheduler, now: float = 0.0) -> list[tuple[str, tuple[str, ...]]]:
    NOW[0] = now
    return [(s.job_id, tuple(sorted(s.preempted))) for s in scheduler.cycle(now).started]


# ------------------------------------------------------------------ the model (Q1)


def test_queues_and_cohorts_are_frozen_hashable_picklable_values() -> None:
    queue = Queue("a", cohort="lab", nominal={"gpu": 8}, borrowing_limit=4, weight=2)
    assert queue == Queue("a", cohort="lab", nominal=8, borrowing_limit={"gpu": 4}, weight=2.0)
    assert hash(queue) == hash(pickle.loads(pickle.dumps(queue)))
    assert pickle.loads(pickle.dumps(Cohort("c", parent="p", lending_limit=3))).lending_limit == {
        "gpu": 3
    }
    assert queue != Queue("a", cohort="lab", nominal=8)
    with pytest.raises(AttributeError):
        queue.nominal = {"gpu": 1}
    assert "nominal={'gpu': 8}" in repr(queue)


@pytest.mark.parametrize(
    ("error", "make"),
    [
        (InvalidRequest, lambda: Queue("")),
        (InvalidRequest, lambda: Queue("x" * 254)),
        (TypeError, lambda: Queue(7)),  # type: ignore[arg-type]
        (InvalidRequest, lambda: Queue("a", nominal=-1)),
        (InvalidRequest, lambda: Queue("a", nominal=2**41)),
        (TypeError, lambda: Queue("a", nominal=1.5)),  # type: ignore[arg-type]
        (TypeError, lambda: Queue("a", nominal=True)),
        (InvalidRequest, lambda: Queue("a", nominal={"cpu": 4})),
        (InvalidRequest, lambda: Queue("a", borrowing_limit=4)),  # no cohort
        (InvalidRequest, lambda: Queue("a", cohort="c", nominal=4, lending_limit=5)),
        (InvalidRequest, lambda: Queue("a", weight=-1)),
        (InvalidRequest, lambda: Queue("a", weight=float("nan"))),
        (TypeError, lambda: Queue("a", weight="1")),  # type: ignore[arg-type]
        (InvalidRequest, lambda: Queue("a", within_queue="always")),  # type: ignore[arg-type]
        (InvalidRequest, lambda: Queue("a", reclaim_within_cohort="all")),  # type: ignore[arg-type]
        (InvalidRequest, lambda: Queue("a", borrow_within_cohort="any")),  # type: ignore[arg-type]
        (InvalidRequest, lambda: Queue("a", queueing="lifo")),  # type: ignore[arg-type]
        # issue 46: Kueue's maxPriorityThreshold, a 32-bit priority, with its policy only
        (
            InvalidRequest,
            lambda: Queue(
                "a", borrow_within_cohort="lower_priority", borrow_within_cohort_max_priority=2**31
            ),
        ),
        (InvalidRequest, lambda: Queue("a", borrow_within_cohort_max_priority=1)),
        (
            TypeError,
            lambda: Queue(
                "a",
                borrow_within_cohort="lower_priority",
                borrow_within_cohort_max_priority=1.5,  # type: ignore[arg-type]
            ),
        ),
        (InvalidRequest, lambda: Cohort("c", weight=float("nan"))),
        (InvalidRequest, lambda: Cohort("c", nominal=-4)),
        (InvalidRequest, lambda: Cohort("c", borrowing_limit=1)),  # a root
        (InvalidRequest, lambda: Cohort("c", parent="")),
    ],
)
def test_bad_values_raise_typed_errors(error: type[BaseException], make: Any) -> None:
    with pytest.raises(error):
        make()


@pytest.mark.parametrize(
    ("queues", "cohorts", "kwargs"),
    [
        ([Queue("a", cohort="nowhere")], [], {}),
        ([Queue("a", cohort="c")], [Cohort("c", parent="d"), Cohort("d", parent="c")], {}),
        ([Queue("a", cohort="c")], [Cohort("c", parent="c")], {}),
        ([Queue("a"), Queue("a")], [], {}),
        ([Queue("a")], [Cohort("a")], {}),
        ([], [], {}),
        ([Queue("a")], [], {"preemption": True}),
    ],
)
def test_bad_trees_are_refused_at_construction(
    queues: list[Queue], cohorts: list[Cohort], kwargs: dict[str, Any]
) -> None:
    with pytest.raises(InvalidRequest):
        Scheduler(racks(), queues=queues, cohorts=cohorts, **kwargs)
    with pytest.raises(InvalidRequest):
        Scheduler(racks(), cohorts=[Cohort("c")])  # cohorts without queues
    with pytest.raises(TypeError):
        Scheduler(racks(), queues=["a"])  # type: ignore[list-item]


def test_bad_submits_change_nothing() -> None:
    cluster = racks()
    scheduler = lab(cluster, Queue("a", cohort="lab", nominal=8), Queue("b", cohort="lab"))
    scheduler.submit("ok", GangRequest(1, 8), queue="a")
    before = (cluster.snapshot(), scheduler.pending_ids())
    cases: list[tuple[type[BaseException], Callable[[], object]]] = [
        (InvalidRequest, lambda: scheduler.submit("x", GangRequest(1, 8))),  # no queue
        (InvalidRequest, lambda: scheduler.submit("x", GangRequest(1, 8), queue="c")),
        (TypeError, lambda: scheduler.submit("x", GangRequest(1, 8), queue=3)),  # type: ignore[arg-type]
        # More than queue "a" can ever reach (8 of its own + 0 lent by "b"):
        (Unschedulable, lambda: scheduler.submit("x", GangRequest(2, 8), queue="a")),
        # Not preemptible: never more than its nominal.
        (
            Unschedulable,
            lambda: scheduler.submit("x", GangRequest(1, 8, preemptible=False), queue="b"),
        ),
    ]
    for error, call in cases:
        with pytest.raises(error):
            call()
        assert (cluster.snapshot(), scheduler.pending_ids()) == before
    plain = Scheduler(racks())
    with pytest.raises(InvalidRequest):
        plain.submit("x", GangRequest(1, 8), queue="a")


# ------------------------------------------------------------------ quotas (Q2-Q4)


def test_a_queue_borrows_what_its_cohort_lends_within_its_limits() -> None:
    scheduler = lab(
        racks(2, 2),
        Queue("a", cohort="lab", nominal=8, borrowing_limit=8),
        Queue("b", cohort="lab", nominal=16, lending_limit=8),
        Queue("c", cohort="lab", nominal=8),
    )
    for index in range(5):
        scheduler.submit(f"a{index}", GangRequest(1, 8), queue="a")
    assert [job for job, _ in started(scheduler)] == ["a0", "a1"]  # 8 own + 8 borrowed
    reason = scheduler.pending()[0].reason
    assert reason == "queue 'a' lets it take 0 GPUs now, it needs 8 (nominal 8, in use 16)"
    tree = scheduler._tenancy.tree  # type: ignore[union-attr]
    assert (tree.borrowed("a"), tree.available("b"), tree.available("c")) == (8, 16, 8)


def test_lending_limit_keeps_a_guarantee_out_of_reach() -> None:
    scheduler = lab(
        racks(2, 2),
        Queue("a", cohort="lab", nominal=8),
        Queue("b", cohort="lab", nominal=24, lending_limit=8),
    )
    for index in range(4):
        scheduler.submit(f"a{index}", GangRequest(1, 8), queue="a")
    assert [job for job, _ in started(scheduler)] == ["a0", "a1"]  # 8 + the 8 "b" lends
    scheduler.submit("b0", GangRequest(2, 8), queue="b")
    assert [job for job, _ in started(scheduler)] == ["b0"]  # its 16 never lent


def test_hierarchical_cohorts_lend_up_and_down_the_tree() -> None:
    cluster = racks(2, 2)
    scheduler = Scheduler(
        cluster,
        queues=[
            Queue("a", cohort="left", nominal=8),
            Queue("b", cohort="right", nominal=8),
        ],
        cohorts=[
            Cohort("root", nominal=16),
            Cohort("left", parent="root", borrowing_limit=8),
            Cohort("right", parent="root"),
        ],
        clock=lambda: 0.0,
    )
    for index in range(5):
        scheduler.submit(f"a{index}", GangRequest(1, 8), queue="a")
    assert [job for job, _ in started(scheduler)] == ["a0", "a1"]  # left borrows 8 at most
    tree = scheduler._tenancy.tree  # type: ignore[union-attr]
    assert tree.available("b") == 16  # 8 own + root's 16 - the 8 "left" borrowed
    scheduler.submit("b0", GangRequest(2, 8), queue="b")
    assert [job for job, _ in started(scheduler)] == ["b0"]


def test_an_unpreemptible_job_never_borrows() -> None:
    scheduler = lab(
        racks(), Queue("a", cohort="lab", nominal=8), Queue("b", cohort="lab", nominal=16)
    )
    scheduler.submit("pinned", GangRequest(1, 8, preemptible=False), queue="a")
    scheduler.submit("pinned-2", GangRequest(1, 8, preemptible=False), queue="a")
    scheduler.submit("loose", GangRequest(1, 8), queue="a")
    assert [job for job, _ in started(scheduler)] == ["pinned", "loose"]
    assert "not preemptible, so never borrows" in scheduler.pending()[0].reason


# ------------------------------------------------------------------ reclaim (Q5-Q7)


def filled(reclaim: str = "any", within: str = "never", borrow: str = "never") -> Scheduler:
    scheduler = lab(
        racks(),
        Queue(
            "vision",
            cohort="lab",
            nominal=16,
            reclaim_within_cohort=reclaim,  # type: ignore[arg-type]
            within_queue=within,  # type: ignore[arg-type]
            borrow_within_cohort=borrow,  # type: ignore[arg-type]
        ),
        Queue("nlp", cohort="lab", nominal=16),
    )
    for index, priority in enumerate((0, 2, 0, 2)):
        scheduler.submit(f"nlp-{index}", GangRequest(1, 8, priority=priority), queue="nlp")
    assert len(scheduler.cycle(0.0).started) == 4
    return scheduler


@pytest.mark.parametrize(
    ("policy", "priority", "victims"),
    [
        ("never", 1, None),
        ("lower_priority", 1, ("nlp-0", "nlp-2")),  # priority 0 < 1, wherever they are
        ("lower_priority", 0, None),  # nothing below priority 0
        ("any", 0, ("nlp-0", "nlp-1")),  # any priority: the first rack
    ],
)
def test_reclaim_within_cohort(policy: str, priority: int, victims: tuple[str, ...] | None) -> None:
    scheduler = filled(reclaim=policy)
    scheduler.submit("v", GangRequest(2, 8, priority=priority), queue="vision")
    got = started(scheduler, 1.0)
    assert got == ([] if victims is None else [("v", victims)])


def test_reclaim_frees_a_whole_rack_for_a_rack_gang() -> None:
    scheduler = filled(reclaim="any")
    scheduler.submit("v", GangRequest(2, 8, required_level="rack"), queue="vision")
    decisions = scheduler.cycle(1.0)
    (start,) = decisions.started
    assert start.allocation.placement.domain == ("r0",)
    assert sorted(start.preempted) == ["nlp-0", "nlp-1"]
    assert sorted(scheduler.pending_ids()) == ["nlp-0", "nlp-1"]  # back in their queue
    assert scheduler._tenancy.reclaimed["nlp"] == 2  # type: ignore[union-attr]


def test_a_borrower_is_never_reclaimed_below_its_nominal() -> None:
    scheduler = filled(reclaim="any")
    scheduler.submit("v0", GangRequest(2, 8), queue="vision")
    scheduler.submit("v1", GangRequest(2, 8), queue="vision")
    assert [job for job, _ in started(scheduler, 1.0)] == ["v0"]  # nlp back at its 16
    assert scheduler.pending_ids() == ["nlp-0", "nlp-1", "v1"]


@pytest.mark.parametrize(
    ("within", "priority", "victims"),
    [
        ("never", 3, None),
        ("lower_priority", 3, ("v-low",)),
        ("lower_priority", 1, None),  # equal priority never
        ("lower_or_newer_equal_priority", 1, ("v-low",)),  # equal and submitted later: no,
    ],
)
def test_within_queue(within: str, priority: int, victims: tuple[str, ...] | None) -> None:
    scheduler = lab(
        racks(1, 1),
        Queue("vision", cohort="lab", nominal=8, within_queue=within),  # type: ignore[arg-type]
    )
    scheduler.submit("v-low", GangRequest(1, 8, priority=1), queue="vision")
    started(scheduler)
    scheduler.submit("v-new", GangRequest(1, 8, priority=priority), queue="vision")
    got = started(scheduler, 1.0)
    if within == "lower_or_newer_equal_priority":
        assert got == []  # "v-low" is older than "v-new": not a victim
        return
    assert got == ([] if victims is None else [("v-new", victims)])


@pytest.mark.parametrize("within", ["lower_priority", "lower_or_newer_equal_priority"])
def test_within_queue_takes_a_newer_equal_priority_job(within: str) -> None:
    scheduler = lab(
        racks(1, 2),
        Queue("vision", cohort="lab", nominal=16, within_queue=within),  # type: ignore[arg-type]
        backfill="any",
    )
    scheduler.submit("x", GangRequest(1, 8, priority=1), queue="vision")
    assert started(scheduler) == [("x", ())]
    scheduler.submit("early", GangRequest(2, 8, priority=1), queue="vision")
    scheduler.submit("late", GangRequest(1, 8, priority=1), queue="vision")
    assert started(scheduler, 1.0) == [("late", ())]  # backfilled past "early"
    scheduler.finish("x", now=1.0)
    expected = [("early", ("late",))] if within != "lower_priority" else []
    assert started(scheduler, 2.0) == expected


@pytest.mark.parametrize(("policy", "victims"), [("never", None), ("lower_priority", ("b0",))])
def test_borrow_within_cohort(policy: str, victims: tuple[str, ...] | None) -> None:
    scheduler = lab(
        racks(1, 2),
        Queue("a", cohort="lab", nominal=0, borrow_within_cohort=policy),  # type: ignore[arg-type]
        Queue("b", cohort="lab", nominal=0),
        Queue("idle", cohort="lab", nominal=16),
    )
    scheduler.submit("b0", GangRequest(2, 8, priority=0), queue="b")
    assert [job for job, _ in started(scheduler)] == ["b0"]
    scheduler.submit("a0", GangRequest(2, 8, priority=5), queue="a")  # must borrow too
    assert started(scheduler, 1.0) == ([] if victims is None else [("a0", victims)])


def test_reclaim_takes_extra_victims_for_the_quota_alone() -> None:
    """Free GPUs are not quota: a cluster larger than the quotas still needs a reclaim."""
    scheduler = lab(
        racks(2, 2),
        Queue("vision", cohort="lab", nominal=8, reclaim_within_cohort="any"),
        Queue("nlp", cohort="lab", nominal=0),
    )
    scheduler.submit("n0", GangRequest(1, 8), queue="nlp")
    assert started(scheduler) == [("n0", ())]
    scheduler.submit("v0", GangRequest(1, 8), queue="vision")
    assert started(scheduler, 1.0) == [("v0", ("n0",))]  # 16 GPUs free, but the quota


def test_brakes_hold_reclaims_too() -> None:
    scheduler = lab(
        racks(),
        Queue("vision", cohort="lab", nominal=16, reclaim_within_cohort="any"),
        Queue("nlp", cohort="lab", nominal=16),
        min_runtime=100.0,
    )
    for index in range(4):
        scheduler.submit(f"nlp-{index}", GangRequest(1, 8), queue="nlp")
    started(scheduler)
    scheduler.submit("v", GangRequest(2, 8), queue="vision")
    assert started(scheduler, 50.0) == []  # too young to be victims
    assert [job for job, _ in started(scheduler, 100.0)] == ["v"]


def test_queue_metrics_count_usage_borrowing_and_reclaims() -> None:
    prometheus_client = pytest.importorskip("prometheus_client")
    registry = prometheus_client.CollectorRegistry()
    scheduler = lab(
        racks(),
        Queue("vision", cohort="lab", nominal=16, reclaim_within_cohort="any"),
        Queue("nlp", cohort="lab", nominal=16),
        metrics=registry,
    )
    for index in range(4):
        scheduler.submit(f"nlp-{index}", GangRequest(1, 8), queue="nlp")
    started(scheduler)

    def value(name: str, queue: str) -> float | None:
        got = registry.get_sample_value(f"gangplace_queue_{name}", {"queue": queue})
        return None if got is None else float(got)

    assert value("usage_gpus", "nlp") == 32 and value("borrowed_gpus", "nlp") == 16
    assert value("lent_gpus", "vision") == 16 and value("nominal_gpus", "vision") == 16
    assert value("weighted_share", "nlp") == pytest.approx(16 / 32)
    assert value("admitted_total", "nlp") == 4
    scheduler.submit("v", GangRequest(2, 8), queue="vision")
    started(scheduler, 1.0)
    assert value("reclaim_victims_total", "nlp") == 2 and value("pending_jobs", "nlp") == 2
    assert value("usage_gpus", "vision") == 16 and value("weighted_share", "nlp") == 0.0


# ------------------------------------------------------------------ order (Q8, Q9)


def test_fair_sharing_starts_the_queue_below_its_share_first() -> None:
    scheduler = lab(
        racks(2, 2),
        Queue("a", cohort="lab", nominal=0),
        Queue("b", cohort="lab", nominal=0),
        Queue("owner", cohort="lab", nominal=32),
        fair_sharing=True,
    )
    for index in range(4):
        scheduler.submit(f"a{index}", GangRequest(1, 8), queue="a")
    for index in range(4):
        scheduler.submit(f"b{index}", GangRequest(1, 8), queue="b")
    assert [job for job, _ in started(scheduler)] == ["a0", "b0", "a1", "b1"]


def test_weight_zero_gets_only_what_nobody_wants() -> None:
    scheduler = lab(
        racks(1, 2),
        Queue("a", cohort="lab", nominal=0, weight=0),
        Queue("b", cohort="lab", nominal=0),
        Queue("owner", cohort="lab", nominal=16),
        fair_sharing=True,
    )
    scheduler.submit("a0", GangRequest(1, 8), queue="a")
    scheduler.submit("a1", GangRequest(1, 8), queue="a")
    scheduler.submit("b0", GangRequest(1, 8), queue="b")
    # "a" borrows at an infinite share: after "b", and only while GPUs are left.
    assert [job for job, _ in started(scheduler)] == ["b0", "a0"]
    assert scheduler.pending_ids() == ["a1"]


def test_a_fifo_queues_stop_outranks_its_refused_size() -> None:
    """Found by the differential test: after a fifo queue's first job is refused for the
    queue's quota, a later job of the same size in another class is stopped behind it (Q9),
    not skipped as refused for the quota (the walk's shortcut for refused sizes)."""
    scheduler = lab(racks(1, 1), Queue("q", cohort="lab", nominal=4, queueing="fifo"))
    scheduler.submit("whole", GangRequest(1, 4), queue="q")
    scheduler.submit("first", GangRequest(1, 1), queue="q")
    scheduler.submit("other-class", GangRequest(1, 1, required_level="rack"), queue="q")
    assert [job for job, _ in started(scheduler)] == ["whole"]
    scheduler.finish("whole")  # the queue has room again: the last walk's reasons show
    reasons = {job.job_id: job.reason for job in scheduler.pending()}
    assert reasons["first"] == "its queue's quota was full in the last cycle"
    fifo = "behind the first blocked job of its queue 'q' (queueing='fifo')"
    assert reasons["other-class"] == fifo


def test_fifo_queues_stop_behind_their_blocked_job() -> None:
    for queueing, expected in (("fifo", ["small-b"]), ("best_effort_fifo", ["small-a", "small-b"])):
        scheduler = lab(
            racks(1, 1),
            Queue("a", cohort="lab", nominal=8, queueing=queueing),  # type: ignore[arg-type]
            Queue("b", cohort="lab", nominal=0),
        )
        scheduler.submit("b-first", GangRequest(1, 4), queue="b")  # borrows 4 of a's 8
        assert [job for job, _ in started(scheduler)] == ["b-first"]
        scheduler.submit("big-a", GangRequest(1, 8), queue="a")  # waits for its quota
        scheduler.submit("small-a", GangRequest(1, 2), queue="a")
        scheduler.submit("small-b", GangRequest(1, 2), queue="b")
        assert [job for job, _ in started(scheduler, 1.0)] == expected
        if queueing == "fifo":
            reasons = {job.job_id: job.reason for job in scheduler.pending()}
            assert reasons["small-a"].startswith("behind the first blocked job of its queue")


# ------------------------------------------------------------------ the arithmetic


@st.composite
def trees(draw: Any) -> tuple[list[Queue], list[Cohort], dict[str, int]]:
    """Random forests of 1-3 cohorts (maybe nested) with 1-4 queues, and usages."""
    cohorts: list[Cohort] = []
    for index in range(draw(st.integers(0, 3))):
        parent = draw(st.sampled_from([None, *(c.name for c in cohorts)]))
        limits = (
            {}
            if parent is None
            else {
                "borrowing_limit": draw(st.none() | st.integers(0, 16)),
                "lending_limit": draw(st.none() | st.integers(0, 16)),
            }
        )
        cohorts.append(
            Cohort(f"c{index}", parent=parent, nominal=draw(st.integers(0, 16)), **limits)
        )
    queues = []
    for index in range(draw(st.integers(1, 4))):
        cohort = draw(st.sampled_from([None, *(c.name for c in cohorts)]))
        nominal = draw(st.integers(0, 16))
        limits = (
            {}
            if cohort is None
            else {
                "borrowing_limit": draw(st.none() | st.integers(0, 16)),
                "lending_limit": draw(st.none() | st.integers(0, nominal)),
            }
        )
        queues.append(
            Queue(
                f"q{index}",
                cohort=cohort,
                nominal=nominal,
                weight=draw(st.sampled_from([0.0, 0.5, 1.0, 2.0])),
                **limits,
            )
        )
    usage = {q.name: draw(st.integers(0, 24)) for q in queues}
    return queues, cohorts, usage


@given(trees(), st.integers(0, 8))
def test_the_quota_tree_matches_the_reference(tree: Any, extra: int) -> None:
    queues, cohorts, usage = tree
    fast, slow = QuotaTree(queues, cohorts), ReferenceQuotas(queues, cohorts)
    for queue, gpus in usage.items():
        fast.add(queue, gpus)
    for name in [*fast.queues, *fast.cohorts]:
        assert fast.nodes[name].subtree == slow.subtree(name)
        assert fast.nodes[name].guaranteed == slow.guaranteed(name)
        assert fast.usage(name) == slow.usage(name, usage)
    for queue in fast.queues:
        assert fast.available(queue) == max(0, slow.available(queue, usage))
        assert fast.reachable(queue) == max(0, slow.available(queue, {}))
        assert fast.share(queue, extra) == slow.share(queue, usage, extra)
    for queue, gpus in usage.items():  # and back to nothing
        fast.add(queue, -gpus)
    assert all(node.usage == 0 for node in fast.nodes.values())


# ------------------------------------------------------------------ the state machine


class QueueMachine(scheduler_machine.SchedulerMachine):
    """The Scheduler's state machine with queues: owner ``"a"`` submits to queue ``"a"``
    (nominal 8, reclaims any borrower), everyone else to ``"rest"`` (nominal 8); both borrow
    from their cohort and the brakes' invariants hold, and after every step each queue's
    usage is its running jobs' GPUs and no queue is past what Q3 lets it reach."""

    QUEUES = (
        Queue("a", cohort="lab", nominal=8, reclaim_within_cohort="any"),
        Queue("rest", cohort="lab", nominal=8, within_queue="lower_priority"),
    )

    @initialize(
        backfill=st.sampled_from(["easy", "conservative"]),
        depth=st.sampled_from([1, 2, 16]),
        fair=st.booleans(),
    )
    def choose_backfill(self, backfill: str, depth: int, fair: bool = False) -> None:
        self.backfill = backfill
        self.scheduler = Scheduler(
            self.cluster,
            clock=lambda: self.now,
            quotas=self.quotas,
            backfill=backfill,  # type: ignore[arg-type]
            reservation_depth=depth,
            queues=list(self.QUEUES),
            cohorts=[Cohort("lab", nominal=8)],
            fair_sharing=fair,
        )
        submit = self.scheduler.submit

        def to_queue(job_id: Any, request: Any, **kwargs: Any) -> None:
            owner = kwargs.get("owner")
            submit(job_id, request, queue="a" if owner == "a" else "rest", **kwargs)

        self.scheduler.submit = to_queue  # type: ignore[method-assign]

    def _check_reservations_hold(self) -> None:
        """A reclaim may take GPUs a reservation counted on (docs/queues.md Q10): not checked."""

    def _check_reasons(self, decisions: Any) -> None:
        """S10 with queues: the blocked head says so, unless its queue's quota (Q4), as it
        stands after the cycle, is what stops it now (as an owner's quota would)."""
        for job in self.scheduler.pending():
            assert job.reason and not job.reason.startswith("not tried yet"), job
            if job.job_id == decisions.head and not job.reason.startswith(("owner ", "queue ")):
                assert job.reason.startswith("the blocked head"), job

    @invariant()
    def queues_hold(self) -> None:
        tenancy = self.scheduler._tenancy
        assert tenancy is not None
        naive = ReferenceQuotas(list(self.QUEUES), [Cohort("lab", nominal=8)])
        used: dict[str, int] = {}
        for job in self.scheduler.running():
            assert job.queue is not None
            used[job.queue] = used.get(job.queue, 0) + job.allocation.placement.total_gpus
        for name in ("a", "rest", "lab"):
            assert tenancy.tree.usage(name) == naive.usage(name, used), name
        assert naive.usage("lab", used) <= naive.subtree("lab")
        for waiting in self.scheduler.pending():
            assert waiting.queue in ("a", "rest")


TestQueueMachine = QueueMachine.TestCase
TestQueueMachine.settings = settings(max_examples=200, stateful_step_count=40)
