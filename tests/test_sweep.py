"""gangplace sweep: the same figures on a process pool, serially and on a local Ray."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from gangplace.sim.errors import SimError
from gangplace.sim.sweep import sweep

TRACE = str(
    Path(__file__).resolve().parents[1] / "python/gangplace/data/philly-6c71a0-first400.trace"
)


def _figures(result: Any) -> list[tuple[str, str, str, Any, Any]]:
    return [
        (row["trace"], row["cluster"], row["policy"], row["figures"]["wait_s.mean"],
         row["figures"]["utilization"])
        for row in result.report["rows"]
    ]  # fmt: skip


def test_a_process_pool_gives_the_serial_figures(tmp_path: Path) -> None:
    kwargs: dict[str, Any] = {"policies": ("best-fit", "pod-by-pod"), "seeds": (0, 1)}
    clusters = ["tree:1,2,2,8", "tree:2,2,2,4"]
    serial = sweep([TRACE], clusters, workers=1, **kwargs)
    pooled = sweep([TRACE], clusters, workers=2, out=tmp_path, **kwargs)
    assert _figures(serial) == _figures(pooled)
    assert len(pooled.report["rows"]) == 4 and pooled.report["tasks"] == 8
    row = pooled.report["rows"][0]["figures"]
    assert row["wait_s.mean"]["n"] == 2 and row["wait_s.mean"]["low"] is not None
    saved = json.loads((tmp_path / "sweep.json").read_text())
    assert saved["rows"][0]["policy"] == "best-fit"
    assert "best-fit" in pooled.table() and "95% intervals" in pooled.table()


def _ray_temp_dirs() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("gangplace-ray-*")}


def test_ray_gives_the_same_figures_and_leaves_no_temporary_files() -> None:
    pytest.importorskip("ray")
    kwargs: dict[str, Any] = {"policies": ("best-fit",), "seeds": (0, 1)}
    before = _ray_temp_dirs()
    local = sweep([TRACE], ["tree:1,2,2,8"], workers=1, **kwargs)
    on_ray = sweep([TRACE], ["tree:1,2,2,8"], executor="ray", workers=2, **kwargs)
    assert _figures(local) == _figures(on_ray)
    assert on_ray.report["executor"] == "ray"
    assert _ray_temp_dirs() <= before  # its temporary directory is removed


def _listening() -> set[tuple[str, str]]:
    """(address, port) of every listening TCP socket, from ``ss``."""
    lines = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True, check=True).stdout
    found = set()
    for line in lines.splitlines():
        local = line.split()[3]
        address, _, port = local.rpartition(":")
        found.add((address, port))
    return found


def test_a_local_ray_listens_on_loopback_only() -> None:
    ray = pytest.importorskip("ray")
    if shutil.which("ss") is None:
        pytest.skip("needs ss (iproute2) to list the listening sockets")
    from gangplace.sim.sweep import local_ray_options

    before = _listening()
    temp = Path(tempfile.mkdtemp(prefix="gangplace-ray-"))
    options = local_ray_options(1, temp)
    ray.init(include_dashboard=False, log_to_driver=False, **options)
    try:
        opened = _listening() - before
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
    assert opened, "Ray opened no listening socket: the check would see nothing"
    loopback = {"127.0.0.1", "[::1]", "[::ffff:127.0.0.1]"}
    assert {address for address, _ in opened} <= loopback, opened


def test_a_task_that_cannot_run_is_reported_not_raised() -> None:
    result = sweep(["no/such.trace"], ["tree:1,1,1,8"], policies=("best-fit",), workers=1)
    assert "cannot read" in result.report["rows"][0]["figures"]["errors"][0]
    assert "FAILED" in result.table()


@pytest.mark.parametrize(
    "kwargs",
    [{"executor": "slurm"}, {"workers": 0}],
)
def test_bad_sweep_arguments(kwargs: dict[str, Any]) -> None:
    with pytest.raises(SimError):
        sweep([TRACE], ["tree:1,1,1,8"], **kwargs)
    with pytest.raises(SimError):
        sweep([], ["tree:1,1,1,8"])


def _cli(*args: str) -> Any:
    from gangplace.cli import main

    return main(list(args))


def test_cli_keeps_tree_specs_whole_and_exits_0_when_every_task_ran(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = _cli(
        "sweep", "--traces", TRACE, "--clusters", "tree:1,2,2,8;tree:2,2,2,4",
        "--policies", "best-fit", "--seeds", "0-1", "--workers", "1", "--out", str(tmp_path),
    )  # fmt: skip
    out = capsys.readouterr()
    assert status == 0, out.err
    report = json.loads((tmp_path / "sweep.json").read_text())
    assert sorted({row["cluster"] for row in report["rows"]}) == ["tree:1,2,2,8", "tree:2,2,2,4"]
    header = out.out.splitlines()[0]
    assert "standoffs" in header and "wait mean" in header
    # Intervals as [low, high], a unit per column, standoffs counted.
    row = out.out.splitlines()[1]
    assert re.search(r"\d \[\d+\.\d, \d+\.\d\] (s|min|h) ", row), row  # [low, high] unit
    assert re.search(r"\] %", row) and re.search(r"\d+ \[\d+, \d+\] jobs", row), row


def test_cli_repeated_flags_add_up(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = _cli(
        "sweep", "--trace", TRACE, "--cluster", "tree:1,2,2,8", "--cluster", "tree:1,1,2,8",
        "--policies", "best-fit", "--workers", "1", "--out", str(tmp_path),
    )  # fmt: skip
    assert status == 0, capsys.readouterr().err
    report = json.loads((tmp_path / "sweep.json").read_text())
    assert [row["cluster"] for row in report["rows"]] == ["tree:1,2,2,8", "tree:1,1,2,8"]


@pytest.mark.parametrize(
    ("trace", "cluster", "named"),
    [
        ("no/such.trace", "tree:1,1,1,8", "no/such.trace on tree:1,1,1,8, best-fit: "),
        (TRACE, "tree:2,x", "on tree:2,x, best-fit: "),
        (TRACE, "nosuchshape", "on nosuchshape, best-fit: "),
    ],
)
def test_cli_a_failed_task_makes_the_exit_status_non_zero_and_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], trace: str, cluster: str, named: str
) -> None:
    status = _cli(
        "sweep", "--traces", trace, "--clusters", cluster, "--policies", "best-fit",
        "--workers", "1", "--out", str(tmp_path),
    )  # fmt: skip
    err = capsys.readouterr().err
    assert status == 1
    assert f"gangplace sweep: failed: {trace} {named}" in err or named in err, err
