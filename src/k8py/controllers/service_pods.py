"""What a Service's pods contribute to its endpoints: the rules the Endpoints
and EndpointSlice controllers share (upstream ``endpointutil`` and
``podutil``).

- :func:`should_pod_be_in_endpoints`: a pod counts once it has an IP and is
  not finished; a terminating pod (``deletionTimestamp`` set) counts only
  when the caller includes terminating endpoints;
- :func:`find_port`: a Service port's ``targetPort`` resolved for one pod —
  a number is itself, a name is the ``containerPort`` of the pod's port of
  that name and protocol (a pod without it has no endpoint for that port);
- :func:`endpoint_hostname`: a pod's DNS hostname within the Service (its
  ``spec.hostname`` when its ``spec.subdomain`` is the Service's name);
  :func:`pod_endpoint_fields` adds it, the node and the ``targetRef`` to an
  endpoint (the same in Endpoints and EndpointSlices);
- :class:`ServicePodIndex`: which Services select a pod, from the Services
  informer (so a pod change queues exactly the Services it affects;
  :meth:`ServicePodIndex.enqueue_on_pod_events` wires that to a queue).

Everything here is pure and reads the cached objects without changing them.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from k8py.api.selectors import LabelSelector, label_selector_from_dict
from k8py.controllers.keyed_controller import unwrap_tombstone
from k8py.controllers.pod_status import is_pod_ready

__all__ = [
    "endpoint_hostname",
    "find_port",
    "is_headless",
    "pod_endpoint_fields",
    "pod_target_ref",
    "service_selector",
    "should_pod_be_in_endpoints",
    "ServicePodIndex",
    "is_pod_ready",
]


def should_pod_be_in_endpoints(pod: Mapping[str, Any], *, include_terminating: bool) -> bool:
    status = pod.get("status") or {}
    if not status.get("podIP"):
        return False
    if not include_terminating and (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    # upstream: a pod that will never run again (Failed, or Succeeded) is out
    return status.get("phase") not in ("Failed", "Succeeded")


def find_port(pod: Mapping[str, Any], service_port: Mapping[str, Any]) -> int | None:
    """The pod's port for ``service_port`` (None when a named port is missing)."""
    target = service_port.get("targetPort")
    if target in (None, "", 0):
        target = service_port.get("port")
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    protocol = service_port.get("protocol") or "TCP"
    for container in (pod.get("spec") or {}).get("containers") or ():
        for port in container.get("ports") or ():
            if port.get("name") == target and (port.get("protocol") or "TCP") == protocol:
                return int(port["containerPort"])
    return None


def endpoint_hostname(pod: Mapping[str, Any], service_name: str) -> str:
    spec = pod.get("spec") or {}
    if spec.get("hostname") and spec.get("subdomain") == service_name:
        return str(spec["hostname"])
    return ""


def pod_target_ref(pod: Mapping[str, Any]) -> dict[str, Any]:
    meta = pod.get("metadata") or {}
    return {"kind": "Pod", "namespace": meta.get("namespace"), "name": meta.get("name"), "uid": meta.get("uid")}


def pod_endpoint_fields(pod: Mapping[str, Any], service_name: str) -> dict[str, Any]:
    """What an endpoint says of its pod, in both APIs: ``hostname`` (if any), ``nodeName`` (if scheduled), ``targetRef``."""
    fields: dict[str, Any] = {}
    hostname = endpoint_hostname(pod, service_name)
    if hostname:
        fields["hostname"] = hostname
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        fields["nodeName"] = node
    fields["targetRef"] = pod_target_ref(pod)
    return fields


def is_headless(service: Mapping[str, Any]) -> bool:
    return (service.get("spec") or {}).get("clusterIP") == "None"


def service_selector(service: Mapping[str, Any]) -> LabelSelector | None:
    """The Service's pod selector, or None for a Service without one (its
    endpoints are written by hand, and no controller touches them)."""
    selector = (service.get("spec") or {}).get("selector")
    if not selector:
        return None
    return label_selector_from_dict({"matchLabels": selector})


class ServicePodIndex:
    """Which Services of a namespace select a pod, read from a Services lister."""

    def __init__(self, services_lister: Any) -> None:
        self.services = services_lister

    def services_for(self, pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        found = []
        for service in self.services.list(namespace=meta.get("namespace")):
            selector = service_selector(service)
            if selector is not None and selector.matches(labels):
                found.append(service)
        return found

    def keys_for_change(self, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> set[str]:
        """Keys of the Services selecting the pod before or after the change."""
        keys: set[str] = set()
        for pod in (old, new):
            if pod is None:
                continue
            for service in self.services_for(pod):
                meta = service.get("metadata") or {}
                keys.add(f"{meta.get('namespace')}/{meta.get('name')}")
        return keys

    def enqueue_on_pod_events(self, pods_informer: Any, enqueue: Callable[[str], None]) -> None:
        """Queue the keys of the Services a pod's add, relevant update or delete touches."""

        def added(pod: Any) -> None:
            for key in self.keys_for_change(None, pod):
                enqueue(key)

        def updated(old: Any, new: Any) -> None:
            if pods_changed_for_endpoints(old, new):
                for key in self.keys_for_change(old, new):
                    enqueue(key)

        def deleted(obj: Any) -> None:
            pod = unwrap_tombstone(obj)
            if pod is not None:
                added(pod)

        pods_informer.add_event_handler(on_add=added, on_update=updated, on_delete=deleted)


def pods_changed_for_endpoints(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether an update can change any endpoint (upstream ``podEndpointsChanged``
    plus labels): resyncs and unrelated status writes are skipped."""
    o_meta, n_meta = old.get("metadata") or {}, new.get("metadata") or {}
    if o_meta.get("resourceVersion") == n_meta.get("resourceVersion"):
        return False
    if o_meta.get("labels") != n_meta.get("labels") or o_meta.get("deletionTimestamp") != n_meta.get("deletionTimestamp"):
        return True
    o_st, n_st = old.get("status") or {}, new.get("status") or {}
    if (o_st.get("podIP"), o_st.get("phase")) != (n_st.get("podIP"), n_st.get("phase")):
        return True
    if is_pod_ready(old) != is_pod_ready(new):
        return True
    o_spec, n_spec = old.get("spec") or {}, new.get("spec") or {}
    keys = ("nodeName", "hostname", "subdomain")
    return any(o_spec.get(k) != n_spec.get(k) for k in keys)


def sorted_pods(pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return sorted(pods, key=lambda p: ((p.get("metadata") or {}).get("name") or ""))
