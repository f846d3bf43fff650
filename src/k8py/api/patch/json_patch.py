"""RFC 6902 JSON Patch with the semantics of evanphx/json-patch v4.

The apiserver applies ``application/json-patch+json`` bodies with
``gopkg.in/evanphx/json-patch.v4``; we follow that library, quirks included,
because clients were written against it:

* ``replace`` of a missing *object member* behaves like ``add`` (v4's object
  ``get`` never fails); ``replace`` of a missing array index, or any operation
  whose parent path is missing, fails with the library's message, e.g.
  ``replace operation does not apply: doc is missing path: /spec/x: missing value``;
* ``test`` treats a missing member and ``null`` as equal, and fails with
  ``testing value /metadata/name failed: test failed``;
* negative array indices count from the end (``SupportNegativeIndices``);
* ``-`` appends on ``add`` (and on the destination of ``move``/``copy``).

Errors: a body that is not a list of operations is ``400 BadRequest`` (decode
time, as upstream); an operation that does not apply is ``422 Invalid`` with the
library message as its cause (see :mod:`k8py.api.patch.patch_errors`); more
than 10,000 operations is ``413`` as upstream's ``maxJSONPatchOperations``.

The input document is never mutated: the patch is applied to a deep copy.
"""

from __future__ import annotations

from typing import Any

from k8py.api.errors import RequestEntityTooLarge
from k8py.api.patch.json_values import json_kind, deep_copy, json_equal
from k8py.api.patch.patch_errors import bad_request, unprocessable

__all__ = ["MAX_OPERATIONS", "JsonPatchFailure", "decode_json_patch", "apply_json_patch"]

#: upstream ``maxJSONPatchOperations``
MAX_OPERATIONS = 10000

_MISSING = object()


class JsonPatchFailure(Exception):
    """An operation did not apply; the message is evanphx/json-patch's."""


def decode_json_patch(patch: Any) -> list[dict[str, Any]]:
    """Check the decoded body is a list of operation objects (400 otherwise)."""
    if not isinstance(patch, list):
        kind = "object" if isinstance(patch, dict) else _json_type_name(patch)
        raise bad_request(f"json: cannot unmarshal {kind} into Go value of type jsonpatch.Patch")
    for op in patch:
        if not isinstance(op, dict):
            raise bad_request(
                f"json: cannot unmarshal {_json_type_name(op)} into Go value of type jsonpatch.Operation"
            )
    if len(patch) > MAX_OPERATIONS:
        raise RequestEntityTooLarge(
            f"The allowed maximum operations in a JSON patch is {MAX_OPERATIONS}, got {len(patch)}"
        )
    return patch


def apply_json_patch(document: Any, patch: Any) -> Any:
    """Apply ``patch`` (decoded JSON) to a copy of ``document``; raise Status errors."""
    ops = decode_json_patch(patch)
    doc = deep_copy(document)
    try:
        for op in ops:
            doc = _apply_one(doc, op)
    except JsonPatchFailure as failure:
        raise unprocessable(str(failure)) from None
    return doc


_GO_JSON_NAMES = {"list": "array", "map": "object"}


def _json_type_name(value: Any) -> str:
    """The JSON type name Go's decoder uses in its errors (array, object, ...)."""
    kind = json_kind(value)
    return _GO_JSON_NAMES.get(kind, kind)


def _decode_key(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _string_field(op: dict[str, Any], name: str, missing: str) -> str:
    value = op.get(name)
    if value is None:
        raise JsonPatchFailure(missing)
    if not isinstance(value, str):
        raise JsonPatchFailure(
            f"json: cannot unmarshal {_json_type_name(value)} into Go value of type string"
        )
    return value


def _find_container(doc: Any, path: str) -> tuple[Any, str] | None:
    """The container holding the last token of ``path``, and that token."""
    parts = path.split("/")
    if len(parts) < 2:
        return None
    node = doc
    for raw in parts[1:-1]:
        key = _decode_key(raw)
        if isinstance(node, dict):
            node = node.get(key, _MISSING)
        elif isinstance(node, list):
            index = _parse_index(key)
            if index is None or index >= len(node) or index < -len(node):
                return None
            node = node[index]
        else:
            return None
        if not isinstance(node, (dict, list)):
            return None
    return node, _decode_key(parts[-1])


def _parse_index(key: str) -> int | None:
    try:
        return int(key, 10) if key.strip() == key and key else None
    except ValueError:
        return None


def _index_error(key: str, reason: str) -> JsonPatchFailure:
    return JsonPatchFailure(f"{reason}: {key}: invalid index referenced")


def _get(container: Any, key: str) -> Any:
    """Value at ``key``; ``_MISSING`` for an absent object member (v4 quirk)."""
    if isinstance(container, dict):
        return container.get(key, _MISSING)
    index = _parse_index(key)
    if index is None:
        raise JsonPatchFailure(f'strconv.Atoi: parsing "{key}": invalid syntax')
    if index >= len(container) or index < -len(container):
        raise JsonPatchFailure(f"Unable to access invalid index: {index}: invalid index referenced")
    return container[index]


def _add(container: Any, key: str, value: Any, path: str) -> None:
    if isinstance(container, dict):
        container[key] = value
        return
    if key == "-":
        container.append(value)
        return
    index = _parse_index(key)
    if index is None:
        raise JsonPatchFailure(
            f"error in add for path: '{path}': value was not a proper array index: '{key}': "
            f'strconv.Atoi: parsing "{key}": invalid syntax'
        )
    size = len(container) + 1
    if index >= size or index < -size:
        raise JsonPatchFailure(
            f"error in add for path: '{path}': Unable to access invalid index: {index}: "
            "invalid index referenced"
        )
    if index < 0:
        index += size
    container.insert(index, value)


def _remove(container: Any, key: str) -> Any:
    if isinstance(container, dict):
        if key not in container:
            raise JsonPatchFailure(f"Unable to remove nonexistent key: {key}: missing value")
        return container.pop(key)
    index = _parse_index(key)
    if index is None:
        raise JsonPatchFailure(f'strconv.Atoi: parsing "{key}": invalid syntax')
    if index >= len(container) or index < -len(container):
        raise JsonPatchFailure(f"Unable to access invalid index: {index}: invalid index referenced")
    return container.pop(index)


def _apply_one(doc: Any, op: dict[str, Any]) -> Any:
    kind = op.get("op")
    if kind == "add":
        path = _string_field(op, "path", "add operation failed to decode path: missing value")
        found = _find_container(doc, path)
        if found is None:
            raise JsonPatchFailure(
                f'add operation does not apply: doc is missing path: "{path}": missing value'
            )
        _add(found[0], found[1], deep_copy(op.get("value")), path)
    elif kind == "remove":
        path = _string_field(op, "path", "remove operation failed to decode path: missing value")
        found = _find_container(doc, path)
        if found is None:
            raise JsonPatchFailure(
                f'remove operation does not apply: doc is missing path: "{path}": missing value'
            )
        try:
            _remove(*found)
        except JsonPatchFailure as e:
            raise JsonPatchFailure(f"error in remove for path: '{path}': {e}") from None
    elif kind == "replace":
        path = _string_field(op, "path", "replace operation failed to decode path: missing value")
        found = _find_container(doc, path)
        if found is None:
            raise JsonPatchFailure(
                f"replace operation does not apply: doc is missing path: {path}: missing value"
            )
        container, key = found
        try:
            _get(container, key)
        except JsonPatchFailure:
            raise JsonPatchFailure(
                f"replace operation does not apply: doc is missing key: {path}: missing value"
            ) from None
        value = deep_copy(op.get("value"))
        if isinstance(container, dict):
            container[key] = value
        else:
            container[int(key)] = value
    elif kind in ("move", "copy"):
        doc = _move_or_copy(doc, op, kind)
    elif kind == "test":
        _test(doc, op)
    else:
        raise JsonPatchFailure(f"Unexpected kind: {kind if isinstance(kind, str) else 'unknown'}")
    return doc


def _move_or_copy(doc: Any, op: dict[str, Any], kind: str) -> Any:
    source = _string_field(op, "from", f"{kind} operation failed to decode from: missing value")
    found = _find_container(doc, source)
    if found is None:
        raise JsonPatchFailure(
            f"{kind} operation does not apply: doc is missing from path: {source}: missing value"
        )
    container, key = found
    try:
        value = _get(container, key)
    except JsonPatchFailure as e:
        raise JsonPatchFailure(f"error in {kind} for path: '{key}': {e}") from None
    if value is _MISSING:
        value = None
    if kind == "move":
        try:
            _remove(container, key)
        except JsonPatchFailure as e:
            raise JsonPatchFailure(f"error in move for path: '{key}': {e}") from None
    else:
        value = deep_copy(value)
    path = _string_field(op, "path", f"{kind} operation failed to decode path: missing value")
    target = _find_container(doc, path)
    if target is None:
        raise JsonPatchFailure(
            f"{kind} operation does not apply: doc is missing destination path: {path}: missing value"
        )
    _add(target[0], target[1], value, path)
    return doc


def _test(doc: Any, op: dict[str, Any]) -> None:
    path = _string_field(op, "path", "test operation failed to decode path: missing value")
    if path == "":
        if not json_equal(doc, op.get("value")):
            raise JsonPatchFailure(f"testing value {path} failed: test failed")
        return
    found = _find_container(doc, path)
    if found is None:
        raise JsonPatchFailure(f"test operation does not apply: is missing path: {path}: missing value")
    try:
        actual = _get(*found)
    except JsonPatchFailure as e:
        raise JsonPatchFailure(f"error in test for path: '{path}': {e}") from None
    expected = op.get("value")
    if actual is _MISSING or actual is None:
        if expected is None:
            return
        raise JsonPatchFailure(f"testing value {path} failed: test failed")
    if not json_equal(actual, expected):
        raise JsonPatchFailure(f"testing value {path} failed: test failed")
