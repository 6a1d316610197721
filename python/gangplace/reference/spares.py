"""Spares, as readable rules: docs/repair.md "Spares".

A request with ``spares`` is placed as the gang it folds into: without slices ``pods + spares``
pods (at least ``min_pods + spares``); with slices, every innermost slice of ``k`` pods grows
to ``k + spares`` and every outer layer in proportion. The placement is then split: the last
``spares`` pods (of every innermost slice, with slices) are the spares, the rest the gang's
ranks in order. The Rust core (``spares.rs``) must give the same answers.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gangplace.reference.values import Placement

__all__ = ["fold", "placed_pods", "split", "split_groups"]


def placed_pods(pods: int, spares: int, slices: tuple[tuple[str, int], ...]) -> int:
    """How many pods a gang of ``pods`` ranks takes with its spares."""
    if not slices:
        return pods + spares
    inner = slices[-1][1]
    return pods // inner * (inner + spares)


def fold(pods: int, min_pods: int | None, slices: tuple[tuple[str, int], ...], spares: int) -> Any:
    """``(pods, min_pods, slices)`` of the gang a request with ``spares`` is placed as."""
    if not spares:
        return pods, min_pods, slices
    inner = slices[-1][1] if slices else 1
    grown = tuple((level, size // inner * (inner + spares)) for level, size in slices)
    folded_min = None if min_pods is None else placed_pods(min_pods, spares, slices)
    return placed_pods(pods, spares, slices), folded_min, grown


def split(placement: Placement, spares: int, slices: tuple[tuple[str, int], ...]) -> Placement:
    """The folded placement as the gang's ranks and its spares."""
    if not spares:
        return placement
    every = slices[-1][1] + spares if slices else len(placement.pods)
    kept = every - spares
    ranks = tuple(pod for index, pod in enumerate(placement.pods) if index % every < kept)
    extra = tuple(pod for index, pod in enumerate(placement.pods) if index % every >= kept)
    return replace(placement, pods=ranks, spares=extra)


def split_groups(placement: Placement, groups: Any) -> Placement:
    """A multi-role placement of folded groups as each group's ranks and spares.

    The spares are listed group by group, in request order.
    """
    if not any(getattr(group, "spares", 0) for group in groups):
        return placement
    pods: list[Any] = []
    extra: list[Any] = []
    counts: list[tuple[str, int]] = []
    start = 0
    for group, (name, count) in zip(groups, placement.groups_counts, strict=True):
        part = replace(placement, pods=placement.pods[start : start + count], spares=())
        part = split(part, getattr(group, "spares", 0), tuple(group.slices))
        start += count
        pods.extend(part.pods)
        extra.extend(part.spares)
        counts.append((name, len(part.pods)))
    return replace(placement, pods=tuple(pods), spares=tuple(extra), groups_counts=tuple(counts))
