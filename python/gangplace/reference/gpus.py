"""The GPUs a pod takes on a node with GPU groups (docs/placement.md rule 5, docs/shapes.md).

Groups are identified by their path prefix: ``paths[gpu][:level + 1]``. At the finest level
where some group's free GPUs hold the pod, the group with the fewest free GPUs (then the
lowest GPU index) is taken; inside it children are filled as rule 4 fills domains (a child
holding all that remains takes it, the tightest such, then the lowest index; otherwise the
largest, then the lowest index, is filled), and the lowest free indices are taken inside the
finest groups. The Rust core's ``intranode.rs`` must give the same GPUs.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["choose"]

Group = tuple[int, ...]  # the GPU indices of one group, ascending


def groups_at(paths: Sequence[Sequence[int]], level: int, within: Group) -> list[Group]:
    """The groups of ``level`` inside the GPUs ``within``, by their lowest GPU index."""
    by_prefix: dict[tuple[int, ...], list[int]] = {}
    for gpu in within:
        by_prefix.setdefault(tuple(paths[gpu][: level + 1]), []).append(gpu)
    return sorted((tuple(gpus) for gpus in by_prefix.values()), key=lambda group: group[0])


def choose(free: Sequence[int], paths: Sequence[Sequence[int]], count: int) -> tuple[int, ...]:
    """The GPUs of ``free`` a pod of ``count`` GPUs takes."""
    free_set = set(free)
    levels = len(paths[0])
    everything = tuple(range(len(paths)))

    def available(group: Group) -> int:
        return sum(1 for gpu in group if gpu in free_set)

    for level in range(levels - 1, -1, -1):
        holding = [g for g in groups_at(paths, level, everything) if available(g) >= count]
        if holding:
            group = min(holding, key=lambda g: (available(g), g[0]))
            return tuple(sorted(fill(group, level, count, paths, free_set)))
    children = groups_at(paths, 0, everything)
    return tuple(sorted(fill_children(children, 0, count, paths, free_set)))


def fill(
    group: Group, level: int, count: int, paths: Sequence[Sequence[int]], free: set[int]
) -> list[int]:
    """``count`` GPUs of ``group`` (a group of ``level``)."""
    if level + 1 == len(paths[0]):
        return [gpu for gpu in group if gpu in free][:count]
    return fill_children(groups_at(paths, level + 1, group), level + 1, count, paths, free)


def fill_children(
    children: list[Group], level: int, count: int, paths: Sequence[Sequence[int]], free: set[int]
) -> list[int]:
    """Rule 4 over the groups ``children`` of ``level``."""

    def available(group: Group) -> int:
        return sum(1 for gpu in group if gpu in free)

    taken: list[int] = []
    remaining = count
    left = list(children)
    while remaining > 0:
        holding = [child for child in left if available(child) >= remaining]
        if holding:
            child = min(holding, key=lambda g: (available(g), g[0]))
            return taken + fill(child, level, remaining, paths, free)
        usable = [child for child in left if available(child) > 0]
        if not usable:
            break
        child = max(usable, key=lambda g: (available(g), -g[0]))
        left.remove(child)
        everything = available(child)
        taken += fill(child, level, everything, paths, free)
        remaining -= everything
    return taken
