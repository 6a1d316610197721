"""The FGD experiment's speed (issue 28, item 4; figures in docs/performance.md).

- ``fgd_run[policy]``: BestFit, FGD and gangplace's own, one seed (42) of
  ``openb_pod_list_default.csv`` at 130% on the 1,213 GPU nodes of the Alibaba 2023 list
  (about 10,800 arrivals), one round: what one cell of ``scripts/fgd.sh`` costs.
- ``fgd_small[gangplace|reference]``: the first 150 nodes and 800 pods of the same lists,
  FGD, by :func:`gangplace.sim.fgd.run_fgd` (groups of equal nodes, memoized fragmentation)
  and by :mod:`gangplace.reference.fgd` (every node scored for every pod, fragmentation
  recomputed): the same decisions, asserted.

Needs ``../shared/data`` beside the clone (skipped otherwise). The README's test command
runs them once on 40 nodes and 150 pods with ``--benchmark-disable``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gangplace.reference import fgd as oracle
from gangplace.sim.fgd import read_nodes, read_pods, run_fgd

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "alibaba-gpu-v2023"

pytestmark = pytest.mark.skipif(
    not (DATA / "openb_node_list_gpu_node.csv").exists(),
    reason=f"the Alibaba 2023 data is not at {DATA} (see ../shared/data/README.md)",
)


def _smoke(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("benchmark_disable", default=False))


@pytest.mark.parametrize("policy", ["bestfit", "fgd", "gangplace"])
def bench_fgd_run(benchmark: Any, policy: str, request: pytest.FixtureRequest) -> None:
    """One seed of the default pod list at 130% (smoke: 40 nodes, 150 pods)."""
    nodes = read_nodes(DATA / "openb_node_list_gpu_node.csv")
    pods = read_pods(DATA / "openb_pod_list_default.csv")
    if _smoke(request):
        nodes, pods = nodes[:40], pods[:150]
    run = benchmark.pedantic(run_fgd, args=(nodes, pods, policy, 42), rounds=1, iterations=1)
    benchmark.extra_info.update(allocation_130=run.at(130), placed=run.placed, failed=run.failed)
    assert run.placed > 0


@pytest.mark.parametrize("side", ["gangplace", "reference"])
def bench_fgd_small(benchmark: Any, side: str, request: pytest.FixtureRequest) -> None:
    """FGD on 150 nodes and 800 pods, by the model and by its oracle (smoke: 40 and 150)."""
    count, pod_count = (40, 150) if _smoke(request) else (150, 800)
    nodes = read_nodes(DATA / "openb_node_list_gpu_node.csv")[:count]
    pods = read_pods(DATA / "openb_pod_list_default.csv")[:pod_count]
    decisions: list[Any] = []

    def model() -> Any:
        decisions.clear()
        return run_fgd(nodes, pods, "fgd", 42, decisions=decisions)

    def reference() -> Any:
        return oracle.replay(nodes, pods, "fgd", 42)

    result = benchmark.pedantic(model if side == "gangplace" else reference, rounds=1, iterations=1)
    if side == "reference":
        model()
        assert result[0] == decisions, "the model and its oracle disagree"
