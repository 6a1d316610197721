"""Summaries of figures over seeds: mean and a 95% Student-t interval."""

from __future__ import annotations

import math
import statistics
from typing import Any

__all__ = ["figure", "interval", "percentiles"]

# Two-sided 95% Student-t quantiles by degrees of freedom (1-30); above 30, 1.96.
_T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def interval(values: list[float]) -> dict[str, float | int | None]:
    """``mean``, ``low`` and ``high`` of a 95% t-interval of the mean, ``n`` and ``sd``.

    One value: no interval (``low``/``high`` ``None``).
    """
    values = [v for v in values if v is not None and math.isfinite(v)]
    if not values:
        return {"mean": None, "low": None, "high": None, "n": 0, "sd": None}
    mean = statistics.fmean(values)
    if len(values) == 1:
        return {"mean": mean, "low": None, "high": None, "n": 1, "sd": None}
    sd = statistics.stdev(values)
    t = _T95[len(values) - 2] if len(values) - 1 <= len(_T95) else 1.96
    half = t * sd / math.sqrt(len(values))
    return {"mean": mean, "low": mean - half, "high": mean + half, "n": len(values), "sd": sd}


def percentiles(values: list[float]) -> dict[str, float | None]:
    """Mean, p50, p95, p99 (nearest rank; ``None`` without values)."""
    if not values:
        return {"mean": None, "p50": None, "p95": None, "p99": None}
    ordered = sorted(values)

    def at(share: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, math.ceil(share * len(ordered)) - 1))]

    return {
        "mean": statistics.fmean(ordered),
        "p50": at(0.50),
        "p95": at(0.95),
        "p99": at(0.99),
    }


def figure(row: dict[str, Any], dotted: str) -> Any:
    """A figure of a run's summary by its dotted name (``wait_s.p95``); ``None`` if absent."""
    value: Any = row
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value
