"""The FGD paper's fragmentation experiment, reproduced (issue 28, item 4).

A model of the experiment of Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing
Workloads with Fragmentation Gradient Descent" (USENIX ATC'23), restated from the paper and
its simulator's documentation: the Alibaba 2023 nodes with their CPU, memory, GPU count and
GPU model; pods asking CPU, memory, whole GPUs or a share of one GPU (``gpu_milli``) and
maybe a GPU model; arrivals only, in a seeded order, until 130% of the cluster's GPUs have
been asked; the GPU allocation at every 1% of arrived load. It models each GPU's thousandths
itself: gangplace's engine does not count CPU, memory or shares of a GPU yet (issue 28,
items 1 and 3). See docs/simulation.md "The FGD experiment".
"""

from __future__ import annotations

from gangplace.sim.fgd.data import (
    FgdNode,
    FgdPod,
    PodShape,
    arrivals,
    read_nodes,
    read_pods,
    typical_pods,
)
from gangplace.sim.fgd.experiment import PUBLISHED_NAMES, FgdRun, published, run_fgd
from gangplace.sim.fgd.policies import FGD_ALL, FGD_POLICIES

__all__ = [
    "FGD_ALL",
    "FGD_POLICIES",
    "PUBLISHED_NAMES",
    "FgdNode",
    "FgdPod",
    "FgdRun",
    "PodShape",
    "arrivals",
    "published",
    "read_nodes",
    "read_pods",
    "run_fgd",
    "typical_pods",
]
