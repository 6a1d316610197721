"""``sbatch`` arguments that pin a job to a placement."""

from __future__ import annotations

from gangplace._gangplace import GangRequest, Placement
from gangplace.slurm.text import compress_hostlist

MIB = 2**20


def sbatch_args(placement: Placement, request: GangRequest | None = None) -> list[str]:
    """``sbatch``/``srun`` arguments that pin a job to ``placement`` (docs/slurm.md).

    When every node holds the same number of the job's pods and GPUs: ``--nodelist`` (a
    compressed hostlist), ``--nodes``, ``--ntasks`` (one task per pod),
    ``--ntasks-per-node`` and ``--gres=gpu:N`` (per node). Otherwise Slurm's per-node
    ``--gres`` and ``--ntasks-per-node`` cannot say it in one job, so the arguments are a
    heterogeneous job: one component per (pods, GPUs) per node, in the order of the
    placement's first pod on each, separated by ``:`` tokens (``sbatch A : B script``, or
    ``#SBATCH hetjob`` lines between the components' options).

    Slurm chooses the GPU indices on each node itself (``CUDA_VISIBLE_DEVICES``); the
    placement's indices are not passed.

    With ``request`` (docs/resources.md "Node resources"), its ``resources_per_pod`` add
    ``--cpus-per-task`` (``cpu`` millicores rounded up to whole CPUs) and ``--mem`` (per
    node: ``memory`` per pod times the pods there, in MiB rounded up) to every component.
    """
    per_node: dict[str, list[int]] = {}
    for pod in placement.pods:
        per_node.setdefault(pod.node, []).append(len(pod.gpus))
    groups: dict[tuple[int, int], list[str]] = {}
    for node, counts in per_node.items():
        groups.setdefault((len(counts), sum(counts)), []).append(node)
    asks = {} if request is None else request.resources_per_pod
    components = [
        _component(nodes, tasks, gpus) + _resources(asks, tasks)
        for (tasks, gpus), nodes in groups.items()
    ]
    args = components[0]
    for component in components[1:]:
        args = [*args, ":", *component]
    return args


def _component(nodes: list[str], tasks_per_node: int, gpus_per_node: int) -> list[str]:
    return [
        f"--nodelist={compress_hostlist(nodes)}",
        f"--nodes={len(nodes)}",
        f"--ntasks={len(nodes) * tasks_per_node}",
        f"--ntasks-per-node={tasks_per_node}",
        f"--gres=gpu:{gpus_per_node}",
    ]


def _resources(asks: dict[str, int], tasks_per_node: int) -> list[str]:
    """``--cpus-per-task`` and ``--mem`` for pods asking ``asks`` (none: nothing)."""
    args = []
    if asks.get("cpu"):
        args.append(f"--cpus-per-task={-(-asks['cpu'] // 1000)}")
    if asks.get("memory"):
        args.append(f"--mem={-(-asks['memory'] * tasks_per_node // MIB)}M")
    return args
