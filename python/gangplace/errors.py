"""The exception hierarchy of gangplace.

Every error gangplace raises on purpose derives from :class:`GangplaceError`, so a host's
``except GangplaceError`` (or ``except Exception``) sees it. Argument *type* errors are plain
:class:`TypeError`, as in the standard library.
"""

from __future__ import annotations

__all__ = [
    "GangplaceError",
    "InternalError",
    "InvalidRequest",
    "ReservationError",
    "ReservationExpired",
    "ReservationRevoked",
    "UnknownNode",
    "UnknownReservation",
    "Unschedulable",
]


class GangplaceError(Exception):
    """Base class of every gangplace error."""


class InvalidRequest(GangplaceError, ValueError):
    """An argument's value breaks the contract (bad level, out-of-range count, duplicate name...).

    The call changed nothing.
    """


class UnknownNode(GangplaceError, KeyError):
    """No node has that name.

    Attributes:
        node: The name that was looked up, when known.

    """

    def __init__(self, message: str, node: str | None = None) -> None:
        super().__init__(message)
        self.node = node

    def __str__(self) -> str:
        # KeyError quotes its argument; a message reads better as it is.
        return str(self.args[0]) if self.args else ""


class Unschedulable(GangplaceError):
    """``reserve`` found no placement for the gang; nothing is held.

    Attributes:
        reason: What the best domain of each level tried could hold, finest level first.

    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ReservationError(GangplaceError):
    """The reservation or allocation cannot undergo this operation in its current state.

    For example: rolling back a committed reservation, committing a rolled-back one, or
    releasing one that was never committed.
    """


class ReservationExpired(ReservationError):
    """The reservation's lifetime ran out before ``commit``; its GPUs were freed."""


class ReservationRevoked(ReservationError):
    """One of the reservation's GPUs became unhealthy before ``commit``; all were freed."""


class UnknownReservation(ReservationError):
    """No reservation or allocation has that id (or it ended too long ago to be remembered)."""


class InternalError(GangplaceError):
    """gangplace found a bug in itself. The cluster then refuses further calls (fails closed)."""
