"""Reading an object's ``metadata`` the one way every controller does.

Controllers read objects from informer caches as plain mappings; a missing or
null ``metadata`` reads as empty, never as an error (a tombstone or a partial
object must not crash a sync). Shared here so that the rule is written once.

Invariant: the mapping returned is the object's own (not a copy): callers read
it and never change it, as with everything that comes from a cache.
"""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["meta"]


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``obj["metadata"]``, or an empty mapping when it is missing or null."""
    return obj.get("metadata") or {}
