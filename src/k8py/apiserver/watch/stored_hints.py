"""What the write path already knows of a value, handed to the watch cache.

Every stored event is turned into a :class:`~k8py.apiserver.watch.cached_object.CachedObject`:
its JSON with the resourceVersion stamped, its labels and selectable fields.
From the bytes alone that is a full decode and a full encode (``orjson.loads``
builds the whole object as dicts only to read a few fields and to add one).
The API server's own writes have just encoded that object from a dict, so
the object store *notes* each value it is about to write
(:meth:`StoredHints.note`, called by ``ObjectStore`` right after encoding,
with no await in between): the labels, the fields, and where in the bytes
``metadata`` ends. When the store's event for that value arrives, the cache
*takes* the note (:meth:`StoredHints.take`) and builds the cached object by
splicing ``"resourceVersion":"<rv>"`` into the bytes: no decode, no encode.

Invariants:

- a note is used only for the very bytes object it was made for (identity,
  not equality): the SQLite store hands its watch the value it was given, so
  a write's event finds its note; any other source (etcd, a replay, an
  encrypted store's decrypted copy) does not and is decoded as before;
- the result is byte for byte what :func:`~k8py.apiserver.watch.cached_object.build_cached_object`
  gives (tests pin it): the stored form is orjson's compact encoding without
  ``metadata.resourceVersion``, and decoding then re-encoding it with the RV
  appended to metadata writes exactly the same bytes with the RV inserted
  before metadata's closing brace; a value whose layout is not that (no
  ``kind``/``apiVersion``/``metadata`` first, a converted view) gets no note;
- a note is only a shortcut, used up by the key's next event whatever it
  is: notes are held only for writes whose events are still to come, or
  that failed (replaced by the key's next write, and all dropped past
  ``limit``), so memory stays bounded; the server notes values only on a
  store whose events carry the written bytes objects
  (``events_carry_written_values``), where notes are almost always used;
- notes are made and taken on the event loop, never across an await.
"""

from __future__ import annotations

import sys
from typing import Any, Mapping

import orjson

from k8py.apiserver.registry import ResourceDefinition
from k8py.apiserver.watch.cached_object import NO_LABELS, CachedObject, interned_labels, read_fields
from k8py.storage import EventType, WatchEvent

__all__ = ["StoredHints"]

_RV_KEY_LEN = len(b'"resourceVersion":')
#: the bytes a stored value of (kind, apiVersion) starts with, up to its metadata
_heads: dict[tuple[str, str], bytes] = {}


class _Note:
    __slots__ = ("value", "getters", "namespace", "name", "labels", "fields", "end", "sep")

    def __init__(self, value: bytes, getters: Mapping[str, Any], namespace: str, name: str,
                 labels: dict[str, str], fields: dict[str, str], end: int, sep: bytes) -> None:
        self.value = value
        self.getters = getters
        self.namespace = namespace
        self.name = name
        self.labels = labels
        self.fields = fields
        self.end = end  # index of the "}" that closes metadata
        self.sep = sep  # what goes before the RV key ("," unless metadata is empty)


def _metadata_end(value: bytes, obj: dict[str, Any], meta: dict[str, Any]) -> int:
    """The index in ``value`` (``orjson.dumps`` of ``obj`` without its
    resourceVersion) of the brace that closes metadata; -1 when ``value`` is
    not laid out so (then no note)."""
    keys = iter(obj)
    if next(keys, None) != "kind" or next(keys, None) != "apiVersion" or next(keys, None) != "metadata":
        return -1
    kind, api_version = obj["kind"], obj["apiVersion"]
    head = _heads.get((kind, api_version)) if type(kind) is str and type(api_version) is str else None
    if head is None:
        if type(kind) is not str or type(api_version) is not str:
            return -1
        head = b'{"kind":%b,"apiVersion":%b,"metadata":' % (orjson.dumps(kind), orjson.dumps(api_version))
        if len(_heads) < 1024:  # one per served kind and version
            _heads[(kind, api_version)] = head
    if not value.startswith(head):
        return -1
    # metadata's length in value: its encoding now, less the resourceVersion
    # the stored form leaves out (restored in the dict after the encoding)
    length = len(orjson.dumps(meta))
    if "resourceVersion" in meta:
        length -= _RV_KEY_LEN + len(orjson.dumps(meta["resourceVersion"])) + (1 if len(meta) > 1 else 0)
    end = len(head) + length - 1
    last = next(keys, None) is None
    if end >= len(value) or value[end] != 0x7D:  # "}"
        return -1
    if last:
        return end if end == len(value) - 2 else -1
    return end if value[end + 1] == 0x2C else -1  # ","


class StoredHints:
    """Notes of values being written, by key (see the module docstring)."""

    def __init__(self, *, limit: int = 2_000) -> None:
        self._notes: dict[str, _Note] = {}
        self.limit = limit
        #: events built from a note / decoded because none matched (for tests and benches)
        self.used = 0
        self.missed = 0

    def note(self, definition: ResourceDefinition, key: str, value: bytes, obj: dict[str, Any]) -> None:
        """Called with the bytes about to be stored for ``key`` and the dict
        they were encoded from, before anything can change it."""
        if definition.converter is not None:
            return  # stored in another kind's form: the dict is not what the bytes hold
        meta = obj.get("metadata")
        if type(meta) is not dict:
            return
        end = _metadata_end(value, obj, meta)
        if end < 0:
            return
        if len(self._notes) >= self.limit:
            self._notes.clear()  # writes that never produced their event (failed): start afresh
        labels = meta.get("labels")
        namespace = meta.get("namespace", "") if definition.namespaced else ""
        name = meta.get("name", "")
        if type(namespace) is not str or type(name) is not str:
            return
        namespace = sys.intern(namespace)
        getters = definition.field_getters
        self._notes[key] = _Note(
            value, getters, namespace, name,
            interned_labels(labels) if labels else NO_LABELS,
            read_fields(getters, obj) if getters else {},
            end, b"," if len(meta) > ("resourceVersion" in meta) else b"",
        )

    def take(self, definition: ResourceDefinition, event: WatchEvent) -> CachedObject | None:
        """The cached object for ``event`` built from its note, or None (decode
        it). The key's note is used up either way."""
        notes = self._notes
        if not notes:
            return None
        kv = event.kv
        note = notes.pop(kv.key, None)
        if note is None:
            return None
        if note.value is not kv.value or event.type is not EventType.PUT or note.getters is not definition.field_getters:
            # not this event's value (an earlier write's event, a value the store
            # transformed): decoded; a later write of the key just misses its note
            self.missed += 1
            return None
        self.used += 1
        value, end = note.value, note.end
        rv = kv.mod_revision
        data = b'%b%b"resourceVersion":"%d"%b' % (value[:end], note.sep, rv, value[end:])
        return CachedObject(key=kv.key, namespace=note.namespace, name=note.name, rv=rv, data=data,
                            labels=note.labels, fields=note.fields)
