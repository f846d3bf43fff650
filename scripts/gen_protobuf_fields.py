#!/usr/bin/env python3
"""Generate ``src/k8py/api/protobuf_fields.json`` from upstream ``generated.proto`` files.

Source release: Kubernetes **1.32** (the release k8py reports). The committed
table was generated from the protobuf descriptors that kubectl v1.32.4 embeds
(k8s.io/api and k8s.io/apimachinery v0.32.4): every ``generated.pb.go``
registers its ``generated.proto`` as a gzipped ``FileDescriptorProto``, and,
unlike the published ``.proto`` text, those descriptors keep go-to-protobuf's
``(gogoproto.nullable) = false`` options, which say which fields are Go values
(zero means unset) rather than pointers (zero is a real value: ``replicas: 0``).

Regenerate (either way; the .proto files are never committed):

  1. From a directory of .proto files laid out by import path
     (``DIR/k8s.io/api/core/v1/generated.proto``,
     ``DIR/k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto``, ... e.g. a
     checkout of kubernetes ``release-1.32``'s ``staging/src``)::

         python scripts/gen_protobuf_fields.py DIR > src/k8py/api/protobuf_fields.json

     Upstream's published .proto text has its gogoproto options stripped, so
     this path cannot tell value fields from pointers: every scalar is taken
     as a pointer (zeros kept) and the script says so on stderr.

  2. From a kubectl binary of the release (no network needed)::

         python scripts/gen_protobuf_fields.py --extract-from /path/to/kubectl DIR
         python scripts/gen_protobuf_fields.py DIR > src/k8py/api/protobuf_fields.json

     The first command writes each embedded descriptor back out as .proto
     text (with the gogoproto options) under DIR.

What the parser understands: ``syntax``/``package``/``import``/``option``
statements, comments, messages and nested messages, enums, ``optional`` /
``required`` / ``repeated`` labels, ``map<k, v>``, ``oneof`` groups, field
options (``[(gogoproto.nullable) = false]``), scalar types, and message
references resolved by protobuf's scoping rules (relative, nested, or
``.fully.qualified``).

Two facts the .proto files do not carry are taken from the upstream OpenAPI
definitions that k8py already ships (``k8py.api.schema``): which message-typed
fields are Go embedded structs that JSON flattens (``Volume.volumeSource``,
``Probe.handler``), and which messages are Go named slice types whose JSON
form is a bare list (``metav1.Verbs``). See ``k8py.api.protobuf`` for the
table's format.
"""

from __future__ import annotations

import argparse
import re
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from k8py.api import schema as openapi
from k8py.api.protobuf import OPTIONAL, REPEATED, VALUE, iter_fields

RELEASE = "1.32"

#: the packages whose messages the table holds (plus everything they reference)
PACKAGES = (
    "k8s.io.api.core.v1",
    "k8s.io.api.apps.v1",
    "k8s.io.api.batch.v1",
    "k8s.io.api.autoscaling.v1",
    "k8s.io.api.coordination.v1",
    "k8s.io.api.discovery.v1",
    "k8s.io.api.events.v1",
    "k8s.io.api.policy.v1",
    "k8s.io.api.rbac.v1",
    "k8s.io.api.authorization.v1",
    "k8s.io.api.authentication.v1",
    "k8s.io.api.certificates.v1",
    "k8s.io.apimachinery.pkg.apis.meta.v1",
    "k8s.io.apimachinery.pkg.runtime",
    "k8s.io.apimachinery.pkg.util.intstr",
    "k8s.io.apimachinery.pkg.api.resource",
)

#: decoded by hand in k8py.api.protobuf; their fields are not needed
WELL_KNOWN = {
    "k8s.io.apimachinery.pkg.api.resource.Quantity",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Time",
    "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Duration",
    "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1",
    "k8s.io.apimachinery.pkg.runtime.RawExtension",
}

SCALARS = {
    "double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64",
    "fixed32", "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes",
}  # fmt: skip


# -- .proto text --------------------------------------------------------------


@dataclass
class Field:
    name: str
    number: int
    label: str  # "optional", "required", "repeated", "map"
    type: str  # scalar, or a message/enum reference as written
    key_type: str = ""  # maps only
    options: dict[str, str] = field(default_factory=dict)


@dataclass
class Message:
    full_name: str
    fields: list[Field] = field(default_factory=list)


_TOKEN = re.compile(
    r'\s+|//[^\n]*|/\*.*?\*/|(?P<tok>"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|[A-Za-z_.][\w.]*|-?\d+|[{}\[\]()<>=;,])',
    re.DOTALL,
)


def tokenize(text: str) -> list[str]:
    tokens: list[str] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise SyntaxError(f"unexpected character {text[pos]!r} at offset {pos}")
        if match.group("tok"):
            tokens.append(match.group("tok"))
        pos = match.end()
    return tokens


class ProtoFile:
    """One parsed .proto file: its package and every message, nested ones included."""

    def __init__(self, text: str) -> None:
        self.package = ""
        self.messages: list[Message] = []
        self.enums: list[str] = []
        self._tokens = tokenize(text)
        self._pos = 0
        while not self._done():
            self._top_level()

    # token helpers
    def _done(self) -> bool:
        return self._pos >= len(self._tokens)

    def _next(self) -> str:
        if self._done():
            raise SyntaxError("unexpected end of file")
        token = self._tokens[self._pos]
        self._pos += 1
        return token

    def _peek(self) -> str:
        return "" if self._done() else self._tokens[self._pos]

    def _expect(self, token: str) -> None:
        got = self._next()
        if got != token:
            raise SyntaxError(f"expected {token!r}, got {got!r}")

    def _skip_statement(self) -> None:
        depth = 0
        while True:
            token = self._next()
            if token in "{[(" and len(token) == 1:
                depth += 1
            elif token in "}])" and len(token) == 1:
                depth -= 1
                if depth == 0 and token == "}":
                    return
            elif token == ";" and depth == 0:
                return

    def _prefix(self) -> str:
        return f"{self.package}." if self.package else ""

    # grammar
    def _top_level(self) -> None:
        token = self._next()
        if token == "package":
            self.package = self._next()
            self._expect(";")
        elif token == "message":
            self._message(self._prefix())
        elif token == "enum":
            self.enums.append(self._prefix() + self._next())
            self._skip_statement()
        elif token == ";":
            pass
        else:  # syntax, import, option, service, extend
            self._skip_statement()

    def _message(self, scope: str) -> None:
        message = Message(scope + self._next())
        self.messages.append(message)
        self._expect("{")
        while (token := self._peek()) != "}":
            if token == "message":
                self._next()
                self._message(message.full_name + ".")
            elif token == "enum":
                self._next()
                self.enums.append(f"{message.full_name}.{self._next()}")
                self._skip_statement()
            elif token == "oneof":
                self._next()
                self._next()
                self._expect("{")
                while self._peek() != "}":
                    message.fields.append(self._field("optional"))
                self._next()
            elif token in ("option", "reserved", "extensions", "extend"):
                self._skip_statement()
            elif token == ";":
                self._next()
            else:
                message.fields.append(self._field(""))
        self._next()

    def _field(self, label: str) -> Field:
        token = self._next()
        key_type = ""
        if token in ("optional", "required", "repeated"):
            label, token = token, self._next()
        if token == "map":
            self._expect("<")
            key_type = self._next()
            self._expect(",")
            type_ = self._next()
            self._expect(">")
            label = "map"
        else:
            type_ = token
        name = self._next()
        self._expect("=")
        number = int(self._next())
        options: dict[str, str] = {}
        if self._peek() == "[":
            self._next()
            while True:
                option = self._next()
                if option == "(":
                    option = self._next()
                    self._expect(")")
                self._expect("=")
                options[option] = self._next().strip("\"'")
                if self._next() == "]":
                    break
        self._expect(";")
        return Field(name, number, label or "optional", type_, key_type, options)


def load_protos(root: Path) -> list[ProtoFile]:
    files = [ProtoFile(path.read_text()) for path in sorted(root.rglob("*.proto"))]
    if not files:
        raise SystemExit(f"no .proto files under {root}")
    return files


# -- the table ----------------------------------------------------------------


def _resolve(reference: str, scope: str, known: set[str]) -> str:
    """A type reference as written in ``scope`` -> its full name (protobuf's rules)."""
    if reference.startswith("."):
        return reference[1:]
    parts = scope.split(".")
    while parts:
        candidate = ".".join(parts + [reference])
        if candidate in known:
            return candidate
        parts.pop()
    if reference in known:
        return reference
    raise SystemExit(f"cannot resolve type {reference!r} used in {scope}")


def _properties(message: str) -> dict[str, Any] | None:
    # proto package k8s.io.api.core.v1 -> OpenAPI name io.k8s.api.core.v1.<Kind>
    definition = openapi.definition("io.k8s." + message.removeprefix("k8s.io."))
    return None if definition is None else definition.get("properties", {})


def _is_array(prop: dict[str, Any] | None) -> bool:
    if prop is None:
        return False
    kind = prop.get("type")
    return kind == "array" or (isinstance(kind, list) and "array" in kind)


def build_table(files: list[ProtoFile], packages: tuple[str, ...] = PACKAGES) -> tuple[dict[str, Any], list[str]]:
    messages = {m.full_name: m for f in files for m in f.messages}
    enums = {e for f in files for e in f.enums}
    known = set(messages) | enums
    package_of = {m.full_name: f.package for f in files for m in f.messages}
    notes: list[str] = []
    if not any(fl.options for m in messages.values() for fl in m.fields):
        notes.append("no gogoproto options in the input: every scalar is taken as a Go pointer (zeros kept)")

    wanted = [name for name, pkg in package_of.items() if pkg in packages]
    table: dict[str, dict[str, list[Any]]] = {}
    wrappers: set[str] = set()
    queue = list(wanted)
    while queue:
        name = queue.pop()
        if name in table or name in WELL_KNOWN:
            continue
        message = messages[name]
        props = _properties(name)
        entries: dict[str, list[Any]] = {}
        for f in message.fields:
            type_ = f.type if f.type in SCALARS else _resolve(f.type, name, known)
            if type_ in enums:
                kind = "enum"
            elif type_ in SCALARS:
                kind = type_
            else:
                kind = "message"
                queue.append(type_)
            if f.label == "map":
                if f.key_type != "string":
                    raise SystemExit(f"{name}.{f.name}: map keys other than string are not supported")
                if _is_array((props or {}).get(f.name, {}).get("additionalProperties")) and kind == "message":
                    wrappers.add(type_)
                entries[str(f.number)] = [f.name, "map", type_, OPTIONAL]
                continue
            if f.label == "repeated":
                label = REPEATED
            elif f.options.get("gogoproto.nullable") == "false":
                label = VALUE
            else:
                label = OPTIONAL
            if kind == "message" and props is not None and f.name not in props and label != REPEATED:
                # a Go embedded struct: its fields are the parent's JSON properties
                inner = {g.name for g in messages[type_].fields} if type_ in messages else set()
                if inner and inner <= set(props):
                    kind = "inline"
            if kind == "message" and label != REPEATED and props is not None and _is_array(props.get(f.name)):
                wrappers.add(type_)
            json_name = f.name
            if kind != "inline" and props is not None and f.name not in props:
                # the proto name of a Go field whose JSON tag differs only in case
                # (BoundObjectReference.UID: proto "uID", JSON "uid")
                same = [p for p in props if p.lower() == f.name.lower()]
                if len(same) == 1:
                    json_name = same[0]
                else:
                    notes.append(f"{name}.{f.name} is not a JSON property of its OpenAPI definition")
            entries[str(f.number)] = [json_name, kind, type_ if kind in ("message", "inline") else "", label]
        table[name] = entries
    for name in wrappers:
        entries = table[name]
        if len(entries) != 1 or next(iter(entries.values()))[3] != REPEATED:
            raise SystemExit(f"{name} is used as a list but is not a one-field repeated message")
        next(iter(entries.values()))[0] = ""
    return dict(sorted(table.items())), notes


# -- descriptors embedded in a Go binary --------------------------------------

_GZIP = re.compile(rb"\x1f\x8b\x08\x00\x00\x00\x00\x00")
_TYPES = {
    1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64", 7: "fixed32", 8: "bool",
    9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32", 16: "sfixed64", 17: "sint32", 18: "sint64",
}  # fmt: skip
_LABELS = {1: "optional", 2: "required", 3: "repeated"}
_GOGO_NULLABLE = 65001


def _fields(raw: bytes) -> Iterator[tuple[int, Any]]:
    for number, _, value in iter_fields(raw):
        yield number, value


def embedded_descriptors(binary: bytes) -> Iterator[bytes]:
    """Every gzipped FileDescriptorProto in a Go binary whose name is a k8s.io generated.proto."""
    for match in _GZIP.finditer(binary):
        stream = zlib.decompressobj(31)
        try:
            data = stream.decompress(binary[match.start() : match.start() + (4 << 20)])
        except zlib.error:
            continue
        if stream.eof and data[:1] == b"\n" and b"k8s.io/" in data[:80] and data[2 : 2 + data[1]].endswith(b"generated.proto"):
            yield data


def render_descriptor(data: bytes) -> tuple[str, str]:
    """(path, .proto text) for one FileDescriptorProto, gogoproto.nullable kept."""
    name = package = ""
    lines: list[str] = []
    imports: list[str] = []
    bodies: list[bytes] = []
    for number, value in _fields(data):
        if number == 1:
            name = value.decode()
        elif number == 2:
            package = value.decode()
        elif number == 3:
            imports.append(value.decode())
        elif number == 4:
            bodies.append(value)
    lines.append(f'// Rendered from the FileDescriptorProto embedded in a Kubernetes {RELEASE} binary.\n')
    lines.append('syntax = "proto2";\n')
    lines.append(f"package {package};\n")
    lines.extend(f'import "{i}";' for i in imports)
    for body in bodies:
        lines.append("")
        lines.extend(_render_message(body, ""))
    return name, "\n".join(lines) + "\n"


def _render_message(body: bytes, indent: str) -> list[str]:
    name = ""
    fields: list[bytes] = []
    nested: dict[str, bytes] = {}
    for number, value in _fields(body):
        if number == 1:
            name = value.decode()
        elif number == 2:
            fields.append(value)
        elif number == 3:
            nested_name = dict(_fields(value)).get(1, b"").decode()
            nested[nested_name] = value
    map_entries = {n: b for n, b in nested.items() if _is_map_entry(b)}
    out = [f"{indent}message {name} {{"]
    for raw in fields:
        f = dict(_fields(raw))
        fname, number = f[1].decode(), f[3]
        type_ = _TYPES.get(f.get(5, 0)) or f.get(6, b"").decode()
        nullable = dict(_fields(f.get(8, b""))).get(_GOGO_NULLABLE)
        option = " [(gogoproto.nullable) = false]" if nullable == 0 else ""
        entry = type_.rsplit(".", 1)[-1]
        if f.get(4) == 3 and entry in map_entries and type_.endswith(f"{name}.{entry}"):
            key, value = (_entry_type(map_entries[entry], n) for n in (1, 2))
            out.append(f"{indent}  map<{key}, {value}> {fname} = {number}{option};")
        else:
            out.append(f"{indent}  {_LABELS[f.get(4, 1)]} {type_} {fname} = {number}{option};")
    for nested_name, nested_body in nested.items():
        if nested_name not in map_entries:
            out.extend(_render_message(nested_body, indent + "  "))
    out.append(f"{indent}}}")
    return out


def _is_map_entry(body: bytes) -> bool:
    options = dict(_fields(body)).get(7, b"")
    return dict(_fields(options)).get(7) == 1


def _entry_type(body: bytes, number: int) -> str:
    for n, value in _fields(body):
        if n == 2:
            f = dict(_fields(value))
            if f[3] == number:
                return _TYPES.get(f.get(5, 0)) or f.get(6, b"").decode()
    raise SystemExit("a map entry without a key or value")


def extract(binary_path: Path, out_dir: Path) -> int:
    count = 0
    for data in embedded_descriptors(binary_path.read_bytes()):
        path, text = render_descriptor(data)
        target = out_dir / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        count += 1
    return count


# -- entry point --------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("proto_dir", type=Path, help="directory of .proto files laid out by import path")
    parser.add_argument("--extract-from", type=Path, metavar="BINARY", help="write a Go binary's embedded descriptors as .proto text into proto_dir, then stop")
    args = parser.parse_args(argv)
    if args.extract_from:
        count = extract(args.extract_from, args.proto_dir)
        print(f"wrote {count} .proto files under {args.proto_dir}", file=sys.stderr)
        return 0 if count else 1
    table, notes = build_table(load_protos(args.proto_dir))
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    doc = {"release": RELEASE, "generator": "scripts/gen_protobuf_fields.py", "messages": table}
    sys.stdout.buffer.write(orjson.dumps(doc) + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
