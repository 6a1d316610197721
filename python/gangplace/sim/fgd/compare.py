"""Every policy on every pod list with the paper's seeds, beside the paper's figures.

``gangplace fgd`` (and ``scripts/fgd.sh``) runs :func:`compare`: for each pod list of the
data directory and each policy, the paper's ten seeds (42-51) at 130% of the GPUs, on a
process pool, showing progress; then :func:`table` sets the mean (and range) of the GPU
allocation at 130% arrived beside the published mean (and range) of the same pair, and
:func:`plot_curves` draws allocation against arrived load, published curves dashed.
"""

from __future__ import annotations

import csv
import statistics
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from gangplace.sim.errors import SimError, TraceError
from gangplace.sim.fgd.data import read_nodes, read_pods
from gangplace.sim.fgd.experiment import PUBLISHED_NAMES, FgdRun, published, run_fgd
from gangplace.sim.stats import interval

__all__ = [
    "NODES_FILE",
    "PAPER_SEEDS",
    "PUBLISHED_FILE",
    "Cell",
    "compare",
    "paired",
    "plot_curves",
    "table",
]

NODES_FILE = "openb_node_list_gpu_node.csv"
PUBLISHED_FILE = "fgd_expected_results/analysis_allo_discrete.csv"
PAPER_SEEDS = tuple(range(42, 52))


@dataclass(frozen=True)
class Cell:
    """One (workload, policy) pair: its runs and the published figure (or ``None``)."""

    workload: str
    policy: str
    runs: tuple[FgdRun, ...]
    paper: tuple[float, float, float, int] | None

    @property
    def values(self) -> list[float]:
        """The allocation at 130% arrived, one per seed."""
        return [run.at(130) for run in self.runs]

    @property
    def mean(self) -> float:
        """Its mean over the seeds."""
        return statistics.fmean(self.values)


def _workloads(data: Path, names: Sequence[str] | None) -> list[Path]:
    found = sorted(data.glob("openb_pod_list_*.csv"))
    if names:
        wanted = {f"openb_pod_list_{name}.csv" for name in names}
        missing = sorted(wanted - {path.name for path in found})
        if missing:
            raise SimError(f"{data}: no pod list {', '.join(missing)}")
        found = [path for path in found if path.name in wanted]
    if not found:
        raise SimError(f"{data}: no openb_pod_list_*.csv")
    return found


def _one(task: tuple[str, str, str, int, float]) -> FgdRun:
    nodes_path, pods_path, policy, seed, ratio = task
    return run_fgd(read_nodes(nodes_path), read_pods(pods_path), policy, seed, ratio=ratio)


def compare(
    data: str | Path,
    *,
    workloads: Sequence[str] | None = None,
    policies: Sequence[str],
    seeds: Sequence[int] = PAPER_SEEDS,
    ratio: float = 1.3,
    workers: int = 2,
    progress: bool = True,
) -> list[Cell]:
    """Runs every (pod list, policy, seed) of ``data`` (the Alibaba 2023 directory).

    Args:
        data: The directory with the node list, the pod lists and the published results.
        workloads: Pod-list names (``default``, ``multigpu50``, ...); default: every one.
        policies: Policy names.
        seeds: Seeds (default: the paper's ten).
        ratio: GPUs asked in all, as a multiple of the cluster's.
        workers: Processes (1: in this process).
        progress: Print a line per finished run to stderr.

    Raises:
        SimError: A missing file or pod list; :class:`TraceError` for a malformed one.

    """
    root = Path(data)
    nodes_path = root / NODES_FILE
    read_nodes(nodes_path)  # fail early on a bad node list
    lists = _workloads(root, workloads)
    tasks = [
        (str(nodes_path), str(path), policy, seed, ratio)
        for path in lists
        for policy in policies
        for seed in seeds
    ]
    results: dict[tuple[str, str, int], FgdRun] = {}
    began = time.monotonic()

    def note(task: tuple[str, str, str, int, float], run: FgdRun) -> None:
        results[(Path(task[1]).stem, task[2], task[3])] = run
        if progress:
            print(
                f"fgd: {len(results)}/{len(tasks)} runs, {time.monotonic() - began:.0f} s "
                f"({Path(task[1]).stem} {task[2]} seed {task[3]}: {run.at(130):.2f}%)",
                file=sys.stderr,
                flush=True,
            )

    if workers <= 1:
        for task in tasks:
            note(task, _one(task))
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = {pool.submit(_one, task): task for task in tasks}
            for future in as_completed(futures):
                note(futures[future], future.result())
    paper_file = root / PUBLISHED_FILE
    cells = []
    for path in lists:
        for policy in policies:
            runs = tuple(results[(path.stem, policy, seed)] for seed in seeds)
            paper = (
                published(paper_file, path.stem, policy)
                if policy in PUBLISHED_NAMES and paper_file.exists()
                else None
            )
            cells.append(Cell(path.stem, policy, runs, paper))
    return cells


def table(cells: Sequence[Cell]) -> str:
    """A Markdown table: measured and published allocation at 130% arrived, and the gap."""
    lines = [
        "| pod list | policy | measured: mean [min, max] (seeds) | published: mean [min, max] "
        "(seeds) | measured - published |",
        "| --- | --- | --- | --- | ---: |",
    ]
    for cell in cells:
        values = cell.values
        measured = f"{cell.mean:.2f} [{min(values):.2f}, {max(values):.2f}] ({len(values)})"
        if cell.paper is None:
            paper, gap = "(none)", ""
        else:
            mean, low, high, count = cell.paper
            paper, gap = f"{mean:.2f} [{low:.2f}, {high:.2f}] ({count})", f"{cell.mean - mean:+.2f}"
        name = cell.workload.removeprefix("openb_pod_list_")
        lines.append(f"| {name} | {cell.policy} | {measured} | {paper} | {gap} |")
    return "\n".join(lines)


def paired(cells: Sequence[Cell], policy: str, baseline: str = "fgd") -> str:
    """A Markdown table of ``policy`` minus ``baseline``, seed by seed, per pod list.

    Same seeds means the same arrivals and the same node order; the interval is a 95%
    t-interval of the mean difference. Empty when either policy is missing.
    """
    by_pair = {(cell.workload, cell.policy): cell for cell in cells}
    lines = [
        f"| pod list | {policy} - {baseline}: mean [95% interval] (seeds) | higher in | "
        f"{policy}: mean [95% interval] | published {baseline} mean |",
        "| --- | --- | ---: | --- | ---: |",
    ]
    for workload in dict.fromkeys(cell.workload for cell in cells):
        mine, theirs = by_pair.get((workload, policy)), by_pair.get((workload, baseline))
        if mine is None or theirs is None:
            continue
        if [run.seed for run in mine.runs] != [run.seed for run in theirs.runs]:
            raise SimError("paired runs must share their seeds")
        gaps = [a - b for a, b in zip(mine.values, theirs.values, strict=True)]
        gap, own = interval(gaps), interval(mine.values)
        higher = sum(1 for value in gaps if value > 0)
        paper = f"{theirs.paper[0]:.2f}" if theirs.paper is not None else "(none)"
        lines.append(
            f"| {workload.removeprefix('openb_pod_list_')} | {_bracket(gap)} ({len(gaps)}) | "
            f"{higher} of {len(gaps)} | {_bracket(own, signed=False)} | {paper} |"
        )
    return "\n".join(lines) if len(lines) > 2 else ""


def _bracket(stats: dict[str, float | int | None], *, signed: bool = True) -> str:
    form = "{:+.2f}" if signed else "{:.2f}"
    mean, low, high = stats["mean"], stats["low"], stats["high"]
    if low is None or high is None:
        return form.format(mean)
    return f"{form.format(mean)} [{form.format(low)}, {form.format(high)}]"


def _published_curve(path: Path, workload: str, policy: str) -> list[float] | None:
    wanted = PUBLISHED_NAMES.get(policy)
    if wanted is None or not path.exists():
        return None
    try:
        with path.open(newline="") as handle:
            rows = [
                row
                for row in csv.DictReader(handle)
                if row.get("workload") == workload and row.get("sc_policy") == wanted
            ]
        if not rows:
            return None
        return [statistics.fmean(float(row[str(p)]) for row in rows) for p in range(131)]
    except (KeyError, ValueError) as error:
        raise TraceError(f"{path}: cannot read the published curves ({error})") from None


def plot_curves(cells: Sequence[Cell], data: str | Path, out: str | Path) -> list[Path]:
    """One PNG per pod list: allocation against arrived load, the paper's curves dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paper_file = Path(data) / PUBLISHED_FILE
    written = []
    for workload in dict.fromkeys(cell.workload for cell in cells):
        figure, axes = plt.subplots(figsize=(8, 5))
        for index, cell in enumerate(c for c in cells if c.workload == workload):
            color = f"C{index}"
            length = min(len(run.allocation) for run in cell.runs)
            mean = [statistics.fmean(run.allocation[p] for run in cell.runs) for p in range(length)]
            axes.plot(range(length), mean, color=color, label=f"{cell.policy} (measured)")
            curve = _published_curve(paper_file, workload, cell.policy)
            if curve is not None:
                axes.plot(range(131), curve, color=color, linestyle="--", linewidth=1)
        axes.plot([0, 100], [0, 100], color="grey", linewidth=0.5)
        axes.set_xlim(60, 131)
        axes.set_ylim(60, 100)
        axes.set_xlabel("GPUs asked by the pods arrived (% of the cluster's)")
        axes.set_ylabel("GPUs allocated (% of the cluster's)")
        seeds = len(cells[0].runs)
        axes.set_title(
            f"{workload}: mean of {seeds} seeds (dashed: the FGD paper's published runs)"
        )
        axes.legend(loc="lower right", fontsize=8)
        path = Path(out) / f"fgd-{workload.removeprefix('openb_pod_list_')}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(figure)
        written.append(path)
    return written
