"""Benchmark clusters, built once per session and shared by the benchmarks.

Three modes:

- full (``pytest benches --benchmark-only``): every shape of ``gangplace.synth`` at 50%, 80%
  and 95% fill;
- ``--quick``: ``colossus100k`` at 80% only (the goals of the performance issue), under two
  minutes;
- smoke (``--benchmark-disable``, as the README's test command runs it): the ``tiny`` shape
  at 50%, every benchmark once, checking answers rather than times.

The reference (``gangplace.reference``) gets the same nodes, health and allocations as the
engine, so both answer on the same state.
"""

from __future__ import annotations

import pytest

from benches.clusters import Setup
from gangplace import synth

FULL_SHAPES = ("superpod", "meta24k", "nvl72", "colossus100k", "million")
FULL_FILLS = (0.5, 0.8, 0.95)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--quick",
        action="store_true",
        help="benchmark colossus100k at 80%% fill only (finishes in under two minutes)",
    )


def _mode(config: pytest.Config) -> str:
    if config.getoption("benchmark_disable", default=False):
        return "smoke"
    return "quick" if config.getoption("--quick") else "full"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "setup" not in metafunc.fixturenames:
        return
    mode = _mode(metafunc.config)
    if mode == "smoke":
        cases = [("tiny", 0.5)]
    elif mode == "quick":
        cases = [("colossus100k", 0.8)]
    else:
        cases = [(shape, fill) for shape in FULL_SHAPES for fill in FULL_FILLS]
    # Session scope: pytest groups the benchmarks by cluster, so each is built once and
    # dropped before the next one is built.
    ids = [f"{s}@{round(f * 100)}" for s, f in cases]
    metafunc.parametrize("setup", cases, ids=ids, indirect=True, scope="session")


@pytest.fixture(scope="session")
def setup(request: pytest.FixtureRequest) -> Setup:
    name, fill = request.param
    shape = synth.SHAPES[name]
    engine, _ = synth.build(shape, fill=fill, seed=1)
    return Setup(shape, fill, engine, {})
