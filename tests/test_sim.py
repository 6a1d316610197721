"""The simulator: hand-computed schedules per policy, deadlocks, metrics, explain, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gangplace import Cluster, GangRequest, Unschedulable
from gangplace.sim.clusters import parse_cluster
from gangplace.sim.metrics import summarize
from gangplace.sim.replay import Replay
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


def starts(policy: str, jobs: list[Job], cluster: str = SMALL, **kwargs: object) -> list[float]:
    result = Replay(jobs, parse_cluster(cluster), policy, **kwargs).run()  # type: ignore[arg-type]
    return [record.start_s if record.start_s is not None else -1 for record in result.records]


@pytest.mark.parametrize("policy", sorted(EXPECTED_STARTS))
def test_five_jobs_start_when_computed_by_hand(policy: str) -> None:
    assert starts(policy, FIVE) == EXPECTED_STARTS[policy]


def test_five_jobs_blind() -> None:
    """Blind, seed 0: nodes in the order r1-n0, r0-n0, r0-n1, r1-n1 (random.Random(0)
    shuffles [0, 1, 2, 3] into [2, 0, 1, 3]), first-fit, no racks. J0 takes r1-n0 and J1
    r0-n0; at t=20 J2 takes r1-n0 again, J3 r0-n1, and the gang finds one 4-GPU node only
    (r1-n1) until J3 ends at t=50; it then spans both racks."""
    spec = parse_cluster(SMALL)
    result = Replay(FIVE, spec, "blind", seed=0).run()
    assert [r.start_s for r in result.records] == [0, 0, 20, 20, 50]
    assert [r.nodes for r in result.records] == [
        ("s0-r1-n0",),
        ("s0-r0-n0",),
        ("s0-r1-n0",),
        ("s0-r0-n1",),
        ("s0-r0-n1", "s0-r1-n1"),
    ]
    assert summarize(result, spec)["locality"]["spine"] == 1


def test_five_jobs_metrics() -> None:
    spec = parse_cluster(SMALL)
    best = summarize(Replay(FIVE, spec, "best-fit").run(), spec)
    first = summarize(Replay(FIVE, spec, "first-fit").run(), spec)
    assert best["makespan_s"] == first["makespan_s"] == 120
    busy = 4 * 10 + 3 * 100 + 1 * 100 + 4 * 30 + 8 * 40
    assert best["utilization"] == pytest.approx(busy / (16 * 120))
    assert best["wait_s"]["mean"] == 0 and first["wait_s"]["mean"] == pytest.approx(30 / 5)
    assert best["fragmentation_waits"] == 0 and first["fragmentation_waits"] == 1
    assert best["locality"] == {"node": 0, "rack": 1, "spine": 0, "wider": 0}
    assert best["jobs_finished"] == best["jobs_total"] == 5
    assert best["deadlocks"] == 0 and best["idle_held_gpu_hours"] == 0


def test_ladder_waits_for_a_rack_until_t1() -> None:
    # Two racks of one 4-GPU node; J0 and J1 leave one GPU per rack; a 2x1 gang then fits
    # only across racks: best-fit places it at once, the ladder after T1 = 300 s.
    jobs = [job("J0", 0, 1000, 1, 3), job("J1", 0, 1000, 1, 3), job("G", 0, 10, 2, 1)]
    assert starts("best-fit", jobs, "tree:1,2,1,4") == [0, 0, 0]
    assert starts("ladder", jobs, "tree:1,2,1,4", ladder=(300.0, 1800.0)) == [0, 0, 300]


def test_pod_by_pod_deadlocks_where_gangs_do_not() -> None:
    """The lesson's example: two 8-GPU jobs, 8 free GPUs."""
    jobs = [job("A", 0, 100, 2, 4), job("B", 0, 100, 2, 4)]
    spec = parse_cluster("tree:1,1,2,4")
    stuck = Replay(jobs, spec, "pod-by-pod", pod_timeout_s=None).run()
    assert stuck.deadlocks == 1
    assert [r.start_s for r in stuck.records] == [None, None]
    gang = Replay(jobs, spec, "best-fit").run()
    assert gang.deadlocks == 0
    assert [r.start_s for r in gang.records] == [0, 100]


def test_pod_by_pod_timeouts_break_the_deadlock_and_count_idle_gpus() -> None:
    jobs = [job("A", 0, 100, 2, 4), job("B", 0, 100, 2, 4)]
    result = Replay(jobs, parse_cluster("tree:1,1,2,4"), "pod-by-pod", pod_timeout_s=60).run()
    assert all(record.end_s is not None for record in result.records)
    assert result.deadlocks >= 1
    # Each partial gang held one 4-GPU pod idle for the 60 s until the timeout.
    assert result.idle_held_gpu_seconds >= 2 * 4 * 60


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
        "unhealthy": 1,  # n0: 7 healthy GPUs cannot hold an 8-GPU pod
        "too_few_free": 0,
    }
    levels = {level.level: level for level in explanation.levels}
    assert levels["rack"].domain == ("r0",) and levels["rack"].capacity == 1
    assert levels["rack"].gpus_to_free is None  # r0 cannot hold 3 even emptied
    assert levels["cluster"].capacity == 2 and levels["cluster"].gpus_to_free is None
    with pytest.raises(Unschedulable) as caught:
        cluster.reserve(GangRequest(3, 8, name="job"))
    assert caught.value.reason == explanation.summary
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
    assert set(report) >= {"trace", "cluster", "seed", "policies"}
    assert set(report["policies"]) == {"best-fit", "first-fit", "blind", "pod-by-pod", "ladder"}
    for figures in report["policies"].values():
        assert set(figures) >= {
            "jobs_finished",
            "jobs_total",
            "makespan_s",
            "wait_s",
            "utilization",
            "idle_held_gpu_hours",
            "deadlocks",
            "locality",
            "fragmentation_waits",
            "placements_per_s",
        }
        assert set(figures["wait_s"]) == {"mean", "p50", "p95", "p99"}
        assert 0 <= figures["utilization"] <= 1
    for name in ("utilization.png", "wait_cdf.png", "locality.png"):
        assert (tmp_path / "out" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "wrote" in done.stdout and "best-fit" in done.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("simulate", "--trace", "no/such/file.trace"),
        ("simulate", "--policies", "best-fit,worst-fit"),
        ("simulate", "--cluster", "tree:1,2"),
        ("simulate", "--ladder", "10"),
        ("explain", "--pods", "x"),
        ("explain", "--pods", "1", "--required-level", "row"),
        ("frobnicate",),
    ],
)
def test_cli_bad_arguments_exit_2_with_one_line(args: tuple[str, ...], tmp_path: Path) -> None:
    done = run_cli(*args, cwd=tmp_path)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) <= 3  # argparse adds a usage line


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
        report = simulate(TRACE, cluster="tree:1,2,2,8", seed=3).report
        for policy in report["policies"].values():
            del policy["placements_per_s"], policy["wall_s"]  # timings
        return report

    assert figures() == figures()


TRACE = Path(__file__).resolve().parents[1] / "python/gangplace/data/philly-6c71a0-first400.trace"
