"""CEL types derived from an OpenAPI v3 schema, for type-checking rules.

Upstream (``k8s.io/apiserver/pkg/cel/common/schemas.go``, ``SchemaDeclType``)
type-checks a CRD's ``x-kubernetes-validations`` against types built from
the schema, so ``self.replicas > 'a'`` (int against string) or a field the
schema does not declare is refused when the CRD is written. cel-cpp
type-checks field selections only on protobuf messages, so each object node
of the schema becomes a message in a descriptor pool built here (proto2: no
JSON-name clashes between ``foo_bar`` and ``fooBar``):

=========================================  =====================================
schema                                     CEL type
=========================================  =====================================
``x-kubernetes-int-or-string``             ``dyn`` (``google.protobuf.Value``)
``integer`` / ``number`` / ``boolean``     ``int`` / ``double`` / ``bool``
``string`` (format ``byte``)               ``string`` (``bytes``)
``string`` (``duration``, ``date[-time]``) ``duration``, ``timestamp``
``array`` with ``items``                   ``list(<items>)``
``object`` with ``additionalProperties``   ``map(string, <value>)``
``object``                                 a message with one field per
                                           property (escaped names; unknown
                                           fields are not exposed, even with
                                           ``x-kubernetes-preserve-unknown-fields``)
=========================================  =====================================

At a resource root and in an ``x-kubernetes-embedded-resource``,
``apiVersion``, ``kind`` and ``metadata`` (``name``, ``generateName`` only)
are declared, as upstream's ``WithTypeAndObjectMeta``. A schema node with no
type upstream can use (an array without items, no ``type``) leaves its
property out, as upstream does.

Where protobuf cannot say what CEL can (a list of lists, a map of lists), the
inner type is ``dyn`` (``ListValue``/``Struct``/``Value``): those rules are
checked less strictly than upstream, never more.

These types are for *checking* only: rules evaluate on the JSON values
through a ``dyn`` program (:mod:`.program`). Object type names are
``selfType<n>`` and ``selfType<n>.<path>``-like names; upstream's carry a
nanosecond clock value, so no client can rely on them.

:func:`property_name` is upstream's ``Escape`` (``foo-bar`` ->
``foo__dash__bar``; reserved words -> ``__in__``; a name that cannot be
escaped is not accessible).
"""

from __future__ import annotations

import itertools
from typing import Any

from cel_expr_python import cel
from google.protobuf import descriptor_pb2, descriptor_pool, duration_pb2, struct_pb2, timestamp_pb2

from k8py.apiserver.cel import types
from k8py.apiserver.cel.names import property_name

__all__ = ["SchemaType", "declare", "property_name"]

Schema = dict[str, Any]
F = descriptor_pb2.FieldDescriptorProto

_STRING = {"type": "string"}
_META = {"type": "object", "properties": {"name": _STRING, "generateName": _STRING}}
_WELL_KNOWN = (struct_pb2, timestamp_pb2, duration_pb2)
_COUNTER = itertools.count(1)


class SchemaType:
    """A schema node's CEL type, and the descriptor pool that defines it."""

    __slots__ = ("pool", "type", "type_name")

    def __init__(self, pool: Any, cel_type: Any, type_name: str) -> None:
        self.pool = pool
        self.type = cel_type
        self.type_name = type_name


def declare(schema: Schema, *, root: bool) -> SchemaType | None:
    """The CEL type of ``schema`` (``root``: a resource root); None when upstream has none."""
    builder = _Builder(f"selfType{next(_COUNTER)}")
    field = builder.field_of(schema, root, builder.prefix)
    pool = descriptor_pool.DescriptorPool()
    for module in _WELL_KNOWN:
        pool.Add(descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb))
    for opaque in types.file_protos():
        pool.Add(opaque)
    pool.Add(builder.file)
    if field is None:
        return None
    kind, name = field
    for message in builder.file.message_type:
        try:
            pool.FindMessageTypeByName(message.name)
        except KeyError:
            raise ValueError(f"protobuf refused the message {message.name} built for the schema") from None
    return SchemaType(pool, _cel_type(kind, name), name or kind)


def _camel(name: str) -> str:
    out, upper = [], True
    for char in name:
        if char == "_":
            upper = True
            continue
        out.append(char.upper() if upper else char)
        upper = False
    return "".join(out)


def _with_type_and_object_meta(schema: Schema) -> Schema:
    props = dict(schema.get("properties") or {})
    props.update(apiVersion=_STRING, kind=_STRING, metadata=_META)
    return {**schema, "type": schema.get("type") or "object", "properties": props}


# a field is (kind, message name): kind is a scalar name, "message", "list:<kind>", "map:<kind>" or "dyn"
_SCALARS = {"int": F.TYPE_INT64, "double": F.TYPE_DOUBLE, "bool": F.TYPE_BOOL, "string": F.TYPE_STRING,
            "bytes": F.TYPE_BYTES}
_WRAPPED = {"timestamp": ".google.protobuf.Timestamp", "duration": ".google.protobuf.Duration",
            "dyn": ".google.protobuf.Value", "list": ".google.protobuf.ListValue", "map": ".google.protobuf.Struct"}
_CEL_SCALARS = {"int": cel.Type.INT, "double": cel.Type.DOUBLE, "bool": cel.Type.BOOL, "string": cel.Type.STRING,
                "bytes": cel.Type.BYTES, "timestamp": cel.Type.TIMESTAMP, "duration": cel.Type.DURATION,
                "dyn": cel.Type.DYN}


def _cel_type(kind: str, name: str) -> Any:
    if kind == "message":
        return cel.Type(name)
    if kind.startswith("list:"):
        return cel.Type.List(_cel_type(kind[5:], name))
    if kind.startswith("map:"):
        return cel.Type.Map(cel.Type.STRING, _cel_type(kind[4:], name))
    if kind in ("list", "map"):
        return cel.Type.List(cel.Type.DYN) if kind == "list" else cel.Type.Map(cel.Type.STRING, cel.Type.DYN)
    return _CEL_SCALARS[kind]


class _Builder:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.file = descriptor_pb2.FileDescriptorProto(name=f"k8py/cel/{prefix}.proto", syntax="proto2",
                                                       dependency=["google/protobuf/struct.proto",
                                                                   "google/protobuf/timestamp.proto",
                                                                   "google/protobuf/duration.proto"])
        self.names: set[str] = set()

    def field_of(self, schema: Any, root: bool, name: str) -> tuple[str, str] | None:
        if not isinstance(schema, dict):
            return None
        if schema.get("x-kubernetes-int-or-string"):
            return "dyn", ""
        if root:
            schema = _with_type_and_object_meta(schema)
        kind = schema.get("type")
        if kind == "array":
            items = schema.get("items")
            inner = self.field_of(items, bool(isinstance(items, dict) and items.get("x-kubernetes-embedded-resource")),
                                  f"{name}_items")
            if inner is None:
                return None
            return ("list", "") if inner[0].startswith(("list", "map")) else (f"list:{inner[0]}", inner[1])
        if kind == "object":
            additional = schema.get("additionalProperties")
            if isinstance(additional, dict):
                inner = self.field_of(additional, bool(additional.get("x-kubernetes-embedded-resource")),
                                      f"{name}_values")
                if inner is None:
                    return None
                return ("map", "") if inner[0].startswith(("list", "map")) else (f"map:{inner[0]}", inner[1])
            return "message", self.message(schema, name)
        if kind == "string":
            return {"byte": "bytes", "duration": "duration", "date": "timestamp",
                    "date-time": "timestamp"}.get(str(schema.get("format") or ""), "string"), ""
        return {"boolean": ("bool", ""), "number": ("double", ""), "integer": ("int", "")}.get(str(kind))

    def message(self, schema: Schema, name: str) -> str:
        while name in self.names:
            name += "_"
        self.names.add(name)
        message = self.file.message_type.add(name=name)
        number = 0
        for prop, sub in sorted((schema.get("properties") or {}).items()):
            escaped = property_name(str(prop))
            if escaped is None or not isinstance(sub, dict):
                continue
            field = self.field_of(sub, bool(sub.get("x-kubernetes-embedded-resource")), f"{name}_{escaped}")
            if field is None:
                continue
            number += 1
            self._add(message, escaped, number, *field)
        return name

    def _add(self, message: Any, name: str, number: int, kind: str, type_name: str) -> None:
        label = F.LABEL_OPTIONAL
        if kind.startswith("list:"):
            label, kind = F.LABEL_REPEATED, kind[5:]
        elif kind.startswith("map:"):
            entry_name = _camel(name) + "Entry"  # protobuf's rule for a map field's entry type
            if any(nested.name == entry_name for nested in message.nested_type):
                return
            entry = message.nested_type.add(name=entry_name)
            entry.options.map_entry = True
            entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
            self._add(entry, "value", 2, kind[4:], type_name)
            message.field.add(name=name, number=number, label=F.LABEL_REPEATED, type=F.TYPE_MESSAGE,
                              type_name=f".{message.name}.{entry_name}")
            return
        if kind in _SCALARS:
            message.field.add(name=name, number=number, label=label, type=_SCALARS[kind])
        elif kind == "message":
            message.field.add(name=name, number=number, label=label, type=F.TYPE_MESSAGE, type_name=f".{type_name}")
        else:
            message.field.add(name=name, number=number, label=label, type=F.TYPE_MESSAGE, type_name=_WRAPPED[kind])
