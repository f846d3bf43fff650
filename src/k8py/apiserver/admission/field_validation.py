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

The walk that finds unknown fields first runs as a pure check
(:func:`_known_count`): per object a C-level subset test of its keys against
the declared ones and a descent into only the fields whose schema nests; only
when it finds something unknown does the full walk (paths in document order,
pruning) run. Both count the body's keys the same way.

Pure functions over the shared schema definitions; nothing is mutated.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Mapping

from k8py.api import schema as upstream
from k8py.api.errors import BadRequest, Cause, Invalid
from k8py.api.names import go_quote
from k8py.apiserver.validation.structural import unknown_fields as structural_unknown_fields

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


class _Node:
    """A schema compiled for walking: what a value at this place may hold.

    Compiled lazily and memoized per definition, so a walk is dict lookups
    (the raw schemas need ``$ref``/``allOf`` resolution at every step).
    ``props`` maps a field to a thunk of its node; ``any`` accepts anything.
    """

    __slots__ = ("props", "additional", "items", "any", "keys")

    def __init__(self) -> None:
        self.props: dict[str, Any] | None = None
        self.additional: Any = None
        self.items: Any = None
        self.any = False
        #: with ``props``: the declared keys (for the fast check's subset test)
        self.keys: frozenset[str] = frozenset()


_ANY = _Node()
_ANY.any = True
_compiled: dict[int, _Node] = {}


def _compile(node: Schema | None) -> _Node:
    if node is None:
        return _ANY
    ref = upstream.ref_name(node)
    resolved = _resolved(ref) if ref is not None else upstream.resolve(node)
    if resolved is None or resolved.get("x-kubernetes-preserve-unknown-fields"):
        return _ANY
    cached = _compiled.get(id(resolved))
    if cached is not None:
        return cached
    out = _Node()
    _compiled[id(resolved)] = out  # before recursing: schemas are recursive
    props = resolved.get("properties")
    extra = resolved.get("additionalProperties")
    items = resolved.get("items")
    if props is not None and extra is None:
        out.props = {key: functools.partial(_compile, prop) for key, prop in props.items()}
        out.keys = frozenset(props)
    elif isinstance(extra, dict):
        out.additional = functools.partial(_compile, extra)
    elif props is None and not isinstance(items, dict):
        out.any = True
    if isinstance(items, dict):
        out.items = functools.partial(_compile, items)
    return out


def _child(thunk: Any) -> _Node:
    """Resolve a thunk once and remember the node in place of it."""
    return thunk() if not isinstance(thunk, _Node) else thunk


def _walk(node: _Node, value: Any, path: str, out: list[str], prune: bool) -> int:
    """Appends unknown-field paths (and removes those fields when ``prune``);
    returns how many keys ``value`` held."""
    if isinstance(value, dict):
        count = len(value)
        props = node.props
        if props is not None:
            unknown: list[str] = []
            for key, item in value.items():
                thunk = props.get(key)
                if thunk is None:
                    out.append(f"{path}.{key}" if path else key)
                    unknown.append(key)
                    count += _count_keys(item)
                    continue
                child = thunk if isinstance(thunk, _Node) else thunk()
                if child is not thunk:
                    props[key] = child
                if isinstance(item, (dict, list)):
                    count += _walk(child, item, f"{path}.{key}" if path else key, out, prune)
            if prune:
                for key in unknown:
                    del value[key]
            return count
        if node.additional is not None:
            child = _child(node.additional)
            node.additional = child
            for key, item in value.items():
                if isinstance(item, (dict, list)):
                    count += _walk(child, item, f"{path}.{key}" if path else key, out, prune)
            return count
        return count + sum(_count_keys(v) for v in value.values())
    if isinstance(value, list):
        count = 0
        if node.items is not None:
            child = _child(node.items)
            node.items = child
            for i, item in enumerate(value):
                if isinstance(item, (dict, list)):
                    count += _walk(child, item, f"{path}[{i}]", out, prune)
            return count
        return sum(_count_keys(v) for v in value)
    return 0


def _known_count(node: _Node, value: Any) -> int:
    """What :func:`_walk` returns for ``value``, or -1 as soon as it holds an
    unknown field (then the full walk runs). Reads only."""
    if type(value) is dict:
        count = len(value)
        props = node.props
        if props is not None:
            if not value.keys() <= node.keys:
                return -1
            for key, item in value.items():
                if type(item) is dict or type(item) is list:
                    thunk = props[key]
                    child = thunk if isinstance(thunk, _Node) else thunk()
                    if child is not thunk:
                        props[key] = child
                    sub = _known_count(child, item)
                    if sub < 0:
                        return -1
                    count += sub
            return count
        if node.additional is not None:
            child = _child(node.additional)
            node.additional = child
            for item in value.values():
                if type(item) is dict or type(item) is list:
                    sub = _known_count(child, item)
                    if sub < 0:
                        return -1
                    count += sub
            return count
        return count + sum(_count_keys(v) for v in value.values())
    if type(value) is list:
        count = 0
        if node.items is not None:
            child = _child(node.items)
            node.items = child
            for item in value:
                if type(item) is dict or type(item) is list:
                    sub = _known_count(child, item)
                    if sub < 0:
                        return -1
                    count += sub
            return count
        return sum(_count_keys(v) for v in value)
    return -1 if isinstance(value, (dict, list)) else 0  # a dict or list subclass: the full walk decides


def _unknown_and_count(
    schema_name: str | None, obj: dict[str, Any], *, prune: bool = False
) -> tuple[list[str], int | None]:
    if not schema_name or _resolved(schema_name) is None:
        return [], None
    node = _compile(_resolved(schema_name))
    count = _known_count(node, obj)
    if count >= 0:
        return [], count
    out: list[str] = []
    count = _walk(node, obj, "", out, prune)
    return out, count


def unknown_fields(schema_name: str | None, obj: dict[str, Any]) -> list[str]:
    """Paths of fields ``obj`` has that the upstream schema does not declare,
    in document order. A kind without an upstream schema accepts anything."""
    return _unknown_and_count(schema_name, obj)[0]


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


def duplicate_fields(raw: bytes, parsed: Any = None, *, key_count: int | None = None) -> list[str]:
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
    if key_count is None:
        key_count = _count_keys(parsed)
    # a C-speed upper bound on the keys in the text (a string containing '":'
    # over-counts, which only costs the slow path); pretty-printed JSON may put
    # spaces before the colon
    tokens = raw.count(b'":') + raw.count(b'" :')
    if tokens <= key_count or len(_KEY_RE.findall(raw)) <= key_count:
        return []
    try:
        slow = json.loads(raw, object_pairs_hook=_hook)
    except ValueError:
        return []
    out: list[str] = []
    _collect_duplicates(slow, "", out)
    return out


def _problems(schema_name: str | None, obj: dict[str, Any], raw: bytes | None, *, prune: bool) -> list[str]:
    unknown, key_count = _unknown_and_count(schema_name, obj, prune=prune)
    problems = [f"unknown field {go_quote(p)}" for p in unknown]
    if raw:
        problems.extend(f"duplicate field {go_quote(p)}" for p in duplicate_fields(raw, obj, key_count=key_count))
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
    structural: Mapping[str, Any] | None = None,
) -> list[str]:
    """Apply a ``fieldValidation`` directive to a decoded body.

    ``structural`` is a custom resource's schema: its unknown fields (see
    :mod:`k8py.apiserver.validation.structural`) are the problems then.

    Unknown fields are removed from ``obj`` (``Warn``, ``Ignore``), as
    upstream's typed decoding drops them before anything is stored.
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
    if structural is not None:
        problems = structural_unknown_fields(obj, dict(structural), prune=mode != "Strict")
        if mode == "Ignore":
            return []
    elif mode == "Ignore":
        _unknown_and_count(schema_name, obj, prune=True)
        return []
    else:
        problems = _problems(schema_name, obj, raw, prune=mode == "Warn")
    if not problems or mode == "Warn":
        return problems
    body_kind, body_version = _kind_version(schema_name, obj)
    raise BadRequest(strict_decoding_message(kind or body_kind, version or body_version, problems))
