"""The placement-speed model (issue 26, item 4): docs/command-line.md "Placement and speed"."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gangplace.sim.clusters import parse_cluster
from gangplace.sim.errors import SimError
from gangplace.sim.metrics import summarize
from gangplace.sim.replay import FAILURE, Replay
from gangplace.sim.settings import SimSettings
from gangplace.sim.speed import (
    POLLUX_DATA,
    SPANS,
    cited_model,
    load_model,
    model_for,
    read_model,
    reference_span,
    span_of,
)
from gangplace.sim.traces import Job, read_philly

# 2 spines x 2 racks x 1 node of 4 GPUs.
TREE = "tree:2,2,1,4"


def write_model(path: Path, rows: list[tuple[str, str, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["job_type", "span", "factor"])
        writer.writerows(rows)
    return path


def simple_model(tmp_path: Path) -> Path:
    """Default: rack 2, spine 3, wider 5 (so spine / rack = 1.5, wider / rack = 2.5)."""
    return write_model(
        tmp_path / "model.csv",
        [("*", "rack", "2"), ("*", "spine", "3"), ("*", "wider", "5")],
    )


def test_span_of_names_the_widest_level() -> None:
    paths = {"a": ("s0", "r0"), "b": ("s0", "r0"), "c": ("s0", "r1"), "d": ("s1", "r2")}
    assert span_of(["a"], paths) == "node"
    assert span_of(["a", "a"], paths) == "node"
    assert span_of(["a", "b"], paths) == "rack"
    assert span_of(["a", "c"], paths) == "spine"
    assert span_of(["a", "d"], paths) == "wider"
    assert span_of(["x", "y"], {"x": (), "y": ()}) == "rack"  # a flat cluster: one domain


def test_reference_span_is_the_tightest_possible() -> None:
    assert reference_span(8, 8) == "node"
    assert reference_span(9, 8) == "rack"


def test_cited_model_reads_the_pollux_rows() -> None:
    """ResNet-50 at batch 64 reads ImageNet's per-GPU batch 57 row: e = step(44)/step(4) - 1."""
    steps = {}
    with POLLUX_DATA.open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            steps[(row["app"], row["placement"], row["local_bsz"])] = float(row["step_time_s"])
    excess = steps[("imagenet", "44", "57")] / steps[("imagenet", "4", "57")] - 1
    entry = cited_model().entry("ResNet-50 (batch size 64)")
    assert entry.times == pytest.approx((1, 1 + excess, 1 + 2 * excess, 1 + 4 * excess))
    assert entry.status.startswith("rack measured")
    assert "per-GPU batch 57" in entry.source
    assert "GUESSED" in cited_model().entry("LM (batch size 20)").status  # the BERT proxy
    unknown = cited_model().entry("no such type")
    assert unknown.job_type == "*" and unknown.status.startswith("GUESSED")
    assert cited_model().entry(None) == unknown


def test_cited_model_factors_grow_with_the_span() -> None:
    for row in cited_model().rows():
        times = [float(str(row[span])) for span in SPANS]
        assert times == sorted(times) and times[0] == 1.0, row


def test_model_for_resolves_auto_by_the_trace() -> None:
    assert model_for("auto", [None, None]) is None
    model = model_for("auto", [None, "ResNet-18 (batch size 32)"])
    assert model is not None and model.name == "cited"
    assert model_for("none", ["ResNet-18 (batch size 32)"]) is None


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([("*", "rack", "2"), ("*", "spine", "3")], "has no wider"),
        ([("a", "rack", "2"), ("a", "spine", "3"), ("a", "wider", "4")], "'*'"),
        ([("*", "rack", "two")], "not a number"),
        ([("*", "rack", "-1")], "finite and > 0"),
        ([("*", "rack", "nan")], "finite and > 0"),
        ([("*", "galaxy", "2")], "span (one of"),
        ([("*", "numa", "0")], "finite and > 0"),
    ],
)
def test_bad_model_files_are_named(
    tmp_path: Path, rows: list[tuple[str, str, str]], message: str
) -> None:
    path = write_model(tmp_path / "bad.csv", rows)
    with pytest.raises(SimError, match="placement model") as caught:
        read_model(path)
    assert message in str(caught.value)
    with pytest.raises(SimError):
        SimSettings(placement_model=str(tmp_path / "bad.csv"))


def test_missing_model_file_is_a_sim_error(tmp_path: Path) -> None:
    with pytest.raises(SimError, match="cannot read"):
        load_model(str(tmp_path / "absent.csv"))


def test_a_spread_job_runs_longer_and_counts_the_cost(tmp_path: Path) -> None:
    """A 2 x 4 gang on one-node racks spans a spine: 1.5 times its rack run time."""
    model = str(simple_model(tmp_path))
    jobs = [Job("gang", 0, 100, 8, 2, 4, job_type="x")]
    spec = parse_cluster(TREE)
    result = Replay(jobs, spec, "best-fit", SimSettings(placement_model=model)).run()
    (record,) = result.records
    assert record.end_s == pytest.approx(150.0)
    assert record.spread_gpu_s == pytest.approx(50.0 * 8)
    figures = summarize(result, spec, (0.0, 150.0))
    assert figures["spread_gpu_hours"] == pytest.approx(400 / 3600)
    assert figures["by_job_type"]["x"]["slowdown"]["mean"] == pytest.approx(1.5)
    plain = Replay(jobs, spec, "best-fit", SimSettings(placement_model="none")).run()
    assert plain.records[0].end_s == pytest.approx(100.0)


def test_blind_spreading_wider_costs_more(tmp_path: Path) -> None:
    """A 4 x 1 gang fits one node (its reference span); spread by blind, it runs longer."""
    model = str(simple_model(tmp_path))
    jobs = [Job("g", 0, 100, 4, 4, 1, job_type="x")]
    spec = parse_cluster(TREE)
    packed = Replay(jobs, spec, "best-fit", SimSettings(placement_model=model)).run()
    assert packed.records[0].end_s == pytest.approx(100.0)  # best-fit: one node
    spread = Replay(jobs, spec, "blind", SimSettings(placement_model=model)).run()
    record = spread.records[0]
    span = span_of(record.nodes, dict(zip(spec.names, spec.paths, strict=True)))
    expected = {"node": 1, "rack": 2, "spine": 3, "wider": 5}[span]
    assert record.end_s == pytest.approx(100.0 * expected)


def test_checkpointed_work_is_counted_at_the_placement_speed(tmp_path: Path) -> None:
    """A failure at t=90 under a job running at 1.5x, checkpoints every 60 s of run time.

    60 s of wall time were saved (40 s of work), 30 s lost; the job restarts at once on spine
    s1 (again 1.5x) and runs its last 60 s of work in 90 s: it ends at 180. Its spreading cost
    is the same as without the failure: 100 s of work x 0.5 x 8 GPUs.
    """
    model = str(simple_model(tmp_path))
    jobs = [Job("gang", 0, 100, 8, 2, 4, job_type="x")]
    replay = Replay(
        jobs, parse_cluster(TREE), "best-fit", SimSettings(placement_model=model, checkpoint_s=60)
    )
    replay._next_failure = lambda after: None  # type: ignore[method-assign]  # this one only
    replay.push(90.0, FAILURE, ("s0-r0-n0", 0))
    (record,) = replay.run().records
    assert record.restarts == 1
    assert record.lost_gpu_s == pytest.approx(30.0 * 8)
    assert record.end_s == pytest.approx(180.0)
    assert record.spread_gpu_s == pytest.approx(400.0)


def test_a_numa_split_pod_slows_its_job_by_the_numa_factor(tmp_path: Path) -> None:
    """As test_sim's NUMA case: A (2 GPUs) lands across sockets under best-fit, not with numa."""
    rows = [("*", "rack", "2"), ("*", "spine", "3"), ("*", "wider", "5"), ("*", "numa", "1.5")]
    model = str(write_model(tmp_path / "numa.csv", rows))
    jobs = [
        Job("B0", 0, 100, 3, 1, 3),
        Job("B1", 0, 100, 3, 1, 3),
        Job("A", 10, 10, 2, 1, 2),
    ]
    spec = parse_cluster("tree:1,1,2,8")
    settings = SimSettings(numa_split=True, placement_model=model)
    split = Replay(jobs, spec, "best-fit", settings).run().records[2]
    assert split.numa_split and split.end_s == pytest.approx(10 + 15)
    single = Replay(jobs, spec, "best-fit+numa", settings).run().records[2]
    assert not single.numa_split and single.end_s == pytest.approx(10 + 10)
    assert cited_model().entry("ResNet-50 (batch size 64)").numa == pytest.approx(
        1 + (cited_model().entry("ResNet-50 (batch size 64)").times[1] - 1) / 4
    )


def test_rack_only_waits_for_a_rack_and_rejects_what_never_fits() -> None:
    jobs = [Job("big", 0, 100, 8, 2, 4), Job("one", 0, 100, 4, 1, 4)]
    result = Replay(jobs, parse_cluster(TREE), "rack-only", SimSettings()).run()
    big, one = result.records
    assert big.rejected is not None and big.rejected.startswith("never fits")
    assert one.rejected is None and one.end_s == pytest.approx(100.0)
    soft = Replay(jobs, parse_cluster(TREE), "best-fit", SimSettings()).run()
    assert soft.records[0].end_s is not None  # best-fit spreads it instead


def test_philly_reader_keeps_the_job_type() -> None:
    path = Path(__file__).parent.parent / "python/gangplace/data/philly-6c71a0-first400.trace"
    jobs = read_philly(path)
    assert all(job.job_type for job in jobs)
    assert {job.job_type for job in jobs} <= set(cited_model().entries)


def test_cli_reports_the_model_and_rejects_a_bad_one(tmp_path: Path) -> None:
    out = tmp_path / "sim"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gangplace",
            "simulate",
            "--policies",
            "best-fit,blind",
            "--placement-model",
            "cited",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "GPU-h lost to spreading" in done.stdout
    report = json.loads((out / "report.json").read_text())
    assert report["settings"]["placement_model"] == "cited"
    assert any(row["status"].startswith("GUESSED") for row in report["placement_model"])
    assert report["policies"]["blind"]["spread_gpu_hours"]["mean"] > 0
    bad = write_model(tmp_path / "bad.csv", [("*", "rack", "x")])
    done = subprocess.run(
        [sys.executable, "-m", "gangplace", "simulate", "--placement-model", str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and "not a number" in done.stderr
    assert "Traceback" not in done.stderr
