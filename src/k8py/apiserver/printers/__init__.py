"""Server-side printing: ``meta.k8s.io/v1`` Table responses for ``kubectl get``.

kubectl asks for ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io`` and
prints whatever columns the server returns; without a Table it can only show
NAME and AGE. This package turns stored objects into that Table. It is pure:
no I/O, no clock except the ``now`` it is given (or the wall clock when not).

What upstream does, and so do we:

- each kind with a printer (one module per API group: :mod:`.core`,
  :mod:`.pods`, :mod:`.events`, :mod:`.apps`, :mod:`.batch`,
  :mod:`.coordination`, :mod:`.discovery`) gets its own columns, and cells are
  generated for every column including ``priority: 1`` (wide) ones;
- any other kind gets the generic ``DefaultTableConvertor`` table: ``Name``
  and ``Created At`` (type ``date``, RFC 3339 in UTC), which kubectl shows as
  ``NAME  CREATED AT``;
- ``includeObject`` decides each row's ``object``: ``Metadata`` (the default,
  also for an empty value) gives a ``PartialObjectMetadata``, ``Object`` the
  full object, ``None`` a null; anything else is a 400 BadRequest;
- ``metadata`` carries ``resourceVersion``/``continue``/``remainingItemCount``
  of the list, or the object's ``resourceVersion`` for a single object
  (``list_meta=None``), as upstream's ``GenerateTable`` does;
- in a watch, only the first event's Table carries ``columnDefinitions``; the
  caller passes ``include_columns=False`` for the rest (they are ``null``);
- :func:`table_version` tells from an ``Accept`` header whether a Table (and
  which version) was asked for.

Rows share the objects' ``metadata`` dicts (no copies): serialise the Table
before mutating the objects it was built from.
"""

from __future__ import annotations

import functools
from datetime import datetime, timezone
from typing import Any, Iterable

from k8py.api.errors import BadRequest

from . import (
    admissionregistration, apps, autoscaling, batch, certificates, coordination, core, discovery, flowcontrol, policy, quota,
    networking, rbac, scheduling,
)
from .accept import table_version
from .cells import dig
from .columns import META, Column, Object, Printer, name_column
from .durations import human_duration, rfc3339, short_human_duration
from .events import EVENT, EVENTS_V1_EVENT
from .pods import POD

__all__ = [
    "build_table",
    "table_columns",
    "printer_for",
    "table_version",
    "INCLUDE_OBJECT_VALUES",
    "human_duration",
    "short_human_duration",
]

INCLUDE_OBJECT_VALUES = ("Metadata", "Object", "None")

#: (group, kind) -> printer. events.k8s.io Events print like core Events.
PRINTERS: dict[tuple[str, str], Printer] = {
    ("", "Pod"): POD,
    ("", "Event"): EVENT,
    ("events.k8s.io", "Event"): EVENTS_V1_EVENT,
    **{("", kind): p for kind, p in core.PRINTERS.items()},
    **{("apps", kind): p for kind, p in apps.PRINTERS.items()},
    **{("batch", kind): p for kind, p in batch.PRINTERS.items()},
    **{("coordination.k8s.io", kind): p for kind, p in coordination.PRINTERS.items()},
    **{("discovery.k8s.io", kind): p for kind, p in discovery.PRINTERS.items()},
    **{("scheduling.k8s.io", kind): p for kind, p in scheduling.PRINTERS.items()},
    **{("networking.k8s.io", kind): p for kind, p in networking.PRINTERS.items()},
    **{("flowcontrol.apiserver.k8s.io", kind): p for kind, p in flowcontrol.PRINTERS.items()},
    **{("policy", kind): p for kind, p in policy.PRINTERS.items()},
    **{("autoscaling", kind): p for kind, p in autoscaling.PRINTERS.items()},
    **{("", kind): p for kind, p in quota.PRINTERS.items()},
    **{("certificates.k8s.io", kind): p for kind, p in certificates.PRINTERS.items()},
    **{("rbac.authorization.k8s.io", kind): p for kind, p in rbac.PRINTERS.items()},
    **{("admissionregistration.k8s.io", kind): p for kind, p in admissionregistration.PRINTERS.items()},
    **{("apiregistration.k8s.io", kind): p for kind, p in admissionregistration.APISERVICE_PRINTERS.items()},
}

#: upstream's rest.DefaultTableConvertor, for kinds nobody wrote a printer for.
DEFAULT = Printer(
    (name_column(), Column("Created At", type="date", doc=(META, "creationTimestamp"))),
    lambda obj, now: [
        dig(obj, "metadata", "name", default=""),
        rfc3339(dig(obj, "metadata", "creationTimestamp")),
    ],
)


def printer_for(group: str, kind: str) -> Printer:
    return PRINTERS.get((group, kind), DEFAULT)


@functools.cache
def _columns(group: str, kind: str) -> tuple[dict[str, Any], ...]:
    return tuple(c.to_dict() for c in printer_for(group, kind).columns)


def table_columns(group: str, kind: str, printer: Printer | None = None) -> list[dict[str, Any]]:
    """The ``columnDefinitions`` of a kind (fresh dicts; safe to mutate)."""
    if printer is not None:
        return [c.to_dict() for c in printer.columns]
    return [dict(c) for c in _columns(group, kind)]


def _row_object(obj: Object, include_object: str, meta_api_version: str) -> Object | None:
    if include_object == "Object":
        return obj
    if include_object == "None":
        return None
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": meta_api_version,
        "metadata": obj.get("metadata") or {},
    }


def _table_metadata(list_meta: dict[str, Any] | None, objects: list[Object]) -> dict[str, Any]:
    if list_meta is None:
        rv = dig(objects[0], "metadata", "resourceVersion") if len(objects) == 1 else None
        return {"resourceVersion": rv} if rv else {}
    out: dict[str, Any] = {}
    for key in ("resourceVersion", "continue", "remainingItemCount"):
        if list_meta.get(key) not in (None, ""):
            out[key] = list_meta[key]
    return out


def build_table(
    group: str,
    kind: str,
    objects: Iterable[Object],
    *,
    list_meta: dict[str, Any] | None,
    include_object: str = "Metadata",
    now: datetime | None = None,
    version: str = "v1",
    include_columns: bool = True,
    printer: Printer | None = None,
) -> dict[str, Any]:
    """A ``meta.k8s.io/<version>`` Table of ``objects`` (all of ``group``/``kind``).

    ``list_meta`` is the list's metadata, or None when printing one object
    (a GET or a watch event). ``include_object`` is the request's
    ``includeObject`` (BadRequest when unrecognised). ``version`` is the
    negotiated Table version (``v1`` or ``v1beta1``); it also names the
    ``PartialObjectMetadata`` apiVersion, as upstream does. ``printer``
    overrides the (group, kind) one (custom resources bring theirs).
    """
    include_object = include_object or "Metadata"
    if include_object not in INCLUDE_OBJECT_VALUES:
        raise BadRequest(f'unrecognized includeObject value: "{include_object}"')
    now = now or datetime.now(timezone.utc)
    objects = list(objects)
    printer = printer or printer_for(group, kind)
    api_version = f"meta.k8s.io/{version}"
    rows = []
    for obj in objects:
        row: dict[str, Any] = {"cells": printer.cells(obj, now)}
        conditions = printer.conditions(obj) if printer.conditions else None
        if conditions:
            row["conditions"] = conditions
        row["object"] = _row_object(obj, include_object, api_version)
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": api_version,
        "metadata": _table_metadata(list_meta, objects),
        "columnDefinitions": table_columns(group, kind, printer) if include_columns else None,
        "rows": rows,
    }
