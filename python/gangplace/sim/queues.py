"""Queues in the simulator: ``gangplace simulate --queues FILE`` (docs/queues.md).

The file (JSON, or YAML when PyYAML is installed) lists the cohorts and queues, whether fair
sharing is on, and which queue each trace owner submits to::

    {"fair_sharing": false,
     "cohorts": [{"name": "lab"}],
     "queues": [{"name": "vision", "cohort": "lab", "nominal": 32,
                 "reclaim_within_cohort": "any"}],
     "owners": {"6214e9": "vision"}}

``evicted_may_preempt`` (docs/queues.md Q5) and ``eviction_grace`` (seconds,
docs/scheduler.md S17) are passed to the Scheduler. ``owners`` maps trace owners (a Philly
VC, a trace file's stem, the ``owner`` column) to queues; an owner it does not list submits
to the queue of its own name, else to
``default_queue`` if set; a job whose owner has none is rejected, and counted as rejected.
Every field is checked when the settings are made: a bad one is a :class:`SimError` that
names it. :class:`QueueFigures` keeps each queue's usage over the run, its reclaims and the
work they threw away, for the report (``queues`` in every run's figures).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gangplace.errors import GangplaceError
from gangplace.scheduler.quota import Cohort, Queue
from gangplace.sim.errors import SimError

__all__ = ["QueueFigures", "QueueSetup", "load_queues"]

QUEUE_FIELDS = Queue._FIELDS
COHORT_FIELDS = Cohort._FIELDS
TOP_FIELDS = (
    "fair_sharing",
    "evicted_may_preempt",
    "eviction_grace",
    "cohorts",
    "queues",
    "owners",
    "default_queue",
)


def load_queues(path: str | Path) -> dict[str, Any]:
    """The queues file as a plain mapping (checked by :class:`QueueSetup`)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise SimError(f"queues file {path}: {error.strerror or error}") from None
    if path.suffix in (".yaml", ".yml"):
        try:
            import yaml  # type: ignore[import-untyped]
        except ImportError:
            raise SimError(f"queues file {path}: YAML needs PyYAML (or write it as JSON)") from None
        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise SimError(f"queues file {path}: not YAML: {error}") from None
    else:
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as error:
            raise SimError(f"queues file {path}: not JSON: {error}") from None
    QueueSetup.parse(raw, str(path))  # every field checked now
    return dict(raw)


@dataclass(frozen=True)
class QueueSetup:
    """The checked queues of a simulation."""

    queues: tuple[Queue, ...]
    cohorts: tuple[Cohort, ...]
    fair_sharing: bool
    owners: Mapping[str, str]
    default_queue: str | None
    evicted_may_preempt: bool = False  # docs/queues.md Q5: same-cycle cascades
    eviction_grace: float = 0.0  # docs/scheduler.md S17: victims' pods ending

    @classmethod
    def parse(cls, raw: object, where: str = "queues") -> QueueSetup:
        """Checks every field (a :class:`SimError` names the bad one)."""
        if not isinstance(raw, Mapping):
            raise SimError(f"{where}: expected an object with queues, got {type(raw).__name__}")
        unknown = sorted(set(raw) - set(TOP_FIELDS))
        if unknown:
            raise SimError(
                f"{where}: unknown field {unknown[0]!r} (fields: {', '.join(TOP_FIELDS)})"
            )
        fair = raw.get("fair_sharing", False)
        if not isinstance(fair, bool):
            raise SimError(f"{where}: fair_sharing must be true or false, got {fair!r}")
        cascades = raw.get("evicted_may_preempt", False)
        if not isinstance(cascades, bool):
            raise SimError(f"{where}: evicted_may_preempt must be true or false, got {cascades!r}")
        grace = raw.get("eviction_grace", 0.0)
        if isinstance(grace, bool) or not isinstance(grace, (int, float)) or not 0 <= grace < 1e12:
            raise SimError(f"{where}: eviction_grace must be seconds >= 0, got {grace!r}")
        queues = tuple(_values(raw, "queues", Queue, QUEUE_FIELDS, where))
        if not queues:
            raise SimError(f"{where}: queues must list at least one queue")
        cohorts = tuple(_values(raw, "cohorts", Cohort, COHORT_FIELDS, where))
        owners = raw.get("owners", {})
        if not isinstance(owners, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in owners.items()
        ):
            raise SimError(f"{where}: owners must map owner names to queue names")
        names = {queue.name for queue in queues}
        for owner, queue in owners.items():
            if queue not in names:
                raise SimError(f"{where}: owners[{owner!r}] names unknown queue {queue!r}")
        default = raw.get("default_queue")
        if default is not None and default not in names:
            raise SimError(f"{where}: default_queue {default!r} is no queue")
        try:  # the tree itself (cycles, unknown parents), as the Scheduler checks it
            from gangplace.scheduler.quota import QuotaTree

            QuotaTree(queues, cohorts)
        except (GangplaceError, TypeError) as error:
            raise SimError(f"{where}: {error}") from None
        return cls(queues, cohorts, fair, dict(owners), default, cascades, float(grace))

    def queue_of(self, owner: str | None) -> str | None:
        """The queue a job of ``owner`` submits to, or ``None``."""
        if owner is not None and owner in self.owners:
            return self.owners[owner]
        if owner is not None and any(queue.name == owner for queue in self.queues):
            return owner
        return self.default_queue


def _values(
    raw: Mapping[str, Any], key: str, kind: type[Any], fields: tuple[str, ...], where: str
) -> list[Any]:
    items = raw.get(key, [])
    if not isinstance(items, list):
        raise SimError(f"{where}: {key} must be a list")
    made = []
    for index, item in enumerate(items):
        here = f"{where}: {key}[{index}]"
        if not isinstance(item, Mapping) or "name" not in item:
            raise SimError(f"{here}: expected an object with a name")
        unknown = sorted(set(item) - set(fields))
        if unknown:
            raise SimError(f"{here}: unknown field {unknown[0]!r} (fields: {', '.join(fields)})")
        arguments = {name: value for name, value in item.items() if name != "name"}
        try:
            made.append(kind(item["name"], **arguments))
        except (GangplaceError, TypeError) as error:
            raise SimError(f"{here}: {error}") from None
    return made


@dataclass
class QueueFigures:
    """Each queue's usage over a run, and what reclaims took (mutable: the policy's own)."""

    names: tuple[str, ...]
    nominal: tuple[int, ...]
    setup: QueueSetup | None = None
    samples: list[tuple[float, tuple[int, ...]]] = field(default_factory=list)
    reclaimed_jobs: dict[str, int] = field(default_factory=dict)
    reclaimed_gpu_s: dict[str, float] = field(default_factory=dict)  # work thrown away

    def sample(self, now: float, usage: tuple[int, ...]) -> None:
        """Usage per queue from ``now`` on (one sample per cycle)."""
        if self.samples and self.samples[-1][0] == now:
            self.samples[-1] = (now, usage)
        else:
            self.samples.append((now, usage))

    def reclaimed(self, queue: str, gpus: int, ran_s: float) -> None:
        """A job of ``queue`` holding ``gpus`` was preempted after ``ran_s`` of its run."""
        self.reclaimed_jobs[queue] = self.reclaimed_jobs.get(queue, 0) + 1
        self.reclaimed_gpu_s[queue] = self.reclaimed_gpu_s.get(queue, 0.0) + gpus * ran_s

    def summary(self, window: tuple[float, float], total_gpus: int) -> dict[str, Any]:
        """Per queue, over ``window``: GPUs used, borrowed, shares and reclaims.

        Mean GPUs used and borrowed, borrowed GPU-hours, the mean share of the cluster it
        received next to its nominal share, jobs reclaimed and the GPU-hours they had run.
        """
        low, high = window
        span = max(high - low, 1e-9)
        used = [0.0] * len(self.names)
        borrowed = [0.0] * len(self.names)
        for (start, usage), (end, _) in zip(
            self.samples, [*self.samples[1:], (high, ())], strict=True
        ):
            begin, finish = max(start, low), min(end, high)
            if finish <= begin:
                continue
            for index, gpus in enumerate(usage):
                used[index] += gpus * (finish - begin)
                borrowed[index] += max(0, gpus - self.nominal[index]) * (finish - begin)
        nominal_total = max(sum(self.nominal), 1)
        return {
            name: {
                "nominal_gpus": self.nominal[index],
                "mean_gpus": used[index] / span,
                "mean_borrowed_gpus": borrowed[index] / span,
                "borrowed_gpu_h": borrowed[index] / 3600.0,
                "share_received": used[index] / span / max(total_gpus, 1),
                "share_nominal": self.nominal[index] / nominal_total,
                "reclaimed_jobs": self.reclaimed_jobs.get(name, 0),
                "reclaimed_gpu_h": self.reclaimed_gpu_s.get(name, 0.0) / 3600.0,
            }
            for index, name in enumerate(self.names)
        }
