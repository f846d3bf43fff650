"""Parsing a request path into what it addresses (upstream RequestInfoFactory).

Resource paths::

    /api/v1/<plural>[/<name>[/<subresource>]]
    /api/v1/namespaces/<ns>/<plural>[/<name>[/<subresource>]]
    /apis/<group>/<version>/...            (the same shapes)
    /api/v1/watch/...                      (the legacy watch prefix)

``/api/v1/namespaces/<name>`` and ``/api/v1/namespaces/<name>/status`` address
the namespace itself.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ResourcePath", "parse_resource_path", "query_bool"]

_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})


def query_bool(value: object) -> bool:
    """A boolean query parameter as Go's ``strconv.ParseBool`` reads it
    (clients send ``true``, ``True`` or ``1``)."""
    if isinstance(value, bool):
        return value
    return value in _TRUE


@dataclass(frozen=True, slots=True)
class ResourcePath:
    group: str
    version: str
    plural: str
    namespace: str = ""
    name: str = ""
    subresource: str = ""
    legacy_watch: bool = False


def parse_resource_path(path: str) -> ResourcePath | None:
    """None when the path is not a resource path (discovery and the like)."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 3 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 4 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    legacy_watch = False
    if rest and rest[0] == "watch":
        legacy_watch = True
        rest = rest[1:]
        if not rest:
            return None
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3 and not (len(rest) == 3 and rest[2] in ("status", "finalize")):
        namespace = rest[1]
        rest = rest[2:]
    plural = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = "/".join(rest[2:]) if len(rest) > 2 else ""
    return ResourcePath(group, version, plural, namespace, name, subresource, legacy_watch)
