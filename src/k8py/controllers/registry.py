"""The controllers the manager knows, by upstream's names, and where each lives.

A controller module registers itself by *existing*: :data:`CONTROLLER_MODULES`
maps each name (as ``kube-controller-manager --controllers`` spells it) to the
module that defines it, and that module exposes one factory::

    def new_controller(ctx: ControllerContext) -> Controller: ...

The table is resolved lazily (:func:`load_factory` imports the module when the
controller is enabled), so a name whose module does not exist yet is reported
as unavailable and skipped rather than breaking the manager, and adding a
controller never edits a shared list of imports.

``--controllers`` is upstream's syntax: a comma-separated list where ``*``
means "every controller on by default", ``name`` enables one, ``-name``
disables one (``*,-cronjob``). :func:`enabled_controllers` resolves it and
rejects names it does not know, with the list of known ones.
"""

from __future__ import annotations

import importlib
import logging
from typing import Callable, Protocol

from k8py.controllers.context import ControllerContext

__all__ = [
    "Controller",
    "ControllerFactory",
    "CONTROLLER_MODULES",
    "DISABLED_BY_DEFAULT",
    "enabled_controllers",
    "load_factory",
    "UnknownControllerError",
]

logger = logging.getLogger(__name__)


class Controller(Protocol):
    """What the manager runs: a name and ``run()`` until cancelled.

    ``run`` waits for the informer caches it reads before starting workers and
    must let ``CancelledError`` propagate.
    """

    name: str

    async def run(self) -> None: ...


#: returns None when the controller cannot run as configured (it says why in the log)
ControllerFactory = Callable[[ControllerContext], "Controller | None"]

CONTROLLER_MODULES: dict[str, str] = {
    "replicaset": "k8py.controllers.replicaset",
    "replicationcontroller": "k8py.controllers.replication_controller",
    "deployment": "k8py.controllers.deployment",
    "job": "k8py.controllers.job",
    "cronjob": "k8py.controllers.cronjob",
    "daemonset": "k8py.controllers.daemonset",
    "statefulset": "k8py.controllers.statefulset",
    "garbagecollector": "k8py.controllers.garbage_collector",
    "namespace": "k8py.controllers.namespace",
    "serviceaccount": "k8py.controllers.service_account",
    "podgc": "k8py.controllers.pod_gc",
    "nodeipam": "k8py.controllers.node_ipam",
    "ttl-after-finished": "k8py.controllers.ttl_after_finished",
    "endpoint": "k8py.controllers.endpoints",
    "endpointslice": "k8py.controllers.endpointslice",
    "endpointslicemirroring": "k8py.controllers.endpointslice_mirroring",
    "disruption": "k8py.controllers.disruption",
    "nodelifecycle": "k8py.controllers.node_lifecycle",
    "horizontalpodautoscaling": "k8py.controllers.podautoscaler",
    "resourcequota": "k8py.controllers.resource_quota",
    "taint-eviction-controller": "k8py.controllers.taint_eviction",
    "clusterrole-aggregation": "k8py.controllers.clusterrole_aggregation",
    "serviceaccount-token": "k8py.controllers.serviceaccount_token",
    "root-ca-cert-publisher": "k8py.controllers.root_ca_publisher",
    "csrsigning": "k8py.controllers.certificates.signer",
    "csrapproving": "k8py.controllers.certificates.approver",
}

DISABLED_BY_DEFAULT: frozenset[str] = frozenset()
"""Names that ``*`` does not include (upstream has a few, e.g. bootstrapsigner)."""


class UnknownControllerError(ValueError):
    pass


def enabled_controllers(spec: str | list[str] = "*") -> list[str]:
    """The controller names a ``--controllers`` value enables, in table order."""
    items = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    known = set(CONTROLLER_MODULES)
    for item in items:
        name = item.lstrip("-")
        if item != "*" and name not in known:
            raise UnknownControllerError(
                f"{name!r} is not a known controller; known controllers: {', '.join(sorted(known))}"
            )
    enabled: list[str] = []
    star = "*" in items
    for name in CONTROLLER_MODULES:
        if f"-{name}" in items:
            continue
        if name in items or (star and name not in DISABLED_BY_DEFAULT):
            enabled.append(name)
    return enabled


def load_factory(name: str) -> ControllerFactory | None:
    """The factory of controller ``name``, or ``None`` if its module is not there (yet)."""
    module_name = CONTROLLER_MODULES[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name is not None and module_name.startswith(err.name):
            logger.warning("controller not available in this build", extra={"controller": name, "controller_module": module_name})
            return None
        raise
    factory: ControllerFactory = getattr(module, "new_controller")
    return factory
