# Sourced by the README's commands: makes .venv, installs the pinned tools, and builds the
# extension in release mode into it. Idempotent: a second run only rebuilds what changed.
# A caller that sets GANGPLACE_FEATURES (scripts/test.sh sets "testing") builds the extension
# with those cargo features; the default build has no test machinery.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
python="${PYTHON:-python3.11}"
command -v "$python" >/dev/null || python=python3
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv with $("$python" --version 2>&1)" >&2
    "$python" -m venv .venv
fi
stamp=.venv/.requirements-installed
if [ ! -f "$stamp" ] || ! cmp -s requirements-dev.txt "$stamp"; then
    echo "setup: installing the pinned tools of requirements-dev.txt into .venv (first time: about a minute)" >&2
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
    cp requirements-dev.txt "$stamp"
fi
export VIRTUAL_ENV="$root/.venv"
export PATH="$VIRTUAL_ENV/bin:$PATH"
# A release build (lto = "fat"): benchmarks and examples always run optimised code.
features="${GANGPLACE_FEATURES:-}"
echo "setup: maturin develop --release${features:+ --features $features} (only what changed is rebuilt; a first build takes a few minutes)" >&2
if ! maturin develop --release ${features:+--features "$features"} >.venv/build.log 2>&1; then
    cat .venv/build.log >&2
    exit 1
fi
