"""A deadlock watchdog: any single cluster operation taking longer than a limit ends the run.

A deadlock inside the engine would block a thread in Rust, where no Python exception can reach
it, so the watchdog does not try to interrupt: it prints every thread's stack (faulthandler)
and exits the process with status 70. pytest's own per-test timeout stays as a backstop.

Usage: ``cluster = watched(Cluster(...))`` times every method call of ``cluster``.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

LIMIT_SECONDS = float(os.environ.get("GANGPLACE_WATCHDOG_SECONDS", "10"))
EXIT_STATUS = 70

T = TypeVar("T")


class Watchdog:
    """Tracks operations in flight and fails the run when one exceeds ``limit`` seconds."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        # Thread id -> (label, start). Single dict operations are atomic, so the hot path
        # takes no lock; the monitor reads a copy.
        self._in_flight: dict[int, tuple[str, float]] = {}
        self._start_lock = threading.Lock()
        self._monitor: threading.Thread | None = None

    def _ensure_monitor(self) -> None:
        with self._start_lock:
            if self._monitor is None:
                self._monitor = threading.Thread(target=self._watch, name="watchdog", daemon=True)
                self._monitor.start()

    def _watch(self) -> None:
        while True:
            time.sleep(min(0.25, self.limit / 4))
            now = time.monotonic()
            stuck = [(label, now - start) for label, start in self._in_flight.copy().values()]
            overdue = [(label, age) for label, age in stuck if age > self.limit]
            if overdue:
                label, age = overdue[0]
                print(
                    f"\nwatchdog: {label} has run for {age:.1f} s (limit {self.limit} s); "
                    "stacks follow",
                    file=sys.stderr,
                    flush=True,
                )
                faulthandler.dump_traceback(all_threads=True)
                os._exit(EXIT_STATUS)

    def call(self, label: str, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Runs ``function`` as one watched operation."""
        if self._monitor is None:
            self._ensure_monitor()
        thread = threading.get_ident()
        self._in_flight[thread] = (label, time.monotonic())
        try:
            return function(*args, **kwargs)
        finally:
            del self._in_flight[thread]


WATCHDOG = Watchdog(LIMIT_SECONDS)


class _Watched:
    def __init__(self, target: Any) -> None:
        self._target = target

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._target, name)
        if not callable(attribute):
            return attribute

        def watched_call(*args: Any, **kwargs: Any) -> Any:
            return WATCHDOG.call(f"{name}()", attribute, *args, **kwargs)

        return watched_call

    def __len__(self) -> int:
        return int(WATCHDOG.call("len()", len, self._target))

    def __repr__(self) -> str:
        return repr(self._target)


def watched(target: T) -> T:
    """``target`` with every method call timed by the watchdog (typed as ``target``)."""
    return cast(T, _Watched(target))
