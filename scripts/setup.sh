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
    if ! maturin develop --release ${features:+--features "$features"} >.venv/build.log 2>&1; then
        cat .venv/build.log >&2
        exit 1
    fi
    echo "features=$features" > "$built"
fi
