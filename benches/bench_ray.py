"""RaySync benchmarks (docs/ray.md; figures in docs/performance.md). No Ray is started: the
node and placement-group tables are records in Ray's format.

- ``ray_refresh_first``: the first ``refresh`` of 2,048 GPU nodes (8 GPUs, 2 levels) and 256
  placement groups of others (one to four 8-GPU bundles each): every node added, every group
  adopted.
- ``ray_refresh_steady``: a ``refresh`` of the same tables again (nothing changed): what a
  controller pays per poll.

The README's test command runs them once on 64 nodes with ``--benchmark-disable``.
"""

from __future__ import annotations

import random
from typing import Any

from gangplace.ray import NODE_ID_LABEL, RaySync

LEVELS = {"spine": "example.com/spine", "rack": "example.com/rack"}


def _tables(nodes: int, groups: int) -> tuple[list[Any], dict[str, Any]]:
    records = []
    for index in range(nodes):
        node_id = f"{index:056x}"
        records.append(
            {
                "NodeID": node_id,
                "Alive": True,
                "Resources": {"GPU": 8.0, "CPU": 128.0, "memory": 2.0**40},
                "Labels": {
                    LEVELS["spine"]: f"s{index // 256}",
                    LEVELS["rack"]: f"r{index // 16}",
                    NODE_ID_LABEL: node_id,
                },
            }
        )
    rng = random.Random(1)
    free = [record["NodeID"] for record in records]
    rng.shuffle(free)
    table = {}
    for group in range(groups):
        size = rng.randint(1, 4)
        placed, free = free[:size], free[size:]
        table[f"{group:036x}"] = {
            "state": "CREATED",
            "bundles": {index: {"GPU": 8.0, "CPU": 4.0} for index in range(size)},
            "bundles_to_node_id": dict(enumerate(placed)),
        }
    return records, table


def _size(benchmark: Any) -> tuple[int, int]:
    return (64, 8) if benchmark.disabled else (2_048, 256)


def bench_ray_refresh_first(benchmark: Any) -> None:
    nodes, groups = _tables(*_size(benchmark))

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (RaySync(LEVELS), nodes, groups), {}

    changes = benchmark.pedantic(
        RaySync.refresh, setup=setup, rounds=10, iterations=1, warmup_rounds=1
    )
    assert len(changes.added) == len(nodes) and len(changes.adopted) == len(groups)
    assert not changes.warnings


def bench_ray_refresh_steady(benchmark: Any) -> None:
    nodes, groups = _tables(*_size(benchmark))
    sync = RaySync(LEVELS)
    sync.refresh(nodes, groups)
    changes = benchmark.pedantic(
        sync.refresh, args=(nodes, groups), rounds=20, iterations=1, warmup_rounds=1
    )
    assert not (changes.added or changes.updated or changes.adopted or changes.released)
