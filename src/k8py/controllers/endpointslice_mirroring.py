"""The EndpointSlice mirroring controller (``endpointslicemirroring``):
hand-written Endpoints of a Service without a selector copied into
EndpointSlices (upstream ``endpointslicemirroring``), so that consumers that
read only slices (kube-proxy, DNS) see them too.

Queue ``endpoint_slice_mirroring`` of Endpoints keys: Endpoints and Services
changes, and changes to slices managed by this controller
(``endpointslice.kubernetes.io/managed-by:
endpointslicemirroring-controller.k8s.io``).

An Endpoints object is mirrored when its Service exists and has no selector,
and it is not labelled ``endpointslice.kubernetes.io/skip-mirror: "true"``
(the label the Endpoints controller's own objects never need, since slices
are written for them directly). Each subset becomes endpoints with the
subset's ports: ``addresses`` are ready (and serving), ``notReadyAddresses``
not; ``hostname``, ``nodeName`` and ``targetRef`` are kept. Otherwise the
mirrored slices are deleted. Slices are placed as
:mod:`.endpointslice_reconciler` places them, owned by the Endpoints object.
"""

from __future__ import annotations

from typing import Any, Mapping

from k8py.client.resources import ENDPOINT_SLICES, ENDPOINTS, SERVICES
from k8py.controllers.context import ControllerContext
from k8py.controllers.endpointslice_reconciler import MANAGED_BY, SERVICE_NAME, plan, port_key
from k8py.controllers.endpointslice_tracker import SliceTracker
from k8py.controllers.keyed_controller import KeyedController
from k8py.controllers.service_pods import service_selector

__all__ = ["EndpointSliceMirroringController", "new_controller", "mirrored_endpoints", "CONTROLLER_NAME"]

CONTROLLER_NAME = "endpointslicemirroring-controller.k8s.io"
SKIP_MIRROR = "endpointslice.kubernetes.io/skip-mirror"
_DROPPED_LABELS = (SKIP_MIRROR, "endpoints.kubernetes.io/last-change-trigger-time")


def mirrored_endpoints(endpoints: Mapping[str, Any]
                       ) -> dict[tuple[Any, ...], tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    desired: dict[tuple[Any, ...], tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
    for subset in endpoints.get("subsets") or []:
        ports = [{"name": p.get("name") or "", "port": p.get("port"), "protocol": p.get("protocol") or "TCP",
                  **({"appProtocol": p["appProtocol"]} if p.get("appProtocol") else {})}
                 for p in subset.get("ports") or []]
        key = port_key(ports)
        out = desired.setdefault(key, (ports, []))[1]
        seen = {ep["addresses"][0] for ep in out}
        for field, ready in (("addresses", True), ("notReadyAddresses", False)):
            for address in subset.get(field) or []:
                ip = address.get("ip")
                if not ip or ":" in ip or ip in seen:
                    continue
                seen.add(ip)
                ep: dict[str, Any] = {"addresses": [ip],
                                      "conditions": {"ready": ready, "serving": ready, "terminating": False}}
                for src, dst in (("hostname", "hostname"), ("nodeName", "nodeName"), ("targetRef", "targetRef")):
                    if address.get(src):
                        ep[dst] = address[src]
                out.append(ep)
    return desired


class EndpointSliceMirroringController(KeyedController):
    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, name="endpointslicemirroring", queue_name="endpoint_slice_mirroring")
        self.max_per_slice = int(ctx.options.extra.get("mirroring_max_endpoints_per_subset", 1000))
        self.services = ctx.informers.informer(SERVICES)
        self.endpoints = ctx.informers.informer(ENDPOINTS)
        self.slices = ctx.informers.informer(ENDPOINT_SLICES)
        self.tracker = SliceTracker(self.slices.lister, CONTROLLER_NAME)
        self.wait_for(self.services, self.endpoints, self.slices)
        for informer in (self.services, self.endpoints):
            informer.add_event_handler(on_add=self.enqueue, on_update=lambda o, n: self.enqueue(n), on_delete=self.enqueue)
        self.tracker.enqueue_on_slice_events(self.slices, self.queue.add)

    async def sync(self, key: str) -> None:
        namespace, _, name = key.partition("/")
        existing = self.tracker.existing(namespace, name)
        service = self.services.lister.try_get(namespace, name)
        endpoints = self.endpoints.lister.try_get(namespace, name)
        mirror = (service is not None and service_selector(service) is None and endpoints is not None
                  and ((endpoints.get("metadata") or {}).get("labels") or {}).get(SKIP_MIRROR) != "true")
        if not mirror:
            for slc in existing:
                await self.tracker.delete(self.client, slc)
            return
        assert endpoints is not None
        labels = {k: v for k, v in ((endpoints.get("metadata") or {}).get("labels") or {}).items() if k not in _DROPPED_LABELS}
        labels[SERVICE_NAME] = name
        labels[MANAGED_BY] = CONTROLLER_NAME
        meta = endpoints.get("metadata") or {}
        owner = {"apiVersion": "v1", "kind": "Endpoints", "name": name, "uid": meta.get("uid"),
                 "controller": True, "blockOwnerDeletion": True}
        actions = plan(existing, mirrored_endpoints(endpoints), max_per_slice=self.max_per_slice,
                       labels_changed=lambda s: ((s.get("metadata") or {}).get("labels") or {}) != labels)
        await self.tracker.carry_out(self.client, actions, namespace=namespace, service_name=name, labels=labels,
                                     owner_ref=owner)


def new_controller(ctx: ControllerContext) -> EndpointSliceMirroringController:
    return EndpointSliceMirroringController(ctx)
