"""Upstream defaulting of pod specs (``SetDefaults_PodSpec``, containers,
probes, volumes): shared by Pods and every workload's pod template.

See :mod:`k8py.apiserver.defaults` for the rules (a default only where the
field is absent; never raises on malformed input). The small helpers here
(``child_object``, ``set_absent``, ``dict_items``) are the vocabulary both
modules use to walk objects that may be malformed.
"""

from __future__ import annotations

from typing import Any

from k8py.api.volume_sources import VOLUME_SOURCES

__all__ = [
    "child_object",
    "set_absent",
    "dict_items",
    "image_pull_policy",
    "default_container",
    "default_pod_spec",
    "requests_from_limits",
]

Object = dict[str, Any]

_VOLUME_SOURCES = frozenset(VOLUME_SOURCES)
_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")


def child_object(parent: Object, key: str) -> Object | None:
    """``parent[key]`` as a dict, created when absent; None if it is not one."""
    value = parent.get(key)
    if value is None:
        value = parent[key] = {}
    return value if isinstance(value, dict) else None


def set_absent(obj: Object, key: str, value: Any) -> None:
    if obj.get(key) is None:
        obj[key] = value


def dict_items(value: Any) -> list[Object]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


# --- core/v1: containers, probes, volumes, pod spec ---------------------------


def image_pull_policy(image: str) -> str:
    """``Always`` for ``:latest`` or no tag, else ``IfNotPresent`` (a digest
    pins the image). The tag is after the last ``:`` past the last ``/``."""
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    tag = last.rsplit(":", 1)[1] if ":" in last else ""
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def _default_probe(probe: Any) -> None:
    if not isinstance(probe, dict):
        return
    set_absent(probe, "timeoutSeconds", 1)
    set_absent(probe, "periodSeconds", 10)
    set_absent(probe, "successThreshold", 1)
    set_absent(probe, "failureThreshold", 3)
    http = probe.get("httpGet")
    if isinstance(http, dict):
        set_absent(http, "path", "/")
        set_absent(http, "scheme", "HTTP")
    grpc = probe.get("grpc")
    if isinstance(grpc, dict):
        set_absent(grpc, "service", "")


def _default_field_ref(holder: Any) -> None:
    if isinstance(holder, dict) and isinstance(holder.get("fieldRef"), dict):
        set_absent(holder["fieldRef"], "apiVersion", "v1")


def default_container(container: Object, *, host_network: bool = False) -> None:
    """``SetDefaults_Container`` plus its ports, probes, lifecycle and env.
    (Every pod created runs this: the set_absent steps are written out.)"""
    get = container.get
    image = get("image")
    if get("imagePullPolicy") is None and isinstance(image, str):
        container["imagePullPolicy"] = image_pull_policy(image)
    if get("terminationMessagePath") is None:
        container["terminationMessagePath"] = "/dev/termination-log"
    if get("terminationMessagePolicy") is None:
        container["terminationMessagePolicy"] = "File"
    # ResourceRequirements is a non-pointer struct: always serialized
    if get("resources") is None:
        container["resources"] = {}
    ports = get("ports")
    if ports:
        for port in dict_items(ports):
            if port.get("protocol") is None:
                port["protocol"] = "TCP"
            if host_network and port.get("hostPort") is None and port.get("containerPort") is not None:
                port["hostPort"] = port["containerPort"]
    for name in _PROBES:
        probe = get(name)
        if probe is not None:
            _default_probe(probe)
    lifecycle = get("lifecycle")
    if isinstance(lifecycle, dict):
        for hook in ("postStart", "preStop"):
            handler = lifecycle.get(hook)
            if isinstance(handler, dict) and isinstance(handler.get("httpGet"), dict):
                set_absent(handler["httpGet"], "path", "/")
                set_absent(handler["httpGet"], "scheme", "HTTP")
    env = get("env")
    if env:
        for var in dict_items(env):
            source = var.get("valueFrom")
            if source is not None:
                _default_field_ref(source)


def _default_volume(volume: Object) -> None:
    # a volume holds a name and (usually) one source: look at its keys, not at every source's
    if not any(volume[k] is not None for k in volume if k in _VOLUME_SOURCES):
        volume["emptyDir"] = {}
    for key in ("secret", "configMap", "downwardAPI"):
        source = volume.get(key)
        if isinstance(source, dict):
            set_absent(source, "defaultMode", 420)
    downward = volume.get("downwardAPI")
    if isinstance(downward, dict):
        for item in dict_items(downward.get("items")):
            _default_field_ref(item)
    host_path = volume.get("hostPath")
    if isinstance(host_path, dict):
        set_absent(host_path, "type", "")
    iscsi = volume.get("iscsi")
    if isinstance(iscsi, dict):
        set_absent(iscsi, "iscsiInterface", "default")
    projected = volume.get("projected")
    if isinstance(projected, dict):
        set_absent(projected, "defaultMode", 420)
        for source in dict_items(projected.get("sources")):
            token = source.get("serviceAccountToken")
            if isinstance(token, dict):
                set_absent(token, "expirationSeconds", 3600)
            downward_source = source.get("downwardAPI")
            if isinstance(downward_source, dict):
                for item in dict_items(downward_source.get("items")):
                    _default_field_ref(item)


#: (field, default) of a pod spec, in upstream's order; a callable default makes a fresh value
_POD_SPEC_DEFAULTS: tuple[tuple[str, Any], ...] = (
    ("dnsPolicy", "ClusterFirst"),
    ("restartPolicy", "Always"),
    ("securityContext", dict),
    ("terminationGracePeriodSeconds", 30),
    ("schedulerName", "default-scheduler"),
)


def default_pod_spec(spec: Object) -> None:
    """``SetDefaults_PodSpec`` and everything nested in a pod spec."""
    for key, value in _POD_SPEC_DEFAULTS:
        if spec.get(key) is None:
            spec[key] = value() if callable(value) else value
    host_network = spec.get("hostNetwork") is True
    for key in ("containers", "initContainers", "ephemeralContainers"):
        containers = spec.get(key)
        if containers:
            for container in dict_items(containers):
                default_container(container, host_network=host_network and key != "ephemeralContainers")
    volumes = spec.get("volumes")
    if volumes:
        for volume in dict_items(volumes):
            _default_volume(volume)


def requests_from_limits(spec: Object) -> None:
    """``SetDefaults_Pod``: a resource with a limit and no request requests the limit."""
    for key in ("containers", "initContainers"):
        for container in dict_items(spec.get(key)):
            resources = container.get("resources")
            if not isinstance(resources, dict) or not isinstance(resources.get("limits"), dict):
                continue
            requests = resources.get("requests")
            if requests is None:
                requests = resources["requests"] = {}
            if isinstance(requests, dict):
                for name, value in resources["limits"].items():
                    requests.setdefault(name, value)
