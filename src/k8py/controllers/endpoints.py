"""The Endpoints controller (``endpoint``): one core/v1 Endpoints per Service
with a selector, listing its pods' addresses and ports (upstream
``endpoints_controller``).

Queue ``endpoint`` of Service keys: a Service added, changed or deleted
queues itself; a pod added, deleted, or changed in a way that matters
(labels, IP, phase, readiness, deletion; :func:`pods_changed_for_endpoints`)
queues every Service selecting it before or after the change.

``sync`` (upstream ``syncService``):

- no Service: delete its Endpoints (a 404 is fine);
- a Service without a selector: nothing (its Endpoints are the user's, and
  the EndpointSlice mirroring controller copies them into slices);
- otherwise, for every pod that :func:`should_pod_be_in_endpoints` (with
  terminating pods only under ``publishNotReadyAddresses``), and every
  Service port whose ``targetPort`` the pod resolves, an address with
  ``nodeName``, ``targetRef`` and ``hostname``: ready pods (or all, under
  ``publishNotReadyAddresses``) in ``addresses``, the rest in
  ``notReadyAddresses``; the subsets then repacked so that addresses sharing
  the same ports share one subset (upstream ``RepackSubsets``), sorted;
- the object is written only when its subsets or labels differ (labels are
  the Service's, plus ``service.kubernetes.io/headless`` for a headless one),
  stamped ``endpoints.kubernetes.io/last-change-trigger-time``.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

from k8py.api.errors import Conflict, NotFound
from k8py.client.resources import ENDPOINTS, PODS, SERVICES
from k8py.controllers.context import ControllerContext
from k8py.controllers.keyed_controller import KeyedController
from k8py.controllers.pod_status import format_time
from k8py.controllers.service_pods import (
    ServicePodIndex, find_port, is_headless, is_pod_ready, pod_endpoint_fields,
    service_selector, should_pod_be_in_endpoints, sorted_pods,
)

__all__ = ["EndpointsController", "new_controller", "build_subsets", "repack_subsets"]

logger = logging.getLogger(__name__)

HEADLESS_LABEL = "service.kubernetes.io/headless"
SKIP_MIRROR = "endpointslice.kubernetes.io/skip-mirror"
TRIGGER_TIME = "endpoints.kubernetes.io/last-change-trigger-time"


def _address(pod: Mapping[str, Any], service_name: str) -> dict[str, Any]:
    return {"ip": pod["status"]["podIP"], **pod_endpoint_fields(pod, service_name)}


def build_subsets(service: Mapping[str, Any], pods: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The Endpoints subsets for ``service`` over ``pods`` (already selected)."""
    spec = service.get("spec") or {}
    name = (service.get("metadata") or {}).get("name", "")
    publish = bool(spec.get("publishNotReadyAddresses"))
    ports = spec.get("ports") or []
    entries: list[tuple[dict[str, Any], dict[str, Any], bool]] = []
    for pod in sorted_pods(pods):
        if not should_pod_be_in_endpoints(pod, include_terminating=publish):
            continue
        ready = publish or is_pod_ready(pod)
        address = _address(pod, name)
        if not ports and is_headless(service):
            entries.append((address, {}, ready))  # a headless Service without ports: addresses only
        for sp in ports:
            port = find_port(pod, sp)
            if port is None:
                continue
            ep_port: dict[str, Any] = {"port": port, "protocol": sp.get("protocol") or "TCP"}
            if sp.get("name"):
                ep_port["name"] = sp["name"]
            if sp.get("appProtocol"):
                ep_port["appProtocol"] = sp["appProtocol"]
            entries.append((address, ep_port, ready))
    return repack_subsets(entries)


def repack_subsets(entries: list[tuple[dict[str, Any], dict[str, Any], bool]]) -> list[dict[str, Any]]:
    """Group (address, port, ready) triples into subsets of addresses that share
    exactly the same ports, ordered as upstream sorts them (by IP, by port name)."""
    by_address: dict[tuple[str, bool], tuple[dict[str, Any], list[dict[str, Any]]]] = {}
    for address, port, ready in entries:
        key = (address["ip"], ready)
        slot = by_address.setdefault(key, (address, []))
        if port and port not in slot[1]:
            slot[1].append(port)
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    for (ip, ready), (address, ports) in by_address.items():
        ports = sorted(ports, key=lambda p: (p.get("name", ""), p["port"], p["protocol"]))
        group_key = tuple((p.get("name", ""), p["port"], p["protocol"]) for p in ports)
        subset = groups.setdefault(group_key, {"addresses": [], "notReadyAddresses": [], "ports": ports})
        subset["addresses" if ready else "notReadyAddresses"].append(address)
    subsets = []
    for subset in groups.values():
        out: dict[str, Any] = {}
        for field in ("addresses", "notReadyAddresses"):
            if subset[field]:
                out[field] = sorted(subset[field], key=lambda a: a["ip"])
        if subset["ports"]:
            out["ports"] = subset["ports"]
        subsets.append(out)
    subsets.sort(key=lambda s: ((s.get("addresses") or s.get("notReadyAddresses") or [{"ip": ""}])[0]["ip"]))
    return subsets


def desired_labels(service: Mapping[str, Any]) -> dict[str, str]:
    labels = dict((service.get("metadata") or {}).get("labels") or {})
    labels[SKIP_MIRROR] = "true"  # slices are written for it directly; mirroring would double them
    if is_headless(service):
        labels[HEADLESS_LABEL] = ""
    else:
        labels.pop(HEADLESS_LABEL, None)
    return labels


class EndpointsController(KeyedController):
    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, name="endpoint", queue_name="endpoint")
        self.services = ctx.informers.informer(SERVICES)
        self.pods = ctx.informers.informer(PODS)
        self.endpoints = ctx.informers.informer(ENDPOINTS)
        self.index = ServicePodIndex(self.services.lister)
        self.wait_for(self.services, self.pods, self.endpoints)
        self.services.add_event_handler(on_add=self.enqueue, on_update=lambda o, n: self.enqueue(n), on_delete=self.enqueue)
        self.index.enqueue_on_pod_events(self.pods, self.queue.add)
        self.endpoints.add_event_handler(on_delete=self.enqueue)  # someone deleted ours: write it again

    async def sync(self, key: str) -> None:
        namespace, _, name = key.partition("/")
        service = self.services.lister.try_get(namespace, name)
        if service is None:
            try:
                await self.client.delete(ENDPOINTS, namespace, name)
            except NotFound:
                pass
            return
        selector = service_selector(service)
        if selector is None:
            return
        pods = self.pods.lister.list(selector, namespace=namespace)
        subsets = build_subsets(service, pods)
        labels = desired_labels(service)
        current = self.endpoints.lister.try_get(namespace, name)
        if current is not None and (current.get("subsets") or []) == subsets and \
                ((current.get("metadata") or {}).get("labels") or {}) == labels:
            return
        annotations = dict(((current or {}).get("metadata") or {}).get("annotations") or {})
        annotations[TRIGGER_TIME] = format_time(self.clock.now())
        body: dict[str, Any] = {
            "apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations},
        }
        if subsets:
            body["subsets"] = subsets
        try:
            if current is None:
                await self.client.create(ENDPOINTS, body, namespace=namespace)
            else:
                body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                await self.client.update(ENDPOINTS, body)
        except NotFound:
            return  # the namespace is going away
        except Conflict:
            raise  # our cache was stale: the loop retries with the fresh object


def new_controller(ctx: ControllerContext) -> EndpointsController:
    return EndpointsController(ctx)
