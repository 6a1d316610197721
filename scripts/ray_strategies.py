"""Ray's placement-group strategies beside gangplace on one fragmented local Ray cluster.

Usage: ``python scripts/ray_strategies.py [--seeds 5] [--sizes 2,3,4,6,8]`` (about two
minutes on a 2-core machine; not part of the test command). Prints a markdown table for
docs/ray.md, "Beside Ray's own strategies".

The cluster: a head without GPUs and 16 workers with 8 fake GPUs each, labelled as 2 spines
of 2 racks of 4 nodes, all on 127.0.0.1. For each seed, 5 workers chosen at random are held
by another user's placement group (fragmentation: each rack keeps 1 to 4 free nodes); then
for each gang size, each way of placing a gang of that many 8-GPU bundles is tried alone on
that state: Ray's ``PACK`` and ``STRICT_SPREAD``, Ray 2.60's ``topology_strategy`` on the
rack label (``PACK`` and ``STRICT_PACK``), and gangplace
(``gangplace.ray.placement_group``, no required level: the engine's smallest domain that
holds the gang). Counted per way and size over the seeds: groups made ready, groups inside
one rack, inside one spine, and the median time from the call to a ready group.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))

from gangplace.sim.sweep import _loopback_only

LEVELS = {"spine": "example.com/spine", "rack": "example.com/rack"}
WAYS = (
    "ray PACK",
    "ray STRICT_SPREAD",
    "ray rack PACK",
    "ray rack STRICT_PACK",
    "gangplace",
)


def main() -> int:
    """Runs every way on every seed and size, then prints the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--sizes", default="2,3,4,6,8")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    _loopback_only()
    import ray
    from ray.cluster_utils import Cluster

    began = time.monotonic()
    print("starting a local Ray of 17 nodes on 127.0.0.1 ...", file=sys.stderr, flush=True)
    head = {"num_cpus": 1, "include_dashboard": False}
    cluster = Cluster(initialize_head=True, head_node_args=head)
    racks: dict[str, str] = {}
    try:
        for index in range(16):
            spine, rack = f"s{index // 8}", f"r{index // 4}"
            node = cluster.add_node(
                num_cpus=1, num_gpus=8, labels={LEVELS["spine"]: spine, LEVELS["rack"]: rack}
            )
            racks[node.node_id] = rack
        ray.init(address=cluster.address, log_to_driver=False)
        print(f"up in {time.monotonic() - began:.0f} s", file=sys.stderr, flush=True)
        results = _measure(ray, racks, sizes, args.seeds)
    finally:
        ray.shutdown()
        cluster.shutdown()
    _print_table(results, sizes, args.seeds)
    return 0


def _measure(
    ray: Any, racks: dict[str, str], sizes: list[int], seeds: int
) -> dict[tuple[str, int], list[tuple[bool, int, int, float]]]:
    from ray.util import placement_group, remove_placement_group

    from gangplace import GangRequest
    from gangplace.ray import NODE_ID_LABEL, RaySync
    from gangplace.ray import placement_group as gangplace_group

    results: dict[tuple[str, int], list[tuple[bool, int, int, float]]] = {}
    order = list(racks)  # the workers in the order they were added: racks r0, r0, ...
    for seed in range(seeds):
        held = [order[index] for index in random.Random(seed).sample(range(len(order)), 5)]
        other = placement_group(
            [{"GPU": 8}] * 5, bundle_label_selector=[{NODE_ID_LABEL: node} for node in held]
        )
        ray.get(other.ready(), timeout=60)
        for size in sizes:
            for way in WAYS:
                sync = RaySync(LEVELS)
                sync.refresh()  # adopts the other user's group
                began = time.perf_counter()
                try:
                    if way == "gangplace":
                        gang = gangplace_group(sync, GangRequest(size, 8), ready_timeout=10)
                        nodes, remove = list(gang.node_ids), gang.remove
                    elif way.startswith("ray rack"):  # Ray 2.60's topology_strategy
                        per_rack = {LEVELS["rack"]: way.split()[2]}
                        group = placement_group([{"GPU": 8}] * size, topology_strategy=per_rack)
                        ready = group.wait(timeout_seconds=10)
                        nodes = _nodes_of(group) if ready else []
                        if not ready:
                            STATES.add(_state(group))
                        remove = lambda group=group: remove_placement_group(group)  # noqa: E731
                    else:
                        group = placement_group([{"GPU": 8}] * size, strategy=way.split()[1])
                        ready = group.wait(timeout_seconds=10)
                        nodes = _nodes_of(group) if ready else []
                        remove = lambda group=group: remove_placement_group(group)  # noqa: E731
                except Exception:  # counted as not made
                    nodes, remove = [], (lambda: None)
                seconds = time.perf_counter() - began
                spines = {_spine(racks[node]) for node in nodes}
                rack_set = {racks[node] for node in nodes}
                made = len(nodes) == size
                results.setdefault((way, size), []).append(
                    (made, len(rack_set), len(spines), seconds)
                )
                remove()
                time.sleep(0.2)  # let Ray return the bundles before the next try
            print(f"seed {seed}: size {size} done", file=sys.stderr, flush=True)
        remove_placement_group(other)
        time.sleep(0.5)
    return results


STATES: set[str] = set()  # Ray's states of the rack-strategy groups that were not ready


def _state(group: Any) -> str:
    from ray.util import placement_group_table

    record = placement_group_table(group)
    return f"{record.get('state')} ({record.get('stats', {}).get('scheduling_state')})"


def _spine(rack: str) -> str:
    return f"s{int(rack[1:]) // 2}"


def _nodes_of(group: Any) -> list[str]:
    from ray.util import placement_group_table

    placed = placement_group_table(group)["bundles_to_node_id"]
    return [placed[index] for index in sorted(placed)]


def _print_table(
    results: dict[tuple[str, int], list[tuple[bool, int, int, float]]], sizes: list[int], seeds: int
) -> None:
    print(
        f"| bundles of 8 GPUs | way | ready (of {seeds}) | in one rack | in one spine | "
        "median time to ready |"
    )
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for size in sizes:
        for way in WAYS:
            rows = results[(way, size)]
            made = [row for row in rows if row[0]]
            one_rack = sum(1 for row in made if row[1] == 1)
            one_spine = sum(1 for row in made if row[2] == 1)
            median = statistics.median(row[3] for row in made) * 1000 if made else float("nan")
            shown = f"{median:.1f} ms" if made else "-"
            print(f"| {size} | {way} | {len(made)} | {one_rack} | {one_spine} | {shown} |")
    print(f"\nRay's states of the rack-strategy groups not ready: {sorted(STATES)}")


if __name__ == "__main__":
    raise SystemExit(main())
