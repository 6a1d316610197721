"""The ``gangplace`` command: ``simulate`` (trace replay) and ``explain`` (why a gang fits or not).

Bad arguments and unreadable files end with exit status 2 and a one-line message, never a
traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import resources

from gangplace.errors import GangplaceError
from gangplace.sim.errors import SimError
from gangplace.sim.policies import POLICIES

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
    unknown = [name for name in chosen if name not in POLICIES]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(
            f"unknown policies {', '.join(unknown) or '(none)'}; choose from {','.join(POLICIES)}"
        )
    return chosen


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
        "--trace", default=DEFAULT_TRACE, help="trace file (default: a bundled Philly VC)"
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
    simulate.add_argument(
        "--policies",
        type=_policies,
        default=POLICIES,
        help=f"comma-separated from {','.join(POLICIES)} (default: all)",
    )
    simulate.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    simulate.add_argument("--out", default="out/simulation", help="output directory")
    simulate.add_argument(
        "--ladder",
        type=_ladder,
        default=(300.0, 1800.0),
        help="T1,T2: require a rack for T1 s of waiting, a spine until T2 s (default 300,1800)",
    )
    simulate.add_argument(
        "--pod-timeout",
        type=float,
        default=600.0,
        help="pod-by-pod: seconds before a partial gang releases (default 600; 0: never)",
    )
    simulate.add_argument("--backfill", action="store_true", help="EASY backfilling (in GPUs)")

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
    explain.add_argument("--gpus-per-pod", type=int, default=8, help="GPUs per pod (default 8)")
    explain.add_argument("--required-level", help="coarsest level the gang may span")
    explain.add_argument("--fill", type=float, default=0.0, help="synth shapes: fill 0..1")
    return parser


def _simulate(args: argparse.Namespace) -> int:
    from gangplace.sim.run import simulate

    result = simulate(
        args.trace,
        trace_format=args.format,
        cluster=args.cluster,
        policies=args.policies,
        seed=args.seed,
        out=args.out,
        ladder=args.ladder,
        pod_timeout_s=args.pod_timeout or None,
        backfill=args.backfill,
        progress=sys.stderr.isatty(),
    )
    report = result.report
    print(
        f"trace {report['trace']}: {report['jobs']['count']} jobs; cluster "
        f"{report['cluster']['spec']}: {report['cluster']['nodes']} nodes, "
        f"{report['cluster']['gpus']} GPUs"
    )
    print(result.table())
    print(f"wrote {', '.join(str(path) for path in result.files)}")
    return 0


def _explain(args: argparse.Namespace) -> int:
    from gangplace import GangRequest, synth
    from gangplace.sim.clusters import parse_cluster

    spec = parse_cluster(args.cluster, seed=0)
    cluster = spec.build()
    if args.fill:
        synth.fill(cluster, args.fill, gpus_per_node=spec.gpus_per_node)
    request = GangRequest(args.pods, args.gpus_per_pod, required_level=args.required_level)
    print(cluster.explain(request))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "simulate":
            return _simulate(args)
        return _explain(args)
    except (SimError, GangplaceError, OSError, ValueError) as error:
        print(f"gangplace {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
