#!/usr/bin/env bash
# The README's main command: set up (idempotent), then replay the bundled Philly VC trace on
# the bundled cluster under all five policies (best-fit, first-fit, blind, pod-by-pod,
# ladder), over workload seeds 0-4 (the durations are synthetic: several draws, with 95%
# intervals). Prints the comparison table and where it wrote report.json and the plots.
# Extra arguments go to `gangplace simulate` (see `python -m gangplace simulate --help`).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
echo "example: gangplace simulate --seeds 0-4 --out out/simulation $*" >&2
python -m gangplace simulate --seeds 0-4 --out out/simulation "$@"
