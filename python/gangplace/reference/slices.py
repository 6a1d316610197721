"""Slices, as pure functions: the docs/shapes.md "Slices" in readable Python.

A slice layer ``(level, k)`` asks that ranks ``j*k`` to ``(j+1)*k - 1`` lie in one domain of
``level``; layers nest, outermost first. Here a layer is resolved to ``(depth, k)``. The
number of slices of layer ``i`` a domain holds is:

- at the layer's depth or finer (the domain lies inside one domain of the layer's level):
  its whole slices of the next layer regrouped, ``(inner slices * inner k) // k``, where the
  innermost layer counts pods, ``capacity // k``;
- coarser: the sum over its children.

``gangplace.reference.rules`` calls these when a gang has slices; the Rust core
(``search/slices.rs``) must give the same answers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gangplace.reference.values import Path, PodPlacement

__all__ = ["Layers", "resolve", "slice_paths", "units"]

Layers = tuple[tuple[int, int], ...]
"""Resolved slice layers: ``(depth, pods per slice)``, outermost first."""


def resolve(slices: Sequence[tuple[str, int]], levels: Sequence[str], coarsest: int) -> Layers:
    """Level names to depths, checked.

    Each level is known, strictly finer than the layer outside it, and none is coarser than
    ``coarsest`` (the required level's depth).

    Raises:
        ValueError: The message the core gives (an unknown level lists the levels).

    """
    layers: list[tuple[int, int]] = []
    depths = {"cluster": 0, **{name: i + 1 for i, name in enumerate(levels)}}
    depths["node"] = len(levels) + 1
    for level, size in slices:
        if level not in depths:
            known = ", ".join(["node", *reversed(levels), "cluster"])
            raise ValueError(f'unknown slice level "{level}"; the levels are {known}')
        depth = depths[level]
        if depth < coarsest:
            raise ValueError(f'slice level "{level}" is coarser than the required level')
        if layers and depth <= layers[-1][0]:
            raise ValueError(
                f'slice level "{level}" is not finer than the layer outside it; layers go '
                "outermost first"
            )
        layers.append((depth, size))
    return tuple(layers)


def units(
    path: Path,
    layers: Layers,
    layer: int,
    capacity: Callable[[Path], int],
    children: Callable[[Path], list[Path]],
) -> int:
    """Slices of layer ``layer`` the domain (or node) ``path`` holds.

    ``capacity`` gives the pods a path holds (rule 1), ``children`` its child paths.
    """
    depth, size = layers[layer]
    if len(path) >= depth:
        if layer + 1 < len(layers):
            inner = layers[layer + 1][1]
            pods = units(path, layers, layer + 1, capacity, children) * inner
        else:
            pods = capacity(path)
        return pods // size
    return sum(units(child, layers, layer, capacity, children) for child in children(path))


def slice_paths(
    pods: Sequence[PodPlacement], layers: Layers, paths: dict[str, Path]
) -> tuple[Path, ...]:
    """``Placement.slices``: the path of every innermost slice's domain, in rank order."""
    if not layers:
        return ()
    depth, size = layers[-1]
    return tuple(paths[pod.node][:depth] for pod in pods[::size])
