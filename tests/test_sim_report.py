"""The simulator's smaller report items (issue 26, item 9)."""

from __future__ import annotations

import math
import random
import statistics
from pathlib import Path

import pytest

from gangplace.sim.errors import SimError
from gangplace.sim.run import simulate
from gangplace.sim.settings import SimSettings, assumptions
from gangplace.sim.traces import (
    PHILLY_MAX_S,
    PHILLY_MEAN_S,
    PHILLY_MEDIAN_S,
    capped_lognormal_mean,
)


def test_a_negative_policy_seed_is_refused() -> None:
    with pytest.raises(SimError, match="policy seed"):
        SimSettings(policy_seed=-1)


def test_no_pod_timeout_reads_as_never_releasing() -> None:
    lines = assumptions(SimSettings(pod_timeout_s=None), synthetic_durations=False)
    assert "partial gangs never release" in lines[1]
    assert "after never" not in " ".join(lines)


def test_the_duration_label_gives_the_mean_after_the_cap() -> None:
    """The closed form agrees with drawing: 200,000 seeded draws, within 3%."""
    closed = capped_lognormal_mean(PHILLY_MEDIAN_S, PHILLY_MEAN_S, PHILLY_MAX_S)
    rng = random.Random(7)
    mu = math.log(PHILLY_MEDIAN_S)
    sigma = math.sqrt(2 * math.log(PHILLY_MEAN_S / PHILLY_MEDIAN_S))
    drawn = statistics.fmean(
        min(rng.lognormvariate(mu, sigma), PHILLY_MAX_S) for _ in range(200_000)
    )
    assert closed == pytest.approx(drawn, rel=0.03)
    assert 16_000 < closed < 16_600  # below the uncapped 18,006 s
    label = assumptions(SimSettings(), synthetic_durations=True)
    assert any(f"lowers the mean to {closed:,.0f} s" in line for line in label)


def test_locality_plot_without_multi_pod_gangs_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No multi-pod gang: policy names on the axis, a sentence, no empty legend."""
    import gangplace.sim.plots as plots

    figures = {}
    save = plots._save

    def keep(fig: object, path: Path) -> Path:
        figures[path.name] = fig
        return save(fig, path)

    monkeypatch.setattr(plots, "_save", keep)
    trace = tmp_path / "small.csv"
    trace.write_text("arrival_s,duration_s,gpus\n0,10,1\n5,10,2\n")
    simulate(trace, cluster="tree:1,1,2,4", policies=("best-fit", "blind"), out=tmp_path)
    axis = figures["locality.png"].axes[0]  # type: ignore[attr-defined]
    assert [label.get_text() for label in axis.get_yticklabels()] == ["best-fit", "blind"]
    assert axis.get_legend() is None
    assert any("no multi-pod gang" in text.get_text() for text in axis.texts)
