"""core/v1 semantic validation: Pod, Service, ConfigMap, Secret.

Upstream: ``pkg/apis/core/validation/validation.go``. Object metadata is
validated elsewhere (``k8py.api.names.validate_object_meta``).
"""

from __future__ import annotations

import re
from typing import Any, Callable

import orjson

from k8py.api.errors import Cause
from k8py.api.names import is_dns1123_label, is_dns1123_subdomain, validate_labels

from k8py.apiserver.validation.field import (
    Raw, duplicate, forbidden, go_map, immutable, invalid, is_int, not_supported,
    port_num_or_name, port_number, required,
)
from k8py.apiserver.validation.podspec import (
    validate_pod_spec, validate_pod_spec_update, validate_pod_template,
)

__all__ = ["VALIDATORS"]

Object = dict[str, Any]
Validator = Callable[[Object, Object | None], list[Cause]]

_SERVICE_TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
_AFFINITIES = ("ClientIP", "None")
_PROTOCOLS = ("SCTP", "TCP", "UDP")
_TRAFFIC_POLICIES = ("Cluster", "Local")


#: a new pod's spec JSON -> its causes: the pods of one template (a ReplicaSet's, a Job's)
#: share one spec, and validating it is a pure function of it. Bounded; Causes are frozen.
_SPEC_CAUSES: dict[bytes, tuple[Cause, ...]] = {}
_SPEC_CAUSES_SIZE = 512


def _new_pod_spec(spec: Any) -> list[Cause]:
    try:
        key = orjson.dumps(spec)
    except TypeError:  # not JSON (never from a decoded body): validated as it is
        return validate_pod_spec(spec, "spec")
    known = _SPEC_CAUSES.get(key)
    if known is None:
        known = tuple(validate_pod_spec(spec, "spec"))
        if len(_SPEC_CAUSES) >= _SPEC_CAUSES_SIZE:
            _SPEC_CAUSES.clear()
        _SPEC_CAUSES[key] = known
    return list(known)


def _pod(obj: Object, old: Object | None) -> list[Cause]:
    spec = obj.get("spec")
    if old is None:
        return _new_pod_spec(spec)
    if spec is not None and spec is old.get("spec"):
        # the stored spec itself, carried over (a status update resets the spec to the
        # stored one): validated when it was stored, and upstream's
        # ValidatePodStatusUpdate does not look at it (it was half a status write's cost)
        return []
    causes = validate_pod_spec(spec, "spec")
    if old is not None:
        causes.extend(validate_pod_spec_update(obj.get("spec"), old.get("spec")))
    return causes


def _is_headless(spec: Object) -> bool:
    return spec.get("clusterIP") == "None"


def _service_port(port: Object, p: str, multiple: bool, names: set[str]) -> list[Cause]:
    causes: list[Cause] = []
    name = port.get("name") or ""
    if multiple and not name:
        causes.append(required(f"{p}.name"))
    elif name:
        causes.extend(invalid(f"{p}.name", name, m) for m in is_dns1123_label(str(name)))
        if name in names:
            causes.append(duplicate(f"{p}.name", name))
        names.add(name)
    causes.extend(port_number(port.get("port"), f"{p}.port"))
    protocol = port.get("protocol")
    if not protocol:
        causes.append(required(f"{p}.protocol"))
    elif protocol not in _PROTOCOLS:
        causes.append(not_supported(f"{p}.protocol", protocol, _PROTOCOLS))
    target = port.get("targetPort")
    if target is not None:
        causes.extend(port_num_or_name(target, f"{p}.targetPort"))
    node_port = port.get("nodePort")
    if node_port not in (None, 0):
        causes.extend(port_number(node_port, f"{p}.nodePort"))
    return causes


def _service(obj: Object, old: Object | None) -> list[Cause]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    causes: list[Cause] = []
    kind = spec.get("type")
    ports = [p for p in spec.get("ports") or () if isinstance(p, dict)]
    if not ports and not _is_headless(spec) and kind != "ExternalName":
        causes.append(required("spec.ports"))
    if kind == "ExternalName":
        if spec.get("clusterIPs") or spec.get("clusterIP") not in (None, "", "None"):
            causes.append(forbidden("spec.clusterIPs", "may not be set for ExternalName services"))
        cname = str(spec.get("externalName") or "").removesuffix(".")
        if cname:
            causes.extend(invalid("spec.externalName", cname, m) for m in is_dns1123_subdomain(cname))
        else:
            causes.append(required("spec.externalName"))
    names: set[str] = set()
    seen_ports: set[tuple[Any, Any]] = set()
    for i, port in enumerate(ports):
        p = f"spec.ports[{i}]"
        causes.extend(_service_port(port, p, len(ports) > 1, names))
        proto_port = (port.get("protocol"), port.get("port"))
        if proto_port in seen_ports:
            causes.append(duplicate(p, {"port": proto_port[1], "protocol": proto_port[0]}))
        seen_ports.add(proto_port)
        if kind == "ClusterIP" and port.get("nodePort") not in (None, 0):
            causes.append(forbidden(f"{p}.nodePort", "may not be used when `type` is 'ClusterIP'"))
    if spec.get("selector") is not None:
        causes.extend(validate_labels(spec.get("selector"), "spec.selector"))
    affinity = spec.get("sessionAffinity")
    if not affinity:
        causes.append(required("spec.sessionAffinity"))
    elif affinity not in _AFFINITIES:
        causes.append(not_supported("spec.sessionAffinity", affinity, _AFFINITIES))
    if not kind:
        causes.append(required("spec.type"))
    elif kind not in _SERVICE_TYPES:
        causes.append(not_supported("spec.type", kind, _SERVICE_TYPES))
    for key in ("externalTrafficPolicy", "internalTrafficPolicy"):
        value = spec.get(key)
        if value not in (None, "") and value not in _TRAFFIC_POLICIES:
            causes.append(not_supported(f"spec.{key}", value, _TRAFFIC_POLICIES))
    if spec.get("externalTrafficPolicy") and kind not in ("NodePort", "LoadBalancer"):
        causes.append(invalid("spec.externalTrafficPolicy", spec["externalTrafficPolicy"],
                              "may only be set for externally-accessible services"))
    health = spec.get("healthCheckNodePort")
    if health and not (kind == "LoadBalancer" and spec.get("externalTrafficPolicy") == "Local"):
        causes.append(invalid("spec.healthCheckNodePort", health,
                              "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"))
    if old is not None:
        causes.extend(_service_update(spec, old.get("spec") or {}))
    return causes


def _primary_ip(spec: Object) -> str:
    ips = spec.get("clusterIPs")
    if isinstance(ips, list) and ips:
        return str(ips[0] or "")
    return str(spec.get("clusterIP") or "")


def _service_update(spec: Object, old: Object) -> list[Cause]:
    """Upstream ``validateUpgradeDowngradeClusterIPs``: the primary cluster IP
    never changes once allocated, except to or from ExternalName. An empty new
    value means "keep" (the REST layer carries the old one forward)."""
    if "ExternalName" in (spec.get("type"), old.get("type")):
        return []
    before, after = _primary_ip(old), _primary_ip(spec)
    if before and after and before != after:
        shown = spec.get("clusterIPs") if isinstance(spec.get("clusterIPs"), list) else [after]
        return [invalid("spec.clusterIPs[0]", shown, "may not change once set")]
    return []


_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_CONFIG_KEY_MSG = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' "
    "(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
)


def _config_key(key: str) -> list[str]:
    """Upstream ``IsConfigMapKey``."""
    errs = []
    if len(key.encode()) > 253:
        errs.append("must be no more than 253 characters")
    if not _CONFIG_KEY.fullmatch(key):
        errs.append(_CONFIG_KEY_MSG)
    if key == ".":
        errs.append("must not be '.'")
    elif key == "..":
        errs.append("must not be '..'")
    elif key.startswith(".."):
        errs.append("must not start with '..'")
    return errs


def _keys(obj: Object, fields: tuple[str, ...]) -> list[Cause]:
    causes: list[Cause] = []
    seen: set[str] = set()
    for name in fields:
        data = obj.get(name)
        if not isinstance(data, dict):
            continue
        for key in data:
            causes.extend(invalid(f"{name}[{key}]", key, m) for m in _config_key(str(key)))
            if key in seen:
                causes.append(invalid(f"{name}[{key}]", key, "duplicate of key present in data"))
            seen.add(key)
    return causes


def _immutable_data(obj: Object, old: Object | None, fields: tuple[str, ...]) -> list[Cause]:
    """``immutable: true`` freezes the data and itself."""
    if old is None or old.get("immutable") is not True:
        return []
    causes: list[Cause] = []
    if obj.get("immutable") is not True:
        causes.append(forbidden("immutable", "field is immutable when `immutable` is set"))
    for name in fields:
        if (obj.get(name) or {}) != (old.get(name) or {}):
            causes.append(forbidden(name, "field is immutable when `immutable` is set"))
    return causes


def _config_map(obj: Object, old: Object | None) -> list[Cause]:
    fields = ("data", "binaryData")
    return _keys(obj, fields) + _immutable_data(obj, old, fields)


_SECRET_REQUIRED_KEYS = {
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
    "kubernetes.io/dockercfg": (".dockercfg",),
    "kubernetes.io/ssh-auth": ("ssh-privatekey",),
}


def _secret(obj: Object, old: Object | None) -> list[Cause]:
    fields = ("data", "stringData")
    causes = _keys(obj, ("data",))
    data = set(obj.get("data") or {}) | set(obj.get("stringData") or {})
    kind = obj.get("type") or "Opaque"
    for key in _SECRET_REQUIRED_KEYS.get(kind, ()):
        if key not in data:
            causes.append(required(f"data[{key}]"))
    if kind == "kubernetes.io/basic-auth" and not data & {"username", "password"}:
        causes.append(required("data[username]"))
    if old is not None:
        if (old.get("type") or "Opaque") != kind:
            causes.append(immutable("type", kind))
        causes.extend(_immutable_data(obj, old, fields[:1]))
    return causes


def _namespace(obj: Object, old: Object | None) -> list[Cause]:
    causes: list[Cause] = []
    for i, f in enumerate(((obj.get("spec") or {}).get("finalizers")) or ()):
        if not isinstance(f, str) or not f:
            causes.append(required(f"spec.finalizers[{i}]"))
    return causes


def _replication_controller(obj: Object, old: Object | None) -> list[Cause]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    causes: list[Cause] = []
    replicas = spec.get("replicas")
    if is_int(replicas) and replicas < 0:
        causes.append(invalid("spec.replicas", replicas, "must be greater than or equal to 0"))
    selector = spec.get("selector") or {}
    if not selector:
        causes.append(required("spec.selector"))
    template = spec.get("template")
    if template is None:
        causes.append(required("spec.template"))
        return causes
    labels = (template.get("metadata") or {}).get("labels") or {}
    if selector and any(labels.get(k) != v for k, v in selector.items()):
        causes.append(invalid("spec.template.metadata.labels", Raw(go_map(labels)),
                              "`selector` does not match template `labels`"))
    causes.extend(validate_pod_template(template, "spec.template"))
    restart = (template.get("spec") or {}).get("restartPolicy") if isinstance(template, dict) else None
    if restart not in (None, "Always"):
        causes.append(not_supported("spec.template.spec.restartPolicy", restart, ("Always",)))
    return causes


VALIDATORS: dict[str, Validator] = {
    "Pod": _pod,
    "Service": _service,
    "ConfigMap": _config_map,
    "Secret": _secret,
    "Namespace": _namespace,
    "ReplicationController": _replication_controller,
}
