"""Trace readers: Philly per-VC traces, the Alibaba GPU trace v2023, and a plain CSV.

Every reader returns a list of :class:`Job` sorted by (arrival, id), and raises
:class:`TraceError` (a ``ValueError``) naming the file and line of the first malformed row.

Turning a job into a gang: a job of ``g`` GPUs on nodes of ``G`` GPUs is one pod of ``g`` GPUs
when ``g <= G``; otherwise ``ceil(g / G)`` pods. Gangs have pods of one size, so when ``g``
is not a multiple of ``G`` the pod size is the largest divisor of ``g`` that is at most ``G``
(12 GPUs on 8-GPU nodes: 2 pods of 6), keeping the GPU count exact. A plain CSV may give
``pods`` and ``gpus_per_pod`` itself.
"""

from __future__ import annotations

import csv
import math
import random
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from gangplace.sim.errors import TraceError

__all__ = [
    "PHILLY_MAX_S",
    "PHILLY_MEAN_S",
    "PHILLY_MEDIAN_S",
    "Job",
    "Trace",
    "TraceError",
    "gang_shape",
    "read_alibaba",
    "read_alibaba_trace",
    "read_csv",
    "read_philly",
    "read_trace",
    "read_traces",
]

# Published Philly statistics (../shared/data/trace-summaries/acme_cluster_summary.csv).
PHILLY_MEDIAN_S = 874.0
PHILLY_MEAN_S = 18_006.0
PHILLY_MAX_S = 4_240_676.0  # the longest GPU job of the published Philly summary


def capped_lognormal_mean(median: float, mean: float, cap: float) -> float:
    """The mean of ``min(X, cap)`` for X log-normal with this median and (uncapped) mean."""
    mu, sigma = math.log(median), math.sqrt(2 * math.log(mean / median))
    normal = statistics.NormalDist()
    below = normal.cdf((math.log(cap) - mu - sigma * sigma) / sigma)
    return mean * below + cap * (1 - normal.cdf((math.log(cap) - mu) / sigma))


# The mean of the drawn durations after the cap (about 16,295 s).
PHILLY_CAPPED_MEAN_S = capped_lognormal_mean(PHILLY_MEDIAN_S, PHILLY_MEAN_S, PHILLY_MAX_S)


@dataclass(frozen=True)
class Job:
    """One job of a trace: a gang arriving at ``arrival_s`` and running ``duration_s``.

    Attributes:
        id: Position in the file (0-based), or the trace's own name.
        arrival_s: Seconds from the start of the trace.
        duration_s: Run time once started; ``None`` for arrival-only traces.
        gpus: GPUs in all.
        pods: Pods of the gang.
        gpus_per_pod: GPUs per pod (``pods * gpus_per_pod == gpus``).
        required_level: Coarsest level the gang may span, if the trace says.
        owner: The tenant (a Philly VC, a CSV ``owner`` column), if known.
        priority: Its priority (a CSV ``priority`` column; default 0).
        real_wait_s: The wait the trace itself recorded (Alibaba ``scheduled_time`` minus
            ``creation_time``), to report beside the simulated one.
        job_type: What the job trains, if the trace says (Philly VC traces: field 1, e.g.
            ``"ResNet-50 (batch size 64)"``): keys the placement model
            (:mod:`gangplace.sim.speed`).
        resources_per_pod: What each pod asks besides GPUs, ``(name, quantity)`` in base
            units (docs/resources.md "Node resources"; Alibaba ``cpu_milli`` as ``cpu``,
            ``memory_mib`` as ``memory`` in bytes); empty when the trace gives none.
        gpu_milli: The thousandths of one GPU each pod asks (Alibaba ``gpu_milli`` < 1000 on a
            one-GPU pod; docs/resources.md "Fractions of a GPU"); ``None``: whole GPUs.

    """

    id: str
    arrival_s: float
    duration_s: float | None
    gpus: int
    pods: int
    gpus_per_pod: int
    required_level: str | None = None
    owner: str | None = None
    priority: int = 0
    real_wait_s: float | None = None
    job_type: str | None = None
    resources_per_pod: tuple[tuple[str, int], ...] = ()
    gpu_milli: int | None = None

    @property
    def gpu_share(self) -> float:
        """GPUs it asks, a fraction counting its share of one GPU (arrived load)."""
        return self.gpus if self.gpu_milli is None else self.gpu_milli / 1000


@dataclass(frozen=True)
class Trace:
    """The jobs of one or more trace files and what the reader knows about them.

    Attributes:
        jobs: Sorted by (arrival, id).
        synthetic_durations: The durations were drawn (guessed), not read.
        never_ran: Jobs the trace says never ran (Alibaba ``Pending`` pods without a
            ``scheduled_time``): left out of the replay, counted here.
        owners: The owners, sorted (empty when the trace has none).
        fractions: GPU pods that ask a fraction of a GPU (Alibaba ``gpu_milli`` < 1000), kept
            as fractions (``Job.gpu_milli``): the report says how many.
        unmodelled: Requests the trace gives that the replay does not model (Alibaba
            ``gpu_spec``; ``cpu_milli`` and ``memory_mib`` too on a cluster without CPU or
            memory), named in the report.

    """

    jobs: list[Job]
    synthetic_durations: bool = False
    never_ran: int = 0
    owners: tuple[str, ...] = ()
    fractions: int = 0
    unmodelled: tuple[str, ...] = ()


def gang_shape(gpus: int, gpus_per_node: int) -> tuple[int, int]:
    """``(pods, gpus_per_pod)`` for a job of ``gpus`` GPUs on nodes of ``gpus_per_node``."""
    if gpus <= gpus_per_node:
        return 1, gpus
    size = next(d for d in range(gpus_per_node, 0, -1) if gpus % d == 0)
    return gpus // size, size


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise TraceError(f"{path}: cannot read: {error}") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            yield number, line


def _number(text: str, what: str, where: str, *, integer: bool = False) -> float:
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        raise TraceError(f"{where}: {what} {text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise TraceError(f"{where}: {what} {text!r} must be finite and >= 0")
    return value


def read_philly(
    path: str | Path, *, seed: int = 0, gpus_per_node: int = 8, owner: str | None = None
) -> list[Job]:
    """A Philly per-VC trace (tab-separated, 7 fields; field 6 arrival s, field 7 GPUs).

    The traces carry no real durations, so each job draws one from a log-normal fitted to the
    published Philly figures: median 874 s (mu = ln 874) and mean 18,006 s
    (sigma = sqrt(2 ln(18006 / 874)) = 2.46), seeded by ``seed``, and capped at Philly's
    published maximum run time (4,240,676 s). These durations are guesses: reports label
    them synthetic.
    """
    path = Path(path)
    rng = random.Random(seed)
    mu = math.log(PHILLY_MEDIAN_S)
    sigma = math.sqrt(2 * math.log(PHILLY_MEAN_S / PHILLY_MEDIAN_S))
    jobs = []
    for number, line in _lines(path):
        where = f"{path}:{number}"
        fields = line.split("\t")
        if len(fields) != 7:
            raise TraceError(f"{where}: expected 7 tab-separated fields, found {len(fields)}")
        arrival = _number(fields[5], "arrival", where)
        gpus = int(_number(fields[6], "GPU count", where, integer=True))
        if gpus < 1:
            raise TraceError(f"{where}: GPU count must be >= 1, got {gpus}")
        pods, size = gang_shape(gpus, gpus_per_node)
        duration = min(rng.lognormvariate(mu, sigma), PHILLY_MAX_S)
        job_type = fields[0].strip() or None
        jobs.append(
            Job(
                f"{path.stem}-{number - 1}",
                arrival,
                duration,
                gpus,
                pods,
                size,
                owner=owner,
                job_type=job_type,
            )
        )
    return sorted(jobs, key=lambda job: job.arrival_s)


def read_alibaba(path: str | Path, *, gpus_per_node: int = 8) -> list[Job]:
    """An Alibaba GPU trace v2023 pod list (``openb_pod_list_*.csv``).

    Pods without GPUs are skipped; a one-GPU pod asking a fraction of it (``gpu_milli <
    1000``) keeps it (``Job.gpu_milli``: docs/resources.md "Fractions of a GPU"). With times, a pod
    arrives at its ``creation_time`` and runs from its ``scheduled_time`` to its
    ``deletion_time`` (so its queue time in the real cluster is not counted as run time);
    ``real_wait_s`` keeps that real queue time. A pod without a ``scheduled_time`` never ran:
    it is left out and counted (see :func:`read_alibaba_trace`). The ``multigpu*`` lists have
    no times and give arrival-only jobs (``arrival_s`` = position, ``duration_s`` =
    ``None``), to be replayed as the FGD paper does.
    """
    return read_alibaba_trace(path, gpus_per_node=gpus_per_node).jobs


def read_alibaba_trace(path: str | Path, *, gpus_per_node: int = 8) -> Trace:
    """:func:`read_alibaba` with the count of never-run pods."""
    path = Path(path)
    rows = list(_lines(path))
    if not rows:
        raise TraceError(f"{path}: empty file")
    header = next(csv.reader([rows[0][1]]))
    if "num_gpu" not in header:
        raise TraceError(f"{path}:{rows[0][0]}: no num_gpu column in the header")
    timed = "creation_time" in header and "deletion_time" in header
    jobs = []
    never_ran = fractions = 0
    for number, line in rows[1:]:
        where = f"{path}:{number}"
        values = next(csv.reader([line]))
        if len(values) != len(header):
            raise TraceError(f"{where}: expected {len(header)} fields, found {len(values)}")
        row = dict(zip(header, values, strict=True))
        gpus = int(_number(row["num_gpu"], "num_gpu", where, integer=True))
        if gpus == 0:
            continue
        milli_text = (row.get("gpu_milli") or "").strip()
        milli = _number(milli_text, "gpu_milli", where) if milli_text else 1000.0
        if not 0 <= milli <= 1000:
            raise TraceError(f"{where}: gpu_milli {milli_text!r} is not in 0..1000")
        fraction = int(milli) if gpus == 1 and 1 <= milli < 1000 else None
        pods, size = gang_shape(gpus, gpus_per_node)
        asks = _pod_resources(row, pods, where)
        name = row.get("name") or str(number)
        if timed:
            created = _number(row["creation_time"], "creation_time", where)
            deleted = _number(row["deletion_time"], "deletion_time", where)
            scheduled_text = (row.get("scheduled_time") or "").strip()
            if deleted < created:
                raise TraceError(f"{where}: deletion_time is before creation_time")
            if "scheduled_time" in row and not scheduled_text:
                never_ran += 1
                continue
            scheduled = (
                _number(scheduled_text, "scheduled_time", where) if scheduled_text else created
            )
            if not created <= scheduled <= deleted:
                raise TraceError(f"{where}: scheduled_time is outside creation..deletion")
            jobs.append(
                Job(
                    name,
                    created,
                    deleted - scheduled,
                    gpus,
                    pods,
                    size,
                    real_wait_s=scheduled - created,
                    resources_per_pod=asks,
                    gpu_milli=fraction,
                )
            )
        else:
            job = Job(name, float(len(jobs)), None, gpus, pods, size, resources_per_pod=asks)
            jobs.append(replace(job, gpu_milli=fraction))
        fractions += fraction is not None  # a share of one GPU (counted for the report)
    unmodelled = tuple(c for c in ("gpu_spec",) if c in header)
    return Trace(
        sorted(jobs, key=lambda job: job.arrival_s),
        never_ran=never_ran,
        fractions=fractions,
        unmodelled=unmodelled,
    )


# Alibaba columns that are resources per pod: column -> (resource, base units per unit).
RESOURCE_COLUMNS = {"cpu_milli": ("cpu", 1), "memory_mib": ("memory", 2**20)}


def _pod_resources(row: dict[str, str], pods: int, where: str) -> tuple[tuple[str, int], ...]:
    """A row's CPU and memory per pod (a row split into ``pods`` pods shares them)."""
    asks = []
    for column, (resource, unit) in RESOURCE_COLUMNS.items():
        text = (row.get(column) or "").strip()
        if text:
            amount = _number(text, column, where) * unit
            if amount > 0:
                asks.append((resource, math.ceil(amount / pods)))
    return tuple(asks)


def with_cluster_resources(trace: Trace, offered: set[str]) -> Trace:
    """``trace`` with each pod asking only the resources the cluster's nodes offer.

    The columns of the others are named as not modelled (docs/resources.md "Node resources").
    """
    asked = {name for job in trace.jobs for name, _ in job.resources_per_pod}
    dropped = sorted(asked - offered)
    if not dropped:
        return trace
    columns = [c for c, (name, _) in RESOURCE_COLUMNS.items() if name in dropped]
    kept = [
        replace(job, resources_per_pod=tuple(p for p in job.resources_per_pod if p[0] in offered))
        for job in trace.jobs
    ]
    return replace(trace, jobs=kept, unmodelled=(*columns, *trace.unmodelled))


def read_csv(path: str | Path, *, gpus_per_node: int = 8) -> list[Job]:
    """A plain CSV: ``arrival_s,duration_s,gpus[,pods,gpus_per_pod,required_level,owner,priority]``.

    A header row naming these columns is required. ``pods`` and ``gpus_per_pod`` default to
    the split described in the module docstring; when given, their product must be ``gpus``.
    ``owner`` names the tenant, ``priority`` is an integer (default 0).
    """
    path = Path(path)
    rows = list(_lines(path))
    if not rows:
        raise TraceError(f"{path}: empty file")
    header = [name.strip() for name in next(csv.reader([rows[0][1]]))]
    missing = {"arrival_s", "duration_s", "gpus"} - set(header)
    if missing:
        raise TraceError(f"{path}:{rows[0][0]}: header lacks {', '.join(sorted(missing))}")
    jobs = []
    for number, line in rows[1:]:
        where = f"{path}:{number}"
        values = [value.strip() for value in next(csv.reader([line]))]
        if len(values) != len(header):
            raise TraceError(f"{where}: expected {len(header)} fields, found {len(values)}")
        row = dict(zip(header, values, strict=True))
        gpus = int(_number(row["gpus"], "gpus", where, integer=True))
        if gpus < 1:
            raise TraceError(f"{where}: gpus must be >= 1")
        pods, size = gang_shape(gpus, gpus_per_node)
        if row.get("pods") or row.get("gpus_per_pod"):
            pods = int(_number(row.get("pods") or "1", "pods", where, integer=True))
            size = int(
                _number(row.get("gpus_per_pod") or str(gpus), "gpus_per_pod", where, integer=True)
            )
            if pods * size != gpus or pods < 1:
                raise TraceError(f"{where}: pods x gpus_per_pod ({pods} x {size}) != gpus ({gpus})")
        jobs.append(
            Job(
                str(number - 1),
                _number(row["arrival_s"], "arrival_s", where),
                _number(row["duration_s"], "duration_s", where),
                gpus,
                pods,
                size,
                row.get("required_level") or None,
                owner=row.get("owner") or None,
                priority=_priority(row.get("priority") or "0", where),
            )
        )
    return sorted(jobs, key=lambda job: job.arrival_s)


def _priority(text: str, where: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise TraceError(f"{where}: priority {text!r} is not an integer") from None
    if not -(2**31) <= value < 2**31:
        raise TraceError(f"{where}: priority {value} is outside -2**31..2**31-1")
    return value


def read_trace(
    path: str | Path, *, format: str | None = None, seed: int = 0, gpus_per_node: int = 8
) -> list[Job]:
    """Reads a trace; ``format`` defaults from the file.

    ``.trace`` files are Philly; ``.csv`` files with a ``num_gpu`` column are Alibaba; any
    other file is the plain CSV.
    """
    path = Path(path)
    if format is None:
        format = _format_of(path)
    if format == "philly":
        return read_philly(path, seed=seed, gpus_per_node=gpus_per_node)
    if format == "alibaba":
        return read_alibaba(path, gpus_per_node=gpus_per_node)
    if format == "csv":
        return read_csv(path, gpus_per_node=gpus_per_node)
    raise TraceError(f"unknown trace format {format!r}; use philly, alibaba or csv")


def read_traces(
    paths: list[str | Path],
    *,
    format: str | None = None,
    seed: int = 0,
    gpus_per_node: int = 8,
) -> Trace:
    """Reads one trace, or several replayed together on one cluster.

    With several files every job's owner is its file's stem (a Philly VC name), unless the
    file names owners itself; durations are drawn with seeds derived from ``seed`` and the
    file's position, so adding a file does not change the others' draws.
    """
    jobs: list[Job] = []
    synthetic = False
    never_ran = fractions = 0
    unmodelled: dict[str, None] = {}
    for index, raw in enumerate(paths):
        path = Path(raw)
        kind = format or _format_of(path)
        owner = path.stem if len(paths) > 1 else None
        if kind == "philly":
            synthetic = True
            read = read_philly(
                path, seed=seed * 1009 + index, gpus_per_node=gpus_per_node, owner=owner
            )
        elif kind == "alibaba":
            trace = read_alibaba_trace(path, gpus_per_node=gpus_per_node)
            read, never_ran = trace.jobs, never_ran + trace.never_ran
            fractions += trace.fractions
            unmodelled.update(dict.fromkeys(trace.unmodelled))
        else:
            read = read_trace(path, format=kind, seed=seed, gpus_per_node=gpus_per_node)
        if owner is not None:
            read = [job if job.owner else _with_owner(job, owner) for job in read]
        jobs.extend(read)
    jobs.sort(key=lambda job: job.arrival_s)  # stable: file order, then row order
    owners = tuple(sorted({job.owner for job in jobs if job.owner is not None}))
    return Trace(jobs, synthetic, never_ran, owners, fractions, tuple(unmodelled))


def _with_owner(job: Job, owner: str) -> Job:
    from dataclasses import replace

    return replace(job, owner=owner)


def _format_of(path: Path) -> str:
    if path.suffix == ".trace":
        return "philly"
    first = next((line for _, line in _lines(path)), "")
    return "alibaba" if "num_gpu" in first.split(",") else "csv"
