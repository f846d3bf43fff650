"""``fieldValidation=Strict|Warn|Ignore``: unknown and duplicate fields in a body.

Why: ``kubectl create/apply`` send ``fieldValidation=Strict`` and rely on the
server to reject typos (``Error from server (BadRequest): ... strict decoding
error: unknown field "spec.containers[0].bogusField"``); ``--validate=warn``
expects each problem back as a ``Warning`` header. Upstream's strict JSON
decoder reports two kinds of problems, and so do we:

* unknown fields: keys the upstream schema of the kind does not declare, with
  Go decoder paths (``spec.containers[0].bogusField``). Objects whose schema
  declares no properties (maps via ``additionalProperties``, ``RawExtension``,
  ``FieldsV1``, ``x-kubernetes-preserve-unknown-fields``) accept anything;
* duplicate fields: orjson keeps the last of duplicate keys silently, so the
  raw bytes are re-read with ``json.loads(object_pairs_hook=...)`` — but only
  when a C-speed count of ``"key":`` tokens exceeds the number of keys the
  parsed object holds. The common request (no duplicates) pays one regex scan
  and one dict walk. (A key ending in a backslash is not counted; duplicates
  of such keys can be missed.)

Pure functions over the shared schema definitions; nothing is mutated.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from k8py.api import schema as upstream
from k8py.api.errors import BadRequest, Cause, Invalid
from k8py.api.names import go_quote

__all__ = [
    "MODES",
    "unknown_fields",
    "duplicate_fields",
    "strict_decoding_message",
    "check_field_validation",
]

MODES = ("Ignore", "Strict", "Warn")

Schema = dict[str, Any]

_KEY_RE = re.compile(rb'(?<!\\)"\s*:')
_OPTIONS_KIND = {"create": "CreateOptions", "update": "UpdateOptions", "patch": "PatchOptions"}


@functools.lru_cache(maxsize=2048)
def _resolved(name: str) -> Schema | None:
    return upstream.resolve({"$ref": f"#/$defs/{name}"})


def _resolve(node: Schema) -> Schema | None:
    ref = upstream.ref_name(node)
    if ref is not None:
        return _resolved(ref)
    return upstream.resolve(node)


def _walk(node: Schema | None, value: Any, path: str, out: list[str]) -> None:
    if node is None:
        return
    node = _resolve(node)
    if node is None or node.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict):
        props = node.get("properties")
        if props is not None and node.get("additionalProperties") is None:
            for key, item in value.items():
                child = f"{path}.{key}" if path else key
                prop = props.get(key)
                if prop is None:
                    out.append(child)
                else:
                    _walk(prop, item, child, out)
            return
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            for key, item in value.items():
                _walk(extra, item, f"{path}.{key}" if path else key, out)
    elif isinstance(value, list):
        items = node.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                _walk(items, item, f"{path}[{i}]", out)


def unknown_fields(schema_name: str | None, obj: dict[str, Any]) -> list[str]:
    """Paths of fields ``obj`` has that the upstream schema does not declare,
    in document order. A kind without an upstream schema accepts anything."""
    if not schema_name:
        return []
    root = _resolved(schema_name)
    if root is None:
        return []
    out: list[str] = []
    _walk(root, obj, "", out)
    return out


def _count_keys(value: Any) -> int:
    if isinstance(value, dict):
        return len(value) + sum(_count_keys(v) for v in value.values())
    if isinstance(value, list):
        return sum(_count_keys(v) for v in value)
    return 0


class _Pairs(dict):  # type: ignore[type-arg]
    """A decoded JSON object that remembers which of its keys repeated."""

    __slots__ = ("duplicates",)
    duplicates: list[str]


def _hook(pairs: list[tuple[str, Any]]) -> _Pairs:
    out = _Pairs()
    out.duplicates = []
    for key, value in pairs:
        if key in out and key not in out.duplicates:
            out.duplicates.append(key)
        out[key] = value
    return out


def _collect_duplicates(value: Any, path: str, out: list[str]) -> None:
    if isinstance(value, _Pairs):
        out.extend(f"{path}.{k}" if path else k for k in value.duplicates)
        for key, item in value.items():
            _collect_duplicates(item, f"{path}.{key}" if path else key, out)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _collect_duplicates(item, f"{path}[{i}]", out)


def duplicate_fields(raw: bytes, parsed: Any = None) -> list[str]:
    """Paths of keys that appear more than once in one JSON object of ``raw``.

    ``parsed`` is the already-decoded body (saves a decode on the fast path).
    Non-JSON bodies (YAML) and undecodable ones report nothing.
    """
    if not raw or raw.lstrip()[:1] not in (b"{", b"["):
        return []
    if parsed is None:
        try:
            parsed = json.loads(raw)
        except ValueError:
            return []
    if len(_KEY_RE.findall(raw)) <= _count_keys(parsed):
        return []
    try:
        slow = json.loads(raw, object_pairs_hook=_hook)
    except ValueError:
        return []
    out: list[str] = []
    _collect_duplicates(slow, "", out)
    return out


def _problems(schema_name: str | None, obj: dict[str, Any], raw: bytes | None) -> list[str]:
    problems = [f"unknown field {go_quote(p)}" for p in unknown_fields(schema_name, obj)]
    if raw:
        problems.extend(f"duplicate field {go_quote(p)}" for p in duplicate_fields(raw, obj))
    return problems


def strict_decoding_message(kind: str, version: str, problems: list[str]) -> str:
    """Upstream ``transformDecodeError`` around a ``strictDecodingError``."""
    return (
        f"{kind} in version {go_quote(version)} cannot be handled as a {kind}: "
        f"strict decoding error: {', '.join(problems)}"
    )


def _kind_version(schema_name: str | None, obj: dict[str, Any]) -> tuple[str, str]:
    kind = str(obj.get("kind") or "")
    api_version = str(obj.get("apiVersion") or "")
    version = api_version.rsplit("/", 1)[-1] if api_version else ""
    if (not kind or not version) and schema_name:
        definition = upstream.definition(schema_name) or {}
        for gvk in definition.get("x-kubernetes-group-version-kind") or ():
            kind, version = kind or str(gvk["kind"]), version or str(gvk["version"])
            break
    return kind, version


def check_field_validation(
    mode: str,
    schema_name: str | None,
    obj: dict[str, Any],
    raw: bytes | None = None,
    *,
    verb: str = "create",
    kind: str = "",
    version: str = "",
) -> list[str]:
    """Apply a ``fieldValidation`` directive to a decoded body.

    Returns the warnings to send (``Warn``; also the default when ``mode`` is
    empty, as upstream), nothing for ``Ignore``; raises :class:`BadRequest`
    with upstream's strict-decoding message for ``Strict`` when there is any
    problem, and :class:`Invalid` (422, as upstream validates
    ``CreateOptions``/``UpdateOptions``/``PatchOptions``) for an unknown mode.
    ``kind``/``version`` default to the body's, then the schema's.
    """
    mode = mode or "Warn"
    if mode not in MODES:
        options = _OPTIONS_KIND.get(verb, "CreateOptions")
        supported = ", ".join(go_quote(m) for m in ("", *MODES))
        cause = Cause(
            "FieldValueNotSupported",
            f"Unsupported value: {go_quote(mode)}: supported values: {supported}",
            "fieldValidation",
        )
        raise Invalid.for_object(options, "", [cause], group="meta.k8s.io")
    if mode == "Ignore":
        return []
    problems = _problems(schema_name, obj, raw)
    if not problems or mode == "Warn":
        return problems
    body_kind, body_version = _kind_version(schema_name, obj)
    raise BadRequest(strict_decoding_message(kind or body_kind, version or body_version, problems))
