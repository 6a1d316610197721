# Sourced by the README's commands: makes .venv, installs the pinned tools, and builds the
# extension in release mode into it. Idempotent: a second run only rebuilds what changed.
# A caller that sets GANGPLACE_FEATURES (scripts/test.sh sets "testing") builds the extension
# with those cargo features; the default build has no test machinery.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# Runs "$@" with its output in the log $1, printing a progress line at least every 20 s: the
# step's own latest line (cargo's "Compiling ...", pip's "Collecting ...") and the time so far.
with_progress() {
    local log=$1 label=$2
    shift 2
    "$@" >"$log" 2>&1 &
    local pid=$! waited=0 status=0
    while kill -0 "$pid" 2>/dev/null; do
        sleep 1
        waited=$((waited + 1))
        if [ $((waited % 20)) -eq 0 ]; then
            local latest
            latest=$(grep -E "Compiling|Collecting|Downloading|Installing|Building|Finished|Built" "$log" \
                | tail -n 1 | sed -E 's/^[[:space:]]+//' | cut -c1-90 || true)
            echo "setup: $label, ${waited} s so far${latest:+: $latest}" >&2
        fi
    done
    wait "$pid" || status=$?
    return "$status"
}
python="${PYTHON:-python3.11}"
command -v "$python" >/dev/null || python=python3
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv with $("$python" --version 2>&1)" >&2
    "$python" -m venv .venv
fi
stamp=.venv/.requirements-installed
if [ ! -f "$stamp" ] || ! cmp -s requirements-dev.txt "$stamp"; then
    echo "setup: installing the pinned tools of requirements-dev.txt into .venv (first time: about a minute)" >&2
    if ! with_progress .venv/pip.log "installing the pinned tools" \
        .venv/bin/python -m pip install --disable-pip-version-check -r requirements-dev.txt; then
        cat .venv/pip.log >&2
        exit 1
    fi
    cp requirements-dev.txt "$stamp"
fi
export VIRTUAL_ENV="$root/.venv"
export PATH="$VIRTUAL_ENV/bin:$PATH"
# A release build (lto = "fat"): benchmarks and examples always run optimised code.
features="${GANGPLACE_FEATURES:-}"
built=.venv/.extension-built
extension=$(ls python/gangplace/_gangplace*.so 2>/dev/null | head -n 1 || true)
newer=""
if [ -n "$extension" ] && [ -f "$built" ]; then
    newer=$(find rust Cargo.toml Cargo.lock pyproject.toml -newer "$extension" -type f \
        -not -path "*/target/*" -not -path "*/fuzz/*" -print -quit)
fi
if [ -n "$extension" ] && [ -f "$built" ] && [ -z "$newer" ] && [ "$(cat "$built")" = "features=$features" ]; then
    echo "setup: the extension is up to date (${features:+features $features, }built $(date -r "$extension" '+%Y-%m-%d %H:%M'))" >&2
else
    echo "setup: building the extension: maturin develop --release${features:+ --features $features} (a first build takes a few minutes; later ones rebuild what changed)" >&2
    if ! with_progress .venv/build.log "building the extension" \
        maturin develop --release ${features:+--features "$features"}; then
        cat .venv/build.log >&2
        exit 1
    fi
    echo "features=$features" > "$built"
fi
