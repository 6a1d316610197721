"""Slice gangs (README "Slices") against plain gangs of the same pods, engine and reference.

The slice size is half a rack, rounded down to a power of two (4 pods on ``colossus100k``,
8 on ``nvl72``, 2 on ``tiny``); pods take whole nodes. ``sliced-4`` is 4 slices, ``sliced-16``
16, ``nested-16`` 16 rack slices grouped 4 per spine-level domain (two layers), ``balanced-16``
the plain gang of 16 slices' pods with ``spread="balanced"``. Each is timed
next to the plain gang of the same pods and GPUs (``plain-4``, ``plain-16``). The issue's goal:
a slice placement at most 2x the plain one.
"""

from __future__ import annotations

from typing import Any

import pytest

from benches.clusters import Setup
from gangplace import GangRequest


def slice_size(setup: Setup) -> int:
    """Half a rack's nodes, rounded down to a power of two (at least 1)."""
    half = max(setup.shape.fanout[-1] // 2, 1)
    return 1 << (half.bit_length() - 1)


def shaped(setup: Setup, label: str) -> GangRequest:
    """The gang ``label``: ``plain-N``, ``sliced-N``, ``nested-N`` or ``balanced-N``."""
    kind, count = label.split("-")
    size = slice_size(setup)
    pods, gpus = int(count) * size, setup.shape.gpus_per_node
    if kind == "plain":
        return GangRequest(pods, gpus)
    if kind == "balanced":
        return GangRequest(pods, gpus, spread="balanced")
    if kind == "sliced":
        return GangRequest(pods, gpus, slices=((setup.rack, size),))
    return GangRequest(pods, gpus, slices=((setup.spine, 4 * size), (setup.rack, size)))


LABELS = ["plain-4", "sliced-4", "plain-16", "sliced-16", "nested-16", "balanced-16"]


@pytest.mark.parametrize("label", LABELS)
def bench_place_shaped(benchmark: Any, setup: Setup, label: str) -> None:
    request = shaped(setup, label)
    benchmark.extra_info.update(op="place_gang", gang=label)
    placement = benchmark(setup.engine.place_gang, request)
    if placement is not None:
        assert len(placement) == request.pods
        if request.slices:
            size = request.slices[-1][1]
            assert len(placement.slices) == request.pods // size


@pytest.mark.parametrize("label", ["sliced-16"])
def bench_place_shaped_reference(benchmark: Any, setup: Setup, label: str) -> None:
    request = shaped(setup, label)
    benchmark.extra_info.update(op="place_gang", gang=label, impl="reference")
    rounds = 1 if setup.shape.total_gpus > 500_000 else 3
    got = benchmark.pedantic(setup.oracle.place_gang, args=(request,), rounds=rounds, iterations=1)
    expected = setup.engine.place_gang(request)
    assert (got is None) == (expected is None)
    if got is not None and expected is not None:
        assert got.nodes == expected.nodes and got.slices == expected.slices
