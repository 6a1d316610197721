"""Prometheus metrics of a :class:`~gangplace.k8s.Controller` (extra ``gangplace[metrics]``).

- ``gangplace_k8s_events_total{kind, result}``: watch events applied, by kind (``node``,
  ``pod``) and by what the sync did (``SyncResult.action``: ``node added``, ``pod adopted``,
  ``ignored``...), and ``stale`` for events of an older watch dropped after a relist.
- ``gangplace_k8s_warnings_total``: warnings (each also logged).
- ``gangplace_k8s_pods_waiting`` (gauge): pods of the controller's scheduler name not bound.
- ``gangplace_k8s_relist_duration_seconds`` (histogram) and
  ``gangplace_k8s_relists_total{reason}`` (``start``, ``gone``: a watch got 410).
- ``gangplace_k8s_binds_total{result}``: pods bound (``bound``), pods whose binding failed
  (``failed``), pods bound before a failure in their gang and deleted (``deleted``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["ControllerMetrics"]

RELIST_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class ControllerMetrics:
    """The metric objects, registered in one ``prometheus_client`` registry."""

    def __init__(self, registry: Any) -> None:
        try:
            from prometheus_client import Counter, Gauge, Histogram
        except ImportError:  # pragma: no cover - depends on the environment
            raise ImportError(
                "Controller(metrics=...) needs prometheus_client: pip install 'gangplace[metrics]'"
            ) from None
        self.events = Counter(
            "gangplace_k8s_events_total",
            "Watch events applied, by kind and by what the sync did.",
            ["kind", "result"],
            registry=registry,
        )
        self.warnings = Counter(
            "gangplace_k8s_warnings_total",
            "Warnings of the sync and the controller.",
            registry=registry,
        )
        self.waiting = Gauge(
            "gangplace_k8s_pods_waiting",
            "Pods of the controller's scheduler name not bound yet.",
            registry=registry,
        )
        self.relist_duration = Histogram(
            "gangplace_k8s_relist_duration_seconds",
            "Seconds one relist took (list both kinds, then resync).",
            buckets=RELIST_BUCKETS,
            registry=registry,
        )
        self.relists = Counter(
            "gangplace_k8s_relists_total",
            "Relists by reason: start, gone (410).",
            ["reason"],
            registry=registry,
        )
        self.binds = Counter(
            "gangplace_k8s_binds_total",
            "Pods by binding result: bound, failed, deleted (bound before a failure).",
            ["result"],
            registry=registry,
        )
