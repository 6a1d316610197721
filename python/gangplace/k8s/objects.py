"""Kubernetes objects as dicts, whichever form they come in (docs/kubernetes.md).

The readers take what ``kubectl get -o json`` prints (dicts with the API's camelCase keys)
and what the ``kubernetes`` client returns (model objects such as ``V1Pod`` with snake_case
attributes). :func:`plain` gives both as a mapping with the API's keys. A model object is
not serialized whole (the client's ``sanitize_for_serialization`` walks every field, which
costs more than everything gangplace reads): :class:`ModelView` looks up each key when it is
read, through the model class's own ``attribute_map``.

:func:`identity` reads what every event is checked against first (kind, name, namespace,
``uid``, ``resourceVersion``) without reading anything else, so that an event for an object
already applied at that version costs a few attribute lookups.
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Identity", "ModelView", "identity", "plain"]


def plain(obj: Any, kind: str = "V1Node") -> Mapping[str, Any]:
    """A mapping with the API's keys: a dict as it is, a client model object as a view.

    Raises:
        TypeError: Neither a mapping nor a ``kubernetes`` client model object.

    """
    if type(obj) is dict or isinstance(obj, Mapping):
        return obj
    if _is_model(obj):
        return ModelView(obj)
    raise TypeError(f"expected a {kind} or a dict, not {type(obj).__name__}")


def _is_model(obj: Any) -> bool:
    return hasattr(type(obj), "attribute_map") and hasattr(type(obj), "openapi_types")


@functools.cache
def _keys_of(model: type) -> tuple[dict[str, str], tuple[str, ...]]:
    """API key -> attribute name for a model class, and the attribute names in order."""
    attributes: Mapping[str, str] = model.attribute_map  # type: ignore[attr-defined]
    return {key: name for name, key in attributes.items()}, tuple(attributes)


def _wrapped(value: Any) -> Any:
    """A value as the API's JSON has it: models as views, lists and dicts item by item."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, list):
        return [_wrapped(item) for item in value]
    if isinstance(value, dict):
        return {key: _wrapped(item) for key, item in value.items()}
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    if _is_model(value):
        return ModelView(value)
    return value


class ModelView(Mapping[str, Any]):
    """A ``kubernetes`` client model object read as its JSON would be, key by key.

    Keys are the API's (``nodeName``, ``resourceVersion``); a field that is ``None`` is
    absent, as in the client's own serialization. Nothing is copied: each read looks the
    attribute up on the model.
    """

    __slots__ = ("_model",)

    def __init__(self, model: Any) -> None:
        self._model = model

    def __getitem__(self, key: str) -> Any:
        names, _ = _keys_of(type(self._model))  # type: ignore[arg-type]
        name = names.get(key)
        if name is None:
            raise KeyError(key)
        value = getattr(self._model, name, None)
        if value is None:
            raise KeyError(key)
        return _wrapped(value)

    def get(self, key: str, default: Any = None) -> Any:  # noqa: D102 (Mapping's)
        names, _ = _keys_of(type(self._model))  # type: ignore[arg-type]
        name = names.get(key)
        value = None if name is None else getattr(self._model, name, None)
        return default if value is None else _wrapped(value)

    def __iter__(self) -> Iterator[str]:
        model = self._model
        attributes = type(model).attribute_map
        return (key for name, key in attributes.items() if getattr(model, name, None) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"ModelView({type(self._model).__name__})"


@dataclass(frozen=True, slots=True)
class Identity:
    """What an event is checked against before anything else is read.

    Attributes:
        kind: ``"Node"``, ``"Pod"``, or what else the object is.
        name: ``metadata.name`` (empty when missing or not a string).
        namespace: ``metadata.namespace`` (``"default"`` for a pod without one).
        uid: ``metadata.uid`` (empty when missing or not a string).
        version: ``metadata.resourceVersion`` as an integer; ``None`` when missing.
        bad_version: The ``resourceVersion`` text when it is not an integer (else empty).

    """

    kind: str
    name: str
    namespace: str
    uid: str
    version: int | None
    bad_version: str = ""


def identity(obj: Any) -> Identity:
    """The object's kind, name, namespace, uid and resourceVersion; never raises."""
    if isinstance(obj, Mapping):
        kind = _dict_kind(obj)
        metadata = obj.get("metadata")
        if not isinstance(metadata, Mapping):
            return Identity(kind, "", "default", "", None)
        name, space = metadata.get("name"), metadata.get("namespace")
        uid, version = metadata.get("uid"), metadata.get("resourceVersion")
    elif _is_model(obj):
        kind = type(obj).__name__.removeprefix("V1")
        metadata = getattr(obj, "metadata", None)
        if metadata is None:
            return Identity(kind, "", "default", "", None)
        name, space = getattr(metadata, "name", None), getattr(metadata, "namespace", None)
        uid, version = getattr(metadata, "uid", None), getattr(metadata, "resource_version", None)
    else:
        return Identity(type(obj).__name__, "", "default", "", None)
    number, bad = _version(version)
    return Identity(
        kind,
        name if isinstance(name, str) else "",
        space if isinstance(space, str) and space else "default",
        uid if isinstance(uid, str) else "",
        number,
        bad,
    )


def _version(value: Any) -> tuple[int | None, str]:
    """``resourceVersion`` as an integer, or ``(None, its text)`` when it is not one."""
    if value is None:
        return None, ""
    if isinstance(value, str) and value.isdigit():
        return int(value), ""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value, ""
    return None, f"{value!r:.40}"


def _dict_kind(obj: Mapping[str, Any]) -> str:
    """A dict's ``kind``, else ``"Pod"`` when its spec looks like a pod's, else ``"Node"``."""
    kind = obj.get("kind")
    if isinstance(kind, str) and kind:
        return kind
    spec = obj.get("spec")
    if isinstance(spec, Mapping) and ("containers" in spec or "nodeName" in spec):
        return "Pod"
    return "Node"
