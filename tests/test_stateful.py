"""A hypothesis state machine drives the engine and the reference through the same operations.

After every step: no GPU is held twice; on every node free + reserved + allocated +
unhealthy-and-unheld == gpus; the engine's own invariants hold; and the two implementations
agree node by node.
"""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
from helpers import FakeClock, as_tuple, fill, regular_nodes
from hypothesis import settings
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

import gangplace
from gangplace import GangplaceError, GangRequest, reference

LEVELS = ("spine", "rack")
NODES = regular_nodes(LEVELS, (2, 2, 2), 8)  # 8 nodes x 8 GPUs
NAMES = [node.name for node in NODES]


def outcome(call: Any, *args: Any) -> tuple[str, Any]:
    """The result of a call, or the type of the gangplace error it raised."""
    try:
        return "ok", call(*args)
    except GangplaceError as error:
        return "error", type(error).__name__


class EngineVersusReference(RuleBasedStateMachine):
    holds = Bundle("holds")

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.engine = gangplace.Cluster(LEVELS, clock=self.clock)
        self.oracle = reference.Cluster(LEVELS, clock=self.clock)
        fill(self.engine, LEVELS, NODES)
        fill(self.oracle, LEVELS, NODES)

    @rule(
        target=holds,
        pods=st.integers(1, 10),
        gpus_per_pod=st.sampled_from((1, 2, 4, 8)),
        min_pods=st.none() | st.integers(1, 10),
        level=st.sampled_from((None, "node", "rack", "spine")),
        ttl=st.sampled_from((1.0, 5.0, 30.0)),
    )
    def reserve(
        self, pods: int, gpus_per_pod: int, min_pods: int | None, level: str | None, ttl: float
    ) -> tuple[str, str]:
        request = GangRequest(
            pods,
            gpus_per_pod,
            min_pods=min(min_pods, pods) if min_pods else None,
            required_level=level,
        )
        got = outcome(lambda: self.engine.reserve(request, ttl=ttl))
        expected = outcome(lambda: self.oracle.reserve(request, ttl=ttl))
        if got[0] == "ok" and expected[0] == "ok":
            assert as_tuple(got[1].placement) == as_tuple(expected[1].placement)
            assert got[1].expires_at == expected[1].expires_at
            return got[1].id, expected[1].id
        assert got == expected
        return "gp-" + "0" * 32, "gp-" + "0" * 32  # an unknown id, in both

    @rule(hold=holds)
    def commit(self, hold: tuple[str, str]) -> None:
        got, expected = outcome(self.engine.commit, hold[0]), outcome(self.oracle.commit, hold[1])
        if got[0] == expected[0] == "ok":
            assert as_tuple(got[1].placement) == as_tuple(expected[1].placement)
        else:
            assert got == expected

    @rule(hold=holds)
    def rollback(self, hold: tuple[str, str]) -> None:
        assert outcome(self.engine.rollback, hold[0]) == outcome(self.oracle.rollback, hold[1])

    @rule(hold=holds)
    def release(self, hold: tuple[str, str]) -> None:
        assert outcome(self.engine.release, hold[0]) == outcome(self.oracle.release, hold[1])

    @rule(node=st.sampled_from(NAMES), gpu=st.integers(0, 7), healthy=st.booleans())
    def set_health(self, node: str, gpu: int, healthy: bool) -> None:
        got = self.engine.set_gpu_health(node, gpu, healthy)
        expected = self.oracle.set_gpu_health(node, gpu, healthy)
        assert len(got) == len(expected) <= 1

    @rule(node=st.sampled_from(NAMES), cordoned=st.booleans())
    def cordon(self, node: str, cordoned: bool) -> None:
        for cluster in (self.engine, self.oracle):
            (cluster.cordon if cordoned else cluster.uncordon)(node)

    @rule(seconds=st.sampled_from((0.5, 1.0, 4.0, 29.0, 1e6)))
    def tick(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule(pods=st.integers(1, 12), gpus_per_pod=st.sampled_from((1, 3, 8)))
    def place(self, pods: int, gpus_per_pod: int) -> None:
        request = GangRequest(pods, gpus_per_pod)
        assert as_tuple(self.engine.place_gang(request)) == as_tuple(
            self.oracle.place_gang(request)
        )

    @invariant()
    def conservation_and_agreement(self) -> None:
        self.engine.check_invariants()
        for name in NAMES:
            node = self.engine.node(name)
            free, reserved, allocated = set(node.free), set(node.reserved), set(node.allocated)
            unhealthy = set(node.unhealthy)
            assert not (free & reserved or free & allocated or reserved & allocated)
            assert not (reserved & unhealthy or free & unhealthy)
            idle_unhealthy = unhealthy - allocated
            assert len(free) + len(reserved) + len(allocated) + len(idle_unhealthy) == node.gpus
            expected = self.oracle.node(name)
            assert (node.free, node.reserved, node.allocated, node.unhealthy, node.cordoned) == (
                expected.free,
                expected.reserved,
                expected.allocated,
                expected.unhealthy,
                expected.cordoned,
            )
        assert self.engine.stats().free == self.oracle.stats().free


# max_examples comes from the loaded profile (see conftest.py).
EngineVersusReference.TestCase.settings = settings(stateful_step_count=50)
test_engine_versus_reference = EngineVersusReference.TestCase
