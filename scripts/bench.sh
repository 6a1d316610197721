#!/usr/bin/env bash
# The performance suite (release build), and its report.
#
#   bash scripts/bench.sh           # every synth shape at 50/80/95% fill (about 20 minutes)
#   bash scripts/bench.sh --quick   # colossus100k at 80% only (under 2 minutes)
#
# Writes out/bench/results.json (pytest-benchmark, with raw rounds), out/bench/memory.jsonl
# and out/bench/report.md (the tables of docs/performance.md), and prints the report.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
mode=()
shapes=(million colossus100k)
if [ "${1:-}" = "--quick" ]; then
    mode=(--quick)
    shapes=(colossus100k)
fi
mkdir -p out/bench
python -m pytest benches --benchmark-only "${mode[@]}" -p no:cacheprovider -q \
    --benchmark-max-time=0.5 --benchmark-json=out/bench/results.json --benchmark-save-data \
    --benchmark-columns=median,iqr,ops,rounds --benchmark-sort=name
: > out/bench/memory.jsonl
for shape in "${shapes[@]}"; do
    python benches/memory.py "$shape" >> out/bench/memory.jsonl
    python benches/memory.py "$shape" --labels >> out/bench/memory.jsonl
done
python benches/report.py out/bench/results.json out/bench/memory.jsonl > out/bench/report.md
cat out/bench/report.md
echo "bench: wrote out/bench/report.md" >&2
