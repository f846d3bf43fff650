"""Server-side tables of custom resources: ``additionalPrinterColumns``.

Upstream's CRD table convertor: the ``Name`` column, then the version's
``additionalPrinterColumns`` (or, when it lists none, ``Age`` from
``.metadata.creationTimestamp``). A column's ``jsonPath`` is a simple path
(``.spec.replicas``, ``.status.conditions[0].type``); a path that finds
nothing gives a null cell, as upstream's.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import orjson

from k8py.apiserver.printers.columns import META, Column, Printer, name_column

__all__ = ["printer_for_version"]

Object = dict[str, Any]

_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _steps(json_path: str) -> list[str | int]:
    path = json_path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    return [int(index) if index else key for key, index in _STEP.findall(path)]


def _lookup(obj: Any, steps: list[str | int]) -> Any:
    for step in steps:
        if isinstance(step, int):
            if not isinstance(obj, list) or step >= len(obj):
                return None
            obj = obj[step]
        else:
            if not isinstance(obj, dict):
                return None
            obj = obj.get(step)
        if obj is None:
            return None
    return obj


def _cell(value: Any, type_: str) -> Any:
    if value is None:
        return None
    if type_ in ("integer", "number", "boolean") and not isinstance(value, (dict, list)):
        return value
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return orjson.dumps(value).decode()


def printer_for_version(version: Object) -> Printer:
    raw = version.get("additionalPrinterColumns") or [
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    ]
    columns: list[Column] = [name_column()]
    paths: list[tuple[list[str | int], str]] = []
    for col in raw:
        type_ = col.get("type") or "string"
        doc: str | tuple[str, str] = col.get("description") or ""
        if col.get("jsonPath") == ".metadata.creationTimestamp" and not doc:
            doc = (META, "creationTimestamp")
        columns.append(Column(col.get("name", ""), type=type_, doc=doc, priority=int(col.get("priority") or 0),
                              format=col.get("format") or ""))
        paths.append((_steps(col.get("jsonPath") or ""), type_))

    def cells(obj: Object, now: datetime) -> list[Any]:
        name = (obj.get("metadata") or {}).get("name", "")
        return [name, *(_cell(_lookup(obj, steps), type_) for steps, type_ in paths)]

    return Printer(tuple(columns), cells)
