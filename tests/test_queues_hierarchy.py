"""docs/queues.md Q6 and Q8 (issue 46, item 3): hierarchical cohorts as Kueue's KEP-79 has
them: a queue reclaims quota its cohort owns from borrowers outside that cohort, a queue
borrowing within its cohort's own quota is safe from reclaims from outside, and cohort
weights count in fair sharing (Kueue's tournament: queues compare at the children of their
lowest common cohort). Engine and reference agree on each."""

from __future__ import annotations

from typing import Any

from gangplace import Cluster, Cohort, GangRequest, Queue, Scheduler
from gangplace.reference.scheduler import ReferenceScheduler


def _cluster(nodes: int) -> Cluster:
    cluster = Cluster(("rack",), clock=lambda: 0.0)
    cluster._use_sequential_ids(1)  # type: ignore[attr-defined]
    for index in range(nodes):
        cluster.add_node(f"n{index}", gpus=8, topology={"rack": "r0"})
    return cluster


def _both(nodes: int, queues: list[Queue], cohorts: list[Cohort], **kwargs: Any) -> list[Any]:
    fast = Scheduler(
        _cluster(nodes), queues=queues, cohorts=cohorts, clock=lambda: 0.0, backfill="any",
        **kwargs,
    )  # fmt: skip
    slow = ReferenceScheduler(
        _cluster(nodes), queues=queues, cohorts=tuple(cohorts), backfill="any", **kwargs
    )
    return [fast, slow]


def _submit(scheduler: Any, job: str, request: GangRequest, queue: str) -> None:
    at = {"now": 0.0} if isinstance(scheduler, ReferenceScheduler) else {}
    scheduler.submit(job, request, queue=queue, **at)


def test_a_queue_reclaims_what_its_cohort_owns_from_outside() -> None:
    """vision owns 16 GPUs as a cohort; its queue v has no nominal of its own. nlp borrows
    vision's 16; v's job fits vision's quota, so it takes it back."""
    cohorts = [Cohort("org"), Cohort("vision", parent="org", nominal=16)]
    queues = [
        Queue("v", cohort="vision", nominal=0, reclaim_within_cohort="any"),
        Queue("nlp", cohort="org", nominal=0),
    ]
    for scheduler in _both(2, queues, cohorts):
        for index in range(2):
            _submit(scheduler, f"nlp{index}", GangRequest(1, 8), "nlp")
        assert len(scheduler.cycle(0.0).started) == 2
        _submit(scheduler, "v0", GangRequest(1, 8), "v")
        (started,) = scheduler.cycle(0.0).started
        assert started.job_id == "v0" and len(started.preempted) == 1


def test_a_queue_borrowing_its_cohorts_own_quota_is_safe_from_outside() -> None:
    """v borrows 16 within vision's own quota; nlp (16 of its own) may not take it back from
    v: nothing of v is borrowed from nlp's side."""
    cohorts = [Cohort("org"), Cohort("vision", parent="org", nominal=16)]
    queues = [
        Queue("v", cohort="vision", nominal=0),
        Queue("nlp", cohort="org", nominal=16, reclaim_within_cohort="any"),
    ]
    for scheduler in _both(2, queues, cohorts):
        for index in range(2):
            _submit(scheduler, f"v{index}", GangRequest(1, 8), "v")
        assert len(scheduler.cycle(0.0).started) == 2
        _submit(scheduler, "nlp0", GangRequest(1, 8), "nlp")
        assert scheduler.cycle(0.0).started == ()


def test_cohort_weights_count_in_fair_sharing() -> None:
    """Two cohorts borrow alike; heavy (weight 2) has half light's share, so its next job
    goes first, though light's was queued first."""
    cohorts = [
        Cohort("org", nominal=40),
        Cohort("heavy", parent="org", weight=2.0),
        Cohort("light", parent="org", weight=1.0),
    ]
    queues = [Queue("h", cohort="heavy"), Queue("l", cohort="light")]
    for scheduler in _both(5, queues, cohorts, fair_sharing=True):
        _submit(scheduler, "l0", GangRequest(2, 8), "l")
        _submit(scheduler, "h0", GangRequest(2, 8), "h")
        assert len(scheduler.cycle(0.0).started) == 2
        _submit(scheduler, "l1", GangRequest(1, 8), "l")
        _submit(scheduler, "h1", GangRequest(1, 8), "h")
        assert [s.job_id for s in scheduler.cycle(0.0).started] == ["h1"]
