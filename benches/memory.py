"""Resident memory and build time of a cluster built with ``Cluster.from_arrays``.

Run as a script, one shape per process so that the numbers are not blurred by earlier work:

    .venv/bin/python benches/memory.py million [--labels] [--resources]

With ``--labels`` the nodes also get the ``pool`` label of ``synth.columns``; with
``--resources`` every node has CPUs and memory (``cpu`` 96,000 millicores, ``memory``
2 TiB: docs/resources.md). Prints one JSON object: the shape, GPUs, nodes, seconds to build
(``from_arrays`` only, columns prepared beforehand), and resident-set growth in bytes per
GPU and per node (``/proc/self/status`` VmRSS before and after, with the columns freed).
"""

from __future__ import annotations

import gc
import json
import sys
import time
from pathlib import Path

from gangplace import Cluster, synth


def resident_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def measure(name: str, labels: bool, resources: bool = False) -> dict[str, object]:
    """Builds ``name`` by ``from_arrays`` and measures it (see the module's text)."""
    shape = synth.SHAPES[name]
    data = synth.columns(shape, seed=1)
    if not labels:
        del data["labels"]
    if resources:
        import numpy as np

        nodes = len(data["names"])
        data["resources"] = {
            "cpu": np.full(nodes, 96_000, dtype=np.int64),
            "memory": np.full(nodes, 2 * 2**40, dtype=np.int64),
        }
    gc.collect()
    before = resident_bytes()
    start = time.perf_counter()
    cluster = Cluster.from_arrays(shape.levels, **data)
    seconds = time.perf_counter() - start
    del data
    gc.collect()
    grown = resident_bytes() - before
    assert cluster.stats().total == shape.total_gpus
    return {
        "shape": name,
        "labels": labels,
        "resources": resources,
        "gpus": shape.total_gpus,
        "nodes": shape.nodes,
        "from_arrays_s": round(seconds, 4),
        "bytes_per_gpu": round(grown / shape.total_gpus, 1),
        "bytes_per_node": round(grown / shape.nodes, 1),
    }


if __name__ == "__main__":
    print(
        json.dumps(
            measure(
                sys.argv[1] if len(sys.argv) > 1 else "million",
                "--labels" in sys.argv,
                "--resources" in sys.argv,
            )
        )
    )
