#!/usr/bin/env bash
# The README's main command: set up (idempotent), then run the quick-start example.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
python examples/quickstart.py
