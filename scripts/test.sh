#!/usr/bin/env bash
# The README's test command: set up (idempotent), then every check and every test.
# Exits non-zero on any failure, including a pytest run that collects no test.
set -euo pipefail
# The tests use the test machinery (the failpoint): build the extension with it.
GANGPLACE_FEATURES=testing
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

step() { printf '\n== %s\n' "$*"; }

step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy --all-targets -- -D warnings (default features, then with testing)"
cargo clippy --quiet --workspace --all-targets -- -D warnings
cargo clippy --quiet --workspace --all-targets --features gangplace-py/testing -- -D warnings
step "the fuzz crate's committed Cargo.lock is current (cargo metadata --locked)"
cargo metadata --locked --format-version 1 --manifest-path rust/gangplace-core/fuzz/Cargo.toml >/dev/null
step "cargo test (core, with the testing feature)"
cargo test --quiet -p gangplace-core --features testing
step "ruff"
ruff check python tests benches examples
ruff format --check python tests benches examples
step "mypy --strict"
mypy
step "stubtest"
python -m mypy.stubtest gangplace._gangplace
# tests/test_slurmctld.py runs Debian's slurmctld (issue 24): install it when we can.
step "Slurm and MUNGE for tests/test_slurmctld.py"
if command -v slurmctld >/dev/null && command -v munged >/dev/null && command -v sbatch >/dev/null; then
    echo "already installed: $(slurmctld -V 2>/dev/null || echo slurmctld)"
elif [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "not root with apt-get: tests/test_slurmctld.py will be skipped"
elif with_progress .venv/apt.log "apt-get update" apt-get update -qq &&
    with_progress .venv/apt.log "apt-get install slurmctld slurm-client munge" \
        env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        slurmctld slurm-client munge; then
    echo "installed: $(slurmctld -V 2>/dev/null || echo slurmctld)"
else
    echo "apt-get failed (.venv/apt.log): tests/test_slurmctld.py will be skipped"
fi
# One pytest worker per core (pytest-xdist): on the 2-core CI machine this halves the
# longest stage. GANGPLACE_TEST_WORKERS=0 runs everything in one process.
workers="${GANGPLACE_TEST_WORKERS:-auto}"
step "pytest (workers: $workers)"
status=0
GANGPLACE_HYPOTHESIS_PROFILE="${GANGPLACE_HYPOTHESIS_PROFILE:-ci}" \
    python -m pytest tests benches --benchmark-disable --timeout=300 -p no:cacheprovider \
    -n "$workers" --dist loadgroup || status=$?
if [ "$status" -eq 5 ]; then
    echo "pytest collected no tests: failing" >&2
fi
exit "$status"
