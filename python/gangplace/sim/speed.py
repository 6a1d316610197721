"""What placement does to a job's speed: run-time factors by the widest level its pods span.

The contract is the docs/command-line.md "Placement and speed" paragraph of the "Simulation"
section; docs/simulation.md shows the cited table and where every value comes from.

A model gives, per job type, the relative run time ``T(span)`` of a job whose pods span one
``node``, several nodes of one ``rack``, one ``spine`` (the level above the rack) or ``wider``,
with ``T(node) = 1``. A trace's duration is the job's run time at its *reference* span, the
tightest it can have (``node`` when its GPUs fit the largest node, else ``rack``); a job that
runs at span ``s`` runs ``T(s) / T(reference)`` times as long.

The cited model (``cited_model``):

- **Measured** (Pollux, Qiao et al., OSDI'21; its simulator's measurements, bundled as
  ``data/pollux-step-times.csv``): the seconds per step of a model on 4 GPUs of one node and on
  8 GPUs over two nodes at the same per-GPU batch size. Their ratio is ``T(rack) = 1 + e``: the
  excess ``e`` is what crossing nodes adds. ResNet-18 jobs read CIFAR-10 ResNet-18 rows,
  ResNet-50 jobs ImageNet ResNet-50 rows, at the measured per-GPU batch nearest (in ratio) to
  the job type's ``(batch size B)``.
- **GUESSED**: ``T(spine) = 1 + 2e`` and ``T(wider) = 1 + 4e`` (cross-rack traffic through a
  2:1 oversubscribed level above each rack doubles the communication excess per level: no
  measured source was found for cross-rack training speed); Transformer and LM jobs use the
  BERT rows as a proxy; every other type (and jobs without a type) uses the median ``e`` of
  all measured rows; a job with a pod whose GPUs span two NUMA halves of a node (the
  ``--numa-split`` scenario) runs ``1 + e/4`` times as long on top of its span factor (the
  inter-socket link crossed inside the node, taken as a quarter of what crossing nodes costs:
  no measurement of it was found).
"""

from __future__ import annotations

import csv
import functools
import math
import re
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from gangplace.sim.errors import SimError

__all__ = [
    "CROSS_LEVEL_GROWTH",
    "MODEL_CHOICES",
    "SPANS",
    "PlacementModel",
    "SpeedEntry",
    "cited_model",
    "load_model",
    "model_for",
    "read_model",
    "reference_span",
    "span_of",
]

SPANS = ("node", "rack", "spine", "wider")
NUMA = "numa"  # a model file's row for the NUMA-split factor (optional, default 1)
MODEL_CHOICES = ("auto", "none", "cited")
CROSS_LEVEL_GROWTH = 2.0  # GUESSED: the communication excess doubles per level above a rack
NUMA_SHARE = 0.25  # GUESSED: a NUMA split costs this share of the cross-node excess
DEFAULT_TYPE = "*"
POLLUX_DATA = Path(__file__).resolve().parent.parent / "data" / "pollux-step-times.csv"
POLLUX_SOURCE = (
    "Pollux (Qiao et al., OSDI'21), petuum/adaptdl@de25dcc9 simulator/traces/{app}/placements.csv"
)
# Job type family (the text before " (batch size") -> (Pollux app, status).
FAMILIES = {
    "ResNet-18": ("cifar10", "measured"),
    "ResNet-50": ("imagenet", "measured"),
    "Transformer": ("bert", "GUESSED (proxy: BERT rows)"),
    "LM": ("bert", "GUESSED (proxy: BERT rows)"),
}
_BATCH = re.compile(r"^(?P<family>.+?) \(batch size (?P<batch>\d+)\)$")


@dataclass(frozen=True)
class SpeedEntry:
    """Relative run times of one job type: ``times[i]`` for ``SPANS[i]`` (node = 1).

    Attributes:
        job_type: The trace's job type, or ``"*"`` for every type not listed.
        times: ``T(node), T(rack), T(spine), T(wider)``.
        numa: The factor on top when one of its pods spans two NUMA halves (1: none).
        status: ``"measured"`` or a ``"GUESSED ..."`` label saying what was guessed.
        source: Where the values come from.

    """

    job_type: str
    times: tuple[float, float, float, float]
    status: str
    source: str
    numa: float = 1.0


@dataclass(frozen=True)
class PlacementModel:
    """Run-time factors by job type and span (see the module docstring).

    Attributes:
        name: ``"cited"`` or the file it was read from.
        entries: By job type; ``"*"`` is the default.

    """

    name: str
    entries: dict[str, SpeedEntry]

    def entry(self, job_type: str | None) -> SpeedEntry:
        """The entry of ``job_type`` (the default one when it is not listed)."""
        found = self.entries.get(job_type) if job_type is not None else None
        return found or self.entries[DEFAULT_TYPE]

    def factor(
        self, job_type: str | None, span: str, reference: str, *, numa_split: bool = False
    ) -> float:
        """``T(span) / T(reference)`` for ``job_type`` (times ``numa`` for a NUMA split).

        How much longer than the trace says the job runs.
        """
        entry = self.entry(job_type)
        ratio = entry.times[SPANS.index(span)] / entry.times[SPANS.index(reference)]
        return ratio * entry.numa if numa_split else ratio

    def rows(self) -> list[dict[str, object]]:
        """The table, sorted by job type, as report.json and the docs show it."""
        return [
            {
                "job_type": entry.job_type,
                **{span: round(time, 4) for span, time in zip(SPANS, entry.times, strict=True)},
                "numa": round(entry.numa, 4),
                "status": entry.status,
                "source": entry.source,
            }
            for _, entry in sorted(self.entries.items())
        ]


def span_of(nodes: Iterable[str], paths: Mapping[str, tuple[str, ...]]) -> str:
    """The widest level ``nodes`` span: ``node``, ``rack``, ``spine`` or ``wider``.

    ``paths`` gives each node's domains, outermost first (the last is its rack).
    """
    distinct = sorted(set(nodes))
    if len(distinct) <= 1:
        return "node"
    racks = {paths[node] for node in distinct}
    if len(racks) == 1:
        return "rack"
    if all(len(rack) >= 2 for rack in racks) and len({rack[:-1] for rack in racks}) == 1:
        return "spine"
    return "wider"


def reference_span(gpus: int, largest_node_gpus: int) -> str:
    """The tightest span a job of ``gpus`` GPUs can have: ``node`` if it fits the largest node."""
    return "node" if gpus <= largest_node_gpus else "rack"


def _times(excess: float) -> tuple[float, float, float, float]:
    growth = CROSS_LEVEL_GROWTH
    return (1.0, 1.0 + excess, 1.0 + growth * excess, 1.0 + growth * growth * excess)


def _entry(job_type: str, excess: float, status: str, source: str) -> SpeedEntry:
    return SpeedEntry(job_type, _times(excess), status, source, 1.0 + NUMA_SHARE * excess)


def _pollux_excess(path: Path = POLLUX_DATA) -> dict[str, dict[int, float]]:
    """Per app and per-GPU batch: ``step(44) / step(4) - 1``, at least 0 (noise clipped)."""
    steps: dict[tuple[str, str, int], float] = {}
    with path.open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            key = (row["app"], row["placement"], int(row["local_bsz"]))
            steps[key] = float(row["step_time_s"])
    excess: dict[str, dict[int, float]] = {}
    for (app, placement, batch), packed in sorted(steps.items()):
        if placement == "4":
            spread = steps[(app, "44", batch)]
            excess.setdefault(app, {})[batch] = max(0.0, spread / packed - 1.0)
    return excess


def _nearest(batches: dict[int, float], batch: int) -> tuple[int, float]:
    """The measured batch nearest to ``batch`` in ratio (ties: the smaller one)."""
    best = min(batches, key=lambda measured: (abs(math.log(measured / batch)), measured))
    return best, batches[best]


# The job types of the Gavel-generated Philly VC traces (job_type, field 1).
GAVEL_TYPES = (
    *(f"ResNet-18 (batch size {b})" for b in (16, 32, 64, 128, 256)),
    *(f"ResNet-50 (batch size {b})" for b in (16, 32, 64, 128)),
    *(f"Transformer (batch size {b})" for b in (16, 32, 64, 128, 256)),
    *(f"LM (batch size {b})" for b in (5, 10, 20, 40, 80)),
    *(f"Recommendation (batch size {b})" for b in (512, 1024, 2048, 4096, 8192)),
    "CycleGAN",
    "A3C",
)


def cited_model(job_types: Iterable[str] = GAVEL_TYPES) -> PlacementModel:
    """The cited model for ``job_types`` (and the ``"*"`` default): see the module docstring."""
    excess = _pollux_excess()
    median = statistics.median(e for by_batch in excess.values() for e in by_batch.values())
    apps = ",".join(sorted(excess))
    guessed_source = (
        f"median e = {median:.3f} of every measured row; {POLLUX_SOURCE.format(app=apps)}"
    )
    entries = {
        DEFAULT_TYPE: _entry(
            DEFAULT_TYPE, median, "GUESSED (no measurement of this type)", guessed_source
        )
    }
    for job_type in sorted(set(job_types)):
        match = _BATCH.match(job_type)
        family = FAMILIES.get(match["family"]) if match else None
        if match is None or family is None:
            entries[job_type] = _entry(
                job_type, median, "GUESSED (no measurement of this type)", guessed_source
            )
            continue
        app, status = family
        batch, value = _nearest(excess[app], int(match["batch"]))
        source = f"{POLLUX_SOURCE.format(app=app)}, per-GPU batch {batch}"
        entries[job_type] = _entry(
            job_type, value, f"rack {status}; spine, wider, NUMA GUESSED", source
        )
    return PlacementModel("cited", entries)


def read_model(path: str | Path) -> PlacementModel:
    """A model from a CSV: ``job_type,span,factor[,status,source]`` (``T(span)``, node = 1).

    Every job type listed needs ``rack``, ``spine`` and ``wider`` rows (``node`` defaults to
    1, and an optional ``numa`` row gives the NUMA-split factor, default 1); a ``*`` job type
    is required (the default). Factors must be finite and > 0.

    Raises:
        SimError: The file cannot be read, or a row is missing, malformed or absurd.

    """
    path = Path(path)
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise SimError(f"placement model {path}: cannot read: {error}") from None
    found: dict[str, dict[str, float]] = {}
    labels: dict[str, tuple[str, str]] = {}
    for number, row in enumerate(rows, start=2):
        where = f"placement model {path}:{number}"
        job_type, span, text = row.get("job_type"), row.get("span"), row.get("factor")
        if not job_type or (span not in SPANS and span != NUMA) or text is None:
            spans = ", ".join((*SPANS, NUMA))
            raise SimError(f"{where}: needs job_type, span (one of {spans}), factor")
        try:
            value = float(text)
        except ValueError:
            raise SimError(f"{where}: factor {text!r} is not a number") from None
        if not math.isfinite(value) or value <= 0:
            raise SimError(f"{where}: factor {text!r} must be finite and > 0")
        found.setdefault(job_type, {"node": 1.0})[span] = value
        labels[job_type] = (row.get("status") or "from file", row.get("source") or str(path))
    if DEFAULT_TYPE not in found:
        raise SimError(f"placement model {path}: needs rows for job type '*' (the default)")
    entries = {}
    for job_type, by_span in found.items():
        missing = [span for span in SPANS if span not in by_span]
        if missing:
            raise SimError(f"placement model {path}: {job_type!r} has no {', '.join(missing)}")
        times = (by_span["node"], by_span["rack"], by_span["spine"], by_span["wider"])
        numa = by_span.get(NUMA, 1.0)
        entries[job_type] = SpeedEntry(job_type, times, *labels[job_type], numa=numa)
    return PlacementModel(str(path), entries)


@functools.cache
def _cited() -> PlacementModel:
    """The cited model, built once per process (its data never changes)."""
    return cited_model()


def load_model(choice: str) -> PlacementModel | None:
    """``"none"`` -> ``None``; ``"cited"`` -> :func:`cited_model`; else :func:`read_model`.

    A model file is read on every call, so an edited file is seen by the next run.

    Raises:
        SimError: ``"auto"`` (resolve it with :func:`model_for`), or a bad model file.

    """
    if choice == "none":
        return None
    if choice == "cited":
        return _cited()
    if choice == "auto":
        raise SimError("placement model 'auto' depends on the trace: use model_for")
    return read_model(choice)


def model_for(choice: str, job_types: Iterable[str | None]) -> PlacementModel | None:
    """The model ``choice`` names for a trace whose jobs have ``job_types``.

    ``"auto"`` is ``"cited"`` when some job names its type, else ``"none"``.
    """
    if choice == "auto":
        choice = "cited" if any(job_type for job_type in job_types) else "none"
    return load_model(choice)
