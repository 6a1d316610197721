"""docs/scheduler.md rule S10: why each pending job waits, from the last cycle."""

from __future__ import annotations

from typing import Any

import pytest

from gangplace import Cluster, GangRequest, Scheduler, UnknownJob


def _cluster() -> Cluster:
    cluster = Cluster(("rack",), clock=lambda: 0.0)
    for rack in ("r0", "r1"):
        for n in range(2):
            cluster.add_node(f"{rack}-n{n}", gpus=8, topology={"rack": rack})
    return cluster


def _reasons(scheduler: Scheduler) -> dict[str, str]:
    return {job.job_id: job.reason for job in scheduler.pending()}


@pytest.mark.parametrize(
    ("backfill", "behind"),
    [
        ("none", "behind the blocked head 'big' (no backfill)"),
        ("easy", "does not fit now (a job like it was tried behind the blocked head)"),
        # big and twin hold the reservations of all 4 nodes from t=100: long's begins when
        # twin's job is predicted to end (docs/scheduler.md S5)
        ("conservative", "does not fit now; its GPUs are reserved from 101 s"),
        ("any", "does not fit now (a job like it was tried behind the blocked head)"),
    ],
)
def test_each_pending_job_says_why(backfill: Any, behind: str) -> None:
    scheduler = Scheduler(_cluster(), backfill=backfill, clock=lambda: 0.0, quotas={"q": 8})
    scheduler.submit("q-first", GangRequest(1, 8), owner="q", walltime=100)
    scheduler.submit("running", GangRequest(2, 8), walltime=100)
    scheduler.submit("big", GangRequest(2, 8), walltime=100)
    scheduler.submit("twin", GangRequest(2, 8), walltime=1)  # the head's class
    scheduler.submit("long", GangRequest(4, 4), walltime=10_000)
    scheduler.submit("open-ended", GangRequest(4, 4))
    scheduler.submit("capped", GangRequest(1, 8), owner="q", walltime=1)
    assert _reasons(scheduler)["big"] == "not tried yet: queued after the last cycle"
    scheduler.cycle()
    reasons = _reasons(scheduler)
    assert reasons["big"].startswith("the blocked head")
    assert reasons["long"].startswith(behind)
    if backfill == "conservative":  # every blocked job (up to 16) gets its reservation
        assert reasons["twin"] == "does not fit now; its GPUs are reserved from 100 s"
        # no walltime: it waits for big's predicted end on the other rack
        assert reasons["open-ended"] == "does not fit now; its GPUs are reserved from 200 s"
    else:
        assert reasons["twin"] == "does not fit now, like the blocked head 'big'"
    if backfill == "easy":  # 16 GPUs, and fewer are free: neither is tried
        assert reasons["open-ended"] == reasons["long"]
    assert reasons["capped"] == "owner 'q' has 0 of its 8 GPUs of quota left"
    scheduler.submit("late", GangRequest(1, 8), walltime=1)
    assert _reasons(scheduler)["late"] == "not tried yet: queued after the last cycle"


def test_a_blind_reservation_names_the_untimed_jobs_in_its_way() -> None:
    """docs/scheduler.md S5: a promise that cannot be made says which job blocks it."""
    cluster = _cluster()
    outside = cluster.commit(cluster.reserve(GangRequest(1, 8)))  # not the scheduler's
    assert outside.placement.nodes == ("r0-n0",)
    scheduler = Scheduler(cluster, backfill="conservative", clock=lambda: 0.0)
    scheduler.submit("forever", GangRequest(1, 8))  # runs on r0-n1, no walltime
    scheduler.submit("a", GangRequest(2, 8), walltime=100)  # runs on rack r1
    scheduler.submit("open-ended", GangRequest(1, 8))  # reserved from 100 s, for ever
    scheduler.submit("whole", GangRequest(2, 8), walltime=5)
    scheduler.submit("all", GangRequest(4, 8), walltime=5)
    scheduler.cycle()
    reasons = _reasons(scheduler)
    shadows = {job.job_id: job.shadow for job in scheduler.pending()}
    opened = shadows["open-ended"]
    assert opened is not None and opened.time == 100.0 and opened.placement is not None
    whole = shadows["whole"]  # rack r1 once a ends, but open-ended keeps one node for ever
    assert whole is not None and whole.placement is None and whole.time == float("inf")
    assert whole.blocked_by == ("open-ended",)
    assert reasons["whole"] == (
        "does not fit now, nor once every running job with a walltime has ended and every "
        "earlier reservation with one is over: 'open-ended' (no walltime) hold or reserve "
        "GPUs where it would go"
    )
    every = shadows["all"]  # the hold that is not the scheduler's is in the way
    assert every is not None and every.placement is None and every.blocked_by == ()
    assert reasons["all"] == (
        "does not fit now, nor once every job of this scheduler has ended: the GPUs it "
        "needs are held by other work, unhealthy, or too few"
    )


def test_explain_asks_the_engine_about_one_pending_job() -> None:
    scheduler = Scheduler(_cluster(), clock=lambda: 0.0)
    scheduler.submit("running", GangRequest(3, 8), walltime=100)
    scheduler.submit("big", GangRequest(2, 8), walltime=100)
    scheduler.cycle()
    assert "does not fit" in scheduler.explain("big").summary
    with pytest.raises(UnknownJob):
        scheduler.explain("running")  # running, not pending
    with pytest.raises(UnknownJob):
        scheduler.explain("nobody")


def test_a_job_that_fits_only_on_reserved_gpus_says_so() -> None:
    """docs/scheduler.md S5: "long-2" would fit the free node, but it is the head's from t=100."""
    cluster = Cluster(("rack",), clock=lambda: 0.0)
    for n in range(4):
        cluster.add_node(f"b{n}", gpus=8, topology={"rack": "r0"})
    scheduler = Scheduler(cluster, clock=lambda: 0.0)
    scheduler.submit("a", GangRequest(2, 8), walltime=100)
    scheduler.submit("head", GangRequest(3, 8), walltime=100)
    scheduler.submit("long-1", GangRequest(1, 8), walltime=1000)  # starts beside it
    scheduler.submit("long-2", GangRequest(1, 8), walltime=1000)
    scheduler.submit("short", GangRequest(1, 8), walltime=100)  # ends in time: takes b2
    assert [s.job_id for s in scheduler.cycle().started] == ["a", "long-1", "short"]
    reasons = _reasons(scheduler)
    assert reasons["long-2"] == (
        "behind the blocked head 'head': it does not fit without the GPUs reserved for "
        "earlier jobs, and would still run when their reservations begin"
    )
