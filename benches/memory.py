"""Resident memory and build time of a cluster built with ``Cluster.from_arrays``.

Run as a script, one shape per process so that the numbers are not blurred by earlier work:

    .venv/bin/python benches/memory.py million [--labels]

With ``--labels`` the nodes also get the ``pool`` label of ``synth.columns``. Prints one JSON
object: the shape, GPUs, seconds to build (``from_arrays`` only, columns prepared
beforehand), and resident-set growth in bytes per GPU (``/proc/self/status`` VmRSS before and
after, with the columns freed).
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


def measure(name: str, labels: bool) -> dict[str, object]:
    shape = synth.SHAPES[name]
    data = synth.columns(shape, seed=1)
    if not labels:
        del data["labels"]
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
        "gpus": shape.total_gpus,
        "from_arrays_s": round(seconds, 4),
        "bytes_per_gpu": round(grown / shape.total_gpus, 1),
    }


if __name__ == "__main__":
    print(
        json.dumps(measure(sys.argv[1] if len(sys.argv) > 1 else "million", "--labels" in sys.argv))
    )
