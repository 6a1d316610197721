"""The simulator's errors: every one it raises on purpose derives from :class:`SimError`.

``SimError`` is a :class:`gangplace.GangplaceError` (so ``except GangplaceError`` sees it) and
a :class:`ValueError` (bad input, as before it had its own base).
"""

from __future__ import annotations

from gangplace.errors import GangplaceError

__all__ = ["ClusterSpecError", "PolicyError", "SimError", "TraceError"]


class SimError(GangplaceError, ValueError):
    """Base class of the simulator's errors."""


class TraceError(SimError):
    """A trace file is unreadable or malformed; the message names the file and line."""


class ClusterSpecError(SimError):
    """A cluster description (``--cluster``) is unknown, unreadable or malformed."""


class PolicyError(SimError):
    """An unknown policy name, or a policy that cannot replay a trace."""
