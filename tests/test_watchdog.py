"""The deadlock watchdog itself must be able to fail a run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

TESTS = Path(__file__).parent


def test_an_operation_over_the_limit_ends_the_run() -> None:
    program = textwrap.dedent(
        """
        import time
        from watchdog import watched

        class Slow:
            def wait(self) -> None:
                time.sleep(5)

        watched(Slow()).wait()
        print("not reached")
        """
    )
    env = {**os.environ, "GANGPLACE_WATCHDOG_SECONDS": "0.5", "PYTHONPATH": str(TESTS)}
    done = subprocess.run(
        [sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 70
    assert "wait() has run for" in done.stderr
    assert "not reached" not in done.stdout


def test_a_quick_operation_passes_through() -> None:
    from watchdog import watched

    class Quick:
        def answer(self, value: int) -> int:
            return value * 2

    assert watched(Quick()).answer(21) == 42
