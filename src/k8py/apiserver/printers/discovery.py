"""Printer for ``discovery.k8s.io`` EndpointSlices: ``ADDRESSTYPE  PORTS  ENDPOINTS``.

PORTS lists port numbers (a port's name when it has no number, ``*`` when it
has neither); ENDPOINTS lists addresses. Both show at most three entries and
then `` + N more...``; an empty list prints ``<unset>`` (upstream
``listWithMoreString``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .cells import object_age, dig, list_with_more
from .columns import Column, Object, Printer, age_column, name_column

__all__ = ["PRINTERS", "slice_ports", "slice_endpoints"]

_SLICE = "io.k8s.api.discovery.v1.EndpointSlice"


def slice_ports(ports: list[dict[str, Any]] | None) -> str:
    items = []
    for port in ports or []:
        if port.get("port") is not None:
            items.append(str(port["port"]))
        elif port.get("name") is not None:
            items.append(str(port["name"]))
        else:
            items.append("*")
    return list_with_more(items, len(items))


def slice_endpoints(endpoints: list[dict[str, Any]] | None) -> str:
    addresses = [a for ep in endpoints or [] for a in ep.get("addresses") or []]
    return list_with_more(addresses, len(addresses))


def _slice(obj: Object, now: datetime) -> list[Any]:
    return [
        dig(obj, "metadata", "name", default=""),
        obj.get("addressType", ""),
        slice_ports(obj.get("ports")),
        slice_endpoints(obj.get("endpoints")),
        object_age(obj, now),
    ]


ENDPOINT_SLICE = Printer(
    (
        name_column(),
        Column("AddressType", doc=(_SLICE, "addressType")),
        Column("Ports", doc=(_SLICE, "ports")),
        Column("Endpoints", doc=(_SLICE, "endpoints")),
        age_column(),
    ),
    _slice,
)

PRINTERS = {"EndpointSlice": ENDPOINT_SLICE}
