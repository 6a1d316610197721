"""The answers of many random preemption plans, one JSON line each, for an A/B of two builds
(docs/performance.md "Preemption from a kept index"): run it with each build on the same
seed and compare the files; any differing line is a plan that changed.

    python -m benches.preemption_answers --plans 10000 --out /tmp/answers-new.jsonl
    PYTHONPATH=/path/to/old/python python -m benches.preemption_answers --out /tmp/old.jsonl
    cmp /tmp/old.jsonl /tmp/answers-new.jsonl

Each cluster is a random tree (1-4 blocks x 1-4 racks x 1-6 nodes of 4 or 8 GPUs, some
unhealthy; on two thirds of them, 16-64 or 96-192 cores per node), loaded with random jobs
(priorities -2..2, preemptible or not, owners, some only reserved, some asking cores), then
asked several random gangs (sizes, levels, priorities, selectors, elastic minimums, cores)
with random limits (victim caps, exempt owners, a minimum runtime). Ids come from a seeded
generator, so the answers of two builds compare line by line.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from typing import Any

from gangplace import Cluster, GangplaceError, GangRequest

LEVELS = ("block", "rack")
OWNERS = (None, "team-a", "team-b")


class Clock:
    """A clock the script moves by hand (for minimum runtimes)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _cluster(rng: random.Random, clock: Clock) -> Cluster:
    cluster = Cluster(LEVELS, clock=clock)
    cluster.seed_ids(rng.randrange(2**32))
    blocks, racks, nodes = rng.randint(1, 4), rng.randint(1, 4), rng.randint(1, 6)
    gpus = rng.choice((4, 8))
    cores = rng.choice((None, (16_000, 64_000), (96_000, 192_000)))
    for b in range(blocks):
        for r in range(racks):
            for n in range(nodes):
                unhealthy = [g for g in range(gpus) if rng.random() < 0.03]
                zone = {"zone": rng.choice("xy")}
                cluster.add_node(
                    f"b{b}r{r}n{n}",
                    gpus=gpus,
                    topology={"block": f"b{b}", "rack": f"b{b}r{r}"},
                    unhealthy=unhealthy,
                    labels=zone,
                    resources=None if cores is None else {"cpu": rng.choice(cores)},
                )
    return cluster


def _cpu(cluster: Cluster, rng: random.Random) -> dict[str, int] | None:
    """Cores per pod, asked now and then on clusters that have them."""
    if not cluster.node(cluster.nodes()[0]).resources or rng.random() < 0.6:
        return None
    return {"cpu": rng.choice((2_000, 8_000, 24_000))}


def _load(cluster: Cluster, rng: random.Random, clock: Clock) -> None:
    for _ in range(rng.randint(10, 150)):
        request = GangRequest(
            rng.randint(1, 4),
            rng.choice((1, 2, 4, 8)),
            required_level=rng.choice((None, "node", "rack", "block")),
            priority=rng.randint(-2, 2),
            preemptible=rng.random() < 0.85,
            resources_per_pod=_cpu(cluster, rng),
        )
        owner = rng.choice(OWNERS)
        clock.now += rng.random()
        try:
            reservation = cluster.reserve(request, owner=owner)
        except GangplaceError:
            continue
        if rng.random() < 0.9:
            cluster.commit(reservation, owner=owner)


def _answer(cluster: Cluster, rng: random.Random) -> dict[str, Any]:
    pods = rng.randint(1, 8)
    gang = GangRequest(
        pods,
        rng.choice((1, 2, 4, 8)),
        min_pods=rng.choice((pods, max(1, pods // 2))),
        required_level=rng.choice((None, "node", "rack", "block")),
        priority=rng.randint(-1, 3),
        selector=rng.choice((None, {"zone": "x"})),
        resources_per_pod=_cpu(cluster, rng),
    )
    limits: dict[str, Any] = {}
    if rng.random() < 0.3:
        limits["max_victims"] = rng.randint(1, 4)
    if rng.random() < 0.2:
        limits["exempt_owners"] = [rng.choice(("team-a", "team-b"))]
    if rng.random() < 0.2:
        limits["min_runtime"] = rng.random() * 10
    try:
        plan = cluster.plan_preemption(gang, **limits)
    except GangplaceError as error:
        return {"error": type(error).__name__}
    if plan is None:
        return {"plan": None}
    pods_placed = [(p.node, list(p.gpus)) for p in plan.placement.pods]
    return {"victims": list(plan.victims), "pods": pods_placed, "gpus": plan.victim_gpus}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plans", type=int, default=10_000, help="plans to answer")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random clusters")
    parser.add_argument("--out", required=True, help="the JSON lines file to write")
    args = parser.parse_args(argv)
    if args.plans < 1:
        parser.error("--plans must be at least 1")
    rng = random.Random(args.seed)
    written, shown, victims = 0, 0, 0
    with open(args.out, "w", encoding="utf-8") as out:
        while written < args.plans:
            clock = Clock()
            cluster = _cluster(rng, clock)
            _load(cluster, rng, clock)
            clock.now += 5.0
            for _ in range(min(10, args.plans - written)):
                answer = _answer(cluster, rng)
                out.write(json.dumps(answer, sort_keys=True) + "\n")
                written += 1
                victims += bool(answer.get("victims"))
            if written - shown >= 1000:
                print(f"{written} plans answered", file=sys.stderr, flush=True)
                shown = written
    print(f"{written} plans, {victims} with victims -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
