"""The upstream Kubernetes OpenAPI definitions, from a maintained source.

We do not hand-write schemas. The ``kubernetes-validate`` package ships the
definitions of every Kubernetes release as JSON Schema, generated from the
upstream OpenAPI, and keeps the vendor extensions (``x-kubernetes-patch-merge-key``,
``x-kubernetes-patch-strategy``, ``x-kubernetes-list-type``,
``x-kubernetes-group-version-kind``, ...). We load the release we report from
``/version`` (see :data:`KUBERNETES_VERSION`).

Differences from OpenAPI that callers must know: references are
``#/$defs/<name>``, and nullable types are written ``["string", "null"]``.

The definitions are loaded once, lazily, and shared; never mutate what this
module returns. Each is parsed the first time it is asked for
(:class:`LazyDefinitions`): all 638 parsed hold 2.6 MB, and an API server
reads a few dozen of them (the kinds it is written and patched as), so the
file is read once and kept as each definition's compact JSON (1 MB).
"""

from __future__ import annotations

import functools
import importlib.util
import pathlib
from importlib import resources
from typing import Any, Iterator, Mapping

import orjson

__all__ = [
    "KUBERNETES_VERSION",
    "definitions",
    "definition",
    "resolve",
    "ref_name",
    "schema_type",
    "gvk_definition_name",
]

#: The Kubernetes release whose API we serve (and report from /version).
KUBERNETES_VERSION = "1.32.0"

Schema = dict[str, Any]


class LazyDefinitions(Mapping[str, Schema]):
    """The definitions by name, each parsed from its JSON the first time it is read
    (and then kept: the same object every time); ``gvk`` maps each
    ``x-kubernetes-group-version-kind`` to the definition that carries it."""

    def __init__(self, raw: dict[str, str], gvk: dict[tuple[str, str, str], str]) -> None:
        self._raw = raw
        self._parsed: dict[str, Schema] = {}
        self.gvk = gvk

    def __getitem__(self, name: str) -> Schema:
        schema = self._parsed.get(name)
        if schema is None:
            schema = self._parsed[name] = orjson.loads(self._raw[name])
        return schema

    def __contains__(self, name: object) -> bool:
        return name in self._raw

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)


@functools.cache
def definitions() -> LazyDefinitions:
    """Every upstream definition by its OpenAPI name (io.k8s.api.core.v1.Pod)."""
    path = _package_dir("kubernetes_validate") / "kubernetes-json-schema" / f"v{KUBERNETES_VERSION}-local" / "_definitions.json"
    doc = orjson.loads(path.read_bytes())
    parsed: dict[str, Schema] = doc.get("$defs") or doc["definitions"]
    gvk: dict[tuple[str, str, str], str] = {}
    for name, schema in parsed.items():
        for kind in schema.get("x-kubernetes-group-version-kind") or ():
            gvk.setdefault((kind.get("group", ""), kind["version"], kind["kind"]), name)
    # (as str: orjson's bytes keep the capacity they were written with, twice their length)
    return LazyDefinitions({name: orjson.dumps(schema).decode() for name, schema in parsed.items()}, gvk)


def _package_dir(package: str) -> Any:
    """Where ``package``'s files are, without running it: importing kubernetes_validate
    imports jsonschema and its dependencies (60 ms and megabytes, in the API server's
    start), and only its data files are read here."""
    spec = importlib.util.find_spec(package)
    if spec is not None and spec.submodule_search_locations:
        return pathlib.Path(next(iter(spec.submodule_search_locations)))
    return resources.files(package)  # a zipped or otherwise unusual install: let importlib find it


def definition(name: str) -> Schema | None:
    return definitions().get(name)


def ref_name(schema: Schema) -> str | None:
    """``io.k8s.api.core.v1.Container`` for ``{"$ref": "#/$defs/io.k8s...Container"}``."""
    ref = schema.get("$ref")
    if not ref:
        return None
    return ref.rsplit("/", 1)[-1]


def resolve(schema: Schema | None) -> Schema | None:
    """Follow ``$ref`` (and a single-element ``allOf``) to the definition."""
    seen = 0
    while schema is not None and seen < 8:
        seen += 1
        name = ref_name(schema)
        if name is not None:
            schema = definitions().get(name)
            continue
        all_of = schema.get("allOf")
        if all_of and len(all_of) == 1:
            schema = all_of[0]
            continue
        return schema
    return schema


def schema_type(schema: Schema) -> str | None:
    """The non-null JSON type of a schema (``"string"`` for ``["string","null"]``)."""
    t = schema.get("type")
    if isinstance(t, list):
        rest = [x for x in t if x != "null"]
        return rest[0] if rest else None
    return t


def gvk_definition_name(group: str, version: str, kind: str) -> str | None:
    """The definition that carries ``x-kubernetes-group-version-kind`` for a kind."""
    return definitions().gvk.get((group, version, kind))
