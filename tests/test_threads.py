"""Many Python threads on one cluster: atomic operations, no GPU ever held twice."""

from __future__ import annotations

import random
import sys
import threading
import time
from typing import Any

from helpers import tree

from gangplace import (
    Conflict,
    GangplaceError,
    GangRequest,
    InvalidRequest,
    LimitExceeded,
    ReservationRevoked,
    UnknownNode,
    Unschedulable,
)

THREADS = 16
OPERATIONS = 20_000
CHURN = ("churn-0", "churn-1")  # nodes one thread keeps removing and adding back
# Typed errors that concurrent threads legitimately cause each other: no room, a placement
# gone stale, a cap reached, a reservation revoked by another thread's health flip before
# its commit, and the churn thread's node racing its own membership check.
EXPECTED = (Unschedulable, Conflict, LimitExceeded, ReservationRevoked, UnknownNode, InvalidRequest)


def test_threads_never_double_allocate() -> None:
    """16 threads x 20,000 mixed operations on one cluster.

    Every operation kind runs concurrently: reserve by request and by (stale) placement,
    commit, rollback, release, queries, health flips, cordons, snapshots, and node removal
    and re-adding. Only typed errors may occur; the book of allocations on the stable nodes
    (kept under a lock) must never see a GPU twice and must match the cluster at the end.
    """
    cluster = tree(("spine", "rack"), (2, 4, 4), max_held_gpus_per_owner=96)
    for name in CHURN:
        cluster.add_node(name, gpus=8, topology={"spine": "s9", "rack": "s9-r9"})
    allocated_by: dict[tuple[str, int], str] = {}
    book = threading.Lock()
    errors: list[BaseException] = []
    counts = {"operations": 0, "typed errors": 0}

    def record(allocation: Any) -> None:
        with book:
            for pod in allocation.placement.pods:
                if pod.node in CHURN:
                    continue
                for gpu in pod.gpus:
                    key = (pod.node, gpu)
                    assert key not in allocated_by, f"{key} held twice"
                    allocated_by[key] = allocation.id

    def forget(allocation_id: str) -> None:
        with book:
            for key in [k for k, v in allocated_by.items() if v == allocation_id]:
                del allocated_by[key]

    def step(rng: random.Random, owner: str, mine: list[str]) -> None:
        action = rng.random()
        if action < 0.35 or not mine:
            request = GangRequest(rng.randint(1, 6), rng.choice((1, 2, 4, 8)))
            if rng.random() < 0.3:
                placement = cluster.place_gang(request)
                if placement is None:
                    return
                reservation = cluster.reserve(placement, ttl=60, owner=owner)
            else:
                reservation = cluster.reserve(request, ttl=60, owner=owner)
            if rng.random() < 0.3:
                cluster.rollback(reservation, owner=owner)
                return
            allocation = cluster.commit(reservation, owner=owner)
            record(allocation)
            mine.append(allocation.id)
        elif action < 0.65:
            victim = mine.pop(rng.randrange(len(mine)))
            forget(victim)
            assert cluster.release(victim, owner=owner) is True
        elif action < 0.75:
            node = f"s{rng.randrange(2)}-r{rng.randrange(4)}-n{rng.randrange(4)}"
            cluster.set_gpu_health(node, rng.randrange(8), rng.random() < 0.6)
        elif action < 0.80:
            node = f"s{rng.randrange(2)}-r{rng.randrange(4)}-n{rng.randrange(4)}"
            (cluster.cordon if rng.random() < 0.5 else cluster.uncordon)(node)
        elif action < 0.83 and owner == "owner-0":
            name = rng.choice(CHURN)
            if name in cluster.nodes():
                cluster.remove_node(name)
            else:
                cluster.add_node(name, gpus=8, topology={"spine": "s9", "rack": "s9-r9"})
        elif action < 0.831:
            cluster.snapshot()  # rare: it encodes up to 65,536 remembered ids
        else:
            cluster.place_gang(GangRequest(rng.randint(1, 12), rng.choice((1, 8))))
            cluster.stats()

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        owner = f"owner-{seed}"
        mine: list[str] = []
        done = typed = 0
        try:
            for _ in range(OPERATIONS):
                done += 1
                try:
                    step(rng, owner, mine)
                except EXPECTED:
                    typed += 1
        except (AssertionError, GangplaceError) as error:
            errors.append(error)
        with book:
            counts["operations"] += done
            counts["typed errors"] += typed

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert counts["operations"] == THREADS * OPERATIONS
    cluster.check_invariants()
    for (node, gpu), _ in allocated_by.items():
        assert gpu in cluster.node(node).allocated
    stable = [name for name in cluster.nodes() if name not in CHURN]
    held = sum(len(cluster.node(name).allocated) for name in stable)
    assert held == len(allocated_by)
    print(f"thread stress: {THREADS} threads x {OPERATIONS} operations, {counts}")


def test_searches_release_the_gil() -> None:
    """With forced switches disabled, another thread only runs if the search releases the GIL.

    One long search is needed: a single placement takes microseconds, less than another
    thread needs to wake up and take the GIL, so the batch call (one GIL release for all its
    searches, by the same path as ``place_gang``) runs 20,000 of them.
    """
    cluster = tree(("spine", "rack"), (8, 16, 8))  # 1,024 nodes
    requests = [GangRequest(200, 8)] * 20_000
    started, stop = threading.Event(), threading.Event()
    ticks = 0

    def counter() -> None:
        nonlocal ticks
        started.set()
        while not stop.is_set():
            ticks += 1
            time.sleep(0)  # hands the GIL back at once

    previous = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)  # the interpreter never preempts this test's threads
    thread = threading.Thread(target=counter)
    try:
        thread.start()
        started.wait()
        before = ticks
        placements = cluster.place_many(requests)
        during = ticks - before
    finally:
        stop.set()
        sys.setswitchinterval(previous)
        thread.join()
    assert all(placement is not None for placement in placements)
    assert during > 0
