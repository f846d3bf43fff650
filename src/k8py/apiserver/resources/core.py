"""core/v1: namespaces, pods, nodes, replicationcontrollers, services, endpoints, configmaps, secrets,
serviceaccounts, events."""

from __future__ import annotations

from k8py.apiserver.registry import ResourceDefinition, ScaleSpec
from k8py.apiserver.resources.strategies import (
    BindingStrategy,
    NamespaceStrategy,
    NodeStrategy,
    PodStrategy,
    StandardStrategy,
    path_getter,
)

_NO_DELETECOLLECTION = ("create", "delete", "get", "list", "patch", "update", "watch")


def _core(kind: str, plural: str, **kw: object) -> ResourceDefinition:
    return ResourceDefinition(
        group="",
        version="v1",
        kind=kind,
        plural=plural,
        singular=kind.lower(),
        openapi_name=f"io.k8s.api.core.v1.{kind}",
        **kw,  # type: ignore[arg-type]
    )


def _std(kind: str, **kw: bool) -> StandardStrategy:
    return StandardStrategy("", "v1", kind, **kw)


POD_FIELDS = {
    "spec.nodeName": path_getter("spec", "nodeName"),
    "spec.restartPolicy": path_getter("spec", "restartPolicy"),
    "spec.schedulerName": path_getter("spec", "schedulerName"),
    "spec.serviceAccountName": path_getter("spec", "serviceAccountName"),
    "spec.hostNetwork": path_getter("spec", "hostNetwork"),
    "status.phase": path_getter("status", "phase"),
    "status.podIP": path_getter("status", "podIP"),
    "status.nominatedNodeName": path_getter("status", "nominatedNodeName"),
}

EVENT_FIELDS = {
    f"involvedObject.{f}": path_getter("involvedObject", f)
    for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
} | {
    "reason": path_getter("reason"),
    "reportingComponent": path_getter("reportingComponent"),
    "source": path_getter("source", "component"),
    "type": path_getter("type"),
}

DEFINITIONS = [
    _core(
        "Namespace",
        "namespaces",
        namespaced=False,
        short_names=("ns",),
        subresources=frozenset({"status", "finalize"}),
        verbs=_NO_DELETECOLLECTION,
        strategy=NamespaceStrategy("", "v1", "Namespace", has_status=True, return_deleted_object=True),
        field_getters={"status.phase": path_getter("status", "phase")},
    ),
    _core(
        "Pod",
        "pods",
        namespaced=True,
        short_names=("po",),
        categories=("all",),
        subresources=frozenset({"status", "binding", "eviction", "ephemeralcontainers", "log", "exec", "attach", "portforward", "proxy"}),
        strategy=PodStrategy("", "v1", "Pod", has_status=True, return_deleted_object=True),
        field_getters=POD_FIELDS,
        indexed_field="spec.nodeName",
    ),
    _core(
        "Node",
        "nodes",
        namespaced=False,
        short_names=("no",),
        subresources=frozenset({"status", "proxy"}),
        strategy=NodeStrategy("", "v1", "Node", has_status=True),
        field_getters={"spec.unschedulable": path_getter("spec", "unschedulable")},
    ),
    _core(
        "ReplicationController",
        "replicationcontrollers",
        namespaced=True,
        short_names=("rc",),
        categories=("all",),
        subresources=frozenset({"status", "scale"}),
        strategy=_std("ReplicationController", has_status=True, tracks_generation=True),
        scale=ScaleSpec(selector_is_map=True),
        field_getters={"status.replicas": path_getter("status", "replicas")},
    ),
    _core(
        "Service",
        "services",
        namespaced=True,
        short_names=("svc",),
        categories=("all",),
        subresources=frozenset({"status", "proxy"}),
        strategy=_std("Service", has_status=True, return_deleted_object=True),
    ),
    _core(
        "Endpoints",
        "endpoints",
        namespaced=True,
        short_names=("ep",),
        strategy=_std("Endpoints", allow_create_on_update=True),
    ),
    _core("ConfigMap", "configmaps", namespaced=True, short_names=("cm",), strategy=_std("ConfigMap")),
    _core(
        "Secret",
        "secrets",
        namespaced=True,
        strategy=_std("Secret"),
        field_getters={"type": path_getter("type")},
    ),
    _core(
        "ServiceAccount",
        "serviceaccounts",
        namespaced=True,
        short_names=("sa",),
        subresources=frozenset({"token"}),
        strategy=_std("ServiceAccount"),
    ),
    # POST-only: binds the pod the Binding names (pods/binding does the same)
    _core("Binding", "bindings", namespaced=True, verbs=("create",), strategy=BindingStrategy("", "v1", "Binding")),
    _core(
        "Event",
        "events",
        namespaced=True,
        short_names=("ev",),
        strategy=_std("Event", allow_create_on_update=True),
        field_getters=EVENT_FIELDS,
    ),
]
