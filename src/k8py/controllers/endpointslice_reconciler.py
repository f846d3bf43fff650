"""Placing a Service's endpoints into EndpointSlices (upstream
``endpointslice/reconciler``), shared by the EndpointSlice and the
EndpointSlice mirroring controllers.

The input is the desired state: for each distinct set of ports, the
endpoints that have exactly those ports (pods whose named target ports
resolve differently land in different slices). :func:`plan` compares it with
the slices that exist and returns what to write, keeping churn low as
upstream does:

1. an existing slice whose port set is no longer wanted is deleted;
2. every other slice keeps the endpoints still wanted (updated in place when
   their conditions or fields changed) and drops the rest;
3. the endpoints not yet placed fill the slices with room, then new slices of
   at most ``max_per_slice`` endpoints;
4. a slice left empty is deleted — except that a Service with no endpoint at
   all keeps exactly one empty placeholder slice (no ports, no endpoints), as
   upstream does, so that "no endpoints" is visible.

An endpoint is identified by its first address. The plan is a value; the
controllers carry it out (creates, updates, deletes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

__all__ = ["Plan", "plan", "port_key", "slice_body", "MANAGED_BY", "SERVICE_NAME"]

SERVICE_NAME = "kubernetes.io/service-name"
MANAGED_BY = "endpointslice.kubernetes.io/managed-by"


def port_key(ports: list[Mapping[str, Any]]) -> tuple[Any, ...]:
    return tuple(sorted((p.get("name") or "", p.get("port"), p.get("protocol") or "TCP", p.get("appProtocol") or "")
                        for p in ports))


def _id(endpoint: Mapping[str, Any]) -> str:
    return str((endpoint.get("addresses") or [""])[0])


@dataclass
class Plan:
    create: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = field(default_factory=list)
    """(ports, endpoints) of each new slice."""
    update: list[tuple[Mapping[str, Any], list[dict[str, Any]], list[dict[str, Any]]]] = field(default_factory=list)
    """(existing slice, ports, endpoints) of each slice to rewrite."""
    delete: list[Mapping[str, Any]] = field(default_factory=list)


def plan(existing: list[Mapping[str, Any]],
         desired: dict[tuple[Any, ...], tuple[list[dict[str, Any]], list[dict[str, Any]]]],
         *, max_per_slice: int, labels_changed: Any = None) -> Plan:
    """What to write so that ``existing`` slices hold ``desired`` endpoints.

    ``desired`` maps :func:`port_key` to (ports, endpoints). ``labels_changed(slice)``
    tells whether a kept slice must be rewritten anyway (its labels are stale).
    """
    result = Plan()
    total = sum(len(eps) for _, eps in desired.values())
    if total == 0:
        return _placeholder(existing, labels_changed)
    existing = sorted(existing, key=lambda s: (s.get("metadata") or {}).get("name") or "")
    placed: set[tuple[tuple[Any, ...], str]] = set()
    kept: list[tuple[Mapping[str, Any], tuple[Any, ...], list[dict[str, Any]], bool]] = []
    for slc in existing:
        key = port_key(slc.get("ports") or [])
        if key not in desired or not (slc.get("endpoints") or []):
            result.delete.append(slc)
            continue
        wanted = {_id(ep): ep for ep in desired[key][1]}
        endpoints: list[dict[str, Any]] = []
        for ep in slc.get("endpoints") or []:
            ident = _id(ep)
            if ident in wanted and (key, ident) not in placed and len(endpoints) < max_per_slice:
                placed.add((key, ident))
                endpoints.append(wanted[ident])
        changed = endpoints != list(slc.get("endpoints") or []) or bool(labels_changed and labels_changed(slc))
        kept.append((slc, key, endpoints, changed))
    for key, (ports, endpoints) in sorted(desired.items()):
        pending = [ep for ep in endpoints if (key, _id(ep)) not in placed]
        for i, (slc, k, eps, changed) in enumerate(kept):
            if not pending:
                break
            if k != key or len(eps) >= max_per_slice:
                continue
            room = max_per_slice - len(eps)
            eps.extend(pending[:room])
            pending = pending[room:]
            kept[i] = (slc, k, eps, True)
        while pending:
            result.create.append((ports, pending[:max_per_slice]))
            pending = pending[max_per_slice:]
    for slc, key, endpoints, changed in kept:
        if not endpoints:
            result.delete.append(slc)
        elif changed:
            result.update.append((slc, desired[key][0], endpoints))
    return result


def _placeholder(existing: list[Mapping[str, Any]], labels_changed: Any) -> Plan:
    result = Plan()
    keep = next((s for s in existing if not (s.get("endpoints") or []) and not (s.get("ports") or [])), None)
    for slc in existing:
        if slc is not keep:
            result.delete.append(slc)
    if keep is None:
        result.create.append(([], []))
    elif labels_changed and labels_changed(keep):
        result.update.append((keep, [], []))
    return result


def slice_body(*, namespace: str, service_name: str, labels: dict[str, str], owner_ref: dict[str, Any] | None,
               ports: list[dict[str, Any]], endpoints: list[dict[str, Any]],
               existing: Mapping[str, Any] | None = None, address_type: str = "IPv4") -> dict[str, Any]:
    meta: dict[str, Any] = {"namespace": namespace, "labels": labels}
    if existing is not None:
        old = existing.get("metadata") or {}
        meta.update(name=old.get("name"), resourceVersion=old.get("resourceVersion"))
        if old.get("annotations"):
            meta["annotations"] = old["annotations"]
    else:
        meta["generateName"] = f"{service_name}-"
    if owner_ref is not None:
        meta["ownerReferences"] = [owner_ref]
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": meta,
            "addressType": address_type, "endpoints": endpoints, "ports": ports}
