"""Does this ``Accept`` header ask for a Table? (The part of negotiation printing needs.)

kubectl sends ``application/json;as=Table;v=v1;g=meta.k8s.io,
application/json;as=Table;v=v1beta1;g=meta.k8s.io, application/json``.
Clauses are taken in order, as upstream's negotiator does: the first one the
server can serve wins. So a Table clause before any plain JSON clause means a
Table; a plain ``application/json`` (or ``*/*``) first means no Table;
clauses we cannot serve (protobuf, other ``as=`` kinds such as
``PartialObjectMetadataList``, unknown Table versions) are skipped.

Returns the Table version (``v1`` or ``v1beta1``) or None; never raises.
"""

from __future__ import annotations

__all__ = ["TABLE_VERSIONS", "table_version"]

TABLE_VERSIONS = ("v1", "v1beta1")
_JSON = ("application/json", "application/*", "*/*")


def _parse(clause: str) -> tuple[str, dict[str, str]]:
    media, *params = (p.strip() for p in clause.split(";"))
    parsed = {}
    for param in params:
        key, _, value = param.partition("=")
        parsed[key.strip().lower()] = value.strip().strip('"')
    return media.lower(), parsed


def table_version(accept: str | None) -> str | None:
    for clause in (accept or "").split(","):
        if not clause.strip():
            continue
        media, params = _parse(clause)
        if media not in _JSON:
            continue
        wanted = params.get("as")
        if wanted is None:
            return None
        if (
            wanted == "Table"
            and params.get("g") == "meta.k8s.io"
            and params.get("v") in TABLE_VERSIONS
        ):
            return params["v"]
    return None
