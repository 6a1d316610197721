"""One test (at least) per placement rule of the contract, on hand-built clusters."""

from __future__ import annotations

import pytest
from helpers import NodeSpec, as_tuple, fill, full_state, tree

import gangplace
from gangplace import Cluster, GangRequest, InvalidRequest, Unschedulable

LEVELS = ("spine", "rack")


def cluster_of(*nodes: NodeSpec, levels: tuple[str, ...] = LEVELS, **kw: object) -> Cluster:
    cluster = Cluster(levels, **kw)  # type: ignore[arg-type]
    fill(cluster, levels, nodes)
    return cluster


def pods_of(placement: gangplace.Placement | None) -> list[tuple[str, tuple[int, ...]]]:
    assert placement is not None
    return [(pod.node, pod.gpus) for pod in placement.pods]


def test_seed_scenario_ecc_error_keeps_the_gang_pending_not_half_placed() -> None:
    cluster = cluster_of(NodeSpec("n1", 8, ("s1", "r1"), unhealthy=(5,)))
    request = GangRequest(1, 8, name="train")
    assert cluster.place_gang(request) is None
    before = full_state(cluster)
    with pytest.raises(Unschedulable) as caught:
        cluster.reserve(request)
    # 7 healthy GPUs cannot take one 8-GPU pod, at any level.
    assert caught.value.reason == (
        'gang "train" of 1 pod x 8 GPUs does not fit: no node holds a pod; '
        "no rack holds a pod; no spine holds a pod; no cluster holds a pod"
    )
    assert full_state(cluster) == before
    assert cluster.stats().reserved == 0
    # The same gang goes to a healthy node as soon as there is one.
    cluster.add_node("n2", gpus=8, topology={"spine": "s1", "rack": "r1"})
    assert pods_of(cluster.place_gang(request)) == [("n2", tuple(range(8)))]


def test_finest_level_first() -> None:
    cluster = tree(LEVELS, (2, 2, 2))  # 2 spines x 2 racks x 2 nodes x 8 GPUs
    one_node = cluster.place_gang(GangRequest(1, 8))
    assert one_node is not None
    assert (one_node.level, one_node.domain) == ("node", ("s0", "s0-r0", "s0-r0-n0"))
    one_rack = cluster.place_gang(GangRequest(2, 8))
    assert one_rack is not None
    assert (one_rack.level, one_rack.domain) == ("rack", ("s0", "s0-r0"))
    one_spine = cluster.place_gang(GangRequest(3, 8))
    assert one_spine is not None
    assert (one_spine.level, one_spine.domain) == ("spine", ("s0",))
    whole = cluster.place_gang(GangRequest(5, 8))
    assert whole is not None
    assert (whole.level, whole.domain) == ("cluster", ())
    assert cluster.place_gang(GangRequest(9, 8)) is None


def test_required_level_forbids_coarser_levels() -> None:
    cluster = tree(LEVELS, (2, 2, 2))
    assert cluster.place_gang(GangRequest(2, 8, required_level="rack")) is not None
    assert cluster.place_gang(GangRequest(3, 8, required_level="rack")) is None
    assert cluster.place_gang(GangRequest(3, 8, required_level="spine")) is not None
    assert cluster.place_gang(GangRequest(2, 8, required_level="node")) is None
    assert cluster.place_gang(GangRequest(8, 1, required_level="node")) is not None
    assert cluster.place_gang(GangRequest(5, 8, required_level="cluster")) is not None
    with pytest.raises(
        InvalidRequest,
        match=r"unknown required_level .row.; the levels are node, rack, spine, cluster",
    ):
        cluster.place_gang(GangRequest(1, required_level="row"))


def test_same_name_under_two_parents_is_two_domains() -> None:
    cluster = cluster_of(NodeSpec("a", 4, ("s1", "r1")), NodeSpec("b", 4, ("s2", "r1")))
    assert cluster.place_gang(GangRequest(2, 4, required_level="rack")) is None
    placement = cluster.place_gang(GangRequest(2, 4))
    assert placement is not None and placement.level == "cluster"


def fragmented() -> list[NodeSpec]:
    # r1: 8 + 8 free (4 pods of 4); r2: 8 + 6 free (3 pods of 4, 14 free GPUs).
    return [
        NodeSpec("a", 8, ("s", "r1")),
        NodeSpec("b", 8, ("s", "r1")),
        NodeSpec("c", 8, ("s", "r2")),
        NodeSpec("d", 8, ("s", "r2"), unhealthy=(0, 1)),
    ]


def test_best_fit_takes_the_domain_with_fewest_free_gpus() -> None:
    placement = cluster_of(*fragmented()).place_gang(GangRequest(3, 4))
    assert placement is not None
    assert (placement.level, placement.domain) == ("rack", ("s", "r2"))


def test_first_fit_takes_the_smallest_path() -> None:
    placement = cluster_of(*fragmented(), policy="first-fit").place_gang(GangRequest(3, 4))
    assert placement is not None
    assert (placement.level, placement.domain) == ("rack", ("s", "r1"))


def test_best_fit_counts_free_gpus_too_small_for_a_pod() -> None:
    # Both racks hold 2 pods of 4 GPUs and no node holds 2. r1 has 11 free GPUs (4 + 4 + 3,
    # the 3 too few for a pod), r2 has 8: best-fit must count the 3 and take r2.
    nodes = [
        NodeSpec("a", 4, ("s", "r1")),
        NodeSpec("b", 4, ("s", "r1")),
        NodeSpec("c", 3, ("s", "r1")),
        NodeSpec("d", 4, ("s", "r2")),
        NodeSpec("e", 4, ("s", "r2")),
    ]
    best = cluster_of(*nodes).place_gang(GangRequest(2, 4))
    assert best is not None and (best.level, best.domain) == ("rack", ("s", "r2"))
    first = cluster_of(*nodes, policy="first-fit").place_gang(GangRequest(2, 4))
    assert first is not None and first.domain == ("s", "r1")


def test_best_fit_breaks_ties_by_path() -> None:
    cluster = cluster_of(NodeSpec("z", 8, ("s2", "r")), NodeSpec("y", 8, ("s1", "r")))
    placement = cluster.place_gang(GangRequest(1, 8))
    assert placement is not None and placement.domain == ("s1", "r", "y")


def test_best_fit_breaks_equal_free_nodes_by_the_fullest_rack() -> None:
    # a, b and c are empty 8-GPU nodes; r2 also has d with 2 free GPUs, so r2 is fuller
    # (10 free) than r1 (16): a one-node gang goes to c and keeps r1 whole (the old rule, the
    # smallest path, took a).
    nodes = [
        NodeSpec("a", 8, ("s", "r1")),
        NodeSpec("b", 8, ("s", "r1")),
        NodeSpec("c", 8, ("s", "r2")),
        NodeSpec("d", 8, ("s", "r2"), unhealthy=(0, 1, 2, 3, 4, 5)),
    ]
    placement = cluster_of(*nodes).place_gang(GangRequest(1, 8))
    assert placement is not None and placement.domain == ("s", "r2", "c")
    first = cluster_of(*nodes, policy="first-fit").place_gang(GangRequest(1, 8))
    assert first is not None and first.domain == ("s", "r1", "a")
    old = cluster_of(*nodes, policy="best-fit-path").place_gang(GangRequest(1, 8))
    assert old is not None and old.domain == ("s", "r1", "a")  # the rule before the tie-break


def test_best_fit_breaks_equal_free_racks_by_the_fullest_spine() -> None:
    # r1, r2 and r3 have 16 free GPUs each; s2 also holds r4 with 4 free, so s2 (20 free) is
    # fuller than s1 (32): a two-node gang takes r3.
    nodes = [
        NodeSpec("a", 8, ("s1", "r1")),
        NodeSpec("b", 8, ("s1", "r1")),
        NodeSpec("c", 8, ("s1", "r2")),
        NodeSpec("d", 8, ("s1", "r2")),
        NodeSpec("e", 8, ("s2", "r3")),
        NodeSpec("f", 8, ("s2", "r3")),
        NodeSpec("h", 8, ("s2", "r4"), unhealthy=(0, 1, 2, 3)),
    ]
    placement = cluster_of(*nodes).place_gang(GangRequest(2, 8))
    assert placement is not None and (placement.level, placement.domain) == ("rack", ("s2", "r3"))


def test_best_fit_goes_up_to_the_grandparent_when_parents_tie() -> None:
    # b and d are empty nodes in racks of equal free GPUs (8 + 2); their spines differ: s1
    # also holds a rack with 1 free GPU, so s2 (10 free) is fuller than s1 (11) and d wins
    # over b (the smaller path).
    nodes = [
        NodeSpec("a", 8, ("s1", "r1"), unhealthy=(0, 1, 2, 3, 4, 5)),
        NodeSpec("b", 8, ("s1", "r1")),
        NodeSpec("c", 8, ("s2", "r2"), unhealthy=(0, 1, 2, 3, 4, 5)),
        NodeSpec("d", 8, ("s2", "r2")),
        NodeSpec("e", 8, ("s1", "r3"), unhealthy=(0, 1, 2, 3, 4, 5, 6)),
    ]
    placement = cluster_of(*nodes).place_gang(GangRequest(1, 8))
    assert placement is not None and placement.domain == ("s2", "r2", "d")


def test_spread_uses_fewest_children_largest_first_then_smallest_that_holds_the_rest() -> None:
    # One rack, 1-GPU pods: a holds 3, b holds 5, c holds 4. A gang of 7: no node holds it;
    # b (largest) takes 5, then the smallest child holding the remaining 2 is a (3).
    cluster = cluster_of(
        NodeSpec("a", 3, ("s", "r")), NodeSpec("b", 5, ("s", "r")), NodeSpec("c", 4, ("s", "r"))
    )
    assert pods_of(cluster.place_gang(GangRequest(7))) == [
        ("a", (0,)),
        ("a", (1,)),
        *[("b", (gpu,)) for gpu in range(5)],
    ]


def test_spread_recurses_through_levels() -> None:
    cluster = tree(LEVELS, (1, 3, 2))  # 1 spine, 3 racks of 2 nodes
    cluster.set_gpu_health("s0-r0-n0", 0, False)  # r0 holds 1 pod of 8 now
    placement = cluster.place_gang(GangRequest(3, 8))
    # Racks r1, r2 hold 2 pods each, r0 only 1: r1 (largest, smallest path) takes 2, then the
    # smallest rack that holds the last pod is r0.
    assert placement is not None
    assert placement.nodes == ("s0-r0-n1", "s0-r1-n0", "s0-r1-n1")


def test_pods_take_lowest_free_healthy_gpus() -> None:
    cluster = cluster_of(NodeSpec("a", 8, ("s", "r"), unhealthy=(0, 2)))
    assert pods_of(cluster.place_gang(GangRequest(2, 2))) == [("a", (1, 3)), ("a", (4, 5))]


def test_rank_order_is_by_node_path_then_first_gpu() -> None:
    cluster = cluster_of(
        NodeSpec("a", 4, ("s2", "r1")),
        NodeSpec("z", 4, ("s1", "r9")),
        NodeSpec("m", 4, ("s1", "r1")),
    )
    placement = cluster.place_gang(GangRequest(6, 2))
    assert placement is not None
    assert placement.nodes == ("m", "z", "a")
    assert [pod.gpus[0] for pod in placement.pods] == [0, 2, 0, 2, 0, 2]


def test_elastic_gang_takes_the_largest_domain_of_the_coarsest_allowed_level() -> None:
    cluster = tree(LEVELS, (1, 2, 2))  # racks of 2 nodes x 8 GPUs
    cluster.set_gpu_health("s0-r1-n0", 0, False)  # r1 now holds 1 pod of 8
    assert cluster.place_gang(GangRequest(4, 8, required_level="rack")) is None
    elastic = cluster.place_gang(GangRequest(4, 8, min_pods=2, required_level="rack"))
    assert elastic is not None and len(elastic) == 2
    assert (elastic.level, elastic.domain) == ("rack", ("s0", "s0-r0"))
    assert cluster.place_gang(GangRequest(4, 8, min_pods=3, required_level="rack")) is None
    anywhere = cluster.place_gang(GangRequest(5, 8, min_pods=2))
    assert anywhere is not None and len(anywhere) == 3 and anywhere.level == "spine"


def test_elastic_gang_gets_all_pods_when_they_fit() -> None:
    cluster = tree(LEVELS, (1, 2, 2))
    placement = cluster.place_gang(GangRequest(4, 8, min_pods=1))
    assert placement is not None and len(placement) == 4


def test_selector_restricts_nodes() -> None:
    cluster = cluster_of(
        NodeSpec("a", 8, ("s", "r1"), labels={"gpu": "h100"}),
        NodeSpec("b", 8, ("s", "r1"), labels={"gpu": "a100"}),
        NodeSpec("c", 8, ("s", "r2"), labels={"gpu": "h100", "zone": "z1"}),
    )
    h100 = cluster.place_gang(GangRequest(2, 8, selector={"gpu": "h100"}))
    assert h100 is not None and h100.nodes == ("a", "c") and h100.level == "spine"
    zoned = cluster.place_gang(GangRequest(1, 8, selector={"gpu": "h100", "zone": "z1"}))
    assert zoned is not None and zoned.nodes == ("c",)
    assert cluster.place_gang(GangRequest(1, selector={"gpu": "v100"})) is None
    assert cluster.place_gang(GangRequest(1, selector={"missing": "x"})) is None
    assert cluster.place_gang(GangRequest(3, 8, selector={"gpu": "h100"})) is None


def test_cordoned_node_takes_nothing_new_but_keeps_its_holds(clock: object) -> None:
    cluster = cluster_of(NodeSpec("a", 8, ("s", "r")), clock=clock)
    reservation = cluster.reserve(GangRequest(1, 4))
    cluster.cordon("a")
    assert cluster.node("a").cordoned
    assert cluster.place_gang(GangRequest(1, 1)) is None
    allocation = cluster.commit(reservation)
    assert cluster.node("a").allocated == (0, 1, 2, 3)
    cluster.uncordon("a")
    assert cluster.place_gang(GangRequest(1, 4)) is not None
    assert cluster.release(allocation) is True


def test_placement_is_independent_of_insertion_order() -> None:
    nodes = [
        NodeSpec(f"n{i}", 8, (f"s{i % 3}", f"r{i % 5}"), unhealthy=(i % 8,)) for i in range(30)
    ]
    forward, backward = cluster_of(*nodes), cluster_of(*reversed(nodes))
    for request in (GangRequest(3, 4), GangRequest(10, 7), GangRequest(40, 1), GangRequest(1, 8)):
        assert as_tuple(forward.place_gang(request)) == as_tuple(backward.place_gang(request))


def test_no_levels_cluster() -> None:
    cluster = cluster_of(NodeSpec("b", 8, ()), NodeSpec("a", 8, ()), levels=())
    assert cluster.levels == ()
    single = cluster.place_gang(GangRequest(1, 8))
    assert single is not None and single.domain == ("a",) and single.level == "node"
    both = cluster.place_gang(GangRequest(2, 8))
    assert both is not None and both.level == "cluster" and both.domain == ()


def test_empty_cluster_places_nothing() -> None:
    cluster = Cluster(("rack",))
    assert cluster.place_gang(GangRequest(1)) is None
    with pytest.raises(Unschedulable, match="no node holds a pod; no rack holds a pod"):
        cluster.reserve(GangRequest(1))
