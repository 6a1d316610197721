#!/usr/bin/env bash
# Runs the cargo-fuzz targets of gangplace-core for a given time (not part of CI).
#
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]     default: 1800 s, targets script and restore
#
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). The targets run in
# parallel, one process each, at low priority. Corpora grow under target/fuzz-corpus/ (seeded
# from rust/gangplace-core/fuzz/seeds/); crashes land in rust/gangplace-core/fuzz/artifacts/.
# Prints, per target, libFuzzer's last "Done N runs in S second(s)" line and the crash count,
# and exits non-zero if any target found a crash.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-1800}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(script restore)
fuzz_dir="$root/rust/gangplace-core/fuzz"
cd "$fuzz_dir"
# The fuzz crate's Cargo.lock is committed: refuse to run (and rewrite it) when it is stale.
if ! cargo metadata --locked --format-version 1 >/dev/null; then
    echo "fuzz: rust/gangplace-core/fuzz/Cargo.lock is stale; run 'cargo update --workspace' in" \
        "rust/gangplace-core/fuzz and commit it" >&2
    exit 1
fi
cargo +nightly fuzz build -O >/dev/null 2>&1
logs="$root/target/fuzz-logs"
mkdir -p "$logs"
pids=()
for target in "${targets[@]}"; do
    corpus="$root/target/fuzz-corpus/$target"
    mkdir -p "$corpus" "$fuzz_dir/artifacts/$target"
    # -rss_limit_mb guards against memory blow-ups; -timeout flags any input taking > 10 s.
    nice -n 19 cargo +nightly fuzz run -O "$target" "$corpus" "$fuzz_dir/seeds/$target" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        >"$logs/$target.log" 2>&1 &
    pids+=($!)
done
status=0
for index in "${!targets[@]}"; do
    wait "${pids[$index]}" || status=1
done
for target in "${targets[@]}"; do
    crashes=$(find "$fuzz_dir/artifacts/$target" -type f | wc -l)
    done_line=$(grep -E "^Done [0-9]+ runs" "$logs/$target.log" | tail -1 || true)
    echo "fuzz $target: ${done_line:-no summary (see $logs/$target.log)}; crashes: $crashes"
    [ "$crashes" -eq 0 ] || status=1
done
exit "$status"
