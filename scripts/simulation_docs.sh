#!/usr/bin/env bash
# Regenerates the runs of docs/simulation.md (not part of the test command: about 10 minutes
# on 2 cores). Needs ../shared/data beside the clone. Each run writes report.json and plots
# into docs/simulation/<run>/ and its table into docs/simulation/<run>/table.txt.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
data=../shared/data
philly=$data/philly-gavel-vc-traces
alibaba=$data/alibaba-gpu-v2023
run() {
    local name=$1
    shift
    echo "simulation_docs: $name: gangplace simulate $*" >&2
    mkdir -p "docs/simulation/$name"
    python -m gangplace simulate "$@" --out "docs/simulation/$name" \
        | tee "docs/simulation/$name/table.txt"
}
run philly-b436b2-64gpus --trace $philly/b436b2.trace --cluster tree:2,2,2,8 --seeds 0-9
run philly-b436b2-64gpus-nobackfill --trace $philly/b436b2.trace --cluster tree:2,2,2,8 \
    --seeds 0-9 --backfill none
run philly-6c71a0-64gpus --trace $philly/6c71a0.trace --cluster tree:2,2,2,8 --seeds 0-9
run philly-3vcs-128gpus --trace $philly/6c71a0.trace,$philly/b436b2.trace,$philly/11cb48.trace \
    --cluster tree:2,2,4,8 --seeds 0-4 --policies best-fit,pod-by-pod,blind
for queues in isolated borrowing fair; do  # docs/queues.md: three VCs as teams
    run philly-3vcs-queues-$queues --trace $philly/6c71a0.trace,$philly/b436b2.trace,$philly/11cb48.trace \
        --cluster tree:2,2,4,8 --seeds 0-9 --policies best-fit --queues examples/queues/philly-3vcs-$queues.json
done
run philly-3vcs-queues-none --trace $philly/6c71a0.trace,$philly/b436b2.trace,$philly/11cb48.trace \
    --cluster tree:2,2,4,8 --seeds 0-9 --policies best-fit
run philly-b436b2-failures --trace $philly/b436b2.trace --cluster tree:2,2,2,8 --seeds 0-9 \
    --policies best-fit,pod-by-pod --failures 0.001 --repair-hours 4
run alibaba-default --trace $alibaba/openb_pod_list_default.csv \
    --cluster $alibaba/openb_node_list_gpu_node.csv --policies best-fit,first-fit,pod-by-pod
run alibaba-multigpu50 --trace $alibaba/openb_pod_list_multigpu50.csv \
    --cluster $alibaba/openb_node_list_gpu_node.csv --policies best-fit,first-fit,pod-by-pod
run philly-b436b2-priorities --trace $philly/b436b2.trace --cluster tree:2,2,2,8 --seeds 0-9 \
    --order priority --high-priority-share 0.2 \
    --policies best-fit,best-fit+preempt,best-fit+defrag
# The best-fit tie-break (issue 13), measured: best-fit against best-fit-path (ties by path).
run philly-tiebreak-3vcs --trace $philly/6c71a0.trace,$philly/b436b2.trace,$philly/11cb48.trace \
    --cluster tree:2,2,4,8 --seeds 0-4 --policies best-fit,best-fit-path
run alibaba-tiebreak --trace $alibaba/openb_pod_list_default.csv \
    --cluster $alibaba/openb_node_list_gpu_node.csv --policies best-fit,best-fit-path
run alibaba-tiebreak-multigpu50 --trace $alibaba/openb_pod_list_multigpu50.csv \
    --cluster $alibaba/openb_node_list_gpu_node.csv --policies best-fit,best-fit-path
run philly-tiebreak-b436b2 --trace $philly/b436b2.trace --cluster tree:2,2,2,8 --seeds 0-9 \
    --policies best-fit,best-fit-path
# Slices (issue 13): three Philly VCs on four NVL72-like racks (18 trays x 4 GPUs).
run philly-nvl72-slices --trace $philly/6c71a0.trace,$philly/b436b2.trace,$philly/11cb48.trace \
    --cluster tree:2,2,18,4 --seeds 0-4 --policies best-fit,best-fit+slices,pod-by-pod
# NUMA-split nodes (issue 13): two NUMA halves per node; best-fit against numa="single".
run philly-numa-split --trace $philly/6c71a0.trace,$philly/b436b2.trace,$philly/11cb48.trace \
    --cluster tree:2,2,4,8 --seeds 0-4 --policies best-fit,best-fit+numa,pod-by-pod --numa-split
# Hard against soft topology constraints (issue 26), with the cited placement model: every
# multi-node job required in one rack (rack-only), a rack preferred with a timeout ladder,
# best-fit's preference without waiting, and no topology at all (blind).
run philly-hard-soft --trace $philly/b436b2.trace --cluster tree:2,2,2,8 --seeds 0-9 \
    --policies rack-only,ladder,best-fit,blind --baseline rack-only
run philly-hard-soft-nomodel --trace $philly/b436b2.trace --cluster tree:2,2,2,8 --seeds 0-9 \
    --policies rack-only,ladder,best-fit,blind --baseline rack-only --placement-model none
run philly-hard-soft-3vcs \
    --trace $philly/6c71a0.trace,$philly/b436b2.trace,$philly/11cb48.trace \
    --cluster tree:2,2,4,8 --seeds 0-4 --policies rack-only,ladder,best-fit,blind \
    --baseline rack-only
# Backfill with reservations (issue 25): EASY, conservative and none on one VC.
for mode in easy conservative none; do
    run philly-b436b2-backfill-$mode --trace $philly/b436b2.trace --cluster tree:2,2,2,8 \
        --seeds 0-9 --policies best-fit,first-fit --backfill $mode
done
echo "simulation_docs: tables of docs/simulation.md" >&2
python scripts/simulation_tables.py
