"""A hypothesis state machine drives the engine and the reference through the same operations.

Rules: add and remove nodes, flip GPU health (also between reserve and commit), cordon, move
the clock by small and huge steps, reserve by request (with random priorities and flags) and by
a possibly stale placement, reserve multi-role gangs (a leader colocated with its workers),
adopt running work (explicit GPUs or counts, some asking CPUs), give nodes CPUs and memory
(docs/resources.md "Node resources": gangs then ask CPUs per pod a third of the time), reserve gangs
of fractions of a GPU (docs/resources.md "Fractions of a GPU"), commit, roll back
and release (twice, out of order, as the wrong owner), change priorities, ask hold statuses,
plan and apply preemptions and defragmentations, plan, hold and commit repairs, and
snapshot-and-restore in the middle of a run, continuing on the restored copies. Both sides
hand out sequential ids (a test-build switch), so that tie-breaks by id agree.

After every step: no GPU is held twice, none shared past 1000 thousandths or both shared and
held whole, and every node's shares are the reference's; every node's free resources are the
reference's and lie between 0 and its capacity (``check_invariants`` recounts every hold's
use); every allocation's lost ranks (docs/repair.md "Repair after failures") are those of the
reference, and a slice gang's ranks (repaired or not) lie in their slices; repair reservations name
the same allocations and ranks; on every node free + reserved + allocated + unhealthy-and-unheld ==
gpus; ``check_invariants()`` passes; and the engine agrees with ``gangplace.reference`` on every
node, the totals and the live holds.

Examples come from the loaded hypothesis profile (500 by default, 20,000 with
GANGPLACE_HYPOTHESIS_PROFILE=long); every run has up to 50 steps.
"""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import pytest
from helpers import FakeClock, as_tuple, fill, regular_nodes
from hypothesis import event, settings
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule
from watchdog import watched

import gangplace
from gangplace import GangplaceError, GangRequest, MultiGangRequest, PodGroup, reference

LEVELS = ("spine", "rack")
NODES = regular_nodes(LEVELS, (2, 2, 2), 8)  # 8 nodes x 8 GPUs
EXTRA = [f"x{index}" for index in range(4)]  # names the add_node rule may use
NAMES = [node.name for node in NODES] + EXTRA
OWNERS = (None, "team-a", "team-b")
CAP = 40  # max_held_gpus_per_owner
UNKNOWN = "gp-" + "0" * 32
# Errors the two implementations must word identically (others are compared by type).
SAME_TEXT = {"Unschedulable", "Conflict", "LimitExceeded"}
# A running pod to adopt: a node and a GPU count (0: a pod without GPUs, which must ask CPUs),
# or explicit GPUs (maybe held, twice, absent).
# docs/placement.md rule 1: the taints a node may carry (one bad: an unknown effect) and the
# tolerations a gang may bring.
TAINTS = (
    (),
    (("dedicated", "train", "NoSchedule"),),
    (("maint", "", "NoExecute"),),
    (("soft", "x", "PreferNoSchedule"),),
    (("dedicated", "train", "Sometimes"),),
)
TOLERATIONS = st.sampled_from(
    ((), (), (("dedicated", "Equal", "train", None),), (("", "Exists", "", None),))
)
ADOPTED_POD = st.tuples(
    st.sampled_from(NAMES),
    st.integers(0, 4) | st.lists(st.integers(0, 7), min_size=1, max_size=3, unique=True),
)


def outcome(call: Any, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    """The result of a call, or the gangplace error it raised (type, and text if id-free)."""
    try:
        return "ok", call(*args, **kwargs)
    except GangplaceError as error:
        kind = type(error).__name__
        return "error", (kind, str(error) if kind in SAME_TEXT else "")


class EngineVersusReference(RuleBasedStateMachine):
    holds = Bundle("holds")
    placements = Bundle("placements")

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.engine = watched(
            gangplace.Cluster(LEVELS, clock=self.clock, max_held_gpus_per_owner=CAP)
        )
        self.oracle = reference.Cluster(LEVELS, clock=self.clock, max_held_gpus_per_owner=CAP)
        fill(self.engine, LEVELS, NODES)
        fill(self.oracle, LEVELS, NODES)
        self.restores = 0
        self._sequential()
        self.ids: dict[str, str] = {UNKNOWN: UNKNOWN}  # engine id -> reference id

    def _sequential(self) -> None:
        """Sequential ids on both sides, from a fresh range after every restore."""
        start = 1 + self.restores * 10**6
        self.engine._use_sequential_ids(start)  # type: ignore[attr-defined]
        self.oracle._use_sequential_ids(start)

    def _both(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        got = outcome(getattr(self.engine, name), *args, **kwargs)
        expected = outcome(getattr(self.oracle, name), *args, **kwargs)
        if got[0] == "error" or expected[0] == "error":
            assert got == expected, name
        return got, expected

    def _same_plan(self, plan: Any, oracle_plan: Any) -> None:
        """A preemption plan of the engine and the reference's agree (ids mapped)."""
        assert as_tuple(plan.placement) == as_tuple(oracle_plan.placement)
        assert sorted(self.ids[v] for v in plan.victims) == list(oracle_plan.victims)
        assert (plan.victim_gpus, plan.max_victim_priority) == (
            oracle_plan.victim_gpus,
            oracle_plan.max_victim_priority,
        )

    def _both_ids(self, name: str, hold: str, **kwargs: Any) -> tuple[Any, Any]:
        """Calls ``name`` on both with the hold's id in each (an unknown id on both sides)."""
        got = outcome(getattr(self.engine, name), hold, **kwargs)
        expected = outcome(getattr(self.oracle, name), self.ids.get(hold, hold), **kwargs)
        assert got[0] == expected[0], (got, expected)
        return got, expected

    def _held(self, got: Any, expected: Any) -> str:
        if got[0] == expected[0] == "ok":
            assert as_tuple(got[1].placement) == as_tuple(expected[1].placement)
            assert got[1].expires_at == expected[1].expires_at
            assert got[1].owner == expected[1].owner
            self.ids[got[1].id] = expected[1].id
            return str(got[1].id)
        assert got == expected
        return UNKNOWN

    @rule(
        target=holds,
        pods=st.integers(1, 10),
        gpus_per_pod=st.sampled_from((1, 2, 4, 8)),
        min_pods=st.none() | st.integers(1, 10),
        level=st.sampled_from((None, "node", "rack", "spine")),
        ttl=st.sampled_from((1.0, 5.0, 30.0)),
        owner=st.sampled_from(OWNERS),
        terms=st.tuples(st.integers(-1, 2), st.booleans(), st.booleans()),
        spares=st.sampled_from((0, 0, 1, 2)),
        cpu=st.sampled_from((0, 0, 1_000, 3_000)),
        milli=st.sampled_from((None, None, None, 250, 500, 700)),
        tolerations=TOLERATIONS,
    )
    def reserve(
        self,
        pods: int,
        gpus_per_pod: int,
        min_pods: int | None,
        level: str | None,
        ttl: float,
        owner: str | None,
        terms: tuple[int, bool, bool],
        spares: int,
        cpu: int = 0,
        milli: int | None = None,
        tolerations: Any = (),
    ) -> str:
        """A gang, a third of the time asking CPUs per pod (docs/resources.md "Node resources");
        some of those are pods without GPUs (a 1-GPU draw asking CPUs becomes 0 GPUs per pod);
        a 1-GPU draw without spares asks a fraction of a GPU half the time (docs/resources.md
        "Fractions of a GPU")."""
        if cpu and gpus_per_pod == 1 and spares == 0 and pods % 2:
            gpus_per_pod = 0
        if gpus_per_pod != 1 or spares:
            milli = None
        request = GangRequest(
            pods,
            gpus_per_pod,
            min_pods=min(min_pods, pods) if min_pods else None,
            required_level=level,
            priority=terms[0],
            preemptible=terms[1],
            movable=terms[2],
            spares=spares,
            resources_per_pod={"cpu": cpu} if cpu else None,
            gpu_milli=milli,
            tolerations=tolerations,
        )
        return self._held(*self._both("reserve", request, ttl=ttl, owner=owner))

    @rule(
        target=holds,
        count=st.integers(1, 3),
        layers=st.sampled_from(
            (
                (("rack", 2),),
                (("spine", 4), ("rack", 2)),
                (("rack", 2), ("node", 1)),
                (("node", 2),),
                (("spine", 2), ("rack", 2), ("node", 1)),
            )
        ),
        gpus_per_pod=st.sampled_from((1, 2, 4)),
        elastic=st.booleans(),
        owner=st.sampled_from(OWNERS),
        spread=st.sampled_from(("pack", "balanced")),
        spares=st.sampled_from((0, 0, 1)),
    )
    def reserve_sliced(
        self,
        count: int,
        layers: tuple[tuple[str, int], ...],
        gpus_per_pod: int,
        elastic: bool,
        owner: str | None,
        spread: str,
        spares: int,
    ) -> str:
        """Slice gangs (docs/shapes.md "Slices"), packed or balanced, some with a spare per
        innermost
        slice (docs/repair.md "Spares"): both sides agree."""
        outer = layers[0][1]
        request = GangRequest(
            outer * count,
            gpus_per_pod,
            min_pods=outer if elastic else None,
            slices=layers,
            spread=spread,  # type: ignore[arg-type]
            spares=spares,
        )
        got, expected = self._both("reserve", request, ttl=30.0, owner=owner)
        if got[0] == expected[0] == "ok":
            assert got[1].placement.slices == expected[1].placement.slices
        return self._held(got, expected)

    @rule(
        target=holds,
        workers=st.integers(1, 6),
        gpus_per_pod=st.sampled_from((1, 2, 4, 8)),
        leader_gpus=st.sampled_from((1, 2, 8)),
        level=st.sampled_from((None, "node", "rack", "spine")),
        elastic=st.booleans(),
        owner=st.sampled_from(OWNERS),
        priority=st.integers(-1, 2),
        spares=st.sampled_from((0, 0, 1)),
        cpu=st.sampled_from((None, None, 1_000, 3_000)),
    )
    def reserve_roles(
        self,
        workers: int,
        gpus_per_pod: int,
        leader_gpus: int,
        level: str | None,
        elastic: bool,
        owner: str | None,
        priority: int,
        spares: int,
        cpu: int | None,
    ) -> str:
        """Multi-role gangs (docs/roles.md): a leader next to its workers, who
        sometimes hold a spare (docs/repair.md "Spares"); sometimes the leader is a launcher asking
        CPUs and no GPU, and each worker asks CPUs too (docs/resources.md "Node resources")."""
        asks = {"cpu": cpu} if cpu else None
        request = MultiGangRequest(
            (
                PodGroup("leader", 1, 0 if cpu == 3_000 else leader_gpus, resources_per_pod=asks),
                PodGroup(
                    "workers",
                    workers,
                    gpus_per_pod,
                    min_pods=1 if elastic else None,
                    spares=spares,
                    resources_per_pod=asks,
                ),
            ),
            colocate=(("leader", "workers", level or "rack"),),
            priority=priority,
        )
        got, expected = self._both("reserve", request, ttl=30.0, owner=owner)
        if got[0] == expected[0] == "ok":
            assert got[1].placement.groups.keys() == {"leader", "workers"}
            assert {k: len(v) for k, v in got[1].placement.groups.items()} == {
                k: len(v) for k, v in expected[1].placement.groups.items()
            }
        return self._held(got, expected)

    @rule(target=placements, pods=st.integers(1, 6), gpus_per_pod=st.sampled_from((1, 2, 4, 8)))
    def place(self, pods: int, gpus_per_pod: int) -> tuple[Any, Any]:
        request = GangRequest(pods, gpus_per_pod)
        got, expected = self.engine.place_gang(request), self.oracle.place_gang(request)
        assert as_tuple(got) == as_tuple(expected)
        return got, expected

    @rule(
        target=holds,
        pods=st.integers(1, 6),
        gpus_per_pod=st.sampled_from((1, 2, 4)),
        avoid=st.lists(st.tuples(st.sampled_from(NAMES), st.integers(0, 7)), max_size=6),
        groups=st.lists(st.lists(holds, max_size=3), max_size=4),
        owner=st.sampled_from(OWNERS),
        milli=st.sampled_from((None, None, 300, 700)),
    )
    def look_ahead_and_reserve_avoiding(
        self,
        pods: int,
        gpus_per_pod: int,
        avoid: list[tuple[str, int]],
        groups: list[list[str]],
        owner: str | None,
        milli: int | None,
    ) -> str:
        """docs/preemption.md "Looking ahead": ``place_after`` over groups of earlier holds (live,
        ended or unknown) agrees with the reference and changes nothing; then a
        reservation that avoids the answer's GPUs (or the drawn ones) agrees too; whole
        gangs or shares of a GPU (docs/resources.md "Fractions of a GPU")."""
        request = GangRequest(pods, 1 if milli else gpus_per_pod, gpu_milli=milli)
        pods_avoided = [gangplace.PodPlacement(node, [gpu]) for node, gpu in avoid]
        known = [[hold for hold in group if hold in self.ids] for group in groups]
        theirs = [[self.ids[hold] for hold in group] for group in known]
        before = self.engine.snapshot()
        got = outcome(self.engine.place_after, request, known, avoid=pods_avoided)
        expected = outcome(self.oracle.place_after, request, theirs, avoid=pods_avoided)
        assert self.engine.snapshot() == before
        assert got[0] == expected[0], (got, expected)
        if got[0] == "ok":
            answer = None if got[1] is None else (got[1][0], as_tuple(got[1][1]))
            other = None if expected[1] is None else (expected[1][0], as_tuple(expected[1][1]))
            assert answer == other
            if got[1] is not None:
                pods_avoided = list(got[1][1].pods)
        engine_side = outcome(self.engine.reserve, request, owner=owner, avoid=pods_avoided)
        oracle_side = outcome(self.oracle.reserve, request, owner=owner, avoid=pods_avoided)
        return self._held(engine_side, oracle_side)

    @rule(target=holds, placement=placements, owner=st.sampled_from(OWNERS))
    def reserve_placement(self, placement: tuple[Any, Any], owner: str | None) -> str:
        """Reserves a placement computed in an earlier step: stale by now, or not."""
        if placement[0] is None:
            return UNKNOWN
        got = outcome(self.engine.reserve, placement[0], ttl=30.0, owner=owner)
        expected = outcome(self.oracle.reserve, placement[1], ttl=30.0, owner=owner)
        return self._held(got, expected)

    @rule(
        target=holds,
        entries=st.lists(ADOPTED_POD, min_size=1, max_size=3),
        owner=st.sampled_from(OWNERS),
        priority=st.integers(-1, 2),
        cpu=st.sampled_from((None, None, 2_000)),
        milli=st.sampled_from((None, None, 250, 600)),
    )
    def adopt(
        self,
        entries: list[tuple[str, Any]],
        owner: str | None,
        priority: int,
        cpu: int | None,
        milli: int | None,
    ) -> str:
        """Records running work: explicit GPUs (maybe held, twice, out of range) or counts,
        sometimes asking CPUs (more than a node has free: ``Conflict``), sometimes a share
        of one GPU per pod (docs/resources.md "Fractions of a GPU": counts become 1, lists one
        GPU)."""
        if milli is not None:
            entries = [
                (name, gpus[:1] if isinstance(gpus, list) else 1 if gpus else gpus)
                for name, gpus in entries
            ]
        pods = [
            gangplace.PodPlacement(name, gpus) if isinstance(gpus, list) else (name, gpus)
            for name, gpus in entries
        ]
        asks: dict[str, Any] = {"resources": None if cpu is None else {"cpu": cpu}}
        asks["gpu_milli"] = milli
        got = outcome(self.engine.adopt, pods, owner=owner, priority=priority, **asks)
        expected = outcome(self.oracle.adopt, pods, owner=owner, priority=priority, **asks)
        if got[0] == expected[0] == "ok":
            assert as_tuple(got[1].placement) == as_tuple(expected[1].placement)
            assert (got[1].owner, got[1].priority) == (expected[1].owner, expected[1].priority)
            self.ids[got[1].id] = expected[1].id
            event("adopt: adopted")
            return str(got[1].id)
        assert got == expected
        event(f"adopt: {got[1][0] if got[0] == 'error' else 'ok'}")
        return UNKNOWN

    @rule(
        hold=holds,
        entries=st.lists(ADOPTED_POD, max_size=2),
        owner=st.sampled_from(OWNERS),
        priority=st.none() | st.integers(-1, 2),
        milli=st.sampled_from((None, None, 250, 600)),
    )
    def adopt_into(
        self,
        hold: str,
        entries: list[tuple[str, Any]],
        owner: str | None,
        priority: int | None,
        milli: int | None,
    ) -> None:
        """Grows an allocation by running pods (only adopted ones may grow; a fractional one
        by pods of its own share: docs/resources.md "Fractions of a GPU")."""
        live = [held for held in self.engine.allocations(owner) if held.id == hold]
        if milli is not None and live and live[0].placement.gpu_milli is not None:
            milli = live[0].placement.gpu_milli  # mostly its own share, so that it grows
        if milli is not None:
            entries = [
                (name, gpus[:1] if isinstance(gpus, list) else 1 if gpus else gpus)
                for name, gpus in entries
            ]
        pods = [
            gangplace.PodPlacement(name, gpus) if isinstance(gpus, list) else (name, gpus)
            for name, gpus in entries
        ]
        asks = {"owner": owner, "priority": priority, "gpu_milli": milli}
        got = outcome(self.engine.adopt, pods, into=hold, **asks)
        expected = outcome(self.oracle.adopt, pods, into=self.ids[hold], **asks)
        assert got[0] == expected[0], (got, expected)
        if got[0] == "ok":
            assert as_tuple(got[1].placement) == as_tuple(expected[1].placement)
            assert (got[1].owner, got[1].priority) == (expected[1].owner, expected[1].priority)
            event(f"adopt_into: grown{' (shares)' if milli else ''}")
        else:
            assert got == expected
            event(f"adopt_into: {got[1][0]}")

    @rule(hold=holds, owner=st.sampled_from(OWNERS))
    def commit(self, hold: str, owner: str | None) -> None:
        got = outcome(self.engine.commit, hold, owner=owner)
        expected = outcome(self.oracle.commit, self.ids[hold], owner=owner)
        if got[0] == expected[0] == "ok":
            assert as_tuple(got[1].placement) == as_tuple(expected[1].placement)
            assert got[1].owner == expected[1].owner
        else:
            assert got == expected

    @rule(hold=holds, owner=st.sampled_from(OWNERS))
    def rollback(self, hold: str, owner: str | None) -> None:
        got = outcome(self.engine.rollback, hold, owner=owner)
        assert got == outcome(self.oracle.rollback, self.ids[hold], owner=owner)

    @rule(hold=holds, owner=st.sampled_from(OWNERS))
    def release(self, hold: str, owner: str | None) -> None:
        got = outcome(self.engine.release, hold, owner=owner)
        assert got == outcome(self.oracle.release, self.ids[hold], owner=owner)

    @rule(
        hold=holds,
        ranks=st.lists(st.integers(-1, 8), max_size=3),
        owner=st.sampled_from(OWNERS),
    )
    def release_pods(self, hold: str, ranks: list[int], owner: str | None) -> None:
        got = outcome(self.engine.release_pods, hold, ranks, owner=owner)
        expected = outcome(self.oracle.release_pods, self.ids[hold], ranks, owner=owner)
        assert got[0] == expected[0], (got, expected)
        if got[0] == "ok" and got[1] is not None:
            assert (got[1].ended, got[1].lost) == (expected[1].ended, expected[1].lost)
        else:
            assert got == expected

    @rule(hold=holds, priority=st.integers(-2, 3), owner=st.sampled_from(OWNERS))
    def set_priority(self, hold: str, priority: int, owner: str | None) -> None:
        got = outcome(self.engine.set_priority, hold, priority, owner=owner)
        expected = outcome(self.oracle.set_priority, self.ids[hold], priority, owner=owner)
        if got[0] == expected[0] == "ok":
            assert (got[1].priority, type(got[1]).__name__) == (
                expected[1].priority,
                type(expected[1]).__name__,
            )
        else:
            assert got == expected

    @rule(hold=holds, owner=st.sampled_from(OWNERS))
    def hold_status(self, hold: str, owner: str | None) -> None:
        got = outcome(self.engine.hold_status, hold, owner=owner)
        assert got == outcome(self.oracle.hold_status, self.ids[hold], owner=owner)

    @rule(
        target=holds,
        gpus=st.sampled_from((1, 2, 4)),
        terms=st.tuples(st.integers(-1, 1), st.booleans(), st.booleans()),
        owner=st.sampled_from(OWNERS),
        milli=st.sampled_from((None, None, None, 300, 600)),
    )
    def run_small_job(
        self, gpus: int, terms: tuple[int, bool, bool], owner: str | None, milli: int | None
    ) -> str:
        """Reserves and commits a small job at once: work for preemption to move or end, or
        two pods of a share of a GPU each, for repair, adoption into and looking ahead to
        work on (docs/resources.md "Fractions of a GPU")."""
        shape = (2, 1) if milli else (1, gpus)
        request = GangRequest(
            *shape, priority=terms[0], preemptible=terms[1], movable=terms[2], gpu_milli=milli
        )
        hold = self._held(*self._both("reserve", request, owner=owner))
        if hold != UNKNOWN:
            self.engine.commit(hold, owner=owner)
            self.oracle.commit(self.ids[hold], owner=owner)
        return hold

    gangs = st.tuples(
        st.integers(2, 8),
        st.sampled_from((1, 2, 4, 8)),
        st.integers(-1, 3),
        st.sampled_from((None, "node", "rack", "spine")),
    )

    @rule(
        target=holds,
        gang=gangs,
        max_victims=st.none() | st.integers(0, 2),
        owner=st.sampled_from(OWNERS),
        balanced=st.booleans(),
        chosen=st.none() | st.integers(0, 255),
        cpu=st.sampled_from((None, None, 1_000, 2_000)),
        tolerations=TOLERATIONS,
        milli=st.sampled_from((None, None, None, 400, 700)),
    )
    def preempt(
        self,
        gang: tuple[int, int, int, str | None],
        max_victims: int | None,
        owner: str | None,
        balanced: bool,
        chosen: int | None,
        cpu: int | None,
        tolerations: Any = (),
        milli: int | None = None,
    ) -> str:
        """Priority preemption; sometimes the gang asks CPUs, which victims give back too
        (docs/resources.md "Node resources"), or is pods of a share of a GPU each; the
        small jobs' shares may be victims (docs/preemption.md P8)."""
        pods, size, priority, level = gang
        request = GangRequest(
            pods,
            1 if milli else size,
            gpu_milli=milli,
            required_level=level,
            priority=priority,
            spread="balanced" if balanced else "pack",
            resources_per_pod={"cpu": cpu} if cpu else None,
            tolerations=tolerations,
        )
        if chosen is None:
            got, expected = self._both("plan_preemption", request, max_victims=max_victims)
        else:  # docs/preemption.md P7: the candidates as a bit mask over the engine's allocations
            ids = sorted(a.id for a in self.engine.allocations() if a.id in self.ids)
            mine = [hold for bit, hold in enumerate(ids) if chosen >> (bit % 8) & 1]
            theirs = [self.ids[hold] for hold in mine]
            got = outcome(self.engine.plan_preemption, request, candidates=mine)
            expected = outcome(self.oracle.plan_preemption, request, candidates=theirs)
            assert (got[0], got[0] == "ok" and got[1] is None) == (
                expected[0],
                expected[0] == "ok" and expected[1] is None,
            )
        if got[0] != "ok" or got[1] is None or expected[1] is None:
            assert (got[0], got[1] is None) == (expected[0], expected[1] is None)
            return UNKNOWN
        plan, oracle_plan = got[1], expected[1]
        self._same_plan(plan, oracle_plan)
        shares = {a.id for a in self.engine.allocations() if a.placement.gpu_milli is not None}
        if shares & set(plan.victims):
            event("preemption: fractional victims")
        got = outcome(self.engine.preempt, plan, owner=owner)
        return self._held(got, outcome(self.oracle.preempt, oracle_plan, owner=owner))

    @rule(
        target=holds,
        workers=st.integers(1, 6),
        gpus_per_pod=st.sampled_from((1, 2, 4, 8)),
        level=st.sampled_from((None, "node", "rack", "spine")),
        elastic=st.booleans(),
        priority=st.integers(-1, 3),
        max_victims=st.none() | st.integers(0, 2),
        owner=st.sampled_from(OWNERS),
        cpu=st.sampled_from((None, None, 1_000)),
    )
    def preempt_roles(
        self,
        workers: int,
        gpus_per_pod: int,
        level: str | None,
        elastic: bool,
        priority: int,
        max_victims: int | None,
        owner: str | None,
        cpu: int | None,
    ) -> str:
        """Preemption for a whole multi-role unit (docs/roles.md, 7); sometimes
        a launcher of CPUs and no GPU, its workers asking CPUs too (rule 9)."""
        asks = {"cpu": cpu} if cpu else None
        request = MultiGangRequest(
            (
                PodGroup("leader", 1, 0 if cpu else 1, resources_per_pod=asks),
                PodGroup(
                    "workers",
                    workers,
                    gpus_per_pod,
                    min_pods=1 if elastic else None,
                    resources_per_pod=asks,
                ),
            ),
            colocate=(("leader", "workers", level or "rack"),),
            required_level=level if level != "node" else None,
            priority=priority,
        )
        got, expected = self._both("plan_preemption", request, max_victims=max_victims)
        if got[0] != "ok" or got[1] is None or expected[1] is None:
            assert (got[0], got[1] is None) == (expected[0], expected[1] is None)
            return UNKNOWN
        plan, oracle_plan = got[1], expected[1]
        event("multi-role preemption: " + ("victims" if plan.victims else "fits as it is"))
        self._same_plan(plan, oracle_plan)
        assert plan.placement.groups.keys() == oracle_plan.placement.groups.keys()
        got = outcome(self.engine.preempt, plan, owner=owner)
        return self._held(got, outcome(self.oracle.preempt, oracle_plan, owner=owner))

    @rule(
        gang=gangs,
        evict=st.booleans(),
        downgrade=st.booleans(),
        owner=st.sampled_from(OWNERS),
        unit=st.booleans(),
        cpu=st.sampled_from((None, None, 1_000)),
    )
    def defrag(
        self,
        gang: tuple[int, int, int, str | None],
        evict: bool,
        downgrade: bool,
        owner: str | None,
        unit: bool,
        cpu: int | None,
    ) -> None:
        """Defragmentation for a gang, or (``unit``) a leader colocated with its workers;
        sometimes the gang asks CPUs (docs/resources.md "Node resources")."""
        pods, size, priority, level = gang
        asks = {"cpu": cpu} if cpu else None
        request: GangRequest | MultiGangRequest = GangRequest(
            pods, size, required_level=level, priority=priority, resources_per_pod=asks
        )
        if unit:
            request = MultiGangRequest(
                (
                    PodGroup("leader", 1, 1, resources_per_pod=asks),
                    PodGroup("workers", pods, size, resources_per_pod=asks),
                ),
                colocate=(("leader", "workers", level or "rack"),),
                required_level=level if level != "node" else None,
                priority=priority,
            )
        options = {"evict_unplaceable": evict, "allow_downgrade": downgrade}
        got, expected = self._both("plan_defrag", request, **options)
        if got[0] != "ok" or got[1] is None or expected[1] is None:
            assert (got[0], got[1] is None) == (expected[0], expected[1] is None)
            return
        plan, oracle_plan = got[1], expected[1]
        if unit:
            event("multi-role defragmentation: " + ("moves" if plan.moves else "no moves"))
        assert as_tuple(plan.placement) == as_tuple(oracle_plan.placement)
        assert [(self.ids[m.allocation], as_tuple(m.target)) for m in plan.moves] == [
            (m.allocation, as_tuple(m.target)) for m in oracle_plan.moves
        ]
        assert [self.ids[e] for e in plan.evictions] == list(oracle_plan.evictions)
        if any(m.target.gpu_milli is not None for m in plan.moves):
            event("defragmentation: fractional moves")  # docs/preemption.md D5
        got = outcome(self.engine.apply_defrag, plan, owner=owner)
        expected = outcome(self.oracle.apply_defrag, oracle_plan, owner=owner)
        assert got[0] == expected[0]
        if got[0] == "ok":
            self.ids[got[1][0].id] = expected[1][0].id
            for old, new in got[1][1].items():
                self.ids[new.id] = expected[1][1][self.ids[old]].id
        else:
            assert got == expected

    @rule(
        hold=holds,
        widen=st.booleans(),
        owner=st.sampled_from(OWNERS),
        fail=st.booleans(),
        preempt=st.booleans(),
    )
    def plan_repair(
        self, hold: str, widen: bool, owner: str | None, fail: bool, preempt: bool
    ) -> None:
        """Repair plans (docs/repair.md "Repair after failures") agree, and change nothing; with
        ``fail``, the allocation's first GPU fails first."""
        live = [a for a in self.engine.allocations() if a.id == hold]
        if fail and live:
            pod = live[0].placement.pods[0]
            if pod.node in self.engine.nodes() and pod.gpus:  # a pod without GPUs: none fails
                self._both("set_gpu_health", pod.node, pod.gpus[0], False)
        before = self.engine.snapshot()
        got, expected = self._both_ids(
            "plan_repair", hold, widen=widen, preempt=preempt, owner=owner
        )
        assert self.engine.snapshot() == before
        if got[0] == "ok" and got[1] is not None and expected[1] is not None:
            plan, oracle_plan = got[1], expected[1]
            pods = [(r, p.node, tuple(p.gpus)) for r, p in plan.replacements]
            assert pods == [(r, p.node, tuple(p.gpus)) for r, p in oracle_plan.replacements]
            assert (plan.lost, plan.level, tuple(plan.domain)) == (
                oracle_plan.lost,
                oracle_plan.level,
                tuple(oracle_plan.domain),
            )
            assert sorted(self.ids[v] for v in plan.victims) == sorted(oracle_plan.victims)
            event("repair plan: " + ("replacements" if plan.replacements else "nothing lost"))
        elif got[0] == "ok":
            assert (got[1] is None) == (expected[1] is None)
        got, expected = self._both_ids("explain_repair", hold, owner=owner)
        if got[0] == "ok":
            assert got[1] == expected[1]

    @rule(
        target=holds,
        hold=holds,
        widen=st.booleans(),
        owner=st.sampled_from(OWNERS),
        fail=st.integers(0, 7),
        merge=st.booleans(),
        preempt=st.booleans(),
    )
    def repair(
        self, hold: str, widen: bool, owner: str | None, fail: int, merge: bool, preempt: bool
    ) -> str:
        """Fails a GPU of the allocation's pod ``fail`` (modulo its pods), then plans a repair
        on both sides and holds it (docs/repair.md "Repair after failures", R4); with ``merge``,
        commits
        it at once (the ``commit_repair`` rule also commits it later, or another hold)."""
        live = [a for a in self.engine.allocations() if a.id == hold]
        if live:
            pod = live[0].placement.pods[fail % len(live[0].placement.pods)]
            if pod.node in self.engine.nodes() and pod.gpus:  # a pod without GPUs: none fails
                self._both("set_gpu_health", pod.node, pod.gpus[-1], False)
        got, expected = self._both_ids(
            "plan_repair", hold, widen=widen, preempt=preempt, owner=owner
        )
        if got[0] != "ok" or got[1] is None or expected[1] is None:
            return UNKNOWN
        assert sorted(self.ids[v] for v in got[1].victims) == sorted(expected[1].victims)
        if got[1].victims:
            event("repair: preempts")
        assert got[1].from_spares == expected[1].from_spares
        if got[1].from_spares:
            event("repair: from spares")
        held = self._held(
            outcome(self.engine.repair, got[1], owner=owner),
            outcome(self.oracle.repair, expected[1], owner=owner),
        )
        event("repair: " + ("held" if held != UNKNOWN else "refused"))
        if live and live[0].placement.gpu_milli is not None:  # docs/repair.md R7
            event("repair: shares " + ("held" if held != UNKNOWN else "refused"))
        if merge and held != UNKNOWN:
            self.commit_repair(held, owner)
        return held

    @rule(hold=holds, owner=st.sampled_from(OWNERS))
    def commit_repair(self, hold: str, owner: str | None) -> None:
        """Merges a repair reservation (R5); on other holds, the same errors on both sides."""
        got, expected = self._both_ids("commit_repair", hold, owner=owner)
        if got[0] == expected[0] == "ok":
            assert as_tuple(got[1].placement) == as_tuple(expected[1].placement)
            assert got[1].lost == expected[1].lost == ()
            event("commit_repair: merged")
        else:
            assert got == expected

    @rule(hold=holds, count=st.integers(-1, 3), owner=st.sampled_from(OWNERS))
    def reserve_spares(self, hold: str, count: int, owner: str | None) -> None:
        """Refills spares (docs/repair.md "Spares", S5): the same spares, or the same error."""
        got, expected = self._both_ids("reserve_spares", hold, count=count, owner=owner)
        if got[0] == expected[0] == "ok":
            assert [(p.node, tuple(p.gpus)) for p in got[1].spares] == [
                (p.node, tuple(p.gpus)) for p in expected[1].spares
            ]
            event("reserve_spares: held")
        else:
            assert got == expected

    @rule(node=st.sampled_from(NAMES), gpu=st.integers(0, 7), healthy=st.booleans())
    def set_health(self, node: str, gpu: int, healthy: bool) -> None:
        got, expected = self._both("set_gpu_health", node, gpu, healthy)
        if got[0] == "ok":
            assert sorted(self.ids[i] for i in got[1]) == expected[1]

    @rule(node=st.sampled_from(NAMES), cordoned=st.booleans())
    def cordon(self, node: str, cordoned: bool) -> None:
        self._both("cordon" if cordoned else "uncordon", node)

    @rule(
        node=st.sampled_from(NAMES),
        gpus=st.sampled_from((1, 4, 8)),
        rack=st.sampled_from(("s0-r0", "s0-r1", "s1-r9")),
        grouped=st.booleans(),
    )
    def add_node(self, node: str, gpus: int, rack: str, grouped: bool) -> None:
        """Adds a node, half the time with two NUMA halves of PCIe pairs (GPU groups)."""
        topology = {"spine": rack.split("-")[0], "rack": rack}
        groups = None
        if grouped:
            paths = tuple((gpu * 2 // gpus, gpu // 2) for gpu in range(gpus))
            groups = gangplace.NodeTopology(("numa", "pcie"), paths)
        self._both("add_node", node, gpus=gpus, topology=topology, gpu_topology=groups)

    @rule(
        node=st.sampled_from(NAMES),
        pool=st.none() | st.sampled_from(("a", "b", "")),
        rack=st.none() | st.sampled_from(("s0-r0", "s0-r1", "s1-r9", "bad")),
        gpus=st.none() | st.sampled_from((1, 4, 8, 0)),
    )
    def update_node(self, node: str, pool: str | None, rack: str | None, gpus: int | None) -> None:
        """docs/transactions.md "Node updates": labels any time; structure only while the node holds
        nothing.

        A label key "" and a rack of an unknown level or 0 GPUs are the bad inputs; after a
        label change both place a one-GPU gang selecting the pool (the pools must follow).
        """
        labels = None if pool is None else ({"pool": pool} if pool else {"": "x"})
        topology = None
        if rack is not None:
            topology = {"galaxy": "x"} if rack == "bad" else {"spine": rack[:2], "rack": rack}
        self._both("update_node", node, labels=labels, topology=topology, gpus=gpus)
        if pool:
            request = GangRequest(1, 1, selector={"pool": pool})
            got, expected = self.engine.place_gang(request), self.oracle.place_gang(request)
            assert (got is None) == (expected is None)
            if got is not None and expected is not None:
                assert as_tuple(got) == as_tuple(expected)

    @rule(node=st.sampled_from(NAMES), taints=st.sampled_from(TAINTS))
    def taint(self, node: str, taints: Any) -> None:
        """docs/placement.md rule 1: taints any time, holds stay; an unknown effect is the bad
        input (a typed error, nothing changes)."""
        before = self.engine.snapshot()
        got, _ = self._both("update_node", node, taints=taints)
        if got[0] == "error":
            assert self.engine.snapshot() == before

    @rule(node=st.sampled_from(NAMES), cpu=st.sampled_from((0, 4_000, 16_000)))
    def set_resources(self, node: str, cpu: int) -> None:
        """docs/resources.md "Node resources": CPUs (and memory) at any time, also below what
        runs."""
        self._both("update_node", node, resources={"cpu": cpu, "memory": 2**30})

    @rule(node=st.sampled_from(NAMES))
    def remove_node(self, node: str) -> None:
        got, expected = self._both("remove_node", node)
        if got[0] == "ok":
            assert sorted(self.ids[i] for i in got[1]) == expected[1]

    @rule(node=st.sampled_from(("ghost", "")))
    def holds_on_unknown_node(self, node: str) -> None:
        before = self.engine.snapshot()
        got, expected = self._both("holds_on", node)
        assert got[0] == "error" and got == expected
        assert self.engine.snapshot() == before

    @rule(seconds=st.sampled_from((0.5, 1.0, 4.0, 29.0, 1e6, 1e12)))
    def tick(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule()
    def snapshot_and_restore(self) -> None:
        data = self.engine.snapshot()
        restored = watched(gangplace.Cluster.restore(data, clock=self.clock))
        assert restored.snapshot() == data
        oracle = reference.Cluster.restore(self.oracle.snapshot(), clock=self.clock)
        self.engine, self.oracle = restored, oracle  # later steps run on the copies
        self.restores += 1
        self._sequential()

    @invariant()
    def conservation_and_agreement(self) -> None:
        self.engine.check_invariants()
        assert self.engine.nodes() == self.oracle.nodes()
        for name in self.engine.nodes():
            node = self.engine.node(name)
            free, reserved, allocated = set(node.free), set(node.reserved), set(node.allocated)
            unhealthy, shared = set(node.unhealthy), set(node.shared)
            assert not (free & reserved or free & allocated or reserved & allocated)
            assert not (reserved & unhealthy or free & unhealthy)
            assert not (shared & (free | reserved | allocated))  # docs/resources.md
            assert all(0 < used <= 1000 for used in node.shared.values())
            idle_unhealthy = unhealthy - allocated
            healthy_shared = shared - unhealthy
            held = len(reserved) + len(allocated) + len(healthy_shared)
            assert len(free) + held + len(idle_unhealthy) == node.gpus
            expected = self.oracle.node(name)
            assert node.shared == expected.shared, "shares"
            assert (node.free, node.reserved, node.allocated, node.unhealthy, node.cordoned) == (
                expected.free,
                expected.reserved,
                expected.allocated,
                expected.unhealthy,
                expected.cordoned,
            )
            assert (node.gpus, dict(node.topology), dict(node.labels)) == (
                expected.gpus,
                dict(expected.topology),
                dict(expected.labels),
            )
            assert (node.resources, node.free_resources) == (
                expected.resources,
                expected.free_resources,
            ), "resources"
            assert node.free_resources.keys() == node.resources.keys()
            assert all(0 <= node.free_resources[r] <= q for r, q in node.resources.items())
            self._holds_on_agree(name, reserved | allocated, shared)
        stats, expected_stats = self.engine.stats(), self.oracle.stats()
        assert (stats.total, stats.free, stats.reserved, stats.allocated) == (
            expected_stats.total,
            expected_stats.free,
            expected_stats.reserved,
            expected_stats.allocated,
        )
        assert (stats.resources, stats.free_resources) == (
            expected_stats.resources,
            expected_stats.free_resources,
        )
        assert stats.shared == expected_stats.shared
        self._holds_agree()

    def _holds_on_agree(self, name: str, held: set[int], shared: set[int]) -> None:
        """``holds_on``: the reference's holds (ids mapped), sorted by id, partitioning the
        node's held GPUs, and naming every shared GPU (several holds may share one)."""
        got = self.engine.holds_on(name)
        assert [hold for hold, _ in got] == sorted(hold for hold, _ in got)
        assert [(self.ids[hold], gpus) for hold, gpus in got] == self.oracle.holds_on(name)
        gpus = [gpu for _, listed in got for gpu in listed if gpu not in shared]
        assert len(gpus) == len(set(gpus)) and set(gpus) == held, "holds_on partitions"
        assert {gpu for _, listed in got for gpu in listed} - set(gpus) == shared, "sharers"

    def _holds_agree(self) -> None:
        """Live holds: same ids (through the map), placements, deadlines and owners."""
        lost = {self.ids[a.id]: a.lost for a in self.engine.allocations(lost=True)}
        assert lost == {a.id: a.lost for a in self.oracle.allocations(lost=True)}
        assert all(lost.values())  # allocations(lost=True): only those with lost ranks
        held: set[tuple[str, int]] = set()
        for listing in ("reservations", "allocations"):
            got = {self.ids[h.id]: h for h in getattr(self.engine, listing)()}
            expected = {h.id: h for h in getattr(self.oracle, listing)()}
            assert got.keys() == expected.keys(), listing
            for hold_id, hold in got.items():
                other = expected[hold_id]
                assert as_tuple(hold.placement) == as_tuple(other.placement)
                assert (hold.owner, hold.priority, hold.preemptible, hold.movable) == (
                    other.owner,
                    other.priority,
                    other.preemptible,
                    other.movable,
                )
                assert hold.since == other.since
                spares = [(p.node, tuple(p.gpus)) for p in hold.spares]
                assert spares == [(p.node, tuple(p.gpus)) for p in other.spares], "spares"
                if listing == "allocations":
                    assert hold.lost == other.lost, "lost ranks disagree"
                    assert hold.ended == other.ended, "ended ranks disagree"
                    self._slices_hold(hold)
                else:
                    repairs = None if hold.repairs is None else self.ids[hold.repairs]
                    assert (repairs, hold.repaired_ranks) == (other.repairs, other.repaired_ranks)
        for reservation in self.engine.reservations():
            if reservation.placement.gpu_milli is not None:
                continue  # shares of a GPU: bounded by the invariant above, not exclusive
            for pod in reservation.placement.pods:
                for gpu in pod.gpus:
                    assert (pod.node, gpu) not in held, "a GPU is reserved twice"
                    held.add((pod.node, gpu))

    def _slices_hold(self, allocation: Any) -> None:
        """Every rank of a slice gang still lies in its innermost slice's domain (repairs
        included), on the nodes it still holds."""
        request = allocation.request
        if not isinstance(request, GangRequest) or not request.slices:
            return
        inner = request.slices[-1][1]
        for rank, pod in enumerate(allocation.placement.pods):
            if rank in allocation.lost or pod.node not in self.engine.nodes():
                continue
            node = self.engine.node(pod.node)
            path = (*(node.topology[level] for level in LEVELS), pod.node)
            where = tuple(allocation.placement.slices[rank // inner])
            assert path[: len(where)] == where, "a rank left its slice"


EngineVersusReference.TestCase.settings = settings(
    settings(),  # the loaded profile: max_examples and deadline
    stateful_step_count=50,
)
test_engine_versus_reference = EngineVersusReference.TestCase


def test_commit_repair_after_another_loss_as_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 30's path as explicit state-machine steps: an allocation of two pods loses rank 0,
    its repair is held, then rank 1 is lost too and ``commit_repair`` must raise the same
    ``Conflict`` text on both sides (the long profile once found the two worded apart)."""
    monkeypatch.setattr(f"{__name__}.event", lambda *_: None)  # no hypothesis run here
    machine = EngineVersusReference()
    try:
        hold = machine.reserve(2, 8, None, None, 30.0, None, (0, False, False), 0)
        machine.commit(hold, None)
        machine.conservation_and_agreement()
        repair = machine.repair(hold, True, None, 0, False, False)  # widen: the rack is full
        assert repair != UNKNOWN, "the repair was not held"
        machine.conservation_and_agreement()
        allocation = next(a for a in machine.engine.allocations() if a.id == hold)
        second = allocation.placement.pods[1]
        machine.set_health(second.node, second.gpus[-1], False)
        got, expected = machine._both_ids("commit_repair", str(repair))
        assert got == expected  # the same error and the same text on both sides
        assert got[0] == "error" and got[1][0] == "Conflict", got
        assert "has lost ranks [0, 1] now, the repair replaces [0]" in got[1][1]
        machine.conservation_and_agreement()
    finally:
        machine.teardown()


@pytest.mark.parametrize("step", ["snapshot_and_restore", "remove_node"])
def test_a_reservation_without_gpus_as_steps(step: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the machine (this session): a reservation of a pod without GPUs (docs/resources.md
    "Node resources") lost its node in the reference's snapshot (which then counted its CPUs
    free), and removing its node did not revoke it there; both sides must agree after
    either step."""
    monkeypatch.setattr(f"{__name__}.event", lambda *_: None)
    machine = EngineVersusReference()
    try:
        machine.set_resources("s0-r0-n0", 4_000)
        hold = machine.reserve(1, 1, None, None, 1.0, None, (0, False, False), 0, cpu=1_000)
        assert hold != UNKNOWN
        if step == "remove_node":
            machine.remove_node("s0-r0-n0")
            assert machine.engine.reservations() == []
        else:
            machine.snapshot_and_restore()
            assert machine.oracle.node("s0-r0-n0").free_resources["cpu"] == 3_000
        machine.conservation_and_agreement()
    finally:
        machine.teardown()
