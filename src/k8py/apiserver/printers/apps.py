"""Printers for the ``apps`` group: Deployments, ReplicaSets, DaemonSets, StatefulSets,
ControllerRevisions.

Upstream column sets (1.32). Worth knowing when comparing with a cluster:
Deployment and StatefulSet READY are ``ready/desired`` strings, ReplicaSet and
DaemonSet counts are integers; a Deployment's SELECTOR is the bare selector
string (empty when empty) while the others print ``<none>``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .cells import object_age, container_cells, dig, format_label_selector, format_labels, selector_string
from .columns import (
    Column,
    Object,
    Printer,
    age_column,
    containers_column,
    images_column,
    name_column,
)

__all__ = ["PRINTERS"]

_APPS = "io.k8s.api.apps.v1."
_CORE = "io.k8s.api.core.v1."


def _base(obj: Object) -> tuple[str, dict[str, Any], dict[str, Any]]:
    return dig(obj, "metadata", "name", default=""), obj.get("spec") or {}, obj.get("status") or {}


def _count(fields: dict[str, Any], key: str) -> int:
    """An integer field, 0 when unset (Go's zero value / ``ptr.Deref(x, 0)``)."""
    return int(fields.get(key) or 0)


def _template_containers(spec: dict[str, Any]) -> tuple[str, str]:
    return container_cells(dig(spec, "template", "spec", "containers", default=[]))



def _deployment(obj: Object, now: datetime) -> list[Any]:
    name, spec, status = _base(obj)
    names, images = _template_containers(spec)
    return [
        name,
        f"{_count(status, 'readyReplicas')}/{_count(spec, 'replicas')}",
        _count(status, "updatedReplicas"),
        _count(status, "availableReplicas"),
        object_age(obj, now),
        names,
        images,
        selector_string(spec.get("selector")),
    ]


DEPLOYMENT = Printer(
    (
        name_column(),
        Column("Ready", doc="Number of the pod with ready state"),
        Column("Up-to-date", doc=(_APPS + "DeploymentStatus", "updatedReplicas")),
        Column("Available", doc=(_APPS + "DeploymentStatus", "availableReplicas")),
        age_column(),
        containers_column(),
        images_column(),
        Column("Selector", priority=1, doc=(_APPS + "DeploymentSpec", "selector")),
    ),
    _deployment,
)


def _replica_set(obj: Object, now: datetime) -> list[Any]:
    name, spec, status = _base(obj)
    names, images = _template_containers(spec)
    return [
        name,
        _count(spec, "replicas"),
        _count(status, "replicas"),
        _count(status, "readyReplicas"),
        object_age(obj, now),
        names,
        images,
        format_label_selector(spec.get("selector")),
    ]


REPLICA_SET = Printer(
    (
        name_column(),
        Column("Desired", type="integer", doc=(_APPS + "ReplicaSetSpec", "replicas")),
        Column("Current", type="integer", doc=(_APPS + "ReplicaSetStatus", "replicas")),
        Column("Ready", type="integer", doc=(_APPS + "ReplicaSetStatus", "readyReplicas")),
        age_column(),
        containers_column(),
        images_column(),
        Column("Selector", priority=1, doc=(_APPS + "ReplicaSetSpec", "selector")),
    ),
    _replica_set,
)


def _daemon_set(obj: Object, now: datetime) -> list[Any]:
    name, spec, status = _base(obj)
    names, images = _template_containers(spec)
    return [
        name,
        _count(status, "desiredNumberScheduled"),
        _count(status, "currentNumberScheduled"),
        _count(status, "numberReady"),
        _count(status, "updatedNumberScheduled"),
        _count(status, "numberAvailable"),
        format_labels(dig(spec, "template", "spec", "nodeSelector")),
        object_age(obj, now),
        names,
        images,
        format_label_selector(spec.get("selector")),
    ]


_DS_STATUS = _APPS + "DaemonSetStatus"
DAEMON_SET = Printer(
    (
        name_column(),
        Column("Desired", type="integer", doc=(_DS_STATUS, "desiredNumberScheduled")),
        Column("Current", type="integer", doc=(_DS_STATUS, "currentNumberScheduled")),
        Column("Ready", type="integer", doc=(_DS_STATUS, "numberReady")),
        Column("Up-to-date", type="integer", doc=(_DS_STATUS, "updatedNumberScheduled")),
        Column("Available", type="integer", doc=(_DS_STATUS, "numberAvailable")),
        Column("Node Selector", doc=(_CORE + "PodSpec", "nodeSelector")),
        age_column(),
        containers_column(),
        images_column(),
        Column("Selector", priority=1, doc=(_APPS + "DaemonSetSpec", "selector")),
    ),
    _daemon_set,
)


def _stateful_set(obj: Object, now: datetime) -> list[Any]:
    name, spec, status = _base(obj)
    names, images = _template_containers(spec)
    return [
        name,
        f"{_count(status, 'readyReplicas')}/{_count(spec, 'replicas')}",
        object_age(obj, now),
        names,
        images,
    ]


STATEFUL_SET = Printer(
    (
        name_column(),
        Column("Ready", doc="Number of the pod with ready state"),
        age_column(),
        containers_column(),
        images_column(),
    ),
    _stateful_set,
)

def _controller_revision(obj: Object, now: datetime) -> list[Any]:
    controller = "<none>"
    for ref in dig(obj, "metadata", "ownerReferences", default=[]) or []:
        if ref.get("controller"):
            group = (ref.get("apiVersion") or "").rpartition("/")[0]
            kind = (ref.get("kind") or "").lower()
            controller = f"{kind}.{group}/{ref.get('name')}" if group else f"{kind}/{ref.get('name')}"
            break
    return [dig(obj, "metadata", "name", default=""), controller, int(obj.get("revision") or 0),
            object_age(obj, now)]


CONTROLLER_REVISION = Printer(
    (
        name_column(),
        Column("Controller", doc="Controller of the object"),
        Column("Revision", type="integer", doc=(_APPS + "ControllerRevision", "revision")),
        age_column(),
    ),
    _controller_revision,
)

PRINTERS: dict[str, Printer] = {
    "ControllerRevision": CONTROLLER_REVISION,
    "Deployment": DEPLOYMENT,
    "ReplicaSet": REPLICA_SET,
    "DaemonSet": DAEMON_SET,
    "StatefulSet": STATEFUL_SET,
}
