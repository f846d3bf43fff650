"""Cache keys for JSON-shaped objects, and the deletion tombstone.

Every local cache (the indexer, the DeltaFIFO, work queues of controllers) is
keyed by one string per object, as client-go's ``MetaNamespaceKeyFunc``:
``"<namespace>/<name>"`` for namespaced objects and ``"<name>"`` for
cluster-scoped ones. :func:`split_key` is the inverse.

:class:`DeletedFinalStateUnknown` is what a cache hands out when it learns of a
deletion without seeing it: a re-list no longer contains an object the cache
knew. Its ``obj`` is the last state the cache saw, which may be stale (or
``None`` when none is known). Every delete handler must accept either an object
or a tombstone; :func:`object_key` understands both, so a tombstone keys to the
key of the object it stands for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, TypeAlias

__all__ = [
    "Obj",
    "KeyFunc",
    "KeyFuncError",
    "ObjectsRejected",
    "DeletedFinalStateUnknown",
    "object_key",
    "split_key",
    "namespace_of",
    "name_of",
]

Obj: TypeAlias = Mapping[str, Any]
"""A Kubernetes object as a JSON-shaped dict."""

KeyFunc: TypeAlias = Callable[[Any], str]
"""Maps an object (or a tombstone) to its cache key."""


class KeyFuncError(ValueError):
    """An object has no key: it is not a mapping or has no ``metadata.name``."""


class ObjectsRejected(Exception):
    """A store's ``replace`` applied every object it could and refused these.

    Raised *after* the rest of the list is in place, so one object without a
    key, or one that a user transform or index function fails on, does not
    keep a whole list out of the cache (or an informer from ever syncing).
    ``errors`` pairs each refused object with what it raised.
    """

    def __init__(self, errors: list[tuple[Any, Exception]]) -> None:
        super().__init__(f"{len(errors)} object(s) refused: {errors[0][1]!r}" if errors else "no object refused")
        self.errors = errors


@dataclass(frozen=True, slots=True)
class DeletedFinalStateUnknown:
    """Tombstone for an object deleted while we were not watching.

    ``obj`` is the last known state (possibly stale), or ``None``. Treat it as
    read-only like every other cached object.
    """

    key: str
    obj: Any


def namespace_of(obj: Obj) -> str:
    """``metadata.namespace``, or ``""`` for cluster-scoped objects."""
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or ""


def name_of(obj: Obj) -> str:
    """``metadata.name`` (``""`` if missing)."""
    meta = obj.get("metadata") or {}
    return meta.get("name") or ""


def object_key(obj: Any) -> str:
    """``namespace/name`` or ``name``; a tombstone yields the key it carries.

    A plain ``str`` is taken to be a key already (client-go's ``ExplicitKey``).
    Raises :class:`KeyFuncError` for anything without ``metadata.name``.
    """
    if type(obj) is dict:  # the hot path: a decoded JSON object (avoids ABC isinstance checks)
        meta = obj.get("metadata")
        if type(meta) is dict:
            name = meta.get("name")
            if name:
                namespace = meta.get("namespace")
                return f"{namespace}/{name}" if namespace else name
    if isinstance(obj, DeletedFinalStateUnknown):
        return obj.key
    if isinstance(obj, str):
        return obj
    if not isinstance(obj, Mapping):
        raise KeyFuncError(f"cannot compute a key for a {type(obj).__name__}")
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not name:
        raise KeyFuncError("object has no metadata.name")
    namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
    return f"{namespace}/{name}" if namespace else name


def split_key(key: str) -> tuple[str, str]:
    """Inverse of :func:`object_key`: ``(namespace, name)``, namespace ``""``
    for a cluster-scoped key. Raises :class:`ValueError` for a malformed key."""
    parts = key.split("/")
    if len(parts) == 1 and parts[0]:
        return "", parts[0]
    if len(parts) == 2 and parts[0] and parts[1]:
        return parts[0], parts[1]
    raise ValueError(f"unexpected key format: {key!r}")
