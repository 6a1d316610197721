"""The ``gangplace`` command: ``simulate``, ``sweep``, ``fgd`` and ``explain``.

``simulate`` replays a trace, ``sweep`` runs many replays in parallel, ``fgd`` reproduces the
FGD paper's fragmentation experiment, ``explain`` says why a gang fits or not.

Bad arguments and unreadable files end with exit status 2 and a one-line message, never a
traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from gangplace.errors import GangplaceError
from gangplace.sim.errors import SimError
from gangplace.sim.fgd.policies import FGD_ALL
from gangplace.sim.policies import ALL_POLICIES, POLICIES
from gangplace.sim.queues import load_queues
from gangplace.sim.settings import (
    BACKFILLS,
    LLAMA3_FAILURES_PER_GPU_HOUR,
    ORDERS,
    POD_ORDERS,
    SimSettings,
    parse_seeds,
)

__all__ = ["DEFAULT_CLUSTER", "DEFAULT_TRACE", "main"]

_DATA = resources.files("gangplace") / "data"
DEFAULT_TRACE = str(_DATA / "philly-6c71a0-first400.trace")
DEFAULT_CLUSTER = str(_DATA / "default-cluster.csv")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def _ladder(text: str) -> tuple[float, float]:
    try:
        first, second = (float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected T1,T2 in seconds, got {text!r}") from None
    if not 0 <= first <= second:
        raise argparse.ArgumentTypeError("need 0 <= T1 <= T2")
    return first, second


def _policies(text: str) -> tuple[str, ...]:
    chosen = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [name for name in chosen if name not in ALL_POLICIES]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(
            f"unknown policies {', '.join(unknown) or '(none)'}; "
            f"choose from {','.join(ALL_POLICIES)}"
        )
    return chosen


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--policies",
        type=_policies,
        default=POLICIES,
        help=f"comma-separated from {','.join(ALL_POLICIES)} (default: {','.join(POLICIES)})",
    )
    parser.add_argument(
        "--seeds", type=_seeds, default=(0,), help="workload seeds: 3, 0-9 or 1,4,7 (default 0)"
    )
    parser.add_argument("--seed", type=_seeds, dest="seeds", help=argparse.SUPPRESS)
    parser.add_argument(
        "--policy-seed", type=int, default=0, help="blind order and pod-by-pod backoffs (0)"
    )
    parser.add_argument("--order", choices=ORDERS, default="fifo", help="queue order (fifo)")
    parser.add_argument(
        "--backfill",
        choices=BACKFILLS,
        default="easy",
        help="gang policies' backfill: easy (default), conservative, none or any (S5)",
    )
    parser.add_argument(
        "--walltime-factor",
        type=float,
        default=1.0,
        help="walltime given to the scheduler = run time x this, >= 1 (default 1)",
    )
    parser.add_argument(
        "--ladder",
        type=_ladder,
        default=(300.0, 1800.0),
        help="T1,T2: require a rack for T1 s of waiting, a spine until T2 s (default 300,1800)",
    )
    parser.add_argument(
        "--pod-timeout",
        type=float,
        default=600.0,
        help="pod-by-pod: seconds before a partial gang releases (default 600; 0: never)",
    )
    parser.add_argument(
        "--pod-order", choices=POD_ORDERS, default="kube", help="pod-by-pod order (kube)"
    )
    parser.add_argument(
        "--standoff-hours",
        type=float,
        default=24.0,
        help="stop a run after this long with partial gangs holding GPUs, no job running and "
        "nothing that could start one (24)",
    )
    parser.add_argument(
        "--quota",
        action="append",
        default=[],
        metavar="OWNER=GPUS",
        help="a GPU quota for an owner (repeatable)",
    )
    parser.add_argument(
        "--queues",
        metavar="FILE",
        help="teams' queues and cohorts (JSON, or YAML with PyYAML): the gang policies run "
        "the Scheduler with them; trace owners map to queues (docs/queues.md 'Queues and quotas')",
    )
    parser.add_argument(
        "--failures",
        nargs="?",
        const="llama3",
        default="0",
        help="inject GPU failures: a rate per GPU-hour, or llama3 (419 in 54 days per 16,384 "
        "GPUs, the default when the option has no value); 0: none (default)",
    )
    parser.add_argument(
        "--repair-hours", type=float, default=4.0, help="a failed GPU is back after this (4)"
    )
    parser.add_argument(
        "--spares",
        type=int,
        default=1,
        help="spare pods the best-fit+spares policy holds next to every gang (1)",
    )
    parser.add_argument(
        "--numa-split",
        action="store_true",
        help="NUMA-split scenario: nodes have two NUMA halves; counts pods spanning both",
    )
    parser.add_argument(
        "--high-priority-share",
        type=float,
        default=0.0,
        help="priorities scenario: this share of jobs made priority 1 at random (0)",
    )
    parser.add_argument(
        "--placement-model",
        default="auto",
        metavar="none|cited|FILE",
        help="run-time factors by the level a job spans: cited (Pollux measurements, labelled "
        "guesses), none, or a CSV job_type,span,factor (default: cited when the trace names "
        "job types, else none)",
    )
    parser.add_argument(
        "--checkpoint-hours",
        type=float,
        default=1.0,
        help="a stopped job resumes from its last checkpoint, taken this often (1; 0: none)",
    )


def _seeds(text: str) -> tuple[int, ...]:
    try:
        return parse_seeds(text)
    except SimError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _settings(args: argparse.Namespace) -> SimSettings:
    quotas = {}
    for item in args.quota:
        owner, _, gpus = item.partition("=")
        if not owner or not gpus.isdigit():
            raise SimError(f"--quota expects OWNER=GPUS, got {item!r}")
        quotas[owner] = int(gpus)
    if args.failures == "llama3":
        rate = LLAMA3_FAILURES_PER_GPU_HOUR
    else:
        try:
            rate = float(args.failures)
        except ValueError:
            raise SimError(
                f"--failures expects a rate or 'llama3', got {args.failures!r}"
            ) from None
    if args.pod_timeout < 0:
        raise SimError(f"--pod-timeout must be >= 0 seconds (0: never), got {args.pod_timeout}")
    return SimSettings(
        order=args.order,
        backfill=args.backfill,
        walltime_factor=args.walltime_factor,
        ladder_s=args.ladder,
        pod_timeout_s=args.pod_timeout or None,
        pod_order=args.pod_order,
        standoff_s=args.standoff_hours * 3600.0,
        policy_seed=args.policy_seed,
        quotas=quotas,
        queues=load_queues(args.queues) if args.queues else None,
        failures_per_gpu_hour=rate,
        repair_s=args.repair_hours * 3600.0,
        checkpoint_s=args.checkpoint_hours * 3600.0 if args.checkpoint_hours else None,
        high_priority_share=args.high_priority_share,
        numa_split=args.numa_split,
        spares=args.spares,
        placement_model=args.placement_model,
    )


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="gangplace",
        description="All-or-nothing, topology-aware GPU gang placement: simulate and explain.",
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    simulate = commands.add_parser(
        "simulate",
        help="replay a GPU-cluster trace under several placement policies",
        description="Replays a trace under each policy on identical job streams and reports "
        "waits, utilization, locality, deadlocks and fragmentation.",
    )
    simulate.add_argument(
        "--trace",
        default=DEFAULT_TRACE,
        help="trace file, or several comma-separated replayed together (each file's jobs "
        "owned by its name, e.g. Philly VCs); default: a bundled Philly VC",
    )
    simulate.add_argument(
        "--format",
        choices=("philly", "alibaba", "csv"),
        help="trace format (default: .trace is philly; .csv with num_gpu alibaba; else csv)",
    )
    simulate.add_argument(
        "--cluster",
        default=DEFAULT_CLUSTER,
        help="a gangplace.synth shape, tree:S,R,N,G, or a node-list CSV (default: bundled)",
    )
    _add_run_options(simulate)
    simulate.add_argument("--out", default="out/simulation", help="output directory")
    simulate.add_argument(
        "--baseline",
        help="policy the others are compared with, seed by seed (default: the first policy)",
    )
    simulate.add_argument(
        "--jobs-out",
        metavar="FILE",
        help="write one row per job, policy and seed (CSV; Parquet when FILE ends in "
        ".parquet, with pyarrow); the report's figures recompute from it",
    )

    sweep = commands.add_parser(
        "sweep",
        help="simulate traces x clusters x policies x seeds in parallel, one report",
        description="Runs every (trace, cluster, policy, seed) on a local process pool or on "
        "Ray, and writes one aggregated report with 95%% intervals over the seeds.",
    )
    sweep.add_argument(
        "--traces",
        "--trace",
        action="append",
        required=True,
        help="trace files, ';'-separated, or the flag repeated (a spec never contains ';')",
    )
    sweep.add_argument(
        "--clusters",
        "--cluster",
        action="append",
        required=True,
        help="cluster specs (tree:S,R,N,G keeps its commas), ';'-separated or the flag repeated",
    )
    _add_run_options(sweep)
    sweep.add_argument(
        "--executor", choices=("process", "ray"), default="process", help="default: process"
    )
    sweep.add_argument("--workers", type=int, default=None, help="processes (default: CPUs)")
    sweep.add_argument("--address", help="Ray: address of an existing cluster (default: local)")
    sweep.add_argument("--out", default="out/sweep", help="output directory")

    fgd = commands.add_parser(
        "fgd",
        help="reproduce the FGD paper's fragmentation experiment on the Alibaba 2023 data",
        description="Runs the FGD paper's six policies (and gangplace's own) on every "
        "openb_pod_list_*.csv of --data with the paper's ten seeds at 130%% of the GPUs, and "
        "sets each pair's GPU allocation beside the paper's published runs.",
    )
    fgd.add_argument(
        "--data",
        required=True,
        help="the Alibaba 2023 directory (node list, pod lists, fgd_expected_results/)",
    )
    fgd.add_argument(
        "--workloads", help="pod lists, comma-separated (default, multigpu50, ...; default: all)"
    )
    fgd.add_argument(
        "--policies",
        default=",".join(FGD_ALL),
        help=f"comma-separated, of {', '.join(FGD_ALL)} (default: all)",
    )
    fgd.add_argument("--seeds", type=_seeds, default=(42, 43, 44, 45, 46, 47, 48, 49, 50, 51))
    fgd.add_argument("--ratio", type=float, default=1.3, help="GPUs asked / the cluster's (1.3)")
    fgd.add_argument("--workers", type=int, default=2, help="processes (default: 2)")
    fgd.add_argument("--out", default="out/fgd", help="output directory")

    explain = commands.add_parser(
        "explain",
        help="say why a gang does or does not fit a cluster",
        description="Loads a cluster and prints, level by level, what the best domain could "
        "hold, which nodes were excluded and why, and what would have to be freed.",
    )
    explain.add_argument(
        "--cluster",
        default=DEFAULT_CLUSTER,
        help="a gangplace.synth shape, tree:S,R,N,G, or a node-list CSV (default: bundled)",
    )
    explain.add_argument("--pods", type=int, required=True, help="pods in the gang")
    explain.add_argument(
        "--gpus-per-pod",
        type=int,
        default=None,
        help="GPUs per pod (default: the GPUs of the cluster's largest node)",
    )
    explain.add_argument("--required-level", help="coarsest level the gang may span")
    explain.add_argument("--fill", type=float, default=0.0, help="synth shapes: fill 0..1")
    return parser


def _simulate(args: argparse.Namespace) -> int:
    from gangplace.sim.run import simulate

    traces = [part for part in args.trace.split(",") if part]
    result = simulate(
        traces if len(traces) > 1 else traces[0],
        trace_format=args.format,
        cluster=args.cluster,
        policies=args.policies,
        seeds=args.seeds,
        settings=_settings(args),
        out=args.out,
        progress=sys.stderr.isatty(),
        baseline=args.baseline,
        jobs_out=args.jobs_out,
    )
    report = result.report
    print(
        f"trace {','.join(report['trace'])}: {report['jobs']['count']} jobs; cluster "
        f"{report['cluster']['spec']}: {report['cluster']['nodes']} nodes, "
        f"{report['cluster']['gpus']} GPUs"
    )
    print(result.table())
    print(f"wrote {', '.join(str(path) for path in result.files)}")
    failed = [name for name, entry in report["policies"].items() if entry.get("errors")]
    if failed:  # a FAILED row, or a policy that failed in some seeds: not a clean run
        print(f"gangplace simulate: failed in some seed(s): {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _sweep(args: argparse.Namespace) -> int:
    from gangplace.sim.sweep import sweep

    result = sweep(
        _specs(args.traces),
        _specs(args.clusters),
        policies=args.policies,
        seeds=args.seeds,
        settings=_settings(args),
        executor=args.executor,
        workers=args.workers,
        address=args.address,
        out=args.out,
    )
    print(result.table())
    print(f"wrote {', '.join(str(path) for path in result.files)}")
    for failure in result.failures:
        print(f"gangplace sweep: failed: {failure}", file=sys.stderr)
    return 1 if result.failures else 0


def _fgd(args: argparse.Namespace) -> int:
    from gangplace.sim.fgd.compare import compare, paired, plot_curves, table

    policies = [part.strip() for part in args.policies.split(",") if part.strip()]
    unknown = [policy for policy in policies if policy not in FGD_ALL]
    if unknown or not policies:
        raise SimError(
            f"--policies: unknown {', '.join(unknown) or '(none)'}; of {', '.join(FGD_ALL)}"
        )
    if not 0.0 < args.ratio <= 10.0:
        raise SimError(f"--ratio {args.ratio} is not in (0, 10]")
    if args.workers < 1:
        raise SimError(f"--workers {args.workers} is not >= 1")
    workloads = (
        [w.strip() for w in args.workloads.split(",") if w.strip()] if args.workloads else None
    )
    cells = compare(
        args.data,
        workloads=workloads,
        policies=policies,
        seeds=args.seeds,
        ratio=args.ratio,
        workers=args.workers,
    )
    text = table(cells)
    versus = paired(cells, "gangplace") if "fgd" in policies else ""
    if versus:
        text += "\n\ngangplace against FGD, paired by seed:\n\n" + versus
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "fgd.md").write_text(text + "\n")
    with (out / "fgd-runs.csv").open("w") as handle:
        handle.write("workload,policy,seed,allocation_130,placed,failed,arrived_percent\n")
        for cell in cells:
            for run in cell.runs:
                handle.write(
                    f"{cell.workload},{run.policy},{run.seed},{run.at(130):.4f},{run.placed},"
                    f"{run.failed},{run.arrived_percent:.4f}\n"
                )
    files = [out / "fgd.md", out / "fgd-runs.csv", *plot_curves(cells, args.data, out)]
    print(text)
    print(f"wrote {', '.join(str(path) for path in files)}")
    return 0


def _specs(values: list[str]) -> list[str]:
    """Every ``;``-separated part of every value of a repeatable flag, in order."""
    return [part.strip() for value in values for part in value.split(";") if part.strip()]


def _explain(args: argparse.Namespace) -> int:
    from gangplace import GangRequest, synth
    from gangplace.sim.clusters import parse_cluster

    spec = parse_cluster(args.cluster, seed=0)
    cluster = spec.build()
    if args.fill:
        synth.fill(cluster, args.fill, gpus_per_node=spec.gpus_per_node)
    gpus = args.gpus_per_pod if args.gpus_per_pod is not None else spec.gpus_per_node
    request = GangRequest(args.pods, gpus, required_level=args.required_level)
    print(cluster.explain(request))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "simulate":
            return _simulate(args)
        if args.command == "sweep":
            return _sweep(args)
        if args.command == "fgd":
            return _fgd(args)
        return _explain(args)
    except (SimError, GangplaceError, OSError, ValueError) as error:
        print(f"gangplace {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
