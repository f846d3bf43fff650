"""The EndpointSlice controller (``endpointslice``): discovery.k8s.io/v1
EndpointSlices for every Service with a selector (upstream
``endpointslice_controller``).

Queue ``endpoint_slice`` of Service keys, fed as the Endpoints controller's
is (Service changes; pod changes that matter, for the Services selecting the
pod before and after), plus changes to slices this controller manages
(``endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io``),
so a slice edited or deleted by someone else is put back.

For each pod that has an IP and is not finished — terminating pods included,
with their conditions — and each Service port the pod resolves, an endpoint::

    {addresses: [podIP], conditions: {ready, serving, terminating},
     nodeName, targetRef, hostname?}

``serving`` is the pod's Ready condition, ``terminating`` its deletion,
``ready`` is serving and not terminating (always true under
``publishNotReadyAddresses``). Endpoints are grouped by port set and placed
by :mod:`.endpointslice_reconciler` into slices of at most
``--max-endpoints-per-slice`` (100), named ``<service>-<random>``, labelled
``kubernetes.io/service-name`` plus the Service's labels, owned by the
Service (so the garbage collector removes them with it).
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

from k8py.client.resources import ENDPOINT_SLICES, PODS, SERVICES
from k8py.controllers.context import ControllerContext
from k8py.controllers.endpointslice_reconciler import MANAGED_BY, SERVICE_NAME, plan, port_key
from k8py.controllers.endpoints import HEADLESS_LABEL
from k8py.controllers.endpointslice_tracker import SliceTracker
from k8py.controllers.keyed_controller import KeyedController
from k8py.controllers.owner_refs import new_controller_ref
from k8py.controllers.service_pods import (
    ServicePodIndex, find_port, is_headless, is_pod_ready, pod_endpoint_fields,
    service_selector, should_pod_be_in_endpoints, sorted_pods,
)

__all__ = ["EndpointSliceController", "new_controller", "desired_endpoints", "CONTROLLER_NAME"]

logger = logging.getLogger(__name__)

CONTROLLER_NAME = "endpointslice-controller.k8s.io"
DEFAULT_MAX_ENDPOINTS_PER_SLICE = 100


def _endpoint(pod: Mapping[str, Any], service: Mapping[str, Any]) -> dict[str, Any]:
    spec = service.get("spec") or {}
    terminating = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
    serving = is_pod_ready(pod)
    ready = bool(spec.get("publishNotReadyAddresses")) or (serving and not terminating)
    endpoint: dict[str, Any] = {
        "addresses": [pod["status"]["podIP"]],
        "conditions": {"ready": ready, "serving": serving, "terminating": terminating},
    }
    endpoint.update(pod_endpoint_fields(pod, (service.get("metadata") or {}).get("name", "")))
    return endpoint


def desired_endpoints(service: Mapping[str, Any], pods: list[Mapping[str, Any]]
                      ) -> dict[tuple[Any, ...], tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    """port key -> (ports, endpoints) for ``service`` over its selected ``pods``."""
    service_ports = (service.get("spec") or {}).get("ports") or []
    desired: dict[tuple[Any, ...], tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
    for pod in sorted_pods(pods):
        if not should_pod_be_in_endpoints(pod, include_terminating=True):
            continue
        if ":" in pod["status"]["podIP"]:
            continue  # IPv6 pods go to IPv6 slices; this cluster is IPv4 only
        ports: list[dict[str, Any]] = []
        for sp in service_ports:
            number = find_port(pod, sp)
            if number is None:
                continue
            port: dict[str, Any] = {"name": sp.get("name") or "", "port": number, "protocol": sp.get("protocol") or "TCP"}
            if sp.get("appProtocol"):
                port["appProtocol"] = sp["appProtocol"]
            ports.append(port)
        if service_ports and not ports and not is_headless(service):
            continue
        key = port_key(ports)
        desired.setdefault(key, (ports, []))[1].append(_endpoint(pod, service))
    return desired


def slice_labels(service: Mapping[str, Any], managed_by: str) -> dict[str, str]:
    labels = dict((service.get("metadata") or {}).get("labels") or {})
    labels[SERVICE_NAME] = (service.get("metadata") or {}).get("name", "")
    labels[MANAGED_BY] = managed_by
    if is_headless(service):
        labels[HEADLESS_LABEL] = ""
    return labels


class EndpointSliceController(KeyedController):
    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, name="endpointslice", queue_name="endpoint_slice")
        self.max_per_slice = int(ctx.options.extra.get("max_endpoints_per_slice", DEFAULT_MAX_ENDPOINTS_PER_SLICE))
        self.services = ctx.informers.informer(SERVICES)
        self.pods = ctx.informers.informer(PODS)
        self.slices = ctx.informers.informer(ENDPOINT_SLICES)
        self.index = ServicePodIndex(self.services.lister)
        self.tracker = SliceTracker(self.slices.lister, CONTROLLER_NAME)
        self.wait_for(self.services, self.pods, self.slices)
        self.services.add_event_handler(on_add=self.enqueue, on_update=lambda o, n: self.enqueue(n), on_delete=self.enqueue)
        self.index.enqueue_on_pod_events(self.pods, self.queue.add)
        self.tracker.enqueue_on_slice_events(self.slices, self.queue.add)

    async def sync(self, key: str) -> None:
        namespace, _, name = key.partition("/")
        service = self.services.lister.try_get(namespace, name)
        existing = self.tracker.existing(namespace, name)
        if service is None or service_selector(service) is None:
            # a deleted Service's slices go with it (the GC too, by owner); a Service that lost
            # its selector keeps hand-written endpoints, mirrored by another controller
            for slc in existing:
                await self.tracker.delete(self.client, slc)
            return
        if (service.get("spec") or {}).get("type") == "ExternalName":
            for slc in existing:
                await self.tracker.delete(self.client, slc)
            return
        pods = self.pods.lister.list(service_selector(service), namespace=namespace)
        labels = slice_labels(service, CONTROLLER_NAME)
        owner = new_controller_ref(service, SERVICES)
        actions = plan(existing, desired_endpoints(service, pods), max_per_slice=self.max_per_slice,
                       labels_changed=lambda s: ((s.get("metadata") or {}).get("labels") or {}) != labels)
        await self.tracker.carry_out(self.client, actions, namespace=namespace, service_name=name, labels=labels,
                                     owner_ref=owner)


def new_controller(ctx: ControllerContext) -> EndpointSliceController:
    return EndpointSliceController(ctx)
