"""The checks of the Scheduler's arguments (docs/scheduler.md, S2, S6, S7).

Each raises a typed error before anything is queued or changed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from gangplace._gangplace import LIMITS
from gangplace.errors import InvalidRequest

MAX_NAME_BYTES = int(LIMITS["max_name_bytes"])

__all__ = [
    "checked_choice",
    "checked_ladder",
    "checked_name",
    "checked_quotas",
    "checked_seconds",
]


def checked_name(what: str, value: object) -> str:
    """A job id or owner as the engine takes names: a str of 1 to 253 bytes of UTF-8.

    Checked at ``submit`` so that no argument is refused only later, by every cycle.

    Raises:
        TypeError: Not a str.
        InvalidRequest: Empty, too long, or not encodable as UTF-8.

    """
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidRequest(f"{what} must be valid UTF-8 (it has a lone surrogate)") from None
    if not 1 <= size <= MAX_NAME_BYTES:
        raise InvalidRequest(f"{what} must be 1 to {MAX_NAME_BYTES} bytes long, got {size} bytes")
    return value


def checked_seconds(what: str, value: float | None, *, positive: bool) -> float | None:
    """``value`` as float seconds (``None`` stays ``None``): finite, >= 0 (> 0 if positive)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number of seconds or None")
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        bound = "> 0" if positive else ">= 0"
        raise InvalidRequest(f"{what} must be finite and {bound} seconds, got {value!r}")
    return float(value)


def checked_ladder(
    ladder: Iterable[tuple[float, str | None]] | None, levels: tuple[str, ...]
) -> tuple[tuple[float, str | None], ...]:
    """The ladder as ``(seconds, level or None)`` steps, strictly increasing, known levels."""
    if ladder is None:
        return ()
    steps: list[tuple[float, str | None]] = []
    known = {"node", "cluster", *levels}
    for step in ladder:
        try:
            seconds, level = step
        except (TypeError, ValueError):
            raise TypeError("ladder steps must be (seconds, level or None) pairs") from None
        checked = checked_seconds("ladder step", seconds, positive=False)
        assert checked is not None
        if level is not None and level not in known:
            raise InvalidRequest(
                f"ladder level {level!r} is not a level of this cluster "
                f"({', '.join(['node', *levels, 'cluster'])})"
            )
        if steps and checked <= steps[-1][0]:
            raise InvalidRequest("ladder steps must have strictly increasing seconds")
        steps.append((checked, None if level == "cluster" else level))
    return tuple(steps)


def checked_quotas(quotas: Mapping[str, int] | None) -> dict[str | None, int]:
    """Owner -> GPUs, each a non-negative int."""
    checked: dict[str | None, int] = {}
    for owner, gpus in (quotas or {}).items():
        if not isinstance(owner, str) or isinstance(gpus, bool) or not isinstance(gpus, int):
            raise TypeError("quotas must map owner names (str) to GPU counts (int)")
        if gpus < 0:
            raise InvalidRequest(f"quota of owner {owner!r} must be >= 0, got {gpus}")
        if not 1 <= len(owner.encode("utf-8", "surrogatepass")) <= MAX_NAME_BYTES:
            raise InvalidRequest(f"quota owner {owner!r} must be 1 to {MAX_NAME_BYTES} bytes")
        checked[owner] = gpus
    return checked


def checked_choice(what: str, value: object, choices: tuple[str, ...]) -> str:
    """``value`` if it is one of ``choices`` (``TypeError`` for a non-str)."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    if value not in choices:
        raise InvalidRequest(f"{what} must be one of {', '.join(choices)}; got {value!r}")
    return value
