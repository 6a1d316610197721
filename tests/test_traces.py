"""Trace readers: real files from ../shared/data, small files written here, malformed rows."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest

from gangplace.sim.errors import ClusterSpecError
from gangplace.sim.stats import percentiles
from gangplace.sim.traces import (
    PHILLY_MAX_S,
    PHILLY_MEDIAN_S,
    TraceError,
    gang_shape,
    read_alibaba,
    read_alibaba_trace,
    read_csv,
    read_philly,
    read_trace,
)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data is not beside the clone")

PHILLY_ROW = "Job\tcmd\t-n\t1\t100\t{arrival}\t{gpus}"


@pytest.mark.parametrize(
    ("gpus", "shape"), [(1, (1, 1)), (8, (1, 8)), (16, (2, 8)), (12, (2, 6)), (24, (3, 8))]
)
def test_gang_shape_keeps_the_gpu_count(gpus: int, shape: tuple[int, int]) -> None:
    assert gang_shape(gpus, 8) == shape
    assert shape[0] * shape[1] == gpus


def test_philly_rows_durations_are_seeded(tmp_path: Path) -> None:
    trace = tmp_path / "vc.trace"
    rows = [PHILLY_ROW.format(arrival=a, gpus=g) for a, g in ((5.0, 16), (0.0, 1), (3.5, 4))]
    trace.write_text("\n".join(rows) + "\n")
    jobs = read_philly(trace, seed=3)
    assert [(job.arrival_s, job.gpus, job.pods, job.gpus_per_pod) for job in jobs] == [
        (0.0, 1, 1, 1),
        (3.5, 4, 1, 4),
        (5.0, 16, 2, 8),
    ]
    assert jobs == read_philly(trace, seed=3)
    assert jobs != read_philly(trace, seed=4)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("only\tthree\tfields", "expected 7"),
        (PHILLY_ROW.format(arrival="soon", gpus=1), "arrival 'soon' is not a number"),
        (PHILLY_ROW.format(arrival=1, gpus="2.5"), "GPU count '2.5'"),
        (PHILLY_ROW.format(arrival=1, gpus=0), "GPU count must be >= 1"),
        (PHILLY_ROW.format(arrival=-1, gpus=1), "must be finite and >= 0"),
        (PHILLY_ROW.format(arrival="nan", gpus=1), "must be finite"),
    ],
)
def test_philly_malformed_rows_name_the_line(tmp_path: Path, row: str, message: str) -> None:
    trace = tmp_path / "bad.trace"
    trace.write_text(PHILLY_ROW.format(arrival=0, gpus=1) + "\n" + row + "\n")
    with pytest.raises(TraceError, match=message) as caught:
        read_philly(trace)
    assert f"{trace}:2:" in str(caught.value)


def test_alibaba_timed_and_arrival_only(tmp_path: Path) -> None:
    timed = tmp_path / "pods.csv"
    timed.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
        "creation_time,deletion_time,scheduled_time\n"
        "p0,1,1,1,460,,LS,Running,10,70,10\n"
        "p1,1,1,0,0,,LS,Running,0,5,0\n"
        "p2,1,1,16,1000,,LS,Running,0,100,0\n"
    )
    jobs = read_alibaba(timed)
    assert [(j.id, j.arrival_s, j.duration_s, j.pods) for j in jobs] == [
        ("p2", 0.0, 100.0, 2),
        ("p0", 10.0, 60.0, 1),
    ]
    untimed = tmp_path / "multigpu.csv"
    untimed.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1,1,2,1000\np1,1,1,1,1000\n"
    )
    assert [(j.arrival_s, j.duration_s) for j in read_trace(untimed)] == [(0.0, None), (1.0, None)]


def test_alibaba_malformed(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("name,num_gpu,creation_time,deletion_time\np0,1,50,10\n")
    with pytest.raises(TraceError, match=r"bad.csv:2: deletion_time is before"):
        read_alibaba(bad)
    bad.write_text("name,num_gpu\np0,1,extra\n")
    with pytest.raises(TraceError, match=r"bad.csv:2: expected 2 fields"):
        read_alibaba(bad)


def test_plain_csv(tmp_path: Path) -> None:
    plain = tmp_path / "jobs.csv"
    plain.write_text(
        "arrival_s,duration_s,gpus,pods,gpus_per_pod,required_level\n0,100,16,,,\n5,10,8,8,1,rack\n"
    )
    jobs = read_trace(plain)
    assert [(j.pods, j.gpus_per_pod, j.required_level) for j in jobs] == [
        (2, 8, None),
        (8, 1, "rack"),
    ]
    plain.write_text("arrival_s,duration_s,gpus,pods,gpus_per_pod\n0,1,8,3,2\n")
    with pytest.raises(TraceError, match=r"jobs.csv:2: pods x gpus_per_pod"):
        read_csv(plain)
    plain.write_text("arrival,gpus\n0,1\n")
    with pytest.raises(TraceError, match="header lacks arrival_s, duration_s"):
        read_csv(plain)


def test_unreadable_and_unknown(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="cannot read"):
        read_trace(tmp_path / "missing.trace")
    with pytest.raises(TraceError, match="unknown trace format"):
        read_trace(tmp_path, format="swf")


@needs_data
def test_real_philly_vc_durations_follow_the_published_median() -> None:
    jobs = read_trace(DATA / "philly-gavel-vc-traces" / "ed69ec.trace", seed=0)
    assert len(jobs) == 951
    median = statistics.median(job.duration_s or 0 for job in jobs)
    # 951 draws: the sample median is within a factor of 1.5 of the fitted 874 s.
    assert PHILLY_MEDIAN_S / 1.5 < median < PHILLY_MEDIAN_S * 1.5
    assert all(job.pods * job.gpus_per_pod == job.gpus for job in jobs)


@needs_data
def test_real_alibaba_default_trace() -> None:
    trace = read_alibaba_trace(DATA / "alibaba-gpu-v2023" / "openb_pod_list_default.csv")
    jobs = trace.jobs
    # 8,152 pods, 1,088 without GPUs (skipped), 861 of the rest never scheduled (counted).
    assert len(jobs) == 8152 - 1088 - 861 and trace.never_ran == 861
    assert all(job.duration_s is not None and math.isfinite(job.duration_s) for job in jobs)
    # Run time is scheduled -> deleted; the real queue time is kept apart.
    first = jobs[0]
    assert (first.id, first.arrival_s, first.duration_s, first.real_wait_s) == (
        "openb-pod-0000",
        0.0,
        12537496.0,
        0.0,
    )
    waits = percentiles([job.real_wait_s or 0.0 for job in jobs])
    assert waits["p50"] == 2.0 and 250 < (waits["p95"] or 0) < 300


def test_alibaba_run_time_starts_at_scheduling_and_never_run_pods_are_counted(
    tmp_path: Path,
) -> None:
    pods = tmp_path / "pods.csv"
    header = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    header += "creation_time,deletion_time,scheduled_time"
    pods.write_text(
        header
        + "\np0,1,1,1,1000,,LS,Running,10,110,40\np1,1,1,2,1000,,BE,Pending,20,30,\n"
        + "p2,1,1,1,1000,,LS,Running,10,110,200\n"
    )
    with pytest.raises(TraceError, match=r"pods\.csv:4: scheduled_time is outside"):
        read_alibaba(pods)
    pods.write_text(
        header + "\np0,1,1,1,1000,,LS,Running,10,110,40\np1,1,1,2,1000,,BE,Pending,20,30,\n"
    )
    trace = read_alibaba_trace(pods)
    assert [(j.id, j.arrival_s, j.duration_s, j.real_wait_s) for j in trace.jobs] == [
        ("p0", 10.0, 70.0, 30.0)
    ]
    assert trace.never_ran == 1


def test_philly_durations_are_capped_at_the_published_maximum(tmp_path: Path) -> None:
    trace = tmp_path / "vc.trace"
    trace.write_text("\n".join(PHILLY_ROW.format(arrival=i, gpus=1) for i in range(3000)) + "\n")
    jobs = read_philly(trace, seed=1)
    assert max(job.duration_s or 0 for job in jobs) == PHILLY_MAX_S
    assert sum(1 for job in jobs if job.duration_s == PHILLY_MAX_S) >= 1


def test_csv_owner_and_priority_columns(tmp_path: Path) -> None:
    plain = tmp_path / "jobs.csv"
    plain.write_text("arrival_s,duration_s,gpus,owner,priority\n0,10,8,team-a,5\n1,10,4,,\n")
    jobs = read_csv(plain)
    assert [(j.owner, j.priority) for j in jobs] == [("team-a", 5), (None, 0)]
    plain.write_text("arrival_s,duration_s,gpus,priority\n0,10,8,high\n")
    with pytest.raises(TraceError, match=r"jobs\.csv:2: priority 'high' is not an integer"):
        read_csv(plain)


def test_alibaba_fractions_and_unmodelled_requests_are_counted_not_hidden(
    tmp_path: Path,
) -> None:
    """Issue 28, item 5: pods asking part of a GPU keep their fraction (placed as shares of
    one GPU), and the report says how many; on a cluster without CPU or memory (the default
    one) those requests are named as not modelled, as the GPU model is."""
    path = tmp_path / "pods.csv"
    path.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
        "a,1000,1024,1,460,\n"
        "b,1000,1024,1,1000,V100\n"
        "c,1000,1024,0,0,\n"
        "d,1000,1024,2,1000,\n"
    )
    trace = read_alibaba_trace(path)
    assert (len(trace.jobs), trace.fractions) == (3, 1)
    assert [job.gpu_milli for job in trace.jobs] == [460, None, None]
    assert trace.unmodelled == ("gpu_spec",)
    assert trace.jobs[0].resources_per_pod == (("cpu", 1000), ("memory", 2**30))
    from gangplace.sim.run import simulate

    report = simulate(str(path), trace_format="alibaba", policies=("best-fit",)).report
    assert report["jobs"]["fractions"] == 1
    from gangplace.sim.report import table

    text = table(report)
    assert "fractions: 1 of the 3 GPU pods ask part of a GPU" in text
    assert "not modelled: the trace's cpu_milli, memory_mib, gpu_spec requests" in text


def test_alibaba_cpu_and_memory_are_placed_on_a_node_list_that_has_them(tmp_path: Path) -> None:
    """Issue 28, item 5 (in part): a node list with ``cpu_milli`` and ``memory_mib`` gives
    the replay's nodes CPUs and memory, and each pod asks its own (docs/resources.md "Node
    resources"): two 1-GPU pods asking 3 CPUs cannot share a 4-CPU node, whatever its GPUs."""
    from gangplace.sim.clusters import parse_cluster
    from gangplace.sim.report import table
    from gangplace.sim.run import simulate

    nodes = tmp_path / "nodes.csv"
    nodes.write_text(
        "sn,cpu_milli,memory_mib,gpu,model\nn0,4000,8192,8,V100\nn1,4000,8192,8,V100\n"
    )
    spec = parse_cluster(str(nodes))
    assert spec.resources == (("cpu", (4000, 4000)), ("memory", (8 * 2**30, 8 * 2**30)))
    cluster = spec.build()
    assert cluster.node("n0").resources == {"cpu": 4000, "memory": 8 * 2**30}
    pods = tmp_path / "pods.csv"
    pods.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,3000,1024,1,1000\nb,3000,1024,1,1000\n"
    )
    report = simulate(str(pods), trace_format="alibaba", cluster=str(nodes), policies=("best-fit",))
    assert report.report["jobs"]["resources_per_pod"] == ["cpu", "memory"]
    assert report.report["jobs"]["unmodelled_requests"] == []
    text = table(report.report)
    assert "modelled besides GPUs: each pod's cpu, memory against its node's" in text
    bad = tmp_path / "bad.csv"
    bad.write_text("sn,cpu_milli,gpu\nn0,lots,8\n")
    with pytest.raises(ClusterSpecError, match="cpu_milli 'lots' is not a whole number"):
        parse_cluster(str(bad))


def test_alibaba_fractions_are_placed_as_shares_and_counted_as_shares(tmp_path: Path) -> None:
    """Issue 28, item 5: arrival-only pods of 500 thousandths on one 1-GPU node: arrivals
    count half a GPU each (three arrive before 130%: 1.5 GPUs); two share the GPU, the third
    is rejected; the busy share at the end is that one GPU, not two or three."""
    from gangplace.sim.run import simulate

    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,64000,65536,1,V100\n")
    pods = tmp_path / "pods.csv"
    rows = "".join(f"{name},1000,1024,1,500\n" for name in "abcdef")
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n" + rows)
    policies = ("best-fit", "pod-by-pod")
    report = simulate(str(pods), trace_format="alibaba", cluster=str(nodes), policies=policies)
    assert report.report["jobs"]["fractions"] == 6
    for policy in policies:
        figures = report.report["policies"][policy]
        assert figures["jobs_total"]["mean"] == 3, policy
        assert figures["jobs_rejected"]["mean"] == 1, policy
        assert figures["allocation_at_end"]["mean"] == 1.0, policy
