#!/usr/bin/env bash
# Regenerates the FGD comparison of docs/simulation.md ("The FGD experiment", issue 28):
# the FGD paper's six policies on every openb_pod_list_*.csv of the Alibaba 2023 data with
# the paper's ten seeds at 130% of the GPUs, beside the paper's published runs; the table
# and one plot per pod list go to docs/simulation/fgd/. Not part of the test command (about
# 10 minutes on 2 cores; the test command runs one seed of the default list). Needs
# ../shared/data beside the clone. Extra arguments go to `gangplace fgd`
# (e.g. --workloads default --seeds 42-44).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
data=${GANGPLACE_FGD_DATA:-../shared/data/alibaba-gpu-v2023}
if [ ! -f "$data/openb_node_list_gpu_node.csv" ]; then
    echo "fgd.sh: no Alibaba 2023 data at $data (set GANGPLACE_FGD_DATA)" >&2
    exit 2
fi
echo "fgd.sh: gangplace fgd --data $data $* (progress below)" >&2
python -m gangplace fgd --data "$data" --out docs/simulation/fgd "$@"
python scripts/simulation_tables.py
