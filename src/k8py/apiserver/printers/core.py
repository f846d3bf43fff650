"""Printers for the core (``""``) group, except Pods (see :mod:`.pods`).

Column names, priorities and cell formats follow upstream
``pkg/printers/internalversion/printers.go`` (1.32). Objects here are the
stored v1 JSON, not upstream's internal types, so where upstream relies on
defaulting (``spec.type`` of a Service, ``protocol`` of a port, ``clusterIPs``
filled from ``clusterIP``) the printer applies the same default rather than
print an empty cell.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .cells import object_age, dig, format_labels, join_host_port
from .columns import Column, Object, Printer, age_column, name_column

__all__ = ["PRINTERS", "port_string", "format_endpoints", "node_status", "node_roles"]

_CORE = "io.k8s.api.core.v1."
_NODE_INFO = _CORE + "NodeSystemInfo"
_ROLE_PREFIX = "node-role.kubernetes.io/"
_ROLE_LABEL = "kubernetes.io/role"


def _name(obj: Object) -> str:
    return dig(obj, "metadata", "name", default="")



# -- Service ----------------------------------------------------------------


def _load_balancer_ips(svc: Object) -> str:
    seen: dict[str, None] = {}
    for ingress in dig(svc, "status", "loadBalancer", "ingress", default=[]):
        value = ingress.get("ip") or ingress.get("hostname")
        if value:
            seen[value] = None
    # The server always prints wide, so the 16-character clipping never applies.
    return ",".join(seen)


def _external_ip(svc: Object) -> str:
    spec = svc.get("spec") or {}
    kind = spec.get("type") or "ClusterIP"
    external = spec.get("externalIPs") or []
    if kind in ("ClusterIP", "NodePort"):
        return ",".join(external) if external else "<none>"
    if kind == "LoadBalancer":
        lb = _load_balancer_ips(svc)
        if external:
            return ",".join(([*lb.split(",")] if lb else []) + external)
        return lb or "<pending>"
    if kind == "ExternalName":
        return spec.get("externalName", "")
    return "<unknown>"


def port_string(ports: list[dict[str, Any]] | None) -> str:
    """``makePortString``: ``80/TCP``, ``80:30080/TCP``, comma-joined."""
    pieces = []
    for port in ports or []:
        protocol = port.get("protocol") or "TCP"
        node_port = port.get("nodePort") or 0
        if node_port > 0:
            pieces.append(f"{port.get('port', 0)}:{node_port}/{protocol}")
        else:
            pieces.append(f"{port.get('port', 0)}/{protocol}")
    return ",".join(pieces)


def _service(svc: Object, now: datetime) -> list[Any]:
    spec = svc.get("spec") or {}
    cluster_ips = spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else [])
    return [
        _name(svc),
        spec.get("type") or "ClusterIP",
        cluster_ips[0] if cluster_ips else "<none>",
        _external_ip(svc),
        port_string(spec.get("ports")) or "<none>",
        object_age(svc, now),
        format_labels(spec.get("selector")),
    ]


SERVICE = Printer(
    (
        name_column(),
        Column("Type", doc=(_CORE + "ServiceSpec", "type")),
        Column("Cluster-IP", doc=(_CORE + "ServiceSpec", "clusterIP")),
        Column("External-IP", doc=(_CORE + "ServiceSpec", "externalIPs")),
        Column("Port(s)", doc=(_CORE + "ServiceSpec", "ports")),
        age_column(),
        Column("Selector", priority=1, doc=(_CORE + "ServiceSpec", "selector")),
    ),
    _service,
)

# -- Endpoints --------------------------------------------------------------


def format_endpoints(endpoints: Object) -> str:
    """``formatEndpoints`` for all ports: up to three ``ip:port``, then ``+ N more...``."""
    subsets = endpoints.get("subsets") or []
    if not subsets:
        return "<none>"
    shown: list[str] = []
    count = 0
    maximum = 3
    for subset in subsets:
        addresses = subset.get("addresses") or []
        ports = subset.get("ports") or []
        if not ports:
            # Headless services may have no ports: print bare addresses.
            count += len(addresses)
            shown.extend(a.get("ip", "") for a in addresses[: maximum - len(shown)])
            continue
        for port in ports:
            count += len(addresses)
            for addr in addresses[: max(0, maximum - len(shown))]:
                shown.append(join_host_port(addr.get("ip", ""), port.get("port", 0)))
    text = ",".join(shown)
    if count > maximum:
        return f"{text} + {count - maximum} more..."
    return text


ENDPOINTS = Printer(
    (
        name_column(),
        Column("Endpoints", doc=(_CORE + "Endpoints", "subsets")),
        age_column(),
    ),
    lambda obj, now: [_name(obj), format_endpoints(obj), object_age(obj, now)],
)

# -- Node -------------------------------------------------------------------


def node_status(node: Object) -> str:
    """``Ready`` / ``NotReady`` / ``Unknown``, plus ``SchedulingDisabled`` when cordoned."""
    status: list[str] = []
    for cond in dig(node, "status", "conditions", default=[]):
        if cond.get("type") == "Ready":
            status = ["Ready" if cond.get("status") == "True" else "NotReady"]
    if not status:
        status = ["Unknown"]
    if dig(node, "spec", "unschedulable"):
        status.append("SchedulingDisabled")
    return ",".join(status)


def node_roles(node: Object) -> str:
    """Roles from ``node-role.kubernetes.io/<role>`` and ``kubernetes.io/role=<role>``, sorted."""
    roles = set()
    for key, value in (dig(node, "metadata", "labels", default={})).items():
        if key.startswith(_ROLE_PREFIX) and key[len(_ROLE_PREFIX):]:
            roles.add(key[len(_ROLE_PREFIX):])
        elif key == _ROLE_LABEL and value:
            roles.add(value)
    return ",".join(sorted(roles)) or "<none>"


def _node_address(node: Object, kind: str) -> str:
    for address in dig(node, "status", "addresses", default=[]):
        if address.get("type") == kind:
            return address.get("address", "")
    return "<none>"


def _node(node: Object, now: datetime) -> list[Any]:
    info = dig(node, "status", "nodeInfo", default={})
    return [
        _name(node),
        node_status(node),
        node_roles(node),
        object_age(node, now),
        info.get("kubeletVersion", ""),
        _node_address(node, "InternalIP"),
        _node_address(node, "ExternalIP"),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


NODE = Printer(
    (
        name_column(),
        Column("Status", doc="The status of the node"),
        Column("Roles", doc="The roles of the node"),
        age_column(),
        Column("Version", doc=(_CORE + "NodeSystemInfo", "kubeletVersion")),
        Column("Internal-IP", priority=1, doc=(_CORE + "NodeStatus", "addresses")),
        Column("External-IP", priority=1, doc=(_CORE + "NodeStatus", "addresses")),
        Column("OS-Image", priority=1, doc=(_CORE + "NodeSystemInfo", "osImage")),
        Column("Kernel-Version", priority=1, doc=(_CORE + "NodeSystemInfo", "kernelVersion")),
        Column("Container-Runtime", priority=1, doc=(_NODE_INFO, "containerRuntimeVersion")),
    ),
    _node,
)

# -- small kinds --------------------------------------------------------------

NAMESPACE = Printer(
    (name_column(), Column("Status", doc="The status of the namespace"), age_column()),
    lambda obj, now: [_name(obj), dig(obj, "status", "phase", default=""), object_age(obj, now)],
)

CONFIG_MAP = Printer(
    (name_column(), Column("Data", doc=(_CORE + "ConfigMap", "data")), age_column()),
    lambda obj, now: [
        _name(obj),
        len(obj.get("data") or {}) + len(obj.get("binaryData") or {}),
        object_age(obj, now),
    ],
)

SECRET = Printer(
    (
        name_column(),
        Column("Type", doc=(_CORE + "Secret", "type")),
        Column("Data", doc=(_CORE + "Secret", "data")),
        age_column(),
    ),
    lambda obj, now: [_name(obj), obj.get("type", ""), len(obj.get("data") or {}), object_age(obj, now)],
)

SERVICE_ACCOUNT = Printer(
    (name_column(), Column("Secrets", doc=(_CORE + "ServiceAccount", "secrets")), age_column()),
    lambda obj, now: [_name(obj), len(obj.get("secrets") or []), object_age(obj, now)],
)

def _replication_controller(obj: Object, now: datetime) -> list[Any]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    containers = dig(spec, "template", "spec", "containers") or []
    selector = spec.get("selector") or {}
    return [
        _name(obj),
        int(spec.get("replicas") or 0),
        int(status.get("replicas") or 0),
        int(status.get("readyReplicas") or 0),
        object_age(obj, now),
        ",".join(str(c.get("name", "")) for c in containers),
        ",".join(str(c.get("image", "")) for c in containers),
        ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<none>",
    ]


REPLICATION_CONTROLLER = Printer(
    (
        name_column(),
        Column("Desired", type="integer", doc=(_CORE + "ReplicationControllerSpec", "replicas")),
        Column("Current", type="integer", doc=(_CORE + "ReplicationControllerStatus", "replicas")),
        Column("Ready", type="integer", doc=(_CORE + "ReplicationControllerStatus", "readyReplicas")),
        age_column(),
        Column("Containers", priority=1, doc="Names of each container in the template."),
        Column("Images", priority=1, doc="Images referenced by each container in the template."),
        Column("Selector", priority=1, doc=(_CORE + "ReplicationControllerSpec", "selector")),
    ),
    _replication_controller,
)

PRINTERS: dict[str, Printer] = {
    "ReplicationController": REPLICATION_CONTROLLER,
    "Service": SERVICE,
    "Endpoints": ENDPOINTS,
    "Node": NODE,
    "Namespace": NAMESPACE,
    "ConfigMap": CONFIG_MAP,
    "Secret": SECRET,
    "ServiceAccount": SERVICE_ACCOUNT,
}
