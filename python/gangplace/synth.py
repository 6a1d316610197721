"""Standard synthetic clusters for benchmarks, simulations and notebooks.

Each shape is a regular tree: ``fanout[i]`` children per domain of level ``i``, then
``fanout[-1]`` nodes per domain of the deepest level, each with ``gpus_per_node`` GPUs.
:func:`build` makes the cluster in one :meth:`Cluster.from_arrays` call, marks a seeded random
0.2% of GPUs unhealthy, and can pre-fill it with committed gangs drawn from a seeded mix.

Names: domains are a level's initial and a zero-padded index within the parent (``h0``,
``a07``, ``r3``); nodes join their path with ``-`` and add ``n<k>`` (``h0-a07-r3-n5``).

Example:
    >>> from gangplace import GangRequest, synth
    >>> cluster, report = synth.build("nvl72", fill=0.5, seed=1)
    >>> cluster.stats().total, round(report.fill, 2)
    (9216, 0.5)
    >>> cluster.place_gang(GangRequest(18, 4, required_level="rack")).level
    'rack'

"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from gangplace._gangplace import Cluster, GangRequest

__all__ = ["SHAPES", "FillReport", "Shape", "build", "columns", "fill", "gang_mix"]


@dataclass(frozen=True)
class Shape:
    """A regular cluster shape.

    Attributes:
        name: Short name.
        levels: Level names, outermost first.
        fanout: Children per domain at each level, then nodes per deepest domain.
        gpus_per_node: GPUs of every node.
        description: Where the shape comes from.

    """

    name: str
    levels: tuple[str, ...]
    fanout: tuple[int, ...]
    gpus_per_node: int
    description: str

    @property
    def nodes(self) -> int:
        """Number of nodes."""
        return math.prod(self.fanout)

    @property
    def total_gpus(self) -> int:
        """Number of GPUs."""
        return self.nodes * self.gpus_per_node


SHAPES: dict[str, Shape] = {
    shape.name: shape
    for shape in (
        Shape(
            "superpod",
            ("spine", "su"),
            (8, 8, 32),
            8,
            "DGX SuperPOD-like: 64 scalable units of 32 nodes x 8 GPUs (16,384 GPUs), "
            "8 spines of 8 units",
        ),
        Shape(
            "meta24k",
            ("pod", "rack"),
            (8, 192, 2),
            8,
            "Meta 24k-GPU cluster-like: 8 pods x 192 racks x 2 nodes x 8 GPUs (24,576 GPUs)",
        ),
        Shape(
            "nvl72",
            ("su", "rack"),
            (16, 8, 18),
            4,
            "GB200 NVL72-like: 16 units x 8 racks x 18 nodes x 4 GPUs (9,216 GPUs); "
            "a rack is one NVLink domain",
        ),
        Shape(
            "colossus100k",
            ("hall", "array", "rack"),
            (4, 50, 8, 8),
            8,
            "xAI Colossus-like: 4 halls x 50 arrays x 8 racks x 8 nodes x 8 GPUs (102,400 GPUs)",
        ),
        Shape(
            "million",
            ("zone", "spine", "rack"),
            (16, 16, 64, 8),
            16,
            "16 zones x 16 spines x 64 racks x 8 nodes x 16 GPUs (2,097,152 GPUs)",
        ),
        Shape(
            "tiny",
            ("spine", "rack"),
            (2, 4, 4),
            8,
            "2 spines x 4 racks x 4 nodes x 8 GPUs (256 GPUs): for tests and examples",
        ),
    )
}


def _shape(shape: str | Shape) -> Shape:
    if isinstance(shape, Shape):
        return shape
    try:
        return SHAPES[shape]
    except KeyError:
        known = ", ".join(sorted(SHAPES))
        raise ValueError(f"unknown shape {shape!r}; known shapes: {known}") from None


def columns(shape: str | Shape, *, unhealthy: float = 0.002, seed: int = 0) -> dict[str, Any]:
    """The arguments of :meth:`Cluster.from_arrays` for ``shape``.

    Returns:
        A dict with ``names`` (array of str), ``domains`` (per level, ``(codes, table)``),
        ``gpus``, ``unhealthy_mask`` (``unhealthy`` of all GPUs, seeded, are marked bad) and
        ``labels``: ``pool`` is ``a`` on the nodes of even-numbered deepest domains (racks),
        ``b`` on the others.

    """
    shape = _shape(shape)
    nodes = shape.nodes
    levels = shape.levels
    # Index of every node within each level: node i has coordinates digits of i in the
    # mixed radix of the fanout.
    coordinates = np.unravel_index(np.arange(nodes), shape.fanout)
    domains = []
    prefixes: npt.NDArray[Any] = np.full(nodes, "", dtype=object)
    for level, (width, coordinate) in enumerate(zip(shape.fanout, coordinates, strict=False)):
        if level == len(levels):
            break
        digits = len(str(width - 1))
        table = [f"{levels[level][0]}{i:0{digits}d}" for i in range(width)]
        domains.append((coordinate.astype(np.int64), table))
        prefixes = prefixes + np.array(table, dtype=object)[coordinate] + "-"
    per_domain = shape.fanout[-1]
    digits = len(str(per_domain - 1))
    node_table = np.array([f"n{i:0{digits}d}" for i in range(per_domain)], dtype=object)
    names = (prefixes + node_table[coordinates[-1]]).astype(str)
    masks = np.zeros(nodes, dtype=np.uint64)
    bad = round(shape.total_gpus * unhealthy)
    if bad:
        rng = np.random.default_rng(seed)
        picks = rng.choice(shape.total_gpus, size=bad, replace=False)
        node_of, gpu_of = np.divmod(picks, shape.gpus_per_node)
        np.bitwise_or.at(masks, node_of, np.left_shift(np.uint64(1), gpu_of.astype(np.uint64)))
    # A label splitting the cluster in two pools by the parity of the deepest domain's index.
    deepest = coordinates[len(levels) - 1] if levels else np.zeros(nodes, dtype=np.int64)
    pool = np.where(deepest % 2 == 0, "a", "b").astype(object)
    return {
        "names": names,
        "domains": domains,
        "gpus": np.full(nodes, shape.gpus_per_node, dtype=np.int64),
        "unhealthy_mask": masks,
        "labels": {"pool": pool.tolist()},
    }


def gang_mix(rng: random.Random, gpus_per_node: int) -> GangRequest:
    """One gang from the seeded benchmark mix.

    Shares (of gangs): 30% 1 GPU, 10% 2 GPUs, 10% 4 GPUs (one pod each); whole-node pods:
    20% one node, 12% 2 nodes, 10% 4, 5% 8, 2% 16, 1% 32. Small jobs dominate by count,
    multi-node gangs by GPUs, as in published GPU-cluster traces.
    """
    draw = rng.random()
    for share, pods, gpus_per_pod in (
        (0.30, 1, 1),
        (0.40, 1, 2),
        (0.50, 1, 4),
        (0.70, 1, gpus_per_node),
        (0.82, 2, gpus_per_node),
        (0.92, 4, gpus_per_node),
        (0.97, 8, gpus_per_node),
        (0.99, 16, gpus_per_node),
    ):
        if draw < share:
            return GangRequest(pods, min(gpus_per_pod, gpus_per_node))
    return GangRequest(32, gpus_per_node)


@dataclass(frozen=True)
class FillReport:
    """What :func:`fill` committed.

    Attributes:
        gangs: Gangs committed.
        gpus: GPUs they hold.
        fill: Allocated share of all GPUs after filling.

    """

    gangs: int
    gpus: int
    fill: float


def fill(
    cluster: Cluster,
    fraction: float,
    *,
    seed: int = 0,
    gpus_per_node: int = 8,
    mix: Callable[[random.Random, int], GangRequest] = gang_mix,
) -> FillReport:
    """Commits gangs drawn from ``mix`` until ``fraction`` of all GPUs are allocated.

    Gangs are reserved in batches with ``reserve_many`` (greedy, in order) and committed; a
    gang that would overshoot the target is not drawn, and filling stops when a whole batch
    finds no room.
    """
    rng = random.Random(seed)
    total = cluster.stats().total
    target = int(total * fraction)
    allocated = cluster.stats().allocated
    gangs = 0
    while allocated < target:
        batch: list[GangRequest] = []
        planned = allocated
        while planned < target and len(batch) < 4096:
            request = mix(rng, gpus_per_node)
            if planned + request.total_gpus > target:
                request = GangRequest(1, 1)
            batch.append(request)
            planned += request.total_gpus
        held = [r for r in cluster.reserve_many(batch, ttl=3600.0) if r is not None]
        if not held:
            break
        for reservation in held:
            cluster.commit(reservation)
            allocated += reservation.placement.total_gpus
        gangs += len(held)
    stats = cluster.stats()
    return FillReport(gangs, stats.allocated, stats.allocated / total if total else 0.0)


def build(
    shape: str | Shape,
    *,
    fill: float = 0.0,
    unhealthy: float = 0.002,
    seed: int = 0,
    policy: str = "best-fit",
    clock: Callable[[], float] | None = None,
) -> tuple[Cluster, FillReport]:
    """A cluster of ``shape`` with ``unhealthy`` of its GPUs bad, filled to ``fill``.

    Args:
        shape: A name from :data:`SHAPES` or a :class:`Shape`.
        fill: Share of all GPUs to allocate with committed gangs (0 to 1).
        unhealthy: Share of GPUs marked unhealthy, chosen at random (seeded).
        seed: Seeds the unhealthy GPUs and the gang mix.
        policy: ``"best-fit"`` or ``"first-fit"``.
        clock: As for :class:`Cluster`.

    Returns:
        The cluster and what filling committed.

    """
    resolved = _shape(shape)
    data = columns(resolved, unhealthy=unhealthy, seed=seed)
    cluster = Cluster.from_arrays(
        resolved.levels,
        data["names"],
        data["domains"],
        data["gpus"],
        data["unhealthy_mask"],
        data["labels"],
        policy=policy,  # type: ignore[arg-type]
        clock=clock,
    )
    report = _fill(cluster, fill, seed=seed, gpus_per_node=resolved.gpus_per_node)
    return cluster, report


_fill = fill
