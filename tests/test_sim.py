"""The simulator: hand-computed schedules per policy, deadlocks, metrics, explain, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from gangplace import Cluster, GangRequest, Unschedulable
from gangplace.sim.clusters import parse_cluster
from gangplace.sim.errors import SimError
from gangplace.sim.metrics import summarize
from gangplace.sim.replay import Replay, RunResult
from gangplace.sim.settings import SimSettings
from gangplace.sim.traces import Job

# 1 spine, racks s0-r0 and s0-r1, 2 nodes each, 4 GPUs per node (16 GPUs).
SMALL = "tree:1,2,2,4"


def job(name: str, arrival: float, duration: float, pods: int, size: int) -> Job:
    return Job(name, arrival, duration, pods * size, pods, size)


# J0 leaves r0-n0 free at t=10, J1 holds 3 GPUs of r0-n1; at t=20 a 1-GPU job, a 4-GPU job
# and a 2x4 gang arrive. best-fit puts J2 on the fullest node (r0-n1) and J3 on r0-n0, so the
# gang finds rack r1 whole; first-fit puts J2 on r0-n0, J3 on r1-n0, and the gang waits for
# J3 to end at t=50 although 8 GPUs are free (fragmentation).
FIVE = [
    job("J0", 0, 10, 1, 4),
    job("J1", 0, 100, 1, 3),
    job("J2", 20, 100, 1, 1),
    job("J3", 20, 30, 1, 4),
    job("J4", 20, 40, 2, 4),
]
EXPECTED_STARTS = {
    "best-fit": [0, 0, 20, 20, 20],
    "first-fit": [0, 0, 20, 20, 50],
    "pod-by-pod": [0, 0, 20, 20, 20],  # each pod on its best-fit node: as best-fit here
    "ladder": [0, 0, 20, 20, 20],  # J4 fits a rack at once, so the ladder never relaxes
}


def starts(policy: str, jobs: list[Job], cluster: str = SMALL, **settings: Any) -> list[float]:
    result = Replay(jobs, parse_cluster(cluster), policy, SimSettings(**settings)).run()
    return [record.start_s if record.start_s is not None else -1 for record in result.records]


def run(policy: str, jobs: list[Job], cluster: str = SMALL, **settings: Any) -> RunResult:
    return Replay(jobs, parse_cluster(cluster), policy, SimSettings(**settings)).run()


@pytest.mark.parametrize("policy", sorted(EXPECTED_STARTS))
def test_five_jobs_start_when_computed_by_hand(policy: str) -> None:
    assert starts(policy, FIVE) == EXPECTED_STARTS[policy]


def test_five_jobs_blind() -> None:
    """Blind, seed 0: nodes in the order r1-n0, r0-n0, r0-n1, r1-n1 (random.Random(0)
    shuffles [0, 1, 2, 3] into [2, 0, 1, 3]), first-fit, no racks. J0 takes r1-n0 and J1
    r0-n0; at t=20 J2 takes r1-n0 again, J3 r0-n1, and the gang finds one 4-GPU node only
    (r1-n1) until J3 ends at t=50; it then spans both racks."""
    spec = parse_cluster(SMALL)
    result = run("blind", FIVE)
    assert [r.start_s for r in result.records] == [0, 0, 20, 20, 50]
    assert [r.nodes for r in result.records] == [
        ("s0-r1-n0",),
        ("s0-r0-n0",),
        ("s0-r1-n0",),
        ("s0-r0-n1",),
        ("s0-r0-n1", "s0-r1-n1"),
    ]
    assert summarize(result, spec, (0.0, 20.0))["locality"]["spine"] == 1.0


def test_five_jobs_metrics_over_the_common_window() -> None:
    spec = parse_cluster(SMALL)
    best = summarize(run("best-fit", FIVE), spec, (0.0, 20.0))
    first = summarize(run("first-fit", FIVE), spec, (0.0, 20.0))
    assert best["end_s"] == first["end_s"] == 120
    # Inside the window [0, 20]: J0 (4 GPUs, 0-10) and J1 (3 GPUs, 0-20).
    assert best["utilization"] == first["utilization"] == pytest.approx((40 + 60) / (16 * 20))
    assert best["drain_h"] == pytest.approx(100 / 3600)
    assert best["wait_s"]["mean"] == 0 and first["wait_s"]["mean"] == pytest.approx(30 / 5)
    assert best["locality"] == {"multi_pod_gangs": 1, "rack": 1.0, "spine": 0.0, "wider": 0.0}
    assert best["jobs_finished"] == best["jobs_total"] == 5
    assert best["never_started"] == 0 and best["jobs_rejected"] == 0
    assert best["deadlock_h"] == 0 and best["idle_held_gpu_hours"] == 0


def test_ladder_waits_for_a_rack_until_t1() -> None:
    # Two racks of one 4-GPU node; J0 and J1 leave one GPU per rack; a 2x1 gang then fits
    # only across racks: best-fit places it at once, the ladder after T1 = 300 s.
    jobs = [job("J0", 0, 1000, 1, 3), job("J1", 0, 1000, 1, 3), job("G", 0, 10, 2, 1)]
    assert starts("best-fit", jobs, "tree:1,2,1,4") == [0, 0, 0]
    assert starts("ladder", jobs, "tree:1,2,1,4", ladder_s=(300.0, 1800.0)) == [0, 0, 300]


def test_pod_by_pod_interleaved_deadlocks_and_the_run_stops_as_a_standoff() -> None:
    """The lesson's example: two 8-GPU jobs, 8 free GPUs, pods handed out in turn."""
    jobs = [job("A", 0, 100, 2, 4), job("B", 0, 100, 2, 4), job("C", 10, 5, 1, 1)]
    spec = parse_cluster("tree:1,1,2,4")
    stuck = run("pod-by-pod", jobs, "tree:1,1,2,4", pod_timeout_s=None, pod_order="interleaved")
    assert [r.start_s for r in stuck.records] == [None, None, None]
    assert stuck.standoff is not None and stuck.standoff.held_gpus == 8
    figures = summarize(stuck, spec, (0.0, 10.0))
    assert figures["never_started"] == 3
    # The run stops when the standoff window (24 h) closes; the waits are censored there.
    assert stuck.end_s == 24 * 3600 and figures["standoff"]["nothing_started_for_h"] == 24
    assert figures["wait_s"]["p50"] == 24 * 3600 and figures["wait_s"]["censored"] == 3
    assert figures["wait_s"]["mean"] == pytest.approx((2 * 86400 + 86390) / 3)
    assert figures["idle_held_share"] == 1.0 and figures["deadlock_h"] == 24
    # kube-scheduler's order binds a job's pods together: A runs, then B.
    assert starts("pod-by-pod", jobs, "tree:1,1,2,4", pod_timeout_s=None) == [0, 100, 200]
    assert starts("best-fit", jobs, "tree:1,1,2,4") == [0, 100, 200]


def test_pod_by_pod_timeouts_break_the_deadlock_and_count_idle_gpus() -> None:
    jobs = [job("A", 0, 100, 2, 4), job("B", 0, 100, 2, 4)]
    result = run("pod-by-pod", jobs, "tree:1,1,2,4", pod_timeout_s=60, pod_order="interleaved")
    assert all(record.end_s is not None for record in result.records)
    assert result.standoff is None and result.deadlock_s >= 60
    figures = summarize(result, parse_cluster("tree:1,1,2,4"), (0.0, 0.0))
    # Each partial gang held one 4-GPU pod idle for the 60 s until the timeout.
    assert figures["idle_held_gpu_hours"] * 3600 >= 2 * 4 * 60


def test_interleaved_pod_by_pod_with_timeouts_ends_as_a_livelock() -> None:
    """Issue 49, item 1: the bundled default trace on its 32-GPU tree, pod-by-pod in
    interleaved order with the default 600 s timeout, workload seed 1: partial gangs of
    4-GPU pods hold all 32 GPUs, every timeout releases one and the retries rebuild others,
    and nothing runs. The run used to go on past 24,000 simulated hours; it now stops as a
    livelock once the standoff window passed without a start, with timeouts still pending."""
    from gangplace.cli import DEFAULT_CLUSTER, DEFAULT_TRACE
    from gangplace.sim.run import simulate

    settings = SimSettings(pod_order="interleaved")
    result = simulate(
        DEFAULT_TRACE, cluster=DEFAULT_CLUSTER, policies=("pod-by-pod",), seeds=(1,),
        settings=settings,
    ).results["pod-by-pod"]  # fmt: skip
    assert result.standoff is not None and result.standoff.kind == "livelock"
    assert result.standoff.held_gpus == 32 and result.cut_at_s is None
    assert result.standoff.at_s - result.standoff.since_s >= settings.standoff_s
    # Nothing ran for the whole window before the stop: the deadlock hours say so (they
    # read 0 when the stop came the moment the last running job ended).
    assert result.deadlock_s == pytest.approx(settings.standoff_s)
    # It ends about 720 simulated hours in (the last arrival is at 430 h), not 24,000 h on.
    assert result.end_s < 1000 * 3600


def test_no_standoff_while_retries_may_still_start_a_job() -> None:
    """Issue 49: with seed 0 the interleaved run used to be stopped as a standoff the moment
    its last running job ended (24 h after the last start), although partial gangs' retries
    were still to come; the window now counts time with nothing running, and every job of
    that run finishes."""
    from gangplace.cli import DEFAULT_CLUSTER, DEFAULT_TRACE
    from gangplace.sim.run import simulate

    result = simulate(
        DEFAULT_TRACE, cluster=DEFAULT_CLUSTER, policies=("pod-by-pod",), seeds=(0,),
        settings=SimSettings(pod_order="interleaved"),
    ).results["pod-by-pod"]  # fmt: skip
    assert result.standoff is None and result.cut_at_s is None
    assert all(record.end_s is not None for record in result.records if record.rejected is None)


def test_a_run_never_goes_past_its_bound() -> None:
    """Issue 49, item 1: every run has a bound, the last arrival + 2 x all jobs'
    GPU-seconds / healthy GPUs + the longest job + the standoff window; a run that reaches
    it is cut there and its unfinished jobs are censored. Here the bound is set below the
    standoff window, so the stuck run (two partial gangs, no timeout) meets the bound first."""
    jobs = [job("A", 0, 100, 2, 4), job("B", 0, 100, 2, 4), job("C", 50, 10, 1, 1)]
    spec = parse_cluster("tree:1,1,2,4")
    settings = SimSettings(pod_timeout_s=None, pod_order="interleaved", standoff_s=3600)
    replay = Replay(jobs, spec, "pod-by-pod", settings)
    assert replay.bound_s == pytest.approx(50 + 2 * (8 * 100 + 8 * 100 + 10) / 8 + 100 + 3600)
    replay.bound_s = 300.0  # as if the window were longer than the bound
    result = replay.run()
    assert result.cut_at_s == 300.0 and result.end_s == 300.0 and result.standoff is None
    figures = summarize(result, spec, (0.0, 50.0))
    assert figures["cut_at_h"] == pytest.approx(300 / 3600)
    assert figures["jobs_finished"] == 0 and figures["wait_s"]["censored"] == 3
    assert figures["wait_s"]["p50"] == pytest.approx(300.0)  # A and B waited to the cut


def test_no_standoff_while_a_job_runs() -> None:
    # A and B each hold one pod while X runs for 1e6 s: nothing starts for far longer than the
    # window (1 h), but X's end frees a node, so the run goes on (the audit's case: pod-by-pod
    # was stopped while jobs ran). When X ends, A gets its second pod, then B.
    jobs = [job("A", 0, 100, 2, 4), job("B", 0, 100, 2, 4), job("X", 0, 1e6, 1, 4)]
    result = run(
        "pod-by-pod", jobs, "tree:1,1,3,4", pod_timeout_s=None, pod_order="interleaved",
        standoff_s=3600,
    )  # fmt: skip
    assert result.standoff is None and result.queued_at_end == 0
    assert [r.end_s is not None for r in result.records] == [True, True, True]
    assert result.end_s > 1e6
    assert result.deadlock_s == 0  # X was running the whole time: never a deadlock


def test_no_standoff_while_a_job_has_yet_to_arrive() -> None:
    # A and B deadlock at t=0 with nothing running; a 1-GPU job arriving after 20 h cannot
    # start either, nor can one arriving after 60 h: the run takes every arrival (issue 49:
    # it used to stop at 24 h and leave the 60 h job out of every column), then stops.
    jobs = [
        job("A", 0, 100, 2, 4), job("B", 0, 100, 2, 4),
        job("C", 20 * 3600, 5, 1, 1), job("late", 60 * 3600, 5, 1, 1),
    ]  # fmt: skip
    spec = parse_cluster("tree:1,1,2,4")
    stuck = run("pod-by-pod", jobs, "tree:1,1,2,4", pod_timeout_s=None, pod_order="interleaved")
    assert stuck.standoff is not None and stuck.end_s == 60 * 3600
    figures = summarize(stuck, spec, (0.0, 10.0))
    assert (figures["jobs_total"], figures["jobs_not_arrived"]) == (4, 0)
    assert figures["never_started"] == 4 and figures["deadlock_h"] == 60


def test_a_repair_keeps_the_run_going_while_jobs_wait_for_it() -> None:
    # Two 4-GPU nodes; GPU 0 of the first fails at t=50 under nothing: the 2 x 4 gang that
    # arrives at t=100 must wait for the repair (1 h later), and the run ends only when the
    # gang has run (it used to end at t=100 with the gang queued, its status "ok").
    from gangplace.sim.replay import FAILURE

    jobs = [job("small", 0, 10, 1, 1), job("gang", 100, 50, 2, 4)]
    replay = Replay(jobs, parse_cluster("tree:1,1,2,4"), "best-fit", SimSettings(repair_s=3600))
    replay._next_failure = lambda after: None  # type: ignore[method-assign]  # this one only
    replay.push(50.0, FAILURE, ("s0-r0-n0", 0))
    result = replay.run()
    gang = result.records[1]
    assert gang.start_s is not None and gang.start_s >= 50 + 3600
    assert result.queued_at_end == 0 and result.end_s == gang.end_s


def test_a_run_that_ends_with_jobs_queued_says_so() -> None:
    # The gang can never start after its node's GPU fails for good (no repair is scheduled):
    # the run ends with it queued, and the status is not "ok".
    from gangplace.sim.run import aggregate

    jobs = [job("gang", 100, 50, 2, 4)]
    replay = Replay(jobs, parse_cluster("tree:1,1,2,4"), "best-fit", SimSettings())
    replay.cluster.set_gpu_health(replay.policy.node_name("s0-r0-n0"), 0, False)
    result = replay.run()
    assert result.standoff is None and result.queued_at_end == 1
    figures = summarize(result, parse_cluster("tree:1,1,2,4"), (0.0, 100.0))
    assert figures["queued_at_end"] == 1
    entry = aggregate({"0": {"best-fit": figures}}, ("best-fit",))["best-fit"]
    assert entry["ended_queued"] == 1


def test_every_wait_counts_and_completion_and_slowdown_are_per_job() -> None:
    # low runs 0-10, is preempted by high at 10 and queued again until high ends at 20: its
    # first wait is 0, its total wait 10 s; it finishes at 1020 (no checkpoint): completion
    # 1020 s over 1000 s of run time.
    jobs = [
        Job("low", 0, 1000, 16, 4, 4, priority=0),
        Job("high", 10, 10, 8, 2, 4, priority=5),
    ]
    result = run("best-fit+preempt", jobs, order="priority", checkpoint_s=None)
    low, high = result.records
    assert (low.waited_s, high.waited_s) == (10.0, 0.0)
    figures = summarize(result, parse_cluster(SMALL), (0.0, 10.0))
    assert figures["wait_s"]["mean"] == 0.0  # first waits only
    assert figures["total_wait_s"]["mean"] == 5.0  # (10 + 0) / 2
    assert figures["completion_s"]["p99"] == 1020.0 and figures["completion_s"]["jobs"] == 2
    assert figures["slowdown"]["p99"] == pytest.approx(1.02)
    assert figures["slowdown"]["p50"] == pytest.approx(1.0)  # high: 10 s over 10 s
    assert figures["restarted_jobs"] == 1


def test_a_wait_still_open_at_the_end_is_censored_there() -> None:
    jobs = [job("A", 0, 100, 2, 4), job("B", 0, 100, 2, 4)]
    stuck = run("pod-by-pod", jobs, "tree:1,1,2,4", pod_timeout_s=None, pod_order="interleaved")
    figures = summarize(stuck, parse_cluster("tree:1,1,2,4"), (0.0, 10.0))
    assert figures["total_wait_s"]["mean"] == stuck.end_s == 24 * 3600
    # Issue 49: never-finished jobs are in the completion times, censored at the run's end
    completion = figures["completion_s"]
    assert (completion["jobs"], completion["censored"]) == (2, 2)
    assert completion["mean"] == 24 * 3600 and figures["slowdown"]["mean"] == 24 * 36


def test_a_job_that_can_never_fit_is_rejected_not_queued() -> None:
    jobs = [job("huge", 0, 10, 5, 4), job("next", 1, 10, 1, 4)]
    for policy in ("best-fit", "pod-by-pod", "blind"):
        result = run(policy, jobs, backfill="none")
        assert result.records[0].rejected is not None and "never fits" in result.records[0].rejected
        assert result.records[1].start_s == 1


def test_arrival_only_jobs_are_rejected_without_room() -> None:
    jobs = [Job(f"p{i}", float(i), None, 4, 1, 4) for i in range(6)]
    for policy in ("best-fit", "pod-by-pod"):
        result = run(policy, jobs)
        figures = summarize(result, parse_cluster(SMALL), (0.0, 5.0))
        assert figures["jobs_rejected"] == 2 and figures["allocation_at_end"] == 1.0
        assert figures["load_curve"][-1] == [1.5, 1.0]


def test_preemption_policy_evicts_low_priority_work() -> None:
    jobs = [
        Job("low", 0, 1000, 16, 4, 4, priority=0),
        Job("high", 10, 10, 8, 2, 4, priority=5),
    ]
    plain = run("best-fit", jobs)
    assert [r.start_s for r in plain.records] == [0, 1000]
    preempting = run("best-fit+preempt", jobs, order="priority", checkpoint_s=None)
    low, high = preempting.records
    assert high.start_s == 10 and preempting.preemptions == 1
    assert low.restarts == 1 and low.lost_gpu_s == 16 * 10
    assert low.end_s is not None and low.end_s == 20 + 1000
    # With a checkpoint every 4 s, 8 s of its 10 are kept: it ends 8 s earlier, 2 s lost.
    checkpointed = run("best-fit+preempt", jobs, order="priority", checkpoint_s=4.0)
    low = checkpointed.records[0]
    assert low.lost_gpu_s == 16 * 2 and low.end_s == 20 + 1000 - 8


def test_failures_requeue_jobs_and_cost_goodput() -> None:
    jobs = [job(f"J{i}", i * 100.0, 2000, 2, 4) for i in range(20)]
    result = run("best-fit", jobs, failures_per_gpu_hour=0.05, repair_s=600)
    figures = summarize(result, parse_cluster(SMALL), (0.0, 1900.0))
    assert result.failures > 0 and figures["restarts"] > 0
    assert figures["lost_gpu_hours"] > 0 and figures["goodput"] < 1
    assert figures["jobs_finished"] == 20
    again = run("best-fit", jobs, failures_per_gpu_hour=0.05, repair_s=600)
    assert again.failures == result.failures  # seeded


def test_failures_repaired_in_place_or_from_spares_instead_of_requeued() -> None:
    """The failure scenario's three answers (docs/command-line.md): requeue the job, repair
    it in place, or hold spares and repair from them; all seeded, all jobs finish."""
    jobs = [job(f"J{i}", i * 100.0, 2000, 2, 4) for i in range(20)]
    spec = "tree:1,2,3,4"  # room left for repairs
    figures = {}
    for policy in ("best-fit", "best-fit+repair", "best-fit+spares"):
        result = run(policy, jobs, spec, failures_per_gpu_hour=0.05, repair_s=600)
        figures[policy] = summarize(result, parse_cluster(spec), (0.0, 1900.0))
        assert figures[policy]["jobs_finished"] == 20 and result.failures > 0
    requeue, repair, spares = (
        figures[p] for p in ("best-fit", "best-fit+repair", "best-fit+spares")
    )
    assert requeue["repairs"] == 0 and requeue["spare_gpu_hours"] == 0
    assert repair["repairs"] >= 1 and repair["restarts"] < requeue["restarts"]
    assert repair["spare_gpu_hours"] == 0 and repair["ranks_from_spares"] == 0
    assert spares["ranks_from_spares"] >= 1 and spares["spare_gpu_hours"] > 0
    assert spares["restarts"] < requeue["restarts"]
    for entry in figures.values():
        assert entry["useful_gpu_hours"] == pytest.approx(
            entry["lost_gpu_hours"] / (1 - entry["goodput"]) - entry["lost_gpu_hours"]
        )
    again = run("best-fit+spares", jobs, spec, failures_per_gpu_hour=0.05, repair_s=600)
    assert (
        again.repairs == spares["repairs"] and again.spare_gpu_s / 3600 == spares["spare_gpu_hours"]
    )


def test_spares_settings_are_checked() -> None:
    with pytest.raises(SimError, match="spares"):
        SimSettings(spares=-1)
    with pytest.raises(SimError, match="spares"):
        SimSettings(spares=65)


def test_explain_counts_exclusions_and_gpus_to_free() -> None:
    cluster = Cluster(("rack",))
    for index in range(4):
        cluster.add_node(f"n{index}", gpus=8, topology={"rack": f"r{index // 2}"})
    cluster.set_gpu_health("n0", 0, False)  # n0: 7 healthy GPUs
    cluster.cordon("n3")
    held = cluster.reserve(GangRequest(1, 4))  # best-fit: n0 (fewest free), 3 left there
    assert held.placement.nodes == ("n0",)
    explanation = cluster.explain(GangRequest(3, 8, name="job"))
    assert not explanation.fits
    assert explanation.excluded == {
        "cordoned": 1,
        "selector_mismatch": 0,
        "untolerated_taints": 0,
        "unhealthy": 1,  # n0: 7 healthy GPUs cannot hold an 8-GPU pod
        "too_few_free": 0,
        "numa_split": 0,
        "resources": 0,
    }
    levels = {level.level: level for level in explanation.levels}
    assert levels["rack"].domain == ("r0",) and levels["rack"].capacity == 1
    assert levels["rack"].gpus_to_free is None  # r0 cannot hold 3 even emptied
    assert levels["cluster"].capacity == 2 and levels["cluster"].gpus_to_free is None
    with pytest.raises(Unschedulable) as caught:
        cluster.reserve(GangRequest(3, 8, name="job"))
    assert explanation.summary.startswith(caught.value.reason)
    assert str(explanation).splitlines()[0] == explanation.summary
    fits = cluster.explain(GangRequest(2, 4))
    assert fits.fits and fits.placement == cluster.place_gang(GangRequest(2, 4))
    freeing = cluster.explain(GangRequest(2, 8, required_level="rack"))
    rack = {level.level: level for level in freeing.levels}["rack"]
    assert rack.capacity == 1 and rack.gpus_to_free is None  # r0: n0 too unhealthy
    r0_only = cluster.explain(GangRequest(3, 4, required_level="rack"))
    best_rack = {level.level: level for level in r0_only.levels}["rack"]
    # r0 holds 2 pods of 4 now (n0: 3 free of 7 healthy, n1: 8 free); freeing 1 of the 4
    # GPUs held on n0 would give it a third.
    assert best_rack.domain == ("r0",)
    assert best_rack.capacity == 2 and best_rack.gpus_to_free == 1


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gangplace", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=240,
    )


def test_cli_simulates_the_bundled_default(tmp_path: Path) -> None:
    done = run_cli("simulate", "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert set(report) >= {"trace", "cluster", "seeds", "policies", "runs", "assumptions"}
    assert set(report["policies"]) == {"best-fit", "first-fit", "blind", "pod-by-pod", "ladder"}
    for figures in report["runs"]["0"].values():
        assert set(figures) >= {
            "jobs_finished",
            "jobs_total",
            "never_started",
            "jobs_rejected",
            "wait_s",
            "utilization",
            "idle_held_share",
            "deadlock_h",
            "standoff",
            "locality",
        }
        assert set(figures["wait_s"]) == {"mean", "p50", "p95", "p99", "censored"}
        assert 0 <= figures["utilization"] <= 1
    for name in ("utilization.png", "wait_cdf.png", "locality.png"):
        assert (tmp_path / "out" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "wrote" in done.stdout and "best-fit" in done.stdout
    assert "SYNTHETIC" in done.stdout and "easy backfill" in done.stdout


def test_several_seeds_give_intervals_and_a_failing_policy_gets_its_row(tmp_path: Path) -> None:
    trace = tmp_path / "levels.csv"
    rows = ["arrival_s,duration_s,gpus,required_level"]
    rows += [f"{i * 50},{300 + 97 * i % 700},{(i % 3 + 1) * 4},rack" for i in range(30)]
    trace.write_text("\n".join(rows) + "\n")
    done = run_cli(
        "simulate", "--trace", str(trace), "--cluster", "tree:1,2,2,8", "--seeds", "0-2",
        "--out", str(tmp_path / "out"), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # issue 49: a FAILED row is not a clean run
    assert "failed in some seed(s): blind" in done.stderr
    assert "blind" in done.stdout and "FAILED" in done.stdout
    assert "policy blind cannot replay job" in done.stdout
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["policies"]["blind"]["seeds_run"] == 0
    assert report["policies"]["best-fit"]["seeds_run"] == 3
    assert report["policies"]["best-fit"]["wait_s.mean"]["n"] == 3


def test_owners_quotas_and_per_owner_waits() -> None:
    from gangplace.sim.run import simulate

    first = DATA / "philly-gavel-vc-traces" / "ed69ec.trace"
    second = DATA / "philly-gavel-vc-traces" / "103959.trace"
    if not first.exists():
        pytest.skip("../shared/data is not beside the clone")
    result = simulate(
        [first, second],
        cluster="tree:1,2,4,8",
        policies=("best-fit",),
        settings=SimSettings(quotas={"ed69ec": 32}),
    )
    figures = result.report["runs"]["0"]["best-fit"]
    assert set(figures["wait_by_owner_s"]) == {"ed69ec", "103959"}
    assert result.report["jobs"]["owners"] == ["103959", "ed69ec"]
    assert (
        figures["wait_by_owner_s"]["ed69ec"]["jobs"] + figures["wait_by_owner_s"]["103959"]["jobs"]
        == figures["jobs_total"] - figures["jobs_rejected"]
    )


DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.mark.parametrize(
    "args",
    [
        ("simulate", "--trace", "no/such/file.trace"),
        ("simulate", "--policies", "best-fit,worst-fit"),
        ("simulate", "--cluster", "tree:1,2"),
        ("simulate", "--ladder", "10"),
        ("simulate", "--pod-timeout", "-1"),
        ("simulate", "--walltime-factor", "0.5"),
        ("simulate", "--seeds", "x"),
        ("simulate", "--seeds", "3-1"),
        ("simulate", "--backfill", "always"),
        ("simulate", "--standoff-hours", "0"),
        ("simulate", "--quota", "a=b"),
        ("simulate", "--failures", "often"),
        ("sweep", "--traces", "x.trace"),
        ("explain", "--pods", "x"),
        ("explain", "--pods", "1", "--required-level", "row"),
        ("frobnicate",),
    ],
)
def test_cli_bad_arguments_exit_2_with_one_line(args: tuple[str, ...], tmp_path: Path) -> None:
    done = run_cli(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stdout
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) <= 3  # argparse adds a usage line


def test_cli_explain_defaults_to_pods_of_one_node(tmp_path: Path) -> None:
    done = run_cli("explain", "--pods", "2", cwd=tmp_path)  # the bundled 4-GPU nodes
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("gang of 2 pods x 4 GPUs fits"), done.stdout


def test_cli_explain(tmp_path: Path) -> None:
    done = run_cli("explain", "--cluster", "tree:1,2,2,8", "--pods", "5", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "does not fit" in done.stdout and "best rack" in done.stdout


def test_cluster_from_json_and_explain_cli(tmp_path: Path) -> None:
    description = {
        "levels": ["rack"],
        "nodes": [
            {"name": "a", "gpus": 8, "topology": {"rack": "r0"}, "unhealthy": [0]},
            {"name": "b", "gpus": 8, "topology": {"rack": "r0"}},
        ],
    }
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(description))
    spec = parse_cluster(str(path))
    assert spec.names == ("a", "b") and spec.unhealthy == (1, 0)
    done = run_cli("explain", "--cluster", str(path), "--pods", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "1 with too few healthy GPUs for a pod" in done.stdout
    path.write_text('{"levels": ["rack"], "nodes": [{"name": "a"}]}')
    bad = run_cli("explain", "--cluster", str(path), "--pods", "1", cwd=tmp_path)
    assert bad.returncode == 2 and "not a cluster description" in bad.stderr


def test_reports_are_deterministic_for_a_seed(tmp_path: Path) -> None:
    from gangplace.sim.run import simulate

    def figures() -> dict[str, object]:
        # Preemption and defragmentation break ties by hold id: the replay seeds the ids.
        report = simulate(
            TRACE,
            cluster="tree:1,2,2,8",
            seeds=(3,),
            policies=("best-fit", "pod-by-pod", "best-fit+preempt", "best-fit+defrag"),
            settings=SimSettings(order="priority", high_priority_share=0.3),
        ).report
        for policy in report["runs"]["3"].values():
            del policy["scheduler_seconds"], policy["wall_s"]  # timings
        del report["policies"]  # holds wall times too, through nothing else than the runs
        return report

    assert figures() == figures()


TRACE = Path(__file__).resolve().parents[1] / "python/gangplace/data/philly-6c71a0-first400.trace"


def test_priorities_scenario_preemption_serves_the_high_priority_jobs() -> None:
    """The documented scenario: 20% of the bundled trace made priority 1, priority order."""
    from gangplace.sim.run import simulate

    settings = SimSettings(order="priority", high_priority_share=0.2)
    report = simulate(
        TRACE,
        cluster="tree:2,2,2,4",
        policies=("best-fit", "best-fit+preempt", "best-fit+defrag"),
        settings=settings,
    ).report
    runs = report["runs"]["0"]
    plain, preempt, defrag = (runs[p] for p in ("best-fit", "best-fit+preempt", "best-fit+defrag"))
    high = {name: row["wait_by_priority_s"]["1"] for name, row in runs.items()}
    assert high["best-fit"]["jobs"] == high["best-fit+preempt"]["jobs"] > 40
    assert preempt["preemptions"] > 0 and preempt["lost_gpu_hours"] > 0
    assert high["best-fit+preempt"]["mean"] < high["best-fit"]["mean"]
    assert defrag["moves"] > 0 and plain["preemptions"] == plain["moves"] == 0
    assert "priorities scenario: 20%" in " ".join(report["assumptions"])


def test_nvidia_slices_and_the_slices_policy_waits_for_whole_slices() -> None:
    from gangplace.sim.policies import nvidia_slices

    assert nvidia_slices(32, 128, "rack") == (("rack", 16),)
    assert nvidia_slices(8, 32, "rack") == (("rack", 4),)
    assert nvidia_slices(6, 48, "rack") == ()  # 4 does not divide 6 pods
    assert nvidia_slices(4, 16, "rack") == ()  # under 32 GPUs: no slices
    # Racks of 6 nodes x 4 GPUs. B0 and B1 (4 pods each) leave 2 free nodes in r0 and r1; r2
    # is empty. A (8 pods, 32 GPUs: slices of 4) fits unsliced at once (6 in r2 + 2 in r0,
    # which splits a slice), but with slices it waits for B0 to end and r0 to hold a slice.
    jobs = [job("B0", 0, 100, 4, 4), job("B1", 0, 200, 4, 4), job("A", 10, 50, 8, 4)]
    assert starts("best-fit", jobs, cluster="tree:1,3,6,4") == [0, 0, 10]
    assert starts("best-fit+slices", jobs, cluster="tree:1,3,6,4") == [0, 0, 100]


def test_numa_split_scenario_counts_pods_the_kubelet_would_reject() -> None:
    # Two 8-GPU nodes, each two NUMA halves of 4. B0 and B1 (3 GPUs each) leave n0 with GPUs
    # 3 and 7 free, one per socket. A (2 GPUs) goes to n0 under best-fit, across sockets; with
    # numa="single" it takes n1 instead.
    jobs = [job("B0", 0, 100, 1, 3), job("B1", 0, 100, 1, 3), job("A", 10, 10, 1, 2)]
    plain = run("best-fit", jobs, cluster="tree:1,1,2,8", numa_split=True)
    single = run("best-fit+numa", jobs, cluster="tree:1,1,2,8", numa_split=True)
    assert plain.numa_split_pods == 1 and plain.records[2].nodes == ("s0-r0-n0",)
    assert single.numa_split_pods == 0 and single.records[2].nodes == ("s0-r0-n1",)
    assert run("best-fit", jobs, cluster="tree:1,1,2,8").numa_split_pods == 0  # not counted


def test_report_json_says_what_made_it(tmp_path: Path) -> None:
    import subprocess
    import sys

    import gangplace
    from gangplace.sim.report import write_json

    write_json(tmp_path / "report.json", {"seeds": [0]})
    saved = json.loads((tmp_path / "report.json").read_text())
    made = saved["provenance"]
    assert list(saved) == ["provenance", "seeds"]
    assert made["gangplace_version"] == gangplace.__version__
    assert made["command_line"] == sys.argv and made["python"]
    head = subprocess.run(
        ["git", "-C", str(Path(gangplace.__file__).parent), "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert made["git_commit"] == (head.stdout.strip() if head.returncode == 0 else None)
    # Issue 49: the commit the extension was built from, also for an installed package
    built = made["built_from_commit"]
    assert built == "unknown" or (len(built) == 40 and int(built, 16) >= 0), built
    if made["git_commit"] is not None:  # dirty: the package or Rust sources differ from HEAD
        root = Path(gangplace.__file__).resolve().parents[2]
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "python", "rust"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert made["git_dirty"] == bool(status.stdout.strip())


def test_paired_differences_are_per_seed_with_their_own_interval() -> None:
    from gangplace.sim.paired import paired

    def figures(wait: float, util: float) -> dict[str, Any]:
        return {"wait_s": {"mean": wait, "p95": wait}, "utilization": util, "never_started": 0}

    runs = {
        "0": {"a": figures(10.0, 0.5), "b": figures(7.0, 0.6)},
        "1": {"a": figures(20.0, 0.5), "b": figures(18.0, 0.6)},
        "2": {"a": figures(30.0, 0.5), "b": figures(26.0, 0.6)},
        "3": {"a": figures(5.0, 0.5), "b": {"error": "boom"}},  # unpaired: left out
    }
    rows = {row["figure"]: row for row in paired(runs, ("a", "b"))}
    wait = rows["wait_s.mean"]
    assert (wait["policy"], wait["baseline"], wait["seeds"]) == ("b", "a", 3)
    assert wait["difference"] == pytest.approx(-3.0)  # -3, -2, -4
    assert wait["low"] is not None and wait["low"] < -3.0 < wait["high"] < 0.0
    assert (wait["lower_in"], wait["higher_in"]) == (3, 0)
    # The unpaired intervals overlap; the paired one excludes zero.
    assert rows["utilization"]["difference"] == pytest.approx(0.1)
    against_b = paired(runs, ("a", "b"), baseline="b")
    assert {row["policy"] for row in against_b} == {"a"}


def test_cli_simulate_prints_paired_differences_and_refuses_an_unknown_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gangplace.cli import main

    args = [
        "simulate",
        "--seeds",
        "0-1",
        "--policies",
        "best-fit,first-fit",
        "--out",
        str(tmp_path),
    ]
    assert main([*args, "--baseline", "first-fit"]) == 0
    out = capsys.readouterr().out
    assert "paired against first-fit" in out and "best-fit          wait_s.mean" in out
    completion = next(line for line in out.splitlines() if "completion_s.mean" in line)
    assert completion.split("]")[-1].startswith(" h"), completion  # seconds shown in hours
    report = json.loads((tmp_path / "report.json").read_text())
    assert {row["policy"] for row in report["paired"]} == {"best-fit"}
    assert main([*args, "--baseline", "ladder"]) == 2
    assert "baseline 'ladder' is not one of the policies run" in capsys.readouterr().err


def test_pod_by_pod_admits_what_the_gang_policies_admit_and_honours_quotas() -> None:
    def owned(name: str, arrival: float, pods: int, level: str | None = None) -> Job:
        return Job(name, arrival, 100, pods * 4, pods, 4, required_level=level, owner="a")

    # Racks of two 4-GPU nodes: 3 pods of 4 GPUs cannot stay in one rack; 12 GPUs are above
    # the owner's quota of 8; the two 2 x 4 jobs fit the cluster together, not the quota.
    jobs = [
        owned("in-rack", 0, 3, "rack"),
        owned("too-big", 0, 3),
        owned("first", 1, 2),
        owned("second", 1, 2),
    ]
    for policy in ("best-fit", "pod-by-pod"):
        result = run(policy, jobs, "tree:1,2,2,4", quotas={"a": 8}, backfill="none")
        rejected = [r.rejected for r in result.records]
        assert rejected[0] is not None and "rack" in rejected[0], (policy, rejected)
        assert rejected[1] is not None and "above owner 'a''s quota of 8" in rejected[1]
        assert [r.start_s for r in result.records[2:]] == [1, 101], policy
        assert max(busy for _, busy, *_ in result.samples) <= 8  # never above the quota


@pytest.mark.parametrize("backfill", ["easy", "conservative"])
def test_a_job_starts_beside_the_heads_reservation(backfill: str) -> None:
    """Issue 25's trace: on 32 GPUs, 16 GPUs for 100 s, then 24 (blocked until t=100), then
    8 for 1,000 s. The 8-GPU job runs past the head's start but fits on the node the head's
    reservation leaves out, so it starts at 2 s (it waited until 100 s before docs/scheduler.md
    S5)."""
    jobs = [job("A", 0, 100, 2, 8), job("B", 1, 100, 3, 8), job("C", 2, 1000, 1, 8)]
    assert starts("best-fit", jobs, "tree:1,1,4,8", backfill=backfill) == [0, 100, 2]


def test_a_stop_far_outside_the_plot_is_drawn_at_its_edge(tmp_path: Path) -> None:
    """Issue 49, item 5: a standoff 24 h after a 10 s arrival window (8,640 times the
    window) used to end ``simulate`` with a font "raster overflow" after report.json was
    written; the marker is now drawn at the window's edge with its time written out."""
    pytest.importorskip("matplotlib")
    from gangplace.sim.plots import _stop_marker, _utilization

    jobs = [job("A", 0, 100, 2, 4), job("B", 0, 100, 2, 4), job("C", 10, 5, 1, 1)]
    stuck = run("pod-by-pod", jobs, "tree:1,1,2,4", pod_timeout_s=None, pod_order="interleaved")
    assert _stop_marker(stuck) == (24 * 3600, "standoff")
    report = {"jobs": {"first_arrival_s": 0.0, "last_arrival_s": 10.0}, "seeds": [0]}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the old marker broke the layout ("Tight layout not
        path = _utilization(tmp_path, {"pod-by-pod": stuck}, report, "test")  # applied")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.pyplot as plt

    from gangplace.sim.plots import _mark_stop

    figure, axis = plt.subplots()
    axis.set_xlim(0.0, 11 / 3600)
    _mark_stop(axis, 24 * 3600.0, "standoff", (0.0, 11.0))
    (text,) = axis.texts
    assert text.get_position()[0] == pytest.approx(11 / 3600)  # at the window's right edge
    assert "at 24.0 h (outside the plot)" in text.get_text()
    plt.close(figure)


def test_jobs_out_recomputes_the_report(tmp_path: Path) -> None:
    """Issue 49, item 4: ``--jobs-out`` writes one row per job, policy and seed, and the
    report's figures recompute from it alone (with a livelocked pod-by-pod run among them)."""
    import csv
    import statistics

    out, rows_file = tmp_path / "out", tmp_path / "jobs.csv"
    done = run_cli(
        "simulate", "--policies", "best-fit,pod-by-pod", "--pod-order", "interleaved",
        "--seeds", "0-1", "--out", str(out), "--jobs-out", str(rows_file), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert str(rows_file) in done.stdout
    report = json.loads((out / "report.json").read_text())
    with rows_file.open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 * 2 * report["jobs"]["count"]
    stops = set()
    for seed in ("0", "1"):
        for policy in ("best-fit", "pod-by-pod"):
            mine = [r for r in rows if r["seed"] == seed and r["policy"] == policy]
            figures = report["runs"][seed][policy]
            admitted = [r for r in mine if r["status"] not in ("rejected", "not_arrived")]
            waits = [float(r["first_wait_s"]) for r in admitted]
            assert statistics.fmean(waits) == pytest.approx(figures["wait_s"]["mean"])
            never = sum(1 for r in admitted if r["censored_wait"] == "True")
            assert never == figures["never_started"] == figures["wait_s"]["censored"]
            finished = [r for r in mine if r["status"] == "finished"]
            assert len(finished) == figures["jobs_finished"]
            completions = [float(r["completion_s"]) for r in admitted]  # censored ones too
            censored = sum(1 for r in admitted if r["censored_completion"] == "True")
            assert censored == figures["completion_s"]["censored"]
            assert statistics.fmean(completions) == pytest.approx(figures["completion_s"]["mean"])
            assert {float(r["run_end_s"]) for r in mine} == {figures["end_s"]}
            stops |= {r["stop"] for r in mine}
            promised = [r for r in mine if r["first_promise_s"]]  # S5: EASY's heads only
            assert bool(promised) == (policy == "best-fit"), (seed, policy)
            for row in promised:
                assert float(row["first_promise_s"]) >= float(row["arrival_s"])
                assert row["first_start_s"] == "" or float(row["first_start_s"]) > float(
                    row["arrival_s"]
                )
            for row in finished:  # every run is written out, the last one ending at end_s
                last = row["runs"].split(";")[-1]
                assert last.split("@")[0].split("-")[1] == format(float(row["end_s"]), "g")
    assert "livelock" in stops  # seed 1 of interleaved pod-by-pod


def test_jobs_out_parquet_needs_pyarrow(tmp_path: Path) -> None:
    """``--jobs-out x.parquet`` without pyarrow is refused before any run (exit 2, one line);
    with pyarrow, the file holds the same rows as the CSV would."""
    target = tmp_path / "jobs.parquet"
    done = run_cli(
        "simulate", "--policies", "best-fit", "--jobs-out", str(target), cwd=tmp_path,
    )  # fmt: skip
    try:
        import pyarrow.parquet as parquet  # type: ignore[import-not-found]
    except ImportError:
        assert done.returncode == 2 and "Parquet needs pyarrow" in done.stderr
        assert not target.exists()
        return
    assert done.returncode == 0, done.stderr
    assert parquet.read_table(target).num_rows == 400


def test_every_interval_is_clipped_to_what_its_figure_can_be() -> None:
    """Issue 49, item 3: per-priority and per-owner waits never get a negative low end (a
    t-interval over few seeds with one long wait went below zero)."""
    from gangplace.sim.run import aggregate

    rows = {
        str(seed): {
            "best-fit": {
                "wait_by_priority_s": {"0": {"mean": wait}, "1": {"mean": 0.0}},
                "wait_by_owner_s": {"a": {"mean": wait}},
            }
        }
        for seed, wait in enumerate([0.0, 0.0, 36000.0])
    }
    entry = aggregate(rows, ("best-fit",))["best-fit"]
    for group in ("wait_by_priority_mean_s", "wait_by_owner_mean_s"):
        for figures in entry[group].values():
            assert figures["low"] is None or figures["low"] >= 0.0, (group, figures)
    assert entry["wait_by_priority_mean_s"]["0"]["high"] > 36000.0 / 3  # the top is kept


def test_utilization_is_split_into_useful_work_and_spreading() -> None:
    """Issue 49, item 3: busy GPU-time counted as utilization includes what spreading costs
    (a job across nodes runs slower under the placement model); the report splits it, and
    the spreading part integrates to the GPU-seconds the jobs' records say they lost."""
    spec = parse_cluster(SMALL)
    result = run("blind", FIVE, placement_model="cited")
    figures = summarize(result, spec, (0.0, result.end_s))
    assert figures["useful_utilization"] + figures["spread_share"] == pytest.approx(
        figures["utilization"]
    )
    lost = sum(record.spread_gpu_s for record in result.records)
    assert lost > 0  # the blind gang spans both racks
    capacity = spec.healthy_gpus * result.end_s
    assert figures["spread_share"] * capacity == pytest.approx(lost)
    plain = summarize(run("blind", FIVE, placement_model="none"), spec, (0.0, result.end_s))
    assert plain["spread_share"] == 0.0


def test_every_policy_is_measured_over_the_same_jobs(tmp_path: Path) -> None:
    """Issue 49, item 2: rack-only rejects a 3-node gang that best-fit runs across racks;
    rack-only counts it as a job that never started (waits and completion censored at its
    run's end), so its row and the paired differences are over the same jobs."""
    from gangplace.sim.run import simulate

    trace = tmp_path / "t.csv"
    rows = ["arrival_s,duration_s,gpus"] + [f"{i * 10},{50 + i},{g}" for i, g in
                                              enumerate([4, 12, 2, 4, 1])]  # fmt: skip
    trace.write_text("\n".join(rows) + "\n")
    rows_file = tmp_path / "jobs.csv"
    done = simulate(
        str(trace), cluster=SMALL, policies=("best-fit", "rack-only"), seeds=(0,),
        jobs_out=rows_file,
    )  # fmt: skip
    best, rack = (done.report["runs"]["0"][p] for p in ("best-fit", "rack-only"))
    assert best["jobs_rejected"] == 0 and best["never_started"] == 0
    assert rack["admitted_elsewhere"] == 1 and rack["jobs_rejected"] == 0
    assert rack["never_started"] == 1 and rack["wait_s"]["censored"] == 1
    assert rack["completion_s"]["jobs"] == best["completion_s"]["jobs"] == 5
    end = rack["end_s"]
    assert rack["wait_s"]["mean"] >= (end - 10) / 5  # the censored 12-GPU job's share alone
    assert "counted as never started" in done.table()
    import csv

    with rows_file.open() as handle:
        (refused,) = [r for r in csv.DictReader(handle) if r["admitted_elsewhere"] == "True"]
    assert (refused["policy"], refused["status"], refused["censored_wait"]) == (
        "rack-only", "never_started", "True",
    )  # fmt: skip
    assert float(refused["first_wait_s"]) == float(refused["total_wait_s"]) == end - 10


def test_idle_held_share_to_the_end_sees_a_deadlock_after_the_last_arrival() -> None:
    """Issue 49, item 3: two gangs deadlock right after the last arrival; the window's share
    (first to last arrival) is 0, the share to the run's end (the standoff) is not."""
    jobs = [job("A", 0, 100, 2, 4), job("B", 0, 100, 2, 4)]
    spec = parse_cluster("tree:1,1,2,4")
    stuck = run("pod-by-pod", jobs, "tree:1,1,2,4", pod_timeout_s=None, pod_order="interleaved")
    figures = summarize(stuck, spec, (0.0, 0.0))
    assert figures["idle_held_share"] is None or figures["idle_held_share"] == 0.0
    assert figures["idle_held_share_to_end"] == pytest.approx(1.0)  # all 8 GPUs, all along
