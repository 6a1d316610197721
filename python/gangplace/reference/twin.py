"""S2's twin in the reference scheduler: the cluster emptied and all healthy (docs/scheduler.md).

``submit`` asks it whether a job could ever start; the reference builds it again whenever
the cluster's node or GPU count changed.
"""

from __future__ import annotations

from gangplace._gangplace import Cluster

__all__ = ["empty_twin"]


def empty_twin(cluster: Cluster) -> Cluster:
    """A cluster with ``cluster``'s nodes, labels, taints, GPU groups and resources; none held."""
    copy = Cluster(cluster.levels, policy=cluster.policy)  # type: ignore[arg-type]
    for name in cluster.nodes():
        info = cluster.node(name)
        copy.add_node(
            name,
            gpus=info.gpus,
            topology=info.topology,
            labels=info.labels,
            gpu_topology=info.gpu_topology,
            taints=info.taints,
            resources=info.resources or None,  # capacities, as the Scheduler's twin (S2)
        )
    return copy
