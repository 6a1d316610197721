"""docs/queues.md Q11 (issue 46, item 4): queues and cohorts changed while jobs run."""

from __future__ import annotations

from typing import Any

import pytest

from gangplace import Cluster, Cohort, GangRequest, InvalidRequest, Queue, Scheduler
from gangplace.reference.scheduler import ReferenceScheduler


def _cluster() -> Cluster:
    cluster = Cluster(("rack",), clock=lambda: 0.0)
    for index in range(4):
        cluster.add_node(f"n{index}", gpus=8, topology={"rack": f"r{index // 2}"})
    return cluster


def _teams() -> Scheduler:
    return Scheduler(
        _cluster(),
        queues=[Queue("a", cohort="lab", nominal=16), Queue("b", cohort="lab", nominal=16)],
        cohorts=[Cohort("lab")],
        clock=lambda: 0.0,
    )


def test_a_quota_lowered_below_usage_evicts_nothing_and_admits_nothing_until_it_fits() -> None:
    teams = _teams()
    for index in range(2):
        teams.submit(f"a{index}", GangRequest(1, 8), queue="a")
    assert len(teams.cycle(0.0).started) == 2
    teams.update_queue(Queue("a", cohort="lab", nominal=4))  # a uses 16
    teams.update_queue(Queue("b", cohort="lab", nominal=4))  # nothing to lend a
    assert len(teams.running()) == 2  # nothing evicted
    teams.submit("a2", GangRequest(1, 4), queue="a")
    assert teams.cycle(0.0).started == ()
    assert teams.pending()[0].reason == (
        "queue 'a' lets it take 0 GPUs now, it needs 4 (nominal 4, in use 16)"
    )
    teams.finish("a0")
    assert teams.cycle(0.0).started == ()  # 8 in use: still above 4
    teams.finish("a1")
    assert [s.job_id for s in teams.cycle(0.0).started] == ["a2"]


def test_queues_and_cohorts_come_and_go() -> None:
    teams = _teams()
    teams.add_cohort(Cohort("vision", parent="lab"))
    teams.add_queue(Queue("c", cohort="vision", nominal=8))
    teams.submit("c0", GangRequest(1, 8), queue="c")
    assert [s.job_id for s in teams.cycle(0.0).started] == ["c0"]
    with pytest.raises(InvalidRequest, match="queue 'c' has jobs"):
        teams.remove_queue("c")
    with pytest.raises(InvalidRequest, match="unknown cohort"):
        teams.remove_cohort("ghost")
    teams.finish("c0")
    with pytest.raises(InvalidRequest, match="unknown cohort 'vision'"):  # c still names it
        teams.remove_cohort("vision")
    teams.remove_queue("c")
    teams.remove_cohort("vision")
    with pytest.raises(InvalidRequest, match="unknown queue 'c'"):
        teams.submit("c1", GangRequest(1, 8), queue="c")


BAD = [
    ("update_queue", Queue("ghost", nominal=1), InvalidRequest, "unknown queue 'ghost'"),
    ("update_cohort", Cohort("ghost"), InvalidRequest, "unknown cohort 'ghost'"),
    ("add_queue", Queue("a", nominal=1), InvalidRequest, "used twice"),
    ("add_queue", Queue("d", cohort="nowhere"), InvalidRequest, "unknown cohort 'nowhere'"),
    ("update_cohort", Cohort("lab", parent="lab"), InvalidRequest, "cycle"),
    ("remove_queue", "ghost", InvalidRequest, "unknown queue"),
    ("update_queue", "a", TypeError, "expected a Queue"),
]


@pytest.mark.parametrize(("call", "argument", "error", "text"), BAD, ids=[b[0] + b[3] for b in BAD])
def test_bad_changes_are_typed_errors_that_change_nothing(
    call: str, argument: object, error: type, text: str
) -> None:
    teams = _teams()
    teams.submit("a0", GangRequest(1, 8), queue="a")
    teams.cycle(0.0)
    tree = teams._tenancy.tree  # type: ignore[union-attr]
    before = (dict(tree.queues), dict(tree.cohorts), tree.usage("a"))
    with pytest.raises(error, match=text):
        getattr(teams, call)(argument)
    tree = teams._tenancy.tree  # type: ignore[union-attr]
    assert (dict(tree.queues), dict(tree.cohorts), tree.usage("a")) == before


def test_changes_need_queues_and_agree_with_the_reference() -> None:
    plain = Scheduler(_cluster(), clock=lambda: 0.0)
    with pytest.raises(InvalidRequest, match="no queues"):
        plain.add_queue(Queue("a"))
    slow = ReferenceScheduler(
        _cluster(),
        queues=[Queue("a", cohort="lab", nominal=16), Queue("b", cohort="lab", nominal=16)],
        cohorts=(Cohort("lab"),),
    )
    fast = _teams()
    for scheduler in (fast, slow):
        at: dict[str, Any] = {} if scheduler is fast else {"now": 0.0}
        run: Any = scheduler
        run.submit("a0", GangRequest(2, 8), queue="a", **at)
        run.cycle(0.0)
        run.update_queue(Queue("a", cohort="lab", nominal=0))
        run.submit("b0", GangRequest(2, 8), queue="b", **at)
    # a keeps its 16 GPUs, now all borrowed from b, which cannot reclaim them (its policy):
    # the cohort has nothing left to lend, so b0 waits, though 16 GPUs are free.
    assert fast.cycle(0.0).started == slow.cycle(0.0).started == ()
    assert fast.pending()[0].reason == slow.reasons()["b0"]


def test_the_metrics_follow_the_queues() -> None:
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    teams = Scheduler(
        _cluster(),
        queues=[Queue("a", cohort="lab", nominal=16), Queue("b", cohort="lab", nominal=16)],
        cohorts=[Cohort("lab")],
        clock=lambda: 0.0,
        metrics=registry,
    )
    teams.cycle(0.0)
    teams.update_queue(Queue("a", cohort="lab", nominal=4))
    teams.remove_queue("b")
    teams.cycle(0.0)
    nominal = "gangplace_queue_nominal_gpus"
    assert registry.get_sample_value(nominal, {"queue": "a"}) == 4
    assert registry.get_sample_value(nominal, {"queue": "b"}) is None  # gone with its queue
