"""Ray placement groups placed by gangplace, topology-aware and all or nothing (docs/ray.md).

An optional extra (``pip install 'gangplace[ray]'``). :class:`RaySync` keeps a
:class:`~gangplace.Cluster` equal to a Ray cluster's GPU nodes and to the placement groups
others made; :func:`placement_group` places a gang and makes the Ray placement group whose
bundles are pinned to the nodes gangplace chose; :func:`repair` replaces the ranks a dead
node took. :func:`cluster_from_ray` and :func:`bundles_for` need no running Ray.
"""

from gangplace.ray.errors import RayError
from gangplace.ray.groups import RayGang, RayRepair, bundles_for, placement_group, repair
from gangplace.ray.nodes import NODE_ID_LABEL, RayNode
from gangplace.ray.sync import RayChanges, RaySync, cluster_from_ray

__all__ = [
    "NODE_ID_LABEL",
    "RayChanges",
    "RayError",
    "RayGang",
    "RayNode",
    "RayRepair",
    "RaySync",
    "bundles_for",
    "cluster_from_ray",
    "placement_group",
    "repair",
]
