"""``python -m gangplace``: the command line (see :mod:`gangplace.cli`)."""

from __future__ import annotations

import sys

from gangplace.cli import main

sys.exit(main())
