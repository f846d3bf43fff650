"""The built-in resources k8py serves, registered at start-up.

Each module declares one API group's kinds as
:class:`k8py.apiserver.registry.ResourceDefinition` values; names, short names,
categories, subresources and selectable fields follow upstream's discovery
documents for v1.32.
"""

from __future__ import annotations

from k8py.apiserver.registry import Registry, ResourceDefinition
from k8py.apiserver.resources import (
    admissionregistration, apiregistration, apps, authentication, authorization, autoscaling, batch, certificates, core, flowcontrol,
    metrics, misc, networking, policy, quota, rbac, scheduling, storage,
)

__all__ = ["builtin_definitions", "register_builtins"]


def builtin_definitions() -> list[ResourceDefinition]:
    return [*core.DEFINITIONS, *apps.DEFINITIONS, *batch.DEFINITIONS, *misc.DEFINITIONS, *scheduling.DEFINITIONS, *metrics.DEFINITIONS,
            *policy.DEFINITIONS, *quota.DEFINITIONS, *autoscaling.DEFINITIONS,
            *rbac.DEFINITIONS, *admissionregistration.DEFINITIONS, *apiregistration.DEFINITIONS,
            *authentication.DEFINITIONS, *authorization.DEFINITIONS, *certificates.DEFINITIONS, *flowcontrol.DEFINITIONS,
            *storage.DEFINITIONS, *networking.DEFINITIONS]


def register_builtins(registry: Registry) -> None:
    for definition in builtin_definitions():
        registry.add(definition)
