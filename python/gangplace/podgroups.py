"""PodGroups and Kueue's annotations as requests: kept as ``gangplace.podgroups`` for old code.

The module is :mod:`gangplace.k8s.podgroups`; its names are also in :mod:`gangplace.k8s`.
"""

from gangplace.k8s.podgroups import (
    HOSTNAME_LABEL,
    PREFERRED_TOPOLOGY,
    REQUIRED_TOPOLOGY,
    SLICE_REQUIRED_TOPOLOGY,
    SLICE_SIZE,
    GangSpec,
    PodGroupError,
    gang_from_podgroup,
    levels_from_kueue_topology,
    request_from_pod_template,
)

__all__ = [
    "HOSTNAME_LABEL",
    "PREFERRED_TOPOLOGY",
    "REQUIRED_TOPOLOGY",
    "SLICE_REQUIRED_TOPOLOGY",
    "SLICE_SIZE",
    "GangSpec",
    "PodGroupError",
    "gang_from_podgroup",
    "levels_from_kueue_topology",
    "request_from_pod_template",
]
