"""The exception hierarchy of gangplace.

Every error gangplace raises on purpose derives from :class:`GangplaceError`, so a host's
``except GangplaceError`` (or ``except Exception``) sees it. Argument *type* errors are plain
:class:`TypeError`, as in the standard library.
"""

from __future__ import annotations

__all__ = [
    "Conflict",
    "DuplicateJob",
    "GangplaceError",
    "InternalError",
    "InvalidRequest",
    "InvalidSnapshot",
    "LimitExceeded",
    "ReservationError",
    "ReservationExpired",
    "ReservationRevoked",
    "UnknownJob",
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


class Conflict(ReservationError):
    """``reserve`` of an earlier placement found one of its GPUs no longer free and healthy.

    Raised when a GPU of the placement was taken, turned unhealthy, or its node was cordoned,
    removed or moved out of the placement's domain since ``place_gang`` computed it. Nothing
    is held; ask ``place_gang`` again. Also raised by a plan applied after the state moved,
    and by ``update_node`` changing the structure of a node that holds GPUs.
    """


class LimitExceeded(GangplaceError):
    """A size limit would be exceeded: the cluster's node limit, or an owner's GPU cap.

    The call changed nothing.
    """


class InvalidSnapshot(GangplaceError, ValueError):
    """Bytes given to ``Cluster.restore`` are truncated, corrupted, foreign or inconsistent.

    No cluster is built from them.
    """


class InternalError(GangplaceError):
    """gangplace found a bug in itself.

    When it happens inside an operation, the cluster refuses every further call (it fails
    closed); restore a snapshot taken earlier to continue.
    """


class UnknownJob(GangplaceError, KeyError):
    """A :class:`~gangplace.Scheduler` has no pending or running job with that id.

    Attributes:
        job_id: The id that was looked up.

    """

    def __init__(self, message: str, job_id: str | None = None) -> None:
        super().__init__(message)
        self.job_id = job_id

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class DuplicateJob(GangplaceError, ValueError):
    """``Scheduler.submit`` of a job id that is already pending or running; nothing changed."""
