"""Per-job output of a simulation (``gangplace simulate --jobs-out FILE``; issue 49, item 4).

One row per job, policy and workload seed, with everything the report's figures are made
from, so that anyone can recompute them without the Python API (docs/command-line.md
"Per-job output"):

- ``seed``, ``policy``, ``job``, ``owner``, ``priority``, ``arrival_s``, ``gpus``, ``pods``,
  ``gpus_per_pod``, ``duration_s`` (the job's run time at its tightest span; empty in an
  arrival-only trace);
- ``status``: ``finished``, ``running_at_end`` (started, not finished when the run
  stopped), ``never_started``, ``rejected`` or ``not_arrived`` (the run stopped first);
  ``rejected_reason``; ``admitted_elsewhere``: this policy rejected it but another policy of
  the comparison admitted it, so it is counted here as never started (issue 49);
- ``run_end_s``: where the run stopped (the same on every row of a run); ``stop``: how
  (``""``, ``standoff``, ``livelock`` or ``cut``);
- ``first_start_s``, ``end_s`` (when it finished), ``restarts``;
- ``first_promise_s``: the time of the first backfill reservation it got while waiting for
  its first start (docs/scheduler.md S5: the head's under EASY, the first
  ``reservation_depth`` blocked jobs' under conservative backfill), empty when it got none
  (it started without waiting behind a head, or was never reserved for); a promise is kept
  when ``first_start_s`` is at or before it;
- ``first_wait_s``: arrival to first start, or to ``run_end_s`` when it never started
  (``censored_wait`` is then true: a lower bound); ``total_wait_s``: every queued period,
  an open one counted to ``run_end_s``; ``completion_s``: arrival to ``end_s``, or to
  ``run_end_s`` for an admitted job that did not finish (``censored_completion``);
- ``level``, ``domain``: the smallest domain holding its last placement (``node``, a
  level's name, or ``cluster``) and its path; ``placement_factor``: the placement model's
  run-time factor there (1 without a model);
- ``spread_gpu_s``, ``lost_gpu_s``: GPU-seconds its placements cost beyond its tightest
  span, and lost to stops past the last checkpoint;
- ``runs``: every run as ``start-end@node+node`` separated by ``;`` (``end`` empty for the
  run still going at ``run_end_s``).

The file is CSV, or Parquet when its name ends in ``.parquet`` (needs pyarrow).
"""

from __future__ import annotations

import csv
import importlib
from pathlib import Path
from typing import Any

from gangplace.sim.clusters import ClusterSpec
from gangplace.sim.errors import SimError
from gangplace.sim.replay import JobRecord, RunResult

__all__ = ["COLUMNS", "JobRows"]

COLUMNS = (
    "seed", "policy", "job", "owner", "priority", "arrival_s", "gpus", "pods", "gpus_per_pod",
    "duration_s", "status", "rejected_reason", "run_end_s", "stop", "first_start_s", "end_s",
    "first_promise_s", "restarts", "first_wait_s", "censored_wait", "total_wait_s", "completion_s",
    "censored_completion", "admitted_elsewhere", "level",
    "domain", "placement_factor", "spread_gpu_s", "lost_gpu_s", "runs",
)  # fmt: skip


class JobRows:
    """The rows of every run, collected as the runs end, then written once."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if self.path.suffix == ".parquet":
            _parquet(self.path)  # refused before any run when pyarrow is missing
        self.rows: list[dict[str, Any]] = []

    def add(
        self,
        seed: int,
        policy: str,
        result: RunResult,
        spec: ClusterSpec,
        admitted_elsewhere: set[str] | frozenset[str] = frozenset(),
    ) -> None:
        """The rows of one run; ``admitted_elsewhere`` as ``summarize`` takes it."""
        paths = dict(zip(spec.names, spec.paths, strict=True))
        stop = "cut" if result.cut_at_s is not None else ""
        if result.standoff is not None:
            stop = result.standoff.kind
        for record in result.records:
            counted = record.arrived and record.job.id in admitted_elsewhere
            self.rows.append(
                _row(seed, policy, record, result.end_s, stop, (spec.levels, paths), counted)
            )

    def write(self) -> Path:
        """Writes the file; returns its path."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.suffix == ".parquet":
            arrow, parquet = _parquet(self.path)
            columns = {name: [row[name] for row in self.rows] for name in COLUMNS}
            parquet.write_table(arrow.table(columns), self.path)
            return self.path
        with self.path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(self.rows)
        return self.path


def _parquet(path: Path) -> tuple[Any, Any]:
    """``pyarrow`` and ``pyarrow.parquet``, or a ``SimError`` naming the file."""
    try:
        return importlib.import_module("pyarrow"), importlib.import_module("pyarrow.parquet")
    except ImportError as error:
        raise SimError(f"--jobs-out {path}: Parquet needs pyarrow (or name a .csv file)") from error


def _status(record: JobRecord) -> str:
    if not record.arrived:
        return "not_arrived"
    if record.rejected is not None:
        return "rejected"
    if record.first_start_s is None:
        return "never_started"
    return "finished" if record.end_s is not None else "running_at_end"


def _row(
    seed: int,
    policy: str,
    record: JobRecord,
    run_end_s: float,
    stop: str,
    tree: tuple[tuple[str, ...], dict[str, tuple[str, ...]]],
    admitted_elsewhere: bool,
) -> dict[str, Any]:
    """One job's row.

    A job this policy rejected but another admitted is counted as never started here, as
    ``summarize(admitted_elsewhere=)`` counts it.
    """
    job = record.job
    status = "never_started" if admitted_elsewhere else _status(record)
    waits = status in ("finished", "running_at_end", "never_started")
    first_wait = None
    if waits:
        started = record.first_start_s
        first_wait = started if started is not None else max(run_end_s, job.arrival_s)
        first_wait -= job.arrival_s
    open_wait = record.queued_since_s
    total_wait = None
    if admitted_elsewhere:
        total_wait = first_wait  # waiting to the end here, as ``summarize`` counts it
    elif waits:
        total_wait = record.waited_s + (
            max(0.0, run_end_s - open_wait) if open_wait is not None else 0.0
        )
    level, domain = _domain(record.nodes, *tree)
    return {
        "seed": seed,
        "policy": policy,
        "job": job.id,
        "owner": job.owner or "",
        "priority": job.priority,
        "arrival_s": job.arrival_s,
        "gpus": job.gpus,
        "pods": job.pods,
        "gpus_per_pod": job.gpus_per_pod,
        "duration_s": job.duration_s,
        "status": status,
        "rejected_reason": record.rejected or "",
        "run_end_s": run_end_s,
        "stop": stop,
        "first_start_s": record.first_start_s,
        "end_s": record.end_s,
        "first_promise_s": record.promised_s,
        "restarts": record.restarts,
        "first_wait_s": first_wait,
        "censored_wait": waits and record.first_start_s is None,
        "total_wait_s": total_wait,
        "completion_s": _completion(record, run_end_s, waits),
        "censored_completion": waits and record.end_s is None and job.duration_s is not None,
        "admitted_elsewhere": admitted_elsewhere,
        "level": level,
        "domain": domain,
        "placement_factor": record.speed if record.periods else None,
        "spread_gpu_s": record.spread_gpu_s,
        "lost_gpu_s": record.lost_gpu_s,
        "runs": ";".join(_run_text(period) for period in record.periods),
    }


def _completion(record: JobRecord, run_end_s: float, admitted: bool) -> float | None:
    """Arrival to end; a job admitted but not finished censored at the run's end."""
    job = record.job
    if record.end_s is not None:
        return record.end_s - job.arrival_s
    if not admitted or job.duration_s is None:
        return None
    return max(run_end_s, job.arrival_s) - job.arrival_s


def _run_text(period: list[Any]) -> str:
    start, end, nodes = period[0], period[1], period[2]
    return f"{start:g}-{'' if end is None else format(end, 'g')}@{'+'.join(nodes)}"


def _domain(
    nodes: tuple[str, ...], levels: tuple[str, ...], paths: dict[str, tuple[str, ...]]
) -> tuple[str, str]:
    """The smallest domain holding ``nodes``: its level and its path (``""``: none)."""
    if not nodes:
        return "", ""
    if len(nodes) == 1:
        return "node", "/".join((*paths.get(nodes[0], ()), nodes[0]))
    common = list(paths.get(nodes[0], ()))
    for node in nodes[1:]:
        path = paths.get(node, ())
        depth = 0
        while depth < min(len(common), len(path)) and common[depth] == path[depth]:
            depth += 1
        common = common[:depth]
    if not common:
        return "cluster", ""
    return levels[len(common) - 1], "/".join(common)
