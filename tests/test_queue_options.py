"""docs/queues.md (issue 46, item 5): Kueue's options in gangplace's queues.

``borrow_within_cohort_max_priority`` (Kueue's maxPriorityThreshold), the fair-sharing
preemption strategies, ``submit(created=...)`` (Kueue orders by creation time) and weight 0
(Kueue compares unweighted shares when both weights are 0). Engine and reference agree on
each (the queues differential test draws all of them).
"""

from __future__ import annotations

from typing import Any

import pytest

from gangplace import Cluster, Cohort, GangRequest, InvalidRequest, Queue, Scheduler
from gangplace.reference.scheduler import ReferenceScheduler


def _cluster(nodes: int = 4) -> Cluster:
    cluster = Cluster(("rack",), clock=lambda: 0.0)
    cluster._use_sequential_ids(1)  # type: ignore[attr-defined]
    for index in range(nodes):
        cluster.add_node(f"n{index}", gpus=8, topology={"rack": "r0"})
    return cluster


def _both(queues: list[Queue], **kwargs: Any) -> list[Any]:
    cohorts = [Cohort("lab")]
    fast = Scheduler(_cluster(), queues=queues, cohorts=cohorts, clock=lambda: 0.0, **kwargs)
    slow = ReferenceScheduler(_cluster(), queues=queues, cohorts=tuple(cohorts), **kwargs)
    return [fast, slow]


def _submit(scheduler: Any, job: str, request: GangRequest, queue: str, **extra: Any) -> None:
    at = {"now": 0.0} if isinstance(scheduler, ReferenceScheduler) else {}
    scheduler.submit(job, request, queue=queue, **at, **extra)


def test_a_borrowing_job_preempts_only_up_to_the_threshold() -> None:
    """a must borrow; b's jobs of priority 1 and 2 borrow from c; with the threshold at 1,
    a's priority-5 job may take only a priority-1 job."""
    queues = [
        Queue("a", cohort="lab", nominal=0, borrow_within_cohort="lower_priority",
              borrow_within_cohort_max_priority=1),
        Queue("b", cohort="lab", nominal=8),
        Queue("c", cohort="lab", nominal=24),
    ]  # fmt: skip
    for scheduler in _both(queues, backfill="any"):
        for index, priority in enumerate((2, 1, 2, 1)):
            _submit(scheduler, f"b{index}", GangRequest(1, 8, priority=priority), "b")
        assert len(scheduler.cycle(0.0).started) == 4
        _submit(scheduler, "a0", GangRequest(1, 8, priority=5), "a")
        started = scheduler.cycle(0.0).started
        assert [s.job_id for s in started] == ["a0"]
        assert started[0].preempted in (("b1",), ("b3",))
        _submit(scheduler, "a1", GangRequest(2, 8, priority=5), "a")
        assert scheduler.cycle(0.0).started == ()  # one priority-1 job left: not enough


def test_fair_sharing_strategies_decide_who_gives() -> None:
    """b borrows 10 of 40 GPUs (share 0.25); a's next job would take a to 0.2. b's share
    before giving a job is above that ("less_than_initial_share" lets it give), its share
    after giving one (0.05) is not ("less_than_or_equal_to_final_share" does not)."""
    queues = [
        Queue("a", cohort="lab", nominal=8, reclaim_within_cohort="any"),
        Queue("b", cohort="lab", nominal=8),
        Queue("c", cohort="lab", nominal=24),
    ]
    answers: dict[tuple[str, ...], list[int]] = {}
    for strategies in (("less_than_initial_share",), ("less_than_or_equal_to_final_share",)):
        for scheduler in _both(queues, fair_sharing=True, fair_sharing_strategies=strategies,
                               backfill="any"):  # fmt: skip
            scheduler.cluster.add_node("n4", gpus=8, topology={"rack": "r0"})
            _submit(scheduler, "a0", GangRequest(1, 8), "a")
            for index, size in enumerate((8, 8, 2)):
                _submit(scheduler, f"b{index}", GangRequest(1, size), "b")
            _submit(scheduler, "c0", GangRequest(1, 8), "c")
            _submit(scheduler, "c1", GangRequest(1, 6), "c")
            assert len(scheduler.cycle(0.0).started) == 6
            _submit(scheduler, "a1", GangRequest(1, 8), "a")
            started = scheduler.cycle(0.0).started
            answers.setdefault(strategies, []).append(len(started))
    assert answers[("less_than_initial_share",)] == [1, 1]
    assert answers[("less_than_or_equal_to_final_share",)] == [0, 0]


def test_created_orders_the_queue() -> None:
    for scheduler in _both([Queue("a", nominal=8)], backfill="none"):
        _submit(scheduler, "late", GangRequest(1, 8), "a", created=100.0)
        _submit(scheduler, "early", GangRequest(1, 8), "a", created=-50.0)
        assert [s.job_id for s in scheduler.cycle(0.0).started] == ["early"]


def test_two_queues_of_weight_0_compare_unweighted_shares() -> None:
    """Both borrow at weight 0 (share inf): the one borrowing less is walked first."""
    queues = [
        Queue("a", cohort="lab", nominal=0, weight=0.0),
        Queue("b", cohort="lab", nominal=0, weight=0.0),
        Queue("c", cohort="lab", nominal=32),
    ]
    for scheduler in _both(queues, fair_sharing=True, backfill="any"):
        _submit(scheduler, "b0", GangRequest(2, 8), "b")  # b borrows 16
        _submit(scheduler, "a0", GangRequest(1, 8), "a")  # a borrows 8
        scheduler.cycle(0.0)
        _submit(scheduler, "b1", GangRequest(1, 8), "b")
        _submit(scheduler, "a1", GangRequest(1, 8), "a")  # one 8-GPU slot left: a's turn
        assert [s.job_id for s in scheduler.cycle(0.0).started] == ["a1"]


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"borrow_within_cohort_max_priority": 1}, InvalidRequest),  # without lower_priority
        ({"borrow_within_cohort": "lower_priority", "borrow_within_cohort_max_priority": 2**31},
         InvalidRequest),
        ({"borrow_within_cohort": "lower_priority", "borrow_within_cohort_max_priority": True},
         TypeError),
    ],
)  # fmt: skip
def test_bad_thresholds(fields: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        Queue("a", cohort="lab", **fields)


@pytest.mark.parametrize(
    ("strategies", "error"),
    [((), InvalidRequest), (("fastest",), InvalidRequest), ("less_than_initial_share", TypeError)],
)
def test_bad_strategies(strategies: Any, error: type) -> None:
    with pytest.raises(error):
        Scheduler(_cluster(), queues=[Queue("a")], fair_sharing_strategies=strategies)


@pytest.mark.parametrize("created", [float("nan"), float("inf"), "yesterday", True])
def test_bad_creation_times_queue_nothing(created: Any) -> None:
    scheduler = Scheduler(_cluster(), queues=[Queue("a", nominal=8)], clock=lambda: 0.0)
    with pytest.raises(InvalidRequest):
        scheduler.submit("j", GangRequest(1, 8), queue="a", created=created)
    assert scheduler.pending_ids() == [] and scheduler.summary().pending == 0
