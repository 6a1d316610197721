"""Fields of objects from outside, which may be missing, null, mistyped or absurd.

Kubernetes API objects (as dicts) are read through these accessors: each returns the field
or raises :class:`BadField` naming it, which the readers turn into a warning naming the
object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class BadField(Exception):
    """A field that is not what the API defines: ``field`` (a dotted path) and why."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


def kind(value: Any) -> str:
    """The JSON kind of a value, as warnings name it (``"null"`` for ``None``)."""
    return "null" if value is None else type(value).__name__


def obj(value: Any, field: str) -> Mapping[str, Any]:
    """An object field (absent or null: empty)."""
    if type(value) is dict:  # the common case, without the slower ABC check below
        return value
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise BadField(field, f"expected an object, got {kind(value)} {value!r:.40}")
    return value


def seq(value: Any, field: str) -> list[Any]:
    """A list field (absent or null: empty)."""
    if type(value) is list:
        return value
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise BadField(field, f"expected a list, got {kind(value)} {value!r:.40}")
    return list(value)


def text(value: Any, field: str) -> str | None:
    """A string field (absent or null: ``None``)."""
    if value is None or isinstance(value, str):
        return value
    raise BadField(field, f"expected a string, got {kind(value)} {value!r:.40}")


def objects(value: Any, field: str) -> list[Mapping[str, Any]]:
    """A list of objects."""
    items = seq(value, field)
    return [obj(item, f"{field}[{index}]") for index, item in enumerate(items)]
