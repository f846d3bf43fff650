"""Patch engines for the API server's ``PATCH`` verb: pure functions, no I/O.

Entry points:

* :func:`apply_patch` — dispatch on the request ``Content-Type``:
  ``application/json-patch+json`` (RFC 6902, :mod:`.json_patch`),
  ``application/merge-patch+json`` (RFC 7386, :mod:`.merge_patch`),
  ``application/strategic-merge-patch+json`` (schema-driven,
  :mod:`.strategic_merge`). A body that does not parse for its type is
  ``400 BadRequest``; any other type (including apply, which needs a field
  manager) is ``415 UnsupportedMediaType`` with upstream's message.
* :func:`server_side_apply` / :func:`record_update` — field ownership
  (``metadata.managedFields``) for ``application/apply-patch+yaml`` and for
  every other write (:mod:`.apply`); :func:`decode_apply_body` parses the apply
  body (YAML or JSON).
* :func:`create_merge_patch`, :func:`create_two_way_merge_patch` — the
  inverses, for clients and tests.

Module map: ``json_values`` (equality/copy/Go formatting) and
``patch_errors`` (Status mapping) are shared; ``schema_walk`` reads the
upstream schema; ``list_order`` orders merged strategic lists; ``field_set``,
``structured`` and ``managed_fields`` are the server-side-apply building blocks.
"""

from __future__ import annotations

from typing import Any

import orjson
import yaml  # type: ignore[import-untyped]

from k8py.api.errors import BadRequest, UnsupportedMediaType
from k8py.api.patch.apply import record_update, server_side_apply
from k8py.api.patch.json_patch import apply_json_patch
from k8py.api.patch.merge_patch import apply_merge_patch, create_merge_patch
from k8py.api.patch.strategic_diff import create_two_way_merge_patch
from k8py.api.patch.json_values import deep_copy
from k8py.api.patch.strategic_merge import apply_strategic_merge_patch

__all__ = [
    "JSON_PATCH",
    "MERGE_PATCH",
    "STRATEGIC_MERGE_PATCH",
    "APPLY_PATCH",
    "accepted_patch_types",
    "apply_patch",
    "decode_apply_body",
    "server_side_apply",
    "record_update",
    "apply_json_patch",
    "apply_merge_patch",
    "apply_strategic_merge_patch",
    "create_merge_patch",
    "create_two_way_merge_patch",
]

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


def accepted_patch_types(*, strategic: bool = True) -> list[str]:
    """Upstream's list, in its order; custom resources get no strategic merge."""
    if strategic:
        return [JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH]
    return [JSON_PATCH, MERGE_PATCH, APPLY_PATCH]


def _unsupported(strategic: bool) -> UnsupportedMediaType:
    accepted = ", ".join(accepted_patch_types(strategic=strategic))
    return UnsupportedMediaType(
        f"the body of the request was in an unknown format - accepted media types include: {accepted}"
    )


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def _go_json_error(body: bytes, error: orjson.JSONDecodeError) -> str:
    """Roughly what Go's encoding/json says about a syntax error."""
    pos = getattr(error, "pos", len(body))
    if pos >= len(body.rstrip()):
        return "unexpected end of JSON input"
    char = body[pos : pos + 1].decode("latin-1")
    return f"invalid character '{char}' looking for beginning of value"


def _go_kind(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return "object"


def apply_patch(
    content_type: str,
    original: dict[str, Any],
    patch_body: bytes,
    *,
    schema_name: str | None,
    allow_strategic: bool = True,
    owned: bool = False,
) -> dict[str, Any]:
    """Apply a non-apply ``PATCH`` body to ``original``; return the new object.

    ``schema_name`` is the definition (``io.k8s.api.core.v1.Pod``) that drives
    strategic merge; ``allow_strategic=False`` makes strategic merge a 415, as
    upstream answers for custom resources. ``owned``: ``original`` is the
    caller's private copy, which a strategic merge may then change in place
    (the caller must not use it afterwards).
    """
    media = _media_type(content_type)
    if media not in (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH) or (
        media == STRATEGIC_MERGE_PATCH and not allow_strategic
    ):
        raise _unsupported(allow_strategic)
    try:
        patch = orjson.loads(patch_body)
    except orjson.JSONDecodeError as error:
        if media == MERGE_PATCH:
            raise BadRequest("Invalid JSON Patch") from None
        raise BadRequest(_go_json_error(patch_body, error)) from None
    if media == JSON_PATCH:
        result = apply_json_patch(original, patch)
    elif media == MERGE_PATCH:
        if not isinstance(patch, dict):
            raise BadRequest("Invalid JSON Patch")
        result = apply_merge_patch(original, patch, owned=owned)
    else:
        if not isinstance(patch, dict):
            raise BadRequest(
                f"json: cannot unmarshal {_go_kind(patch)} into Go value of type map[string]interface {{}}"
            )
        # the patch was decoded just now: nobody else holds it, only the original may need a copy
        result = apply_strategic_merge_patch(original if owned else deep_copy(original), patch, schema_name,
                                             owned=True)
    if not isinstance(result, dict):
        raise BadRequest("the patch did not produce an object")
    return result


class _ApplyLoader(yaml.SafeLoader):  # type: ignore[misc]
    """Safe YAML without the timestamp type: dates stay strings, as in JSON."""


_ApplyLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def decode_apply_body(body: bytes) -> dict[str, Any]:
    """Parse an ``application/apply-patch+yaml`` body (kubectl sends JSON)."""
    try:
        value = yaml.load(body, Loader=_ApplyLoader) if body.strip() else None
    except yaml.YAMLError as error:
        raise BadRequest(f"error decoding YAML: {error}") from None
    if not isinstance(value, dict):
        raise BadRequest("error decoding YAML: the apply configuration must be an object")
    return value
