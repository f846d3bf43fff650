"""Resource quota (``resourcequota``): keep each ResourceQuota's status current
(upstream ``pkg/controller/resourcequota``).

``status.hard`` is the spec's ``hard``; ``status.used`` is recomputed, for the
names in ``hard`` only, from the objects in the quota's namespace that its
scopes select, with the charges of ``k8py.api.quota`` (the same function the
API server's admission charges with, so both agree on what an object costs).
Pods come from the shared informer; as upstream's replenishment, only what
frees quota (a pod deleted or turned Succeeded/Failed) re-syncs the quotas of
its namespace at once, and quota updates only when ``spec.hard`` changes or
``status.hard`` is behind it, since a recount from a cache that has not yet
seen an object admission just charged would hand that charge back (the
deletion of a Service, ConfigMap or Secret re-syncs too); other
counted kinds (``count/<plural>[.<group>]``, ``services``, ``configmaps``, …)
are listed from the API server on each sync (``count/<plural>.<group>`` of
a custom resource through discovery, so a CRD created later is counted), and every quota is re-synced
every ``resource_quota_sync_period`` seconds (``options.extra``; upstream's
``--resource-quota-sync-period`` is 5 minutes).

The status write carries the quota's resourceVersion: if admission charged a
new object meanwhile, the write conflicts and the sync is retried with the
newer quota.
"""

from __future__ import annotations

import logging
from fractions import Fraction
from typing import Any

from k8py.api.errors import StatusError
from k8py.api.quota import format_amount, is_terminal, matches_scopes, usage
from k8py.client.keys import split_key
from k8py.client.resource import Resource
from k8py.client.resources import CONFIGMAPS, PODS, RESOURCE_QUOTAS, SECRETS, SERVICES
from k8py.controllers.context import ControllerContext
from k8py.controllers.keyed_controller import KeyedController, unwrap_tombstone

__all__ = ["ResourceQuotaController", "new_controller"]

logger = logging.getLogger(__name__)

_LEGACY = {"services", "configmaps", "secrets", "replicationcontrollers", "resourcequotas", "persistentvolumeclaims",
           "services.nodeports", "services.loadbalancers"}
_GROUP_VERSIONS = {"": "v1", "apps": "v1", "batch": "v1", "policy": "v1", "autoscaling": "v2", "networking.k8s.io": "v1",
                   "discovery.k8s.io": "v1", "coordination.k8s.io": "v1", "rbac.authorization.k8s.io": "v1"}
_POD_NAMES = ("pods", "count/pods", "cpu", "memory", "ephemeral-storage")


def _is_pod_name(name: str) -> bool:
    return name in _POD_NAMES or name.startswith(("requests.", "limits."))


def _resource_of(name: str) -> Resource | None:
    """The resource a non-pod quota name counts (``None``: not one we can count)."""
    if name in _LEGACY:
        return Resource("", "v1", name.split(".", 1)[0], True)
    if not name.startswith("count/"):
        return None
    plural, _, group = name[len("count/"):].partition(".")
    version = _GROUP_VERSIONS.get(group)
    return Resource(group, version, plural, True) if version else None


class ResourceQuotaController(KeyedController):
    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, name="resourcequota", queue_name="resourcequota_primary")
        self.quotas = ctx.informers.informer(RESOURCE_QUOTAS)
        self.pods = ctx.informers.informer(PODS)
        self.wait_for(self.quotas, self.pods)
        self.sync_period = float(ctx.options.extra.get("resource_quota_sync_period", 300.0))
        self.quotas.add_event_handler(on_add=self.enqueue, on_update=self._quota_changed)
        self.pods.add_event_handler(on_update=self._pod_updated, on_delete=self._pod_changed)
        for resource in (SERVICES, CONFIGMAPS, SECRETS):  # their deletion gives quota back at once
            ctx.informers.informer(resource).add_event_handler(on_delete=self._pod_changed)

    def _quota_changed(self, old: Any, new: Any) -> None:
        # not on status writes: admission's charges would be raced by a recount
        # from a cache that has not seen the object charged yet
        hard = (new.get("spec") or {}).get("hard")
        if hard != (old.get("spec") or {}).get("hard") or hard != (new.get("status") or {}).get("hard"):
            self.enqueue(new)

    def _pod_updated(self, old: Any, new: Any) -> None:
        if is_terminal(new) and not is_terminal(old):
            self._pod_changed(new)

    def _pod_changed(self, pod: Any) -> None:
        """``pod`` (or another namespaced object) freed quota: re-sync its namespace's quotas."""
        pod = unwrap_tombstone(pod)
        namespace = ((pod or {}).get("metadata") or {}).get("namespace")
        for quota in self.quotas.lister.list(namespace=namespace) if namespace else ():
            self.enqueue(quota)

    async def sync(self, key: str) -> float | None:
        namespace, name = split_key(key)
        quota = self.quotas.lister.try_get(namespace, name)
        if quota is None:
            return None
        hard = dict((quota.get("spec") or {}).get("hard") or {})
        used: dict[str, Fraction] = {n: Fraction(0) for n in hard}
        pod_names = [n for n in hard if _is_pod_name(n)]
        if pod_names:
            for pod in self.pods.lister.list(namespace=namespace):
                if matches_scopes(quota, "pods", "", pod):
                    self._add(used, usage("pods", "", pod), pod_names)
        counted = {n: await self._resource(n) for n in hard if not _is_pod_name(n)}
        for resource in {r for r in counted.values() if r is not None}:
            names = [n for n, r in counted.items() if r == resource]
            items = (await self.client.list(resource, namespace)).get("items") or []
            for obj in items:
                if matches_scopes(quota, resource.plural, resource.group, obj):
                    self._add(used, usage(resource.plural, resource.group, obj), names)
        status = {"hard": hard, "used": {n: format_amount(n, v) for n, v in used.items()}}
        if (quota.get("status") or {}) != status:
            await self.client.update(RESOURCE_QUOTAS, dict(quota, status=status), subresource="status")
        return self.sync_period

    async def _resource(self, name: str) -> Resource | None:
        """:func:`_resource_of`, or for ``count/<plural>.<group>`` of a group
        it does not know (a custom resource), the resource discovery finds."""
        resource = _resource_of(name)
        if resource is not None or not name.startswith("count/"):
            return resource
        plural, _, group = name[len("count/"):].partition(".")
        try:
            found = await self.client.discovery.resource_for(plural, group=group)
        except StatusError:
            return None  # not served (yet): counted once discovery finds it
        return found if found.namespaced and found.plural == plural else None

    @staticmethod
    def _add(used: dict[str, Fraction], charge: dict[str, Fraction], names: list[str]) -> None:
        for n in names:
            if n in charge:
                used[n] += charge[n]


def new_controller(ctx: ControllerContext) -> ResourceQuotaController:
    return ResourceQuotaController(ctx)
