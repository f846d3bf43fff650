"""Printers for ``networking.k8s.io``, upstream's columns: Ingress
``NAME  CLASS  HOSTS  ADDRESS  PORTS  AGE``, IngressClass ``NAME  CONTROLLER  PARAMETERS  AGE``,
NetworkPolicy ``NAME  POD-SELECTOR  AGE``."""

from __future__ import annotations

from typing import Any

from .cells import dig, format_label_selector, list_with_more, object_age
from .columns import Column, Printer, age_column, name_column

__all__ = ["PRINTERS"]

_ING = "io.k8s.api.networking.v1.Ingress"
_IC = "io.k8s.api.networking.v1.IngressClass"
_NP = "io.k8s.api.networking.v1.NetworkPolicy"


def _hosts(obj: dict[str, Any]) -> str:
    rules = dig(obj, "spec", "rules", default=None) or []
    hosts = [r.get("host") or "" for r in rules if r.get("host")]
    return list_with_more(hosts, len(hosts), empty="*")


def _address(obj: dict[str, Any]) -> str:
    ingress = dig(obj, "status", "loadBalancer", "ingress", default=None) or []
    return ",".join(i.get("ip") or i.get("hostname") or "" for i in ingress if i.get("ip") or i.get("hostname"))


def _parameters(obj: dict[str, Any]) -> str:
    params = dig(obj, "spec", "parameters", default=None)
    if not params:
        return "<none>"
    group = params.get("apiGroup") or ""
    kind = f"{params.get('kind', '')}.{group}" if group else params.get("kind", "")
    return f"{kind}/{params.get('name', '')}"


INGRESS = Printer(
    (
        name_column(),
        Column("Class", doc=(_ING, "spec")),
        Column("Hosts", doc=(_ING, "spec")),
        Column("Address", doc=(_ING, "status")),
        Column("Ports", doc=(_ING, "spec")),
        age_column(),
    ),
    lambda obj, now: [
        dig(obj, "metadata", "name", default=""),
        dig(obj, "spec", "ingressClassName", default=None) or "<none>",
        _hosts(obj),
        _address(obj),
        "80, 443" if dig(obj, "spec", "tls", default=None) else "80",
        object_age(obj, now),
    ],
)

INGRESS_CLASS = Printer(
    (name_column(), Column("Controller", doc=(_IC, "spec")), Column("Parameters", doc=(_IC, "spec")), age_column()),
    lambda obj, now: [dig(obj, "metadata", "name", default=""), dig(obj, "spec", "controller", default=""),
                      _parameters(obj), object_age(obj, now)],
)

NETWORK_POLICY = Printer(
    (name_column(), Column("Pod-Selector", doc=(_NP, "spec")), age_column()),
    lambda obj, now: [dig(obj, "metadata", "name", default=""),
                      format_label_selector(dig(obj, "spec", "podSelector", default=None)), object_age(obj, now)],
)

PRINTERS = {"Ingress": INGRESS, "IngressClass": INGRESS_CLASS, "NetworkPolicy": NETWORK_POLICY}
