"""Many Python threads on one cluster: atomic operations, no GPU ever held twice."""

from __future__ import annotations

import random
import sys
import threading
import time

from helpers import tree

from gangplace import GangplaceError, GangRequest, Unschedulable

THREADS = 8
OPERATIONS = 2_000


def test_threads_never_double_allocate() -> None:
    cluster = tree(("spine", "rack"), (2, 4, 4))  # 32 nodes x 8 GPUs
    allocated_by: dict[tuple[str, int], str] = {}
    book = threading.Lock()
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        mine: list[str] = []
        try:
            for _ in range(OPERATIONS):
                action = rng.random()
                if action < 0.5 or not mine:
                    try:
                        request = GangRequest(rng.randint(1, 6), rng.choice((1, 2, 4, 8)))
                        reservation = cluster.reserve(request, ttl=60)
                    except Unschedulable:
                        continue
                    if rng.random() < 0.3:
                        assert cluster.rollback(reservation) is True
                        continue
                    allocation = cluster.commit(reservation)
                    with book:
                        for pod in allocation.placement.pods:
                            for gpu in pod.gpus:
                                key = (pod.node, gpu)
                                assert key not in allocated_by, f"{key} held twice"
                                allocated_by[key] = allocation.id
                    mine.append(allocation.id)
                else:
                    victim = mine.pop(rng.randrange(len(mine)))
                    with book:
                        for key in [k for k, v in allocated_by.items() if v == victim]:
                            del allocated_by[key]
                    assert cluster.release(victim) is True
        except (AssertionError, GangplaceError) as error:
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    cluster.check_invariants()
    assert cluster.stats().allocated == len(allocated_by)
    assert cluster.stats().reserved == 0


def test_place_gang_releases_the_gil() -> None:
    """With forced switches disabled, another thread only runs if place_gang releases the GIL."""
    cluster = tree(("spine", "rack"), (8, 16, 8))  # 1,024 nodes
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
        for _ in range(200):
            cluster.place_gang(GangRequest(200, 8))
        during = ticks - before
    finally:
        stop.set()
        sys.setswitchinterval(previous)
        thread.join()
    assert during > 0
