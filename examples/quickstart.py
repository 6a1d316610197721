"""The main job in miniature: build a spine/rack cluster, place, reserve, commit, roll back."""

from __future__ import annotations

from gangplace import Cluster, GangRequest, Unschedulable


def main() -> None:
    cluster = Cluster(("spine", "rack"))
    for spine in ("s1", "s2"):
        for rack in ("r1", "r2"):
            for node in range(4):
                cluster.add_node(
                    f"{spine}-{rack}-n{node}",
                    gpus=8,
                    topology={"spine": spine, "rack": f"{spine}-{rack}"},
                )
    # One GPU of s1-r1-n0 has an uncorrectable ECC error: it must never be placed on.
    cluster.set_gpu_health("s1-r1-n0", 5, False)
    print(cluster, cluster.stats(), sep="\n")

    print("\n1. A pure query: where would a 4 x 8-GPU gang go?")
    placement = cluster.place_gang(GangRequest(4, 8, name="llm-pretrain"))
    assert placement is not None
    print(f"   level={placement.level} domain={placement.domain} nodes={placement.nodes}")

    print("2. Reserve it (held for 30 s), then commit:")
    reservation = cluster.reserve(GangRequest(4, 8, name="llm-pretrain"))
    allocation = cluster.commit(reservation)
    print(f"   {allocation.id} on {allocation.placement.nodes}")

    print("3. Reserve a 6 x 8-GPU gang within one spine, then roll it back:")
    trial = cluster.reserve(GangRequest(6, 8, required_level="spine", name="eval"))
    print(f"   held {trial.placement.total_gpus} GPUs in spine {trial.placement.domain}")
    print(f"   rollback -> {cluster.rollback(trial)}; free GPUs: {cluster.stats().free}")

    print("4. A gang too big for any rack waits, holding nothing:")
    try:
        cluster.reserve(GangRequest(5, 8, required_level="rack", name="too-big"))
    except Unschedulable as error:
        print(f"   Unschedulable: {error.reason}")

    print("5. An elastic gang takes what one rack can give (at least 2 pods):")
    elastic = cluster.place_gang(GangRequest(5, 8, min_pods=2, required_level="rack"))
    assert elastic is not None
    print(f"   {len(elastic)} pods in rack {elastic.domain}")

    cluster.release(allocation)
    print(f"\nreleased; {cluster.stats()}")


if __name__ == "__main__":
    main()
