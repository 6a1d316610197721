"""Placement of fractional pods (docs/resources.md "Fractions of a GPU") against whole-GPU
placement.

The benchmark cluster (``colossus100k@80`` with ``--quick``: 102,400 GPUs, 80% allocated by
``synth.build``) copied through a snapshot, then 2,000 one-pod gangs of 250, 460 or 700
thousandths (seeded) reserved on it, so that shared GPUs sit among free and allocated ones.
Requests: a whole GPU (``1x1``, the baseline), one pod of 460 thousandths, 8 pods of 250 on
one node, and 64 pods of 500 anywhere. Fractional requests are counted node by node (there is
no per-domain aggregate of shares), so their cost is the nodes visited. The reference places
the 8-pod node gang on a twin with the same allocated GPUs and shares (one round). Figures
in docs/performance.md. (The test command's tiny cluster gets a quarter of its free GPUs'
worth of shared pods instead.)
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from benches.clusters import Setup, assert_same_pods, twin
from gangplace import Cluster, GangRequest, reference

GANGS = {
    "1x1-whole": (1, None, None),
    "1x460": (1, 460, None),
    "8x250-node": (8, 250, "node"),
    "64x500": (64, 500, None),
}
SHARED_PODS = 2_000


@pytest.fixture(scope="module")
def shared(setup: Setup) -> Cluster:
    """A copy of the benchmark cluster with 2,000 fractional pods running."""
    copy = Cluster.restore(setup.engine.snapshot())
    rng = random.Random(7)
    for _ in range(min(SHARED_PODS, copy.stats().free // 4)):  # the test command's tiny cluster
        milli = rng.choice((250, 460, 700))
        copy.commit(copy.reserve(GangRequest(1, 1, gpu_milli=milli)))
    return copy


def request_for(label: str) -> GangRequest:
    pods, milli, level = GANGS[label]
    return GangRequest(pods, 1, required_level=level, gpu_milli=milli)


@pytest.mark.parametrize("label", list(GANGS))
def bench_place_fractions(benchmark: Any, shared: Cluster, label: str) -> None:
    request = request_for(label)
    benchmark.extra_info.update(op="place_gang", gang=label, shared=shared.stats().shared)
    placement = benchmark(shared.place_gang, request)
    if placement is not None:
        assert len(placement) == request.pods


def bench_reference_place_fractions(benchmark: Any, setup: Setup, shared: Cluster) -> None:
    """The reference's placement of the 8-pod node gang of 250 thousandths (one round)."""
    oracle: reference.Cluster = twin(shared, setup.shape)
    for name in shared.nodes():
        oracle._nodes[name].shares = dict(shared.node(name).shared)
    request = request_for("8x250-node")
    benchmark.extra_info.update(op="reference place_gang", gang="8x250-node")
    placement = benchmark.pedantic(oracle.place_gang, (request,), rounds=1, iterations=1)
    assert_same_pods(placement, shared.place_gang(request))
