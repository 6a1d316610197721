"""The knobs of a replay, validated in one place (a bad value is a :class:`SimError`).

Every default is an assumption the report prints under its table (:func:`assumptions`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from gangplace.sim.errors import SimError
from gangplace.sim.speed import CROSS_LEVEL_GROWTH, MODEL_CHOICES, load_model
from gangplace.sim.traces import PHILLY_CAPPED_MEAN_S

__all__ = ["BACKFILLS", "ORDERS", "POD_ORDERS", "SimSettings", "assumptions", "parse_seeds"]

BACKFILLS = ("easy", "conservative", "none", "any")
ORDERS = ("fifo", "priority")
POD_ORDERS = ("kube", "interleaved")
# Llama 3 (Meta, 2024): 419 unexpected interruptions in 54 days on 16,384 H100 GPUs.
LLAMA3_FAILURES_PER_GPU_HOUR = 419 / (54 * 24 * 16_384)


@dataclass(frozen=True)
class SimSettings:
    """How the policies run (see the docs/command-line.md for each one).

    Attributes:
        order: Queue order of the gang policies: ``"fifo"`` or ``"priority"``.
        backfill: ``"easy"`` (default), ``"conservative"``, ``"none"`` or ``"any"``
            (Scheduler rule S5).
        walltime_factor: Walltime given to the scheduler = run time x this (>= 1). A job's
            run time is its trace duration; EASY backfill trusts walltimes.
        ladder_s: ``(T1, T2)`` of the ladder policy: a rack for T1 s, the level above until T2.
        pod_timeout_s: Pod-by-pod: a partial gang releases its pods after this long
            (``None``: never).
        pod_order: Pod-by-pod order: ``"kube"`` (priority, then creation time, a job's pods
            together: kube-scheduler's queue) or ``"interleaved"`` (one pod per job per
            round, the worst case).
        standoff_s: A run stops as a standoff (or a livelock) when partial gangs hold GPUs and
            no job runs for this long (module ``gangplace.sim.replay``).
        policy_seed: Seeds the blind policy's node order and pod-by-pod's backoffs (apart
            from the workload seed).
        quotas: Owner -> GPU quota for every gang policy.
        queues: The queues file's content (:mod:`gangplace.sim.queues`): the gang policies
            run the Scheduler with those queues and cohorts (docs/queues.md).
        failures_per_gpu_hour: Rate of injected GPU failures (0: none).
        repair_s: How long a failed GPU stays unhealthy.
        checkpoint_s: A stopped job (failure, preemption) resumes from its last checkpoint,
            taken every this many seconds of run time (``None``: restarts from scratch).
        high_priority_share: Share of jobs made priority 1 (the priorities scenario of
            :mod:`gangplace.sim.scenarios`).
        numa_split: Every node of an even GPU count has two NUMA halves (the NUMA-split
            scenario): pods whose GPUs span both are counted (the kubelet's
            ``single-numa-node`` policy would reject them).
        spares: Spare pods the ``best-fit+spares`` policy holds next to every gang (per
            innermost slice with slices).
        placement_model: Run-time factors by the level a job's pods span
            (:mod:`gangplace.sim.speed`): ``"auto"`` (``"cited"`` when the trace names job
            types, else ``"none"``), ``"cited"``, ``"none"`` (placement never changes run
            time) or the path of a model CSV.

    """

    order: str = "fifo"
    backfill: str = "easy"
    walltime_factor: float = 1.0
    ladder_s: tuple[float, float] = (300.0, 1800.0)
    pod_timeout_s: float | None = 600.0
    pod_order: str = "kube"
    standoff_s: float = 24 * 3600.0
    policy_seed: int = 0
    quotas: dict[str, int] = field(default_factory=dict)
    failures_per_gpu_hour: float = 0.0
    repair_s: float = 4 * 3600.0
    checkpoint_s: float | None = 3600.0
    high_priority_share: float = 0.0
    numa_split: bool = False
    spares: int = 1
    placement_model: str = "auto"
    queues: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        _choice("order", self.order, ORDERS)
        _choice("backfill", self.backfill, BACKFILLS)
        _choice("pod order", self.pod_order, POD_ORDERS)
        _at_least("walltime factor", self.walltime_factor, 1.0)
        first, second = self.ladder_s
        _at_least("ladder T1", first, 0.0)
        if second < first or not math.isfinite(second):
            raise SimError(f"ladder needs T1 <= T2 (finite), got {first},{second}")
        if self.pod_timeout_s is not None:
            _positive("pod timeout", self.pod_timeout_s)
        _positive("standoff window", self.standoff_s)
        if not isinstance(self.policy_seed, int) or not 0 <= self.policy_seed < 2**63:
            raise SimError(f"policy seed must be an integer >= 0, got {self.policy_seed!r}")
        _at_least("failure rate", self.failures_per_gpu_hour, 0.0)
        _positive("repair time", self.repair_s)
        if not 0.0 <= self.high_priority_share <= 1.0:
            raise SimError(f"high-priority share must be in 0..1, got {self.high_priority_share}")
        if self.checkpoint_s is not None:
            _positive("checkpoint interval", self.checkpoint_s)
        if not 0 <= self.spares <= 64:
            raise SimError(f"spares must be 0 to 64 pods per gang, got {self.spares}")
        if self.placement_model not in MODEL_CHOICES:
            load_model(self.placement_model)  # a file: read now, so a bad one fails here
        if self.queues is not None:
            from gangplace.sim.queues import QueueSetup

            QueueSetup.parse(self.queues)
        for owner, gpus in self.quotas.items():
            if gpus < 0:
                raise SimError(f"quota of {owner!r} must be >= 0 GPUs, got {gpus}")


def _choice(what: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise SimError(f"{what} must be one of {', '.join(allowed)}; got {value!r}")


def _at_least(what: str, value: float, low: float) -> None:
    if not math.isfinite(value) or value < low:
        raise SimError(f"{what} must be a finite number >= {low:g}, got {value!r}")


def _positive(what: str, value: float) -> None:
    if not math.isfinite(value) or value <= 0:
        raise SimError(f"{what} must be a finite number of seconds > 0, got {value!r}")


def parse_seeds(text: str) -> tuple[int, ...]:
    """``"3"``, ``"0-9"`` or ``"1,4,7"`` -> the seeds (each >= 0, at most 1,000)."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            if "-" in part.strip()[1:]:
                low, high = part.split("-", 1)
                seeds.extend(range(int(low), int(high) + 1))
            else:
                seeds.append(int(part))
    except ValueError:
        raise SimError(f"seeds must look like 3, 0-9 or 1,4,7; got {text!r}") from None
    if not seeds or min(seeds) < 0 or len(seeds) > 1000 or len(set(seeds)) != len(seeds):
        raise SimError(f"seeds must be 1 to 1,000 distinct integers >= 0; got {text!r}")
    return tuple(seeds)


def assumptions(settings: SimSettings, *, synthetic_durations: bool) -> list[str]:
    """The settings as sentences, printed under every table."""
    lines = [
        f"gang policies: {settings.order} order, {settings.backfill} backfill, walltime = "
        f"run time x {settings.walltime_factor:g}",
        f"pod-by-pod: {settings.pod_order} order, "
        + (
            f"partial gangs release after {settings.pod_timeout_s:g} s"
            if settings.pod_timeout_s
            else "partial gangs never release"
        ),
        f"a run stops as a standoff after {settings.standoff_s / 3600:g} h with partial gangs "
        "holding GPUs and no job running, and no timeout, repair or arrival that could "
        "change it; as a LIVELOCK (a rule, not a proof) when only pod timeouts and retries went "
        "on for as long; and at the latest at the last arrival + 2 x all jobs' GPU-time / "
        "healthy GPUs + the longest job + the standoff window, run times at the placement "
        "model's largest slowdown (CUT: unfinished jobs censored)",
    ]
    if synthetic_durations:
        lines.append(
            "durations are SYNTHETIC (guessed): log-normal fitted to Philly's median 874 s "
            "and mean 18,006 s, capped at Philly's maximum 4,240,676 s, which lowers the mean "
            f"to {PHILLY_CAPPED_MEAN_S:,.0f} s"
        )
    if settings.high_priority_share:
        lines.append(
            f"priorities scenario: {settings.high_priority_share:.0%} of the jobs made "
            "priority 1 at random (GUESSED: the trace has no priorities)"
        )
    if settings.numa_split:
        lines.append(
            "NUMA-split scenario: every node of an even GPU count has two NUMA halves "
            "(GPUs 0..g/2-1 and g/2..g-1)"
        )
    if settings.quotas:
        lines.append("quotas: " + ", ".join(f"{o}={g}" for o, g in sorted(settings.quotas.items())))
    if settings.failures_per_gpu_hour:
        lines.append(
            f"GPU failures injected at {settings.failures_per_gpu_hour:.3g} per GPU-hour "
            f"(seeded), each GPU repaired after {settings.repair_s / 3600:g} h; the job "
            "using it is requeued (+repair, +spares: repaired in place when a repair fits, "
            f"resuming at once; +spares holds {settings.spares} spare pod(s) per gang)"
        )
    model = settings.placement_model
    if model == "none":
        lines.append("placement never changes run time (placement model: none)")
    elif model in ("cited", "auto"):
        lines.append(
            (
                "placement model cited"
                if model == "cited"
                else "placement model auto (cited when the trace names job types, else none)"
            )
            + ": a multi-node job runs 1+e times its one-node time, e MEASURED by Pollux "
            "(OSDI'21) for ResNet-18/ResNet-50 by batch size; the spine and wider levels "
            f"multiply e by {CROSS_LEVEL_GROWTH:g} per level (GUESSED), Transformer/LM use "
            "BERT's e (GUESSED proxy), other types the median e (GUESSED), a pod across NUMA "
            "halves 1+e/4 on top (GUESSED); durations are run times at the tightest span a "
            "job can have"
        )
    else:
        lines.append(f"placement model read from {model} (run-time factor by span)")
    lines.append(
        "a stopped or moved job (failure, preemption, defragmentation) resumes from its last "
        f"checkpoint, every {settings.checkpoint_s / 3600:g} h of run time (GUESSED)"
        if settings.checkpoint_s
        else "a stopped or moved job restarts from scratch"
    )
    return lines
