"""Helpers shared by the tests: a settable clock, cluster builders, state dumps."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from watchdog import watched

import gangplace
from gangplace import reference


@dataclass
class FakeClock:
    """A clock tests move by hand."""

    now: float = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass(frozen=True)
class NodeSpec:
    """One node for a test cluster."""

    name: str
    gpus: int
    path: tuple[str, ...]
    labels: dict[str, str] = field(default_factory=dict)
    unhealthy: tuple[int, ...] = ()


class AnyCluster(Protocol):
    def add_node(
        self,
        name: str,
        *,
        gpus: int,
        topology: dict[str, str],
        labels: dict[str, str] | None = None,
        unhealthy: Iterable[int] | None = None,
    ) -> None: ...


def fill(cluster: AnyCluster, levels: Sequence[str], nodes: Iterable[NodeSpec]) -> None:
    """Adds `nodes` to `cluster`."""
    for node in nodes:
        cluster.add_node(
            node.name,
            gpus=node.gpus,
            topology=dict(zip(levels, node.path, strict=True)),
            labels=node.labels,
            unhealthy=node.unhealthy,
        )


def twins(levels: Sequence[str], nodes: Iterable[NodeSpec], policy: str) -> tuple[Any, Any]:
    """The engine and the reference with the same `nodes` and placement policy, on one fake
    clock and with sequential ids, so that ties broken by `since` or id break alike."""
    clock = FakeClock()
    engine = gangplace.Cluster(levels, policy=policy, clock=clock)  # type: ignore[arg-type]
    oracle = reference.Cluster(levels, policy=policy, clock=clock)
    nodes = list(nodes)
    for cluster in (engine, oracle):
        fill(cluster, levels, nodes)
        cluster._use_sequential_ids(1)  # type: ignore[union-attr]
    return engine, oracle


def tree(
    levels: Sequence[str], shape: Sequence[int], gpus: int = 8, **kwargs: Any
) -> gangplace.Cluster:
    """A regular cluster: `shape[i]` children per domain of level i, then nodes.

    Names: level domains `s0`, `s0-r1`...; nodes `<path>-n<k>`. Every method call is timed
    by the deadlock watchdog (see watchdog.py).
    """
    cluster = watched(gangplace.Cluster(levels, **kwargs))
    fill(cluster, levels, regular_nodes(levels, shape, gpus))
    return cluster


def regular_nodes(levels: Sequence[str], shape: Sequence[int], gpus: int) -> list[NodeSpec]:
    paths: list[tuple[str, ...]] = [()]
    for level, count in zip(levels, shape, strict=False):
        paths = [
            (*p, f"{p[-1] + '-' if p else ''}{level[0]}{i}") for p in paths for i in range(count)
        ]
    per_domain = shape[len(levels)]
    return [
        NodeSpec(f"{p[-1] + '-' if p else ''}n{k}", gpus, p)
        for p in paths
        for k in range(per_domain)
    ]


def as_tuple(placement: Any) -> Any:
    """A placement from either implementation as plain tuples, for comparison."""
    if placement is None:
        return None
    return (
        placement.level,
        tuple(placement.domain),
        tuple((pod.node, tuple(pod.gpus)) for pod in placement.pods),
    )


def node_state(cluster: Any, name: str) -> tuple[Any, ...]:
    info = cluster.node(name)
    return (
        info.cordoned,
        tuple(info.free),
        tuple(info.reserved),
        tuple(info.allocated),
        tuple(info.unhealthy),
    )


def full_state(cluster: Any) -> tuple[Any, ...]:
    """Every node's state plus the totals: unchanged by a call that must change nothing."""
    stats = cluster.stats()
    totals = (stats.total, stats.free, stats.reserved, stats.allocated, stats.unhealthy)
    return (totals, tuple((name, node_state(cluster, name)) for name in cluster.nodes()))


def set_failpoint(cluster: Any, armed: bool) -> None:
    """Arms the test-only failpoint (only builds with the ``testing`` feature have it)."""
    arm = getattr(cluster, "_set_failpoint", None)
    if arm is None:
        raise AssertionError("this extension was built without the testing feature")
    arm(armed)


def load_script(name: str) -> Any:
    """``scripts/<name>.py`` imported as a module (the scripts are not a package)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reserve_both(
    engine: Any, oracle: Any, request: Any, *, queries: bool = False
) -> tuple[Any, Any] | None:
    """Reserves ``request`` on the engine and the reference: the same placement, or the same
    ``Unschedulable`` reason (then ``None``); with ``queries``, ``place_gang`` and
    ``capacity_for`` agree first."""
    from gangplace import Unschedulable

    if queries:
        assert as_tuple(engine.place_gang(request)) == as_tuple(oracle.place_gang(request))
        assert engine.capacity_for(request) == oracle.capacity_for(request)
    try:
        mine = engine.reserve(request)
    except Unschedulable as error:
        try:
            oracle.reserve(request)
        except Unschedulable as expected:
            assert error.reason == expected.reason
        else:
            raise AssertionError("only the engine found no placement") from error
        return None
    theirs = oracle.reserve(request)
    assert as_tuple(mine.placement) == as_tuple(theirs.placement)
    return mine, theirs
