"""Repair after failures (README "Repair"), so far: which ranks of an allocation are lost.

A rank is lost when its pod's node was removed or one of its GPUs is unhealthy; healthy again
un-loses it; a node that comes back under the same name does not bring the rank back (the
allocation holds nothing there any more). The state machine (``test_stateful.py``) compares
every allocation's lost ranks with the reference after every step.
"""

from __future__ import annotations

import pickle

from helpers import FakeClock, tree

from gangplace import Cluster, GangRequest, MultiGangRequest, PodGroup, PodPlacement, reference

LEVELS = ("spine", "rack")


def test_lost_ranks_follow_removals_and_health() -> None:
    cluster = tree(LEVELS, (1, 2, 4), gpus=8, clock=FakeClock())
    allocation = cluster.commit(cluster.reserve(GangRequest(8, 4)))  # 2 pods per node, 4 nodes
    assert allocation.lost == ()
    nodes = [pod.node for pod in allocation.placement.pods]
    cluster.set_gpu_health(nodes[2], allocation.placement.pods[2].gpus[1], False)
    (current,) = cluster.allocations()
    assert current.lost == (2,)
    assert allocation.lost == ()  # a value: as of when it was made
    cluster.remove_node(nodes[4])  # ranks 4 and 5 lived there
    (current,) = cluster.allocations()
    assert current.lost == (2, 4, 5)
    cluster.set_gpu_health(nodes[2], allocation.placement.pods[2].gpus[1], True)
    assert cluster.allocations()[0].lost == (4, 5)
    cluster.add_node(nodes[4], gpus=8, topology={"spine": "s0", "rack": "s0-r1"})
    assert cluster.allocations()[0].lost == (4, 5)  # it came back empty: still lost
    restored = Cluster.restore(cluster.snapshot(), clock=FakeClock())
    assert restored.allocations()[0].lost == (4, 5)
    assert pickle.loads(pickle.dumps(cluster.allocations()[0])).lost == (4, 5)
    assert cluster.commit(current.id).lost == (4, 5)  # commit again reports it current


def test_lost_ranks_of_adopted_and_multi_role_allocations_agree_with_the_reference() -> None:
    engine = tree(LEVELS, (1, 2, 5), gpus=8, clock=FakeClock())
    oracle = reference.Cluster(LEVELS)
    for name in engine.nodes():
        info = engine.node(name)
        oracle.add_node(name, gpus=8, topology=info.topology)
    unit = MultiGangRequest(
        (PodGroup("leader", 1, 1), PodGroup("workers", 4, 8)),
        colocate=(("leader", "workers", "rack"),),
    )
    adopted = [PodPlacement("s0-r1-n0", [0, 1])]
    engine.commit(engine.reserve(unit))
    oracle.commit(oracle.reserve(unit))
    for cluster in (engine, oracle):
        cluster.adopt(adopted)
        cluster.set_gpu_health("s0-r0-n4", 0, False)  # the leader's GPU
        cluster.set_gpu_health("s0-r1-n0", 1, False)
        cluster.remove_node("s0-r0-n1")  # worker rank 1, group rank 2
    got = [(a.placement.pods[0].node, a.lost) for a in engine.allocations()]
    expected = [(a.placement.pods[0].node, a.lost) for a in oracle.allocations()]
    assert sorted(got) == sorted(expected)
    assert sorted(lost for _, lost in got) == [(0,), (0, 2)]
