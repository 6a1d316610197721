"""The Ray adapter's error (docs/ray.md)."""

from __future__ import annotations

from gangplace.errors import GangplaceError

__all__ = ["RayError"]


class RayError(GangplaceError):
    """Ray refused, failed or timed out; what gangplace held for it was given back.

    The message says which placement group and why (Ray's own error, or the group's state
    when it was not ready in time).
    """
