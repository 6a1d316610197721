"""Turns a pytest-benchmark JSON file (saved with ``--benchmark-save-data``) into the
Markdown tables of ``docs/performance.md``: per cluster and operation, the median, the p99 of
the rounds, operations per second, and the ratio of the reference's median to the engine's.

    .venv/bin/python benches/report.py results.json [memory.json ...] > report.md

p99 is computed over the recorded rounds (each round averages its iterations), so for fast
operations it is the 99th percentile of per-round means, not of single calls.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any


def fmt_time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"


def p99(data: list[float]) -> float:
    if len(data) < 2:
        return data[0] if data else float("nan")
    return statistics.quantiles(data, n=100, method="inclusive")[98]


def key(bench: dict[str, Any]) -> tuple[str, str, str]:
    info = bench["extra_info"]
    return info.get("op", bench["name"]), info.get("gang", ""), info.get("constraint", "")


def tables(results: dict[str, Any]) -> str:
    by_cluster: dict[str, dict[tuple[str, str, str], dict[str, Any]]] = defaultdict(dict)
    reference: dict[str, dict[tuple[str, str, str], dict[str, Any]]] = defaultdict(dict)
    others: list[dict[str, Any]] = []
    for bench in results["benchmarks"]:
        params = bench.get("params") or {}
        if "setup" not in params:  # benchmarks on their own clusters (bench_preemption.py)
            others.append(bench)
            continue
        shape, fill = params["setup"]
        cluster = f"{shape} at {round(fill * 100)}% fill"
        target = reference if bench["extra_info"].get("impl") == "reference" else by_cluster
        target[cluster][key(bench)] = bench
    lines = []
    for cluster, benches in by_cluster.items():
        lines += [
            f"### {cluster}",
            "",
            "| operation | gang (GPUs) | constraint | median | p99 | ops/s "
            "| reference median | ratio |",
            "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for bench_key in sorted(benches, key=lambda k: (k[0], _gang_order(k[1]), k[2])):
            stats = benches[bench_key]["stats"]
            op, gang, constraint = bench_key
            ref = reference[cluster].get(bench_key)
            ref_median = fmt_time(ref["stats"]["median"]) if ref else ""
            ratio = f"{ref['stats']['median'] / stats['median']:,.0f}x" if ref else ""
            lines.append(
                f"| {op} | {gang} | {constraint} | {fmt_time(stats['median'])} | "
                f"{fmt_time(p99(stats.get('data', [])))} | {stats['ops']:,.0f} | "
                f"{ref_median} | {ratio} |"
            )
        lines.append("")
    if others:
        lines += [
            "### Preemption and defragmentation (benches/bench_preemption.py)",
            "",
            "| benchmark | median | p99 | rounds | answer |",
            "| --- | ---: | ---: | ---: | --- |",
        ]
        for bench in sorted(others, key=lambda b: b["name"]):
            stats = bench["stats"]
            answer = ", ".join(f"{k} {v}" for k, v in sorted(bench["extra_info"].items()))
            lines.append(
                f"| {bench['name']} | {fmt_time(stats['median'])} | "
                f"{fmt_time(p99(stats.get('data', [])))} | {stats['rounds']} | {answer} |"
            )
        lines.append("")
    return "\n".join(lines)


def _gang_order(gang: str) -> tuple[int, str]:
    digits = gang.split("x")[0]
    return (int(digits) if digits.isdigit() else 0, gang)


def main(paths: list[str]) -> None:
    results = json.loads(Path(paths[0]).read_text())
    machine = results["machine_info"]
    cpu = machine.get("cpu", {})
    print(
        f"Machine: {cpu.get('brand_raw', machine.get('processor'))}, "
        f"{cpu.get('count', '?')} logical CPUs, Python {machine['python_version']}, "
        f"run {results['datetime']}."
    )
    print()
    print(tables(results))
    for path in paths[1:]:
        for line in Path(path).read_text().splitlines():
            if line.strip():
                memory = json.loads(line)
                print(
                    f"- from_arrays, {memory['shape']} ({memory['gpus']:,} GPUs"
                    f"{', with a label' if memory.get('labels') else ''}): "
                    f"{memory['from_arrays_s']:.3f} s, {memory['bytes_per_gpu']} bytes/GPU resident"
                )


if __name__ == "__main__":
    main(sys.argv[1:])
