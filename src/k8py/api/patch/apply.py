"""Server-side apply and field ownership for every write.

Two entry points, both pure (the caller passes the clock reading ``now``, an
RFC 3339 string, and stores the result):

* :func:`server_side_apply` — ``PATCH`` with ``application/apply-patch+yaml``.
  The applied configuration is merged over the live object
  (:func:`~k8py.api.patch.structured.merge`); the applier's entry
  (``operation: Apply``) becomes exactly the set of fields the configuration
  sets. A field another manager owns whose value would change is a conflict:
  ``409 Conflict`` ``Apply failed with 1 conflict: conflict with "mgr":
  .spec.replicas`` (one ``FieldManagerConflict`` cause per field), unless
  ``force``, in which case the other managers lose those fields. Fields the
  applier owned last time, left out this time and owned by no one else are
  removed from the object ("prune").
* :func:`record_update` — any other write (create, update, non-apply patch).
  The writer's ``operation: Update`` entry gains every field the write added or
  changed and loses the removed ones; other managers lose them too (an update
  always wins).

Algorithm as structured-merge-diff's ``Updater.Apply``/``Update``. Documented
simplifications: pruning removes the fields the applier owned and the
containers they leave empty, but not (as upstream can) whole unowned struct
fields around them; key fields of a list item survive until the item itself is
removed; there is no "before-first-apply" manager for objects that never had
managed fields; ``ignored`` prefixes (e.g. ``("f:status",)`` for a main
resource whose status is reset) stand in for upstream's per-resource reset
fields.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from k8py.api.errors import BadRequest, Cause, Conflict
from k8py.api.patch import field_set as fs
from k8py.api.patch import schema_walk as sw
from k8py.api.patch import structured
from k8py.api.patch.json_values import deep_copy
from k8py.api.patch.managed_fields import (
    ManagerEntry,
    ManagerId,
    Managers,
    decode_managed_fields,
    encode_managed_fields,
    manager_label,
    strip,
)

__all__ = ["server_side_apply", "record_update"]


def _without_managed_fields(obj: dict[str, Any] | None) -> dict[str, Any]:
    out = deep_copy(obj) if obj else {}
    meta = out.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return out


def _with_managed_fields(obj: dict[str, Any], managers: Managers) -> dict[str, Any]:
    entries = encode_managed_fields(managers)
    meta = obj.setdefault("metadata", {})
    if entries:
        meta["managedFields"] = entries
    else:
        meta.pop("managedFields", None)
    return obj


def server_side_apply(
    live: dict[str, Any] | None,
    applied: dict[str, Any],
    *,
    manager: str,
    schema_name: str | None,
    now: str,
    force: bool = False,
    subresource: str = "",
    ignored: Iterable[fs.Path] = (),
) -> dict[str, Any]:
    """The object after ``manager`` applies ``applied`` to ``live`` (None: create)."""
    if not isinstance(applied, dict):
        raise BadRequest("error decoding YAML: apply configuration must be an object")
    if (applied.get("metadata") or {}).get("managedFields"):
        raise BadRequest("metadata.managedFields must be nil")
    ignored = tuple(ignored)
    root = sw.root_schema(schema_name)
    api_version = str(applied.get("apiVersion") or (live or {}).get("apiVersion") or "")
    managers = decode_managed_fields(((live or {}).get("metadata") or {}).get("managedFields"))
    before = _without_managed_fields(live)
    config = _without_managed_fields(applied)

    me = ManagerId(manager, "Apply", "", subresource)
    previous = managers.get(me)
    last = set(previous.fields) if previous else set()
    mine = strip(structured.to_field_set(config, root), ignored)
    managers[me] = ManagerEntry(api_version, previous.time if previous else now, mine)

    merged = structured.merge(before, config, root)
    if last:
        merged = _prune(merged, last, managers, root)

    diff = structured.compare(before, merged, root)
    changed = strip(diff.added | diff.modified, ignored)
    removed = strip(diff.removed, ignored)
    conflicts = {
        ident: entry.fields & changed
        for ident, entry in managers.items()
        if ident != me and entry.fields & changed
    }
    if conflicts and not force:
        raise _conflict_error(conflicts, managers)
    for ident, entry in managers.items():
        if ident != me:
            entry.fields -= changed | removed
    for ident in [i for i, e in managers.items() if not e.fields]:
        del managers[ident]
    if me in managers and (not diff.same() or mine != last or previous is None):
        managers[me].time = now
        managers[me].api_version = api_version
    return _with_managed_fields(merged, managers)


def _prune(
    merged: dict[str, Any], last: set[fs.Path], managers: Managers, root: sw.Schema | None
) -> dict[str, Any]:
    """Remove what the applier owned last time and nobody owns now."""
    owned = fs.with_prefixes(p for entry in managers.values() for p in entry.fields)
    removal = {p for p in last if p not in owned}
    removal = {p for p in removal if not _is_key_field(p) or p[:-1] in removal}
    if not removal:
        return merged
    merged = structured.remove_paths(merged, removal, root)
    parents = sorted({p[:i] for p in removal for i in range(1, len(p))}, key=len, reverse=True)
    for parent in parents:
        if parent in owned:
            continue
        node = _lookup(merged, parent, root)
        if node == {} or node == []:
            merged = structured.remove_paths(merged, {parent}, root)
    return merged


def _is_key_field(path: fs.Path) -> bool:
    if len(path) < 2 or not path[-2].startswith("k:") or not path[-1].startswith("f:"):
        return False
    return f'"{path[-1][2:]}":' in path[-2]


def _lookup(value: Any, path: fs.Path, root: sw.Schema | None) -> Any:
    field: sw.Schema | None = root
    for element in path:
        if isinstance(value, dict) and element.startswith("f:"):
            name = element[2:]
            if name not in value:
                return None
            value, field = value[name], sw.field_schema(field, name)
        elif isinstance(value, list):
            shape = sw.shape_of(field)
            items = sw.items_schema(field)
            match = [
                v for i, v in enumerate(value) if structured.item_element(shape, v, i) == element
            ]
            if not match:
                return None
            value, field = match[0], items
        else:
            return None
    return value


def _conflict_error(conflicts: dict[ManagerId, set[fs.Path]], managers: Managers) -> Conflict:
    pairs: list[tuple[str, str]] = []
    for ident, paths in conflicts.items():
        label = manager_label(ident, managers[ident].api_version)
        pairs.extend((label, fs.path_string(p)) for p in fs.sorted_paths(paths))
    pairs.sort(key=lambda pair: pair[0])
    causes = [Cause("FieldManagerConflict", f"conflict with {m}", field=p) for m, p in pairs]
    if len(pairs) == 1:
        message = f"Apply failed with 1 conflict: conflict with {pairs[0][0]}: {pairs[0][1]}"
    else:
        lines: list[str] = []
        for label in sorted({m for m, _ in pairs}):
            lines.append(f"conflicts with {label}:")
            lines.extend(f"- {p}" for m, p in pairs if m == label)
        message = f"Apply failed with {len(pairs)} conflicts: " + "\n".join(lines)
    return Conflict(message, causes=causes)


def record_update(
    old: dict[str, Any] | None,
    new: dict[str, Any],
    *,
    manager: str,
    schema_name: str | None,
    now: str,
    subresource: str = "",
    ignored: Iterable[fs.Path] = (),
) -> dict[str, Any]:
    """``new`` with managedFields recording that ``manager`` wrote it over ``old``."""
    ignored = tuple(ignored)
    root = sw.root_schema(schema_name)
    api_version = str(new.get("apiVersion") or (old or {}).get("apiVersion") or "")
    requested = (new.get("metadata") or {}).get("managedFields")
    if requested == [{}]:
        managers: Managers = {}
    else:
        managers = decode_managed_fields(requested)
        if not managers:
            managers = decode_managed_fields(((old or {}).get("metadata") or {}).get("managedFields"))
    before = _without_managed_fields(old)
    after = _without_managed_fields(new)
    diff = structured.compare(before, after, root)
    changed = strip(diff.added | diff.modified, ignored)
    removed = strip(diff.removed, ignored)
    me = ManagerId(manager, "Update", api_version, subresource)
    for ident, entry in managers.items():
        if ident != me:
            entry.fields -= changed | removed
    previous = managers.get(me)
    if previous is None:
        previous = managers[me] = ManagerEntry(api_version, now, set())
    updated = (previous.fields - removed) | changed
    if updated != previous.fields or changed or removed:
        previous.time = now
    previous.fields = updated
    for ident in [i for i, e in managers.items() if not e.fields]:
        del managers[ident]
    return _with_managed_fields(after, managers)
