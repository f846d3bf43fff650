"""Building the store events and objects the API server's unit tests feed in."""

from __future__ import annotations

from typing import Any

import orjson

from k8py.apiserver.registry import ResourceDefinition
from k8py.storage import EventType, KeyValue, WatchEvent

__all__ = ["obj", "put", "delete"]


def obj(name: str, namespace: str = "default", *, labels: dict[str, str] | None = None, **top: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = labels
    return {"metadata": meta, **top}


def put(d: ResourceDefinition, o: dict[str, Any], rev: int, *, create_rev: int | None = None) -> WatchEvent:
    """A store PUT event of ``o`` at ``rev`` (what the cacher feeds a watch cache)."""
    meta = o["metadata"]
    key = d.key(meta.get("namespace", ""), meta["name"])
    return WatchEvent(EventType.PUT, KeyValue(key, orjson.dumps(o), create_rev or rev, rev))


def delete(d: ResourceDefinition, o: dict[str, Any], rev: int) -> WatchEvent:
    meta = o["metadata"]
    key = d.key(meta.get("namespace", ""), meta["name"])
    return WatchEvent(EventType.DELETE, KeyValue(key, orjson.dumps(o), 1, rev))
