"""RFC 7386 JSON Merge Patch: apply, and create from two documents.

Semantics (RFC 7386, as evanphx/json-patch's ``MergePatch`` implements them):
objects merge key by key, ``null`` deletes a key, anything else (arrays,
scalars) replaces the target value wholesale. A patch that is not an object
replaces the whole document.

:func:`create_merge_patch` is the inverse: ``apply_merge_patch(a,
create_merge_patch(a, b)) == b`` for all objects ``a``, ``b`` whose object
members are never ``null`` (a merge patch cannot express "set to null").
Nothing here mutates its arguments, except a target its caller gives up (``owned``).
"""

from __future__ import annotations

from typing import Any

from k8py.api.patch.json_values import deep_copy, json_equal

__all__ = ["apply_merge_patch", "create_merge_patch"]


def apply_merge_patch(target: Any, patch: Any, *, owned: bool = False) -> Any:
    """Return ``target`` with ``patch`` merged in (RFC 7386 MergePatch). With ``owned``
    the caller gives ``target`` up (its own decoded copy): it is merged in place, not
    copied first (a pod's status patch copied the whole pod, a seventh of the patch)."""
    if not isinstance(patch, dict):
        return _prune_nulls(patch)
    result = (target if owned else deep_copy(target)) if isinstance(target, dict) else {}
    _merge_into(result, patch)
    return result


def _merge_into(result: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict) and isinstance(result.get(key), dict):
            _merge_into(result[key], value)
        else:
            result[key] = _prune_nulls(value)


def _prune_nulls(value: Any) -> Any:
    """A value new to the target: nulls inside objects mean nothing, drop them."""
    if isinstance(value, dict):
        return {k: _prune_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_prune_nulls(v) for v in value]
    return value


def create_merge_patch(original: Any, modified: Any) -> Any:
    """The merge patch that turns ``original`` into ``modified``."""
    if not isinstance(original, dict) or not isinstance(modified, dict):
        return deep_copy(modified)
    patch: dict[str, Any] = {}
    for key in original:
        if key not in modified:
            patch[key] = None
    for key, new in modified.items():
        if key not in original:
            patch[key] = deep_copy(new)
            continue
        old = original[key]
        if isinstance(old, dict) and isinstance(new, dict):
            sub = create_merge_patch(old, new)
            if sub:
                patch[key] = sub
        elif not json_equal(old, new):
            patch[key] = deep_copy(new)
    return patch
