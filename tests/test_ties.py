"""Best-fit's remembered tie-breaks (issue 29, part 2) against the reference.

Past 64 deepest domains in a run of equally free ones, the engine reads rule 3's pick from
per-domain remembered winners (``capacity/ties.rs``) instead of walking the run. A cluster
of 2 spines x 50 racks x 2 nodes where every node has one free GPU makes every one-GPU search
take that path, for the whole cluster and for a selector's pool (racks r07 are left out of
it); random reservations, rollbacks, health flips and cordons keep changing it, and after
each step the engine's placements must be the reference's and ``check_invariants`` (which
recomputes every remembered winner, the pool's too) must pass. Gangs of 2 and 3 one-GPU pods
do the same at the rack and spine levels (``best_fit::tied_domain``; test builds ask the
remembered winner from the third equally free domain on).
"""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
from helpers import FakeClock, as_tuple
from hypothesis import given, settings

import gangplace
from gangplace import GangRequest, reference

SPINES, RACKS, NODES, GPUS = 2, 50, 2, 2
NAMES = [f"s{s}-r{r:02d}-n{n}" for s in range(SPINES) for r in range(RACKS) for n in range(NODES)]


def _twins() -> tuple[Any, Any]:
    clock = FakeClock()
    clusters = (
        gangplace.Cluster(("spine", "rack"), clock=clock),
        reference.Cluster(("spine", "rack"), clock=clock),
    )
    for cluster in clusters:
        for name in NAMES:
            spine, rack, _ = name.split("-")
            cluster.add_node(
                name,
                gpus=GPUS,
                topology={"spine": spine, "rack": rack},
                labels={"kind": "gpu" if rack != "r07" else "other"},
                unhealthy=[1],
            )
    return clusters


STEP = st.one_of(
    st.tuples(st.just("reserve"), st.integers(1, 3)),
    st.tuples(st.just("rollback"), st.integers(0, 20)),
    st.tuples(st.just("health"), st.sampled_from(NAMES), st.booleans()),
    st.tuples(st.just("cordon"), st.sampled_from(NAMES), st.booleans()),
)


@settings(max_examples=60)
@given(st.lists(STEP, min_size=1, max_size=25))
def test_remembered_tie_breaks_agree_with_the_reference(steps: list[tuple[Any, ...]]) -> None:
    engine, oracle = _twins()
    held: list[tuple[str, str]] = []
    for step in steps:
        if step[0] == "reserve":
            request = GangRequest(step[1], 1)
            got, expected = engine.place_gang(request), oracle.place_gang(request)
            assert (got is None) == (expected is None)
            if got is not None:
                assert as_tuple(got) == as_tuple(expected)
                held.append((engine.reserve(got).id, oracle.reserve(expected).id))
        elif step[0] == "rollback" and held:
            ours, theirs = held.pop(step[1] % len(held))
            engine.rollback(ours)
            oracle.rollback(theirs)
        elif step[0] == "health":
            engine.set_gpu_health(step[1], 0, step[2])
            oracle.set_gpu_health(step[1], 0, step[2])
        elif step[0] == "cordon":
            for cluster in (engine, oracle):
                (cluster.cordon if step[2] else cluster.uncordon)(step[1])
        for request in (
            GangRequest(1, 1),
            GangRequest(1, 1, selector={"kind": "gpu"}),
            GangRequest(2, 1),  # a run of equally free racks: the remembered domain winners
            GangRequest(2, 1, selector={"kind": "gpu"}),
            GangRequest(3, 1),
        ):
            got, expected = engine.place_gang(request), oracle.place_gang(request)
            assert (got is None) == (expected is None)
            if got is not None:
                assert as_tuple(got) == as_tuple(expected)
        engine.check_invariants()  # also the selector pool's remembered picks
