"""The FGD experiment's inputs: nodes, pods, the workload's typical pods, and the arrivals.

Restated from the FGD paper (Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing
Workloads with Fragmentation Gradient Descent", USENIX ATC'23) and its simulator's
documentation; see docs/simulation.md "The FGD experiment" for every choice.

- Nodes: ``openb_node_list_gpu_node.csv`` (``sn, cpu_milli, memory_mib, gpu, model``).
- Pods: an ``openb_pod_list_*.csv`` (``name, cpu_milli, memory_mib, num_gpu, gpu_milli`` and,
  where the list has it, ``gpu_spec``: GPU models separated by ``|``, empty for any).
- Arrivals of one seed: the pods sorted by name, shuffled by the seed; then, until the GPUs
  asked reach ``ratio`` times the cluster's, pods drawn at random from the list are appended
  (or, when the list asks more, random pods are removed).
- Typical pods: the pod shapes ``(cpu, gpu milli, gpus, models)`` of the list, most frequent
  first, until they cover 95% of the pods (CPU-only pods included), their frequencies
  renormalized to sum to 1.

Every field is checked: a missing column, an unparsable or absurd value raises
:class:`~gangplace.sim.errors.TraceError` naming the file, the line and the field.
"""

from __future__ import annotations

import csv
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gangplace.sim.errors import TraceError

__all__ = [
    "MILLI",
    "FgdNode",
    "FgdPod",
    "PodShape",
    "arrivals",
    "read_nodes",
    "read_pods",
    "typical_pods",
]

MILLI = 1000  # thousandths of a GPU in one GPU
MAX_GPUS_PER_NODE = 8  # the node list's largest (the simulator's limit too)
MAX_CPU_MILLI = 10_000_000  # 10,000 cores: anything larger is absurd
MAX_MEMORY_MIB = 1 << 30  # 1 PiB


@dataclass(frozen=True, slots=True)
class FgdNode:
    """One node of the node list."""

    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True, slots=True)
class PodShape:
    """What a pod asks (the typical-pod key: memory is not part of it, as in the paper).

    ``gpu_milli`` is per GPU: a shared pod has ``gpus == 1`` and ``gpu_milli < 1000``; a
    whole-GPU pod has ``gpu_milli == 1000``; a CPU-only pod ``gpus == gpu_milli == 0``.
    ``models``: the GPU models it may use (empty: any).
    """

    cpu_milli: int
    gpu_milli: int
    gpus: int
    models: tuple[str, ...]

    @property
    def total_milli(self) -> int:
        """GPU thousandths asked over all its GPUs."""
        return self.gpu_milli * self.gpus

    @property
    def shared(self) -> bool:
        """A pod asking part of one GPU."""
        return self.gpus == 1 and self.gpu_milli < MILLI


@dataclass(frozen=True, slots=True)
class FgdPod:
    """One pod of a pod list."""

    name: str
    shape: PodShape
    memory_mib: int


def _rows(path: Path, required: Sequence[str]) -> list[tuple[int, dict[str, str]]]:
    try:
        with path.open(newline="") as handle:
            reader = csv.DictReader(handle)
            header = reader.fieldnames or []
            missing = [name for name in required if name not in header]
            if missing:
                raise TraceError(f"{path}: no column {', '.join(missing)} in the header")
            return [(index + 2, row) for index, row in enumerate(reader)]
    except OSError as error:
        raise TraceError(f"{path}: cannot read it ({error.strerror})") from None
    except (csv.Error, UnicodeDecodeError) as error:
        raise TraceError(f"{path}: not a CSV file ({error})") from None


def _int(path: Path, line: int, row: dict[str, str], field: str, low: int, high: int) -> int:
    text = (row.get(field) or "").strip()
    try:
        value = int(text)
    except ValueError:
        raise TraceError(f"{path}:{line}: {field} {text!r} is not an integer") from None
    if not low <= value <= high:
        raise TraceError(f"{path}:{line}: {field} {value} is not in {low}..{high}")
    return value


def read_nodes(path: str | Path) -> list[FgdNode]:
    """The nodes of a node list, in file order.

    Raises:
        TraceError: The file is unreadable, a column is missing, a value is not an integer
            in range, a name repeats, or a node with GPUs has no model.

    """
    source = Path(path)
    nodes: list[FgdNode] = []
    seen: set[str] = set()
    for line, row in _rows(source, ("sn", "cpu_milli", "memory_mib", "gpu", "model")):
        name = (row.get("sn") or "").strip()
        if not name or name in seen:
            raise TraceError(f"{source}:{line}: sn {name!r} is empty or repeated")
        seen.add(name)
        gpus = _int(source, line, row, "gpu", 0, MAX_GPUS_PER_NODE)
        model = (row.get("model") or "").strip()
        if gpus and model in ("", "nan"):
            raise TraceError(f"{source}:{line}: node {name} has {gpus} GPUs but no model")
        nodes.append(
            FgdNode(
                name,
                _int(source, line, row, "cpu_milli", 0, MAX_CPU_MILLI),
                _int(source, line, row, "memory_mib", 0, MAX_MEMORY_MIB),
                gpus,
                model if gpus else "",
            )
        )
    if not nodes:
        raise TraceError(f"{source}: no nodes")
    return nodes


def read_pods(path: str | Path) -> list[FgdPod]:
    """The pods of a pod list, in file order (``gpu_spec`` read where the list has it).

    Raises:
        TraceError: The file is unreadable, a column is missing, a value is not an integer
            in range (a share ``gpu_milli`` below 1000 with more than one GPU, GPUs with no
            thousandths), or a name repeats.

    """
    source = Path(path)
    pods: list[FgdPod] = []
    seen: set[str] = set()
    required = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
    for line, row in _rows(source, required):
        name = (row.get("name") or "").strip()
        if not name or name in seen:
            raise TraceError(f"{source}:{line}: name {name!r} is empty or repeated")
        seen.add(name)
        gpus = _int(source, line, row, "num_gpu", 0, MAX_GPUS_PER_NODE)
        milli = _int(source, line, row, "gpu_milli", 0, MILLI)
        if gpus and not milli:
            raise TraceError(f"{source}:{line}: pod {name} asks {gpus} GPUs of 0 gpu_milli")
        if gpus > 1 and milli < MILLI:
            raise TraceError(
                f"{source}:{line}: pod {name} asks gpu_milli {milli} on each of {gpus} GPUs "
                "(a share of a GPU is for one GPU)"
            )
        spec = (row.get("gpu_spec") or "").strip()
        models = tuple(sorted(m for m in spec.split("|") if m and m != "nan")) if gpus else ()
        shape = PodShape(
            _int(source, line, row, "cpu_milli", 0, MAX_CPU_MILLI),
            milli if gpus else 0,
            gpus,
            models,
        )
        pods.append(FgdPod(name, shape, _int(source, line, row, "memory_mib", 0, MAX_MEMORY_MIB)))
    if not pods:
        raise TraceError(f"{source}: no pods")
    return pods


def typical_pods(pods: Sequence[FgdPod], coverage: float = 0.95) -> list[tuple[PodShape, float]]:
    """The workload's typical pod shapes with their frequencies (summing to 1).

    The most frequent shapes first (ties: the larger shape by ``(cpu, gpu milli, gpus)``
    first, then by models), until they cover ``coverage`` of the pods; CPU-only pods count.
    """
    counts = Counter(pod.shape for pod in pods)
    ranked = sorted(
        counts.items(),
        key=lambda item: (
            -item[1],
            -item[0].cpu_milli,
            -item[0].gpu_milli,
            -item[0].gpus,
            item[0].models,
        ),
    )
    total, kept, covered = len(pods), [], 0
    for shape, count in ranked:
        if covered >= coverage * total:
            break
        kept.append((shape, count))
        covered += count
    return [(shape, count / covered) for shape, count in kept]


def arrivals(
    pods: Sequence[FgdPod], nodes: Sequence[FgdNode], ratio: float, seed: int
) -> list[FgdPod]:
    """The pods in the order they arrive for one seed, tuned to ``ratio`` of the GPUs.

    The list sorted by name and shuffled; then pods drawn from the sorted list appended until
    the next one would take the GPUs asked past ``ratio`` times the cluster's (or random pods
    removed while they ask more than that).
    """
    rng = random.Random(seed)
    ordered = sorted(pods, key=lambda pod: pod.name)
    shuffled = list(ordered)
    rng.shuffle(shuffled)
    target = ratio * MILLI * sum(node.gpus for node in nodes)
    asked = sum(pod.shape.total_milli for pod in shuffled)
    while asked > target and shuffled:
        asked -= shuffled.pop(rng.randrange(len(shuffled))).shape.total_milli
    while True:
        drawn = ordered[rng.randrange(len(ordered))]
        if asked + drawn.shape.total_milli > target:
            return shuffled
        shuffled.append(drawn)
        asked += drawn.shape.total_milli
