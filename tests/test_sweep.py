"""gangplace sweep: the same figures on a process pool, serially and on a local Ray."""

from __future__ import annotations

import json
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


def test_ray_gives_the_same_figures() -> None:
    pytest.importorskip("ray")
    kwargs: dict[str, Any] = {"policies": ("best-fit",), "seeds": (0, 1)}
    local = sweep([TRACE], ["tree:1,2,2,8"], workers=1, **kwargs)
    on_ray = sweep([TRACE], ["tree:1,2,2,8"], executor="ray", workers=2, **kwargs)
    assert _figures(local) == _figures(on_ray)
    assert on_ray.report["executor"] == "ray"


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
