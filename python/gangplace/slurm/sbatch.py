"""``sbatch`` arguments that pin a job to a placement (docs/slurm.md "sbatch")."""

from __future__ import annotations

from gangplace._gangplace import Cluster, GangRequest, Placement
from gangplace.slurm.gres import MIG_PREFIX, SHARD
from gangplace.slurm.text import compress_hostlist

MIB = 2**20


def sbatch_args(
    placement: Placement, request: GangRequest | None = None, *, cluster: Cluster | None = None
) -> list[str]:
    """``sbatch``/``srun`` arguments that pin a job to ``placement`` (docs/slurm.md).

    When every node holds the same number of the job's pods, GPUs and memory:
    ``--nodelist`` (a compressed hostlist), ``--nodes``, ``--ntasks`` (one task per pod),
    ``--ntasks-per-node`` and ``--gres`` (per node: ``gpu:N``, MIG profiles as
    ``gpu:<type>:N``, ``shard:N``). Otherwise Slurm's per-node options cannot say it in one
    job, so the arguments are a heterogeneous job: one component per kind of node, in the
    order of the placement's first pod on each, separated by ``:`` tokens (``sbatch A : B
    script``, or ``#SBATCH hetjob`` lines between the components' options).

    Slurm chooses the GPU indices on each node itself (``CUDA_VISIBLE_DEVICES``); the
    placement's indices are not passed.

    With ``request`` (docs/resources.md "Node resources"), its ``resources_per_pod`` add
    ``--cpus-per-task`` (``cpu`` millicores rounded up to whole CPUs), ``--mem`` (per node:
    ``memory`` per pod times the pods there, in MiB rounded up) and the MIG profiles and
    shards to ``--gres``. A job that asks no memory gets, with ``cluster``, ``--mem`` of the
    node's memory in proportion to the GPUs it takes there (rounded down): with
    ``SelectTypeParameters=CR_Core_Memory`` a job without ``--mem`` is given the whole
    node's memory, and gangs gangplace packed onto one node would wait for each other.
    """
    asks = {} if request is None else request.resources_per_pod
    per_node: dict[str, list[int]] = {}
    for pod in placement.pods:
        per_node.setdefault(pod.node, []).append(len(pod.gpus))
    groups: dict[tuple[int, int, int | None], list[str]] = {}
    for node, counts in per_node.items():
        memory = _memory(asks, len(counts), sum(counts), node, cluster)
        groups.setdefault((len(counts), sum(counts), memory), []).append(node)
    components = [
        _component(nodes, tasks, gpus, asks) + _resources(asks, memory)
        for (tasks, gpus, memory), nodes in groups.items()
    ]
    args = components[0]
    for component in components[1:]:
        args = [*args, ":", *component]
    return args


def _component(
    nodes: list[str], tasks_per_node: int, gpus_per_node: int, asks: dict[str, int]
) -> list[str]:
    gres = [f"gpu:{gpus_per_node}"] if gpus_per_node or not asks else []
    for name, amount in sorted(asks.items()):
        if name.startswith(MIG_PREFIX):
            gres.append(f"gpu:{name[len(MIG_PREFIX) :]}:{amount * tasks_per_node}")
        elif name == SHARD:
            gres.append(f"shard:{amount * tasks_per_node}")
    args = [
        f"--nodelist={compress_hostlist(nodes)}",
        f"--nodes={len(nodes)}",
        f"--ntasks={len(nodes) * tasks_per_node}",
        f"--ntasks-per-node={tasks_per_node}",
    ]
    return [*args, f"--gres={','.join(gres)}"] if gres else args


def _memory(
    asks: dict[str, int], tasks: int, gpus: int, node: str, cluster: Cluster | None
) -> int | None:
    """MiB of ``--mem`` on ``node`` (``None``: none to pass)."""
    if asks.get("memory"):
        return -(-asks["memory"] * tasks // MIB)
    if cluster is None:
        return None
    info = cluster.node(node)
    total = info.resources.get("memory")
    if not total or not info.gpus:
        return None
    return total * gpus // info.gpus // MIB


def _resources(asks: dict[str, int], memory: int | None) -> list[str]:
    """``--cpus-per-task`` and ``--mem`` (none: nothing)."""
    args = []
    if asks.get("cpu"):
        args.append(f"--cpus-per-task={-(-asks['cpu'] // 1000)}")
    if memory:
        args.append(f"--mem={memory}M")
    return args
