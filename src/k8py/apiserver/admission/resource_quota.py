"""ResourceQuota admission: a create that would take a namespace over one of
its quotas is refused (upstream ``plugin/pkg/admission/resourcequota``).

For each ResourceQuota of the new object's namespace whose scopes select it
(``k8py.api.quota``), over the names in ``status.hard`` the object charges:

- a pod that sets no value for a compute name the quota limits (say
  ``limits.cpu``): 403 "failed quota: Q: must specify limits.cpu";
- a quota the resource-quota controller has not filled in yet (no
  ``status.hard``): 403 "status unknown for quota: Q, resources: …";
- ``used + requested > hard`` for some name: 403 "exceeded quota: Q,
  requested: …, used: …, limited: …" (only the names exceeded, sorted);
- otherwise the charge is added to ``status.used`` *before* the object is
  stored, inside a guaranteed update of the quota, so two creates racing for
  the last unit cannot both pass; if the create then fails the charge is
  taken back (the returned rollback). The controller later recomputes
  ``used`` from what exists, which also returns what deleted objects held.

An update is charged what it uses beyond the old object (a Service turned
LoadBalancer, a claim grown); what shrinks is given back by the controller.
The ``ResourceQuota`` plugin of the chain (validating, last before AlwaysDeny,
so LimitRanger's defaults and the webhooks' mutations are charged). A charge
is undone if the write then fails (``attributes.on_abort``). Dry runs check
but do not charge.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Awaitable, Callable

import orjson

from k8py.api.errors import Forbidden, NotFound
from k8py.api.quantity import parse_quantity
from k8py.api.quota import format_amount, matches_scopes, usage
from k8py.apiserver.admission.attributes import AdmissionAttributes, Operation
from k8py.apiserver.registry import Registry, ResourceDefinition
from k8py.apiserver.store.object_store import ObjectStore
from k8py.apiserver.watch.cacher import Cacher

__all__ = ["ResourceQuotaAdmission"]

Object = dict[str, Any]
Rollback = Callable[[], Awaitable[None]]
_MUST_SPECIFY = ("requests.cpu", "requests.memory", "limits.cpu", "limits.memory", "cpu", "memory")


def _pretty(names: list[str], amounts: dict[str, Fraction]) -> str:
    return ",".join(f"{n}={format_amount(n, amounts.get(n, Fraction(0)))}" for n in names)


def _amounts(values: dict[str, Any] | None) -> dict[str, Fraction]:
    return {k: parse_quantity(v) for k, v in (values or {}).items()}


class ResourceQuotaAdmission:
    def __init__(self, registry: Registry, cacher: Cacher, store: ObjectStore) -> None:
        self.registry = registry
        self.cacher = cacher
        self.store = store

    def _quotas(self, namespace: str) -> list[Object]:
        d = self.registry.get("", "v1", "resourcequotas")
        if d is None or not namespace:
            return []
        # the namespace's own (a create pays nothing for other namespaces' objects)
        objs = (orjson.loads(c.data) for c in self.cacher.cache_for(d).candidates(namespace))
        return [q for q in objs if (q.get("metadata") or {}).get("namespace") == namespace]

    name = "ResourceQuota"

    def handles(self, operation: Operation) -> bool:
        return operation in (Operation.CREATE, Operation.UPDATE)

    def concerns(self, group: str, resource: str, subresource: str) -> bool:
        """Objects themselves, not their subresources (``validate`` passes those)."""
        return not subresource

    async def validate(self, attributes: AdmissionAttributes) -> None:
        definition, obj = attributes.definition, attributes.object
        if definition is None or obj is None or attributes.subresource or not definition.namespaced:
            return
        if attributes.operation is Operation.UPDATE and attributes.old_object is None:
            return
        rollback = await self.charge(definition, obj, attributes.old_object, dry_run=attributes.dry_run)
        if rollback is not None:
            attributes.on_abort(rollback)

    async def charge(self, definition: ResourceDefinition, obj: Object, old: Object | None, *,
                     dry_run: bool = False) -> Rollback | None:
        """Check and charge ``obj``'s usage (an update: what it uses more than ``old``)."""
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or ""
        quotas = self._quotas(namespace)
        if not quotas:
            return None
        charge = usage(definition.plural, definition.group, obj)
        if old is not None:
            before = usage(definition.plural, definition.group, old)
            charge = {k: v - before.get(k, Fraction(0)) for k, v in charge.items()}
            charge = {k: v for k, v in charge.items() if v > 0}  # upstream: only what grows is checked
            if not charge:
                return None
        prefix = f'{definition.plural}{"." + definition.group if definition.group else ""} "{meta.get("name") or ""}" is forbidden: '
        charged: list[tuple[str, dict[str, Fraction]]] = []

        async def rollback() -> None:
            for quota_name, amounts in charged:
                await self._charge(namespace, quota_name, {k: -v for k, v in amounts.items()}, prefix, check=False)

        try:
            for quota in quotas:
                if not matches_scopes(quota, definition.plural, definition.group, obj):
                    continue
                hard_names = set(((quota.get("spec") or {}).get("hard") or {}))
                if old is None and definition.plural == "pods" and not definition.group:
                    missing = sorted(n for n in hard_names & set(_MUST_SPECIFY) if n not in charge)
                    if missing:
                        raise Forbidden(prefix + f"failed quota: {quota['metadata']['name']}: must specify {','.join(missing)}",
                                        name=meta.get("name") or "", kind=definition.plural)
                relevant = {k: v for k, v in charge.items() if k in hard_names}
                if not relevant:
                    continue
                await self._charge(namespace, quota["metadata"]["name"], relevant, prefix, check=True, dry_run=dry_run)
                if not dry_run:
                    charged.append((quota["metadata"]["name"], relevant))
        except BaseException:
            await rollback()
            raise
        return rollback if charged else None

    async def _charge(self, namespace: str, name: str, amounts: dict[str, Fraction], prefix: str, *,
                      check: bool, dry_run: bool = False) -> None:
        d = self.registry.get("", "v1", "resourcequotas")
        assert d is not None

        def mutate(quota: Object) -> Object:
            status = quota.setdefault("status", {})
            hard = _amounts(status.get("hard"))
            if check and not all(k in hard for k in amounts):
                unknown = sorted(k for k in amounts if k not in hard)
                raise Forbidden(prefix + f"status unknown for quota: {name}, resources: {','.join(unknown)}")
            used = _amounts(status.get("used"))
            new = {k: max(Fraction(0), used.get(k, Fraction(0)) + v) for k, v in amounts.items()}
            exceeded = sorted(k for k, v in new.items() if check and k in hard and v > hard[k])
            if exceeded:
                raise Forbidden(prefix + f"exceeded quota: {name}, requested: {_pretty(exceeded, amounts)}, "
                                f"used: {_pretty(exceeded, used)}, limited: {_pretty(exceeded, hard)}")
            status["used"] = {**(status.get("used") or {}), **{k: format_amount(k, v) for k, v in new.items()}}
            return quota

        try:
            await self.store.guaranteed_update(d, namespace, name, mutate, subresource="status", dry_run=dry_run)
        except NotFound:
            return
