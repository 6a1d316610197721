"""Slice gangs (docs/shapes.md "Slices") against plain gangs of the same pods, engine and reference.

The slice size is half a rack, rounded down to a power of two (4 pods on ``colossus100k``,
8 on ``nvl72``, 2 on ``tiny``); pods take whole nodes. ``sliced-4`` is 4 slices, ``sliced-16``
16, ``nested-16`` 16 rack slices grouped 4 per spine-level domain (two layers), ``balanced-16``
the plain gang of 16 slices' pods with ``spread="balanced"``. Multi-role gangs (docs/roles.md
"Multi-role gangs"): ``roles-16`` is the plain 16 slices' pods as two groups of half each
(the same GPUs), ``leader-16`` one whole-node ``leader`` pod and the other pods as
``workers``, the leader colocated in the workers' rank-0 domain of the level above the rack
(the same GPUs again). ``mpijob-16`` is an MPIJob launcher (1 pod x 1 GPU) colocated in the
rack of worker rank 0 with 16 whole-node workers, the shape that needs room for the follower
(rule 3's retry) when the workers fill their first rack; it is timed against
the 16 workers alone (``plain16w-16``). Each is
timed next to the plain gang of the same pods and GPUs (``plain-4``, ``plain-16``). The
issue's goal: a slice or multi-role placement at most 2x the plain one.
"""

from __future__ import annotations

from typing import Any

import pytest

from benches.clusters import Setup
from gangplace import GangRequest, MultiGangRequest, PodGroup


def slice_size(setup: Setup) -> int:
    """Half a rack's nodes, rounded down to a power of two (at least 1)."""
    half = max(setup.shape.fanout[-1] // 2, 1)
    return 1 << (half.bit_length() - 1)


def shaped(setup: Setup, label: str) -> GangRequest | MultiGangRequest:
    """The gang ``label``: ``plain-N``, ``sliced-N``, ``nested-N``, ``balanced-N``,
    ``roles-N`` or ``leader-N``."""
    kind, count = label.split("-")
    size = slice_size(setup)
    pods, gpus = int(count) * size, setup.shape.gpus_per_node
    if kind == "roles":
        half = pods // 2
        return MultiGangRequest((PodGroup("a", half, gpus), PodGroup("b", pods - half, gpus)))
    if kind == "mpijob":
        return MultiGangRequest(
            (PodGroup("launcher", 1, 1), PodGroup("workers", int(count), gpus)),
            colocate=(("launcher", "workers", setup.rack),),
        )
    if kind == "plain16w":
        return GangRequest(int(count), gpus)
    if kind == "leader":
        return MultiGangRequest(
            (PodGroup("leader", 1, gpus), PodGroup("workers", pods - 1, gpus)),
            colocate=(("leader", "workers", setup.spine),),
        )
    if kind == "plain":
        return GangRequest(pods, gpus)
    if kind == "balanced":
        return GangRequest(pods, gpus, spread="balanced")
    if kind == "sliced":
        return GangRequest(pods, gpus, slices=((setup.rack, size),))
    return GangRequest(pods, gpus, slices=((setup.spine, 4 * size), (setup.rack, size)))


LABELS = [
    "plain-4",
    "sliced-4",
    "plain-16",
    "sliced-16",
    "nested-16",
    "balanced-16",
    "roles-16",
    "leader-16",
    "plain16w-16",
    "mpijob-16",
]


@pytest.mark.parametrize("label", LABELS)
def bench_place_shaped(benchmark: Any, setup: Setup, label: str) -> None:
    request = shaped(setup, label)
    benchmark.extra_info.update(op="place_gang", gang=label)
    placement = benchmark(setup.engine.place_gang, request)
    if placement is not None:
        assert len(placement) == request.pods
        if isinstance(request, GangRequest) and request.slices:
            size = request.slices[-1][1]
            assert len(placement.slices) == request.pods // size


@pytest.mark.parametrize("label", ["sliced-16", "roles-16", "leader-16", "mpijob-16"])
def bench_place_shaped_reference(benchmark: Any, setup: Setup, label: str) -> None:
    request = shaped(setup, label)
    benchmark.extra_info.update(op="place_gang", gang=label, impl="reference")
    rounds = 1 if setup.shape.total_gpus > 500_000 else 3
    got = benchmark.pedantic(setup.oracle.place_gang, args=(request,), rounds=rounds, iterations=1)
    expected = setup.engine.place_gang(request)
    assert (got is None) == (expected is None)
    if got is not None and expected is not None:
        assert got.nodes == expected.nodes and got.slices == expected.slices


@pytest.mark.parametrize("label", ["roles-16"])
def bench_capacity_for_multi_role(benchmark: Any, setup: Setup, label: str) -> None:
    request = shaped(setup, label)
    benchmark.extra_info.update(op="capacity_for", gang=label)
    copies = benchmark(setup.engine.capacity_for, request)
    if setup.shape.total_gpus < 10_000:  # the reference takes seconds per copy on big shapes
        assert copies == setup.oracle.capacity_for(request)
