#!/usr/bin/env python3
"""Generate ``src/k8py/api/go_shapes.json``: the fields Go's JSON encoder always writes.

Why: a client that created a Service reads ``resp.status.load_balancer``;
upstream returns ``status: {loadBalancer: {}}`` because the API server
decodes every object into its Go type and encodes it back, and Go's
``encoding/json`` writes

- a non-pointer struct field always (``omitempty`` never omits a struct):
  ``Service.status``, ``ServiceStatus.loadBalancer``, ``Container.resources``;
- a field without ``omitempty`` always, with its zero value:
  ``ReplicaSetStatus.replicas: 0``, ``ContainerStatus.ready: false``;
- the zero value of a type with its own marshaller as that marshaller does:
  ``metav1.Time`` as ``null`` (``template.metadata.creationTimestamp: null``),
  ``IntOrString`` as ``0``, ``Quantity`` as ``"0"``, ``Duration`` as ``"0s"``,
  ``RawExtension`` as ``null``.

Slices and maps without ``omitempty`` (written as ``null`` when nil) are
left out on purpose: readers in k8py and in clients treat a missing list as
empty, but many would trip over ``null``.

Source release: Kubernetes **1.32** (the release k8py reports): the Go types
of ``k8s.io/api`` and ``k8s.io/apimachinery`` at ``v0.32.9``. Regenerate::

    git clone --branch v0.32.9 https://github.com/kubernetes/api API
    git clone --branch v0.32.9 https://github.com/kubernetes/apimachinery MACHINERY
    python scripts/gen_go_shapes.py API MACHINERY > src/k8py/api/go_shapes.json

The Go sources are read, never committed. The parser understands what the
API packages use: ``type X struct {...}`` blocks with one field per line,
embedded fields with ``json:",inline"``, named non-struct types
(``type Protocol string``), pointers, slices, maps, and package qualifiers
resolved through each file's imports.

Table format (read by :mod:`k8py.api.go_shape`)::

    {"release": "1.32", "generator": ..., "kinds": {"apps/v1/Deployment": "apps/v1.Deployment", ...},
     "types": {"apps/v1.Deployment": [[json_name, mode, arg], ...], ...}}

``mode`` is ``struct`` (always written; ``arg`` is its type), ``ptr`` /
``list`` / ``map`` (a pointer, slice or map of that struct type: recurse
where present) or ``zero`` (always written; ``arg`` is the JSON zero value).
Only types that lead to some always-written field are listed.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import orjson

RELEASE = "1.32"
_META = "k8s.io/apimachinery/pkg/apis/meta/v1"
#: types with their own JSON marshaller: the JSON their zero value becomes
_SPECIAL_ZERO: dict[str, object] = {
    f"{_META}.Time": None,
    f"{_META}.MicroTime": None,
    f"{_META}.Duration": "0s",
    "k8s.io/apimachinery/pkg/util/intstr.IntOrString": 0,
    "k8s.io/apimachinery/pkg/api/resource.Quantity": "0",
    "k8s.io/apimachinery/pkg/runtime.RawExtension": None,
}
#: never descended into (interfaces, raw JSON, list metadata)
_OPAQUE = {f"{_META}.FieldsV1", "k8s.io/apimachinery/pkg/runtime.Object", f"{_META}.ListMeta"}
_SCALAR_ZERO: dict[str, object] = {
    "string": "", "bool": False, "byte": 0, "rune": 0, "float32": 0, "float64": 0,
    **{t: 0 for t in ("int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "uintptr")},
}

_TYPE_RE = re.compile(r"^type\s+(\w+)\s+(.+?)\s*$")
_STRUCT_RE = re.compile(r"^type\s+(\w+)\s+struct\s*\{\s*$")
_FIELD_RE = re.compile(r"^\s*(\w+)\s+([^\s`]+)\s*(`[^`]*`)?\s*$")
_EMBED_RE = re.compile(r"^\s*(\*?[\w.]+)\s*(`[^`]*`)?\s*$")
_JSON_TAG_RE = re.compile(r'json:"([^"]*)"')
_IMPORT_RE = re.compile(r'^\s*(?:(\w+)\s+)?"([^"]+)"\s*$')


@dataclass
class Field:
    json: str  # "" for an inline embedded struct
    type: str  # Go type expression, package qualifiers resolved to import paths
    omitempty: bool
    inline: bool


@dataclass
class GoType:
    pkg: str
    name: str
    fields: list[Field] | None  # None: not a struct
    underlying: str = ""  # for a named non-struct type


def _imports(text: str) -> dict[str, str]:
    aliases: dict[str, str] = {}
    block = re.search(r"^import\s*\((.*?)^\)", text, re.M | re.S)
    lines = block.group(1).splitlines() if block else []
    lines += [m.group(1) for m in re.finditer(r'^import\s+(\w+\s+"[^"]+"|"[^"]+")\s*$', text, re.M)]
    for line in lines:
        m = _IMPORT_RE.match(line.split("//")[0])
        if m:
            path = m.group(2)
            aliases[m.group(1) or path.rsplit("/", 1)[-1]] = path
    return aliases


def _resolve(expr: str, pkg: str, imports: dict[str, str]) -> str:
    """``*metav1.Time`` -> ``*k8s.io/apimachinery/pkg/apis/meta/v1.Time``; ``[]Container`` -> ``[]<pkg>.Container``."""
    prefix = ""
    while True:
        if expr.startswith("*"):
            prefix, expr = prefix + "*", expr[1:]
        elif expr.startswith("[]"):
            prefix, expr = prefix + "[]", expr[2:]
        elif expr.startswith("map["):
            depth, i = 0, 3
            for i in range(3, len(expr)):
                depth += {"[": 1, "]": -1}.get(expr[i], 0)
                if depth == 0:
                    break
            return prefix + "map[" + expr[4:i] + "]" + _resolve(expr[i + 1 :], pkg, imports)
        else:
            break
    if "." in expr:
        alias, name = expr.split(".", 1)
        return prefix + f"{imports.get(alias, alias)}.{name}"
    if expr in _SCALAR_ZERO or expr in ("interface{}", "any", "error"):
        return prefix + expr
    return prefix + f"{pkg}.{expr}"


def parse_package(directory: Path, pkg: str, types: dict[str, GoType]) -> None:
    for path in sorted(directory.glob("*.go")):
        if path.name.endswith("_test.go") or path.name.startswith("zz_generated") or path.name == "generated.pb.go":
            continue
        text = path.read_text()
        imports = _imports(text)
        lines = text.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            m = _STRUCT_RE.match(line)
            if m:
                fields: list[Field] = []
                i += 1
                while i < len(lines) and not lines[i].startswith("}"):
                    fields.extend(_field(_strip_comment(lines[i]), pkg, imports))
                    i += 1
                types[f"{pkg}.{m.group(1)}"] = GoType(pkg, m.group(1), fields)
            else:
                t = _TYPE_RE.match(line)
                if t and not t.group(2).startswith(("struct", "interface", "func", "(")) and "=" not in t.group(2).split()[0]:
                    underlying = t.group(2).split("//")[0].strip()
                    types[f"{pkg}.{t.group(1)}"] = GoType(pkg, t.group(1), None, _resolve(underlying, pkg, imports))
            i += 1


def _strip_comment(line: str) -> str:
    """The line without a trailing ``//`` comment (a tag's backticks may hold ``//``)."""
    if line.lstrip().startswith("//"):
        return ""
    if "`" in line:
        return line[: line.rindex("`") + 1]
    return line.split("//", 1)[0]


def _field(line: str, pkg: str, imports: dict[str, str]) -> list[Field]:
    if not line.strip() or line.strip().startswith("//"):
        return []
    m = _FIELD_RE.match(line)
    if m and m.group(1)[0].isupper():
        tag = _JSON_TAG_RE.search(m.group(3) or "")
        name, _, opts = (tag.group(1) if tag else m.group(1)).partition(",")
        if name == "-":
            return []
        return [Field(name or m.group(1), _resolve(m.group(2), pkg, imports), "omitempty" in opts.split(","), "inline" in opts.split(","))]
    e = _EMBED_RE.match(line)
    if e:
        tag = _JSON_TAG_RE.search(e.group(2) or "")
        name, _, opts = (tag.group(1) if tag else "").partition(",")
        if name == "-":
            return []
        return [Field(name, _resolve(e.group(1), pkg, imports), "omitempty" in opts.split(","), not name)]
    return []


class Shapes:
    def __init__(self, types: dict[str, GoType], short: dict[str, str]) -> None:
        self.types = types
        self.short = short  # import path prefix -> short name ("k8s.io/api/core/v1" -> "core/v1")
        self.out: dict[str, list[list[object]]] = {}
        self._busy: set[str] = set()

    def key(self, full: str) -> str:
        pkg, name = full.rsplit(".", 1)
        return f"{self.short.get(pkg, pkg)}.{name}"

    def _underlying(self, expr: str) -> str:
        seen = 0
        while expr in self.types and self.types[expr].fields is None and seen < 10:
            expr = self.types[expr].underlying
            seen += 1
        return expr

    def entries(self, full: str) -> list[list[object]]:
        """The relevant fields of a struct type (inline embeds flattened); caches into ``out``."""
        key = self.key(full)
        if key in self.out or full in self._busy:
            return self.out.get(key, [])
        self._busy.add(full)
        rows: list[list[object]] = []
        for f in self.types[full].fields or []:
            rows.extend(self._rows(f))
        self._busy.discard(full)
        if rows:
            self.out[key] = rows
        return rows

    def _is_struct(self, full: str) -> bool:
        t = self.types.get(full)
        return t is not None and t.fields is not None

    def _rows(self, f: Field) -> list[list[object]]:
        expr = f.type
        if f.inline and not expr.startswith(("*", "[]", "map[")):
            target = self._underlying(expr)
            return self.entries(target) if self._is_struct(target) and target not in _OPAQUE else []
        if expr.startswith("*"):
            target = self._underlying(expr[1:])
            if self._is_struct(target) and target not in _OPAQUE and target not in _SPECIAL_ZERO and self.entries(target):
                return [[f.json, "ptr", self.key(target)]]
            return []
        if expr.startswith("[]"):
            elem = self._underlying(expr[2:].lstrip("*"))
            if self._is_struct(elem) and elem not in _OPAQUE and elem not in _SPECIAL_ZERO and self.entries(elem):
                return [[f.json, "list", self.key(elem)]]
            return []
        if expr.startswith("map["):
            value = self._underlying(expr[expr.index("]") + 1 :].lstrip("*"))
            if self._is_struct(value) and value not in _OPAQUE and value not in _SPECIAL_ZERO and self.entries(value):
                return [[f.json, "map", self.key(value)]]
            return []
        target = self._underlying(expr)
        if target in _SPECIAL_ZERO:
            return [[f.json, "zero", _SPECIAL_ZERO[target]]]
        if target in _OPAQUE or target in ("interface{}", "any"):
            return []
        if self._is_struct(target):
            self.entries(target)
            return [[f.json, "struct", self.key(target)]]
        underlying = self._underlying(target)
        if not f.omitempty and underlying in _SCALAR_ZERO:
            return [[f.json, "zero", _SCALAR_ZERO[underlying]]]
        return []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("api", type=Path, help="a checkout of k8s.io/api at the release")
    ap.add_argument("apimachinery", type=Path, help="a checkout of k8s.io/apimachinery at the release")
    args = ap.parse_args()
    types: dict[str, GoType] = {}
    short: dict[str, str] = {}
    for sub in ("pkg/apis/meta/v1", "pkg/util/intstr", "pkg/api/resource", "pkg/runtime"):
        pkg = f"k8s.io/apimachinery/{sub}"
        parse_package(args.apimachinery / sub, pkg, types)
    short[_META] = "meta/v1"
    groups: dict[str, str] = {}  # short package -> API group
    for register in sorted(args.api.glob("*/*/register.go")):
        group_dir, version = register.parent.parent.name, register.parent.name
        pkg = f"k8s.io/api/{group_dir}/{version}"
        m = re.search(r'GroupName\s*=\s*"([^"]*)"', register.read_text())
        if m is None:
            continue
        parse_package(register.parent, pkg, types)
        short[pkg] = f"{group_dir}/{version}"
        groups[f"{group_dir}/{version}"] = m.group(1)
    shapes = Shapes(types, short)
    kinds: dict[str, str] = {}
    for full, t in sorted(types.items()):
        if t.fields is None or not t.pkg.startswith("k8s.io/api/") or t.name.endswith("List"):
            continue
        embeds = {f.type for f in t.fields if f.inline}
        has_meta = any(f.json == "metadata" and f.type == f"{_META}.ObjectMeta" for f in t.fields)
        if f"{_META}.TypeMeta" not in embeds or not has_meta:
            continue
        short_pkg = short[t.pkg]
        group = groups[short_pkg]
        version = short_pkg.split("/")[1]
        if shapes.entries(full):
            kinds[f"{group}/{version}/{t.name}" if group else f"{version}/{t.name}"] = shapes.key(full)
    reachable: set[str] = set()
    stack = list(kinds.values())
    while stack:
        key = stack.pop()
        if key in reachable:
            continue
        reachable.add(key)
        stack.extend(str(row[2]) for row in shapes.out.get(key, []) if row[1] != "zero")
    table = {
        "release": RELEASE,
        "generator": "scripts/gen_go_shapes.py",
        "kinds": dict(sorted(kinds.items())),
        "types": {k: shapes.out[k] for k in sorted(reachable) if k in shapes.out},
    }
    # one kind and one type per line: small, and a regeneration diffs by type
    out = [b'{"release": ' + orjson.dumps(table["release"]) + b', "generator": ' + orjson.dumps(table["generator"]) + b',\n"kinds": {']
    out.append(b",\n".join(orjson.dumps(k) + b": " + orjson.dumps(v) for k, v in table["kinds"].items()))
    out.append(b'},\n"types": {')
    out.append(b",\n".join(orjson.dumps(k) + b": " + orjson.dumps(v) for k, v in table["types"].items()))
    out.append(b"}}\n")
    sys.stdout.buffer.write(b"\n".join(out))
    print(f"{len(kinds)} kinds, {len(table['types'])} types", file=sys.stderr)


if __name__ == "__main__":
    main()
