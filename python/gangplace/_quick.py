"""The seed's quick form of placement: one rack, from a plain mapping of free GPUs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gangplace.errors import InvalidRequest


def _count(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    return value


def place_gang(free_gpus_by_rack: Mapping[str, Sequence[int]], required_gpus: int) -> str | None:
    """Returns the lexicographically smallest rack whose free GPUs add up to ``required_gpus``.

    Quick form for notebooks and lessons: racks are lists of per-node free GPU counts, and a
    rack fits when its counts sum to at least ``required_gpus``. For pods, health, topology
    levels and reservations, use :class:`gangplace.Cluster`.

    Args:
        free_gpus_by_rack: Rack name -> free GPUs of each of its nodes.
        required_gpus: GPUs the gang needs, >= 1.

    Returns:
        The chosen rack's name, or ``None`` if no rack has enough free GPUs.

    Raises:
        InvalidRequest: ``required_gpus <= 0`` or a negative count (both are ``ValueError``).
        TypeError: Non-integer counts or a non-string rack name.

    Example:
        >>> place_gang({"rack-b": [8], "rack-a": [4, 4]}, 8)
        'rack-a'
        >>> place_gang({"rack-a": [4], "rack-b": [3, 1]}, 8) is None
        True

    """
    required = _count(required_gpus, "required_gpus")
    if required <= 0:
        raise InvalidRequest(f"required_gpus must be >= 1, got {required}")
    totals: dict[str, int] = {}
    for rack, counts in free_gpus_by_rack.items():
        if not isinstance(rack, str):
            raise TypeError(f"rack names must be str, not {type(rack).__name__}")
        total = 0
        for count in counts:
            if _count(count, f"free GPUs of {rack!r}") < 0:
                raise InvalidRequest(f"rack {rack!r} has a negative free GPU count: {count}")
            total += count
        totals[rack] = total
    fitting = [rack for rack, total in totals.items() if total >= required]
    return min(fitting) if fitting else None
