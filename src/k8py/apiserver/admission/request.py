"""One request's admission, as the object store calls it (:class:`~k8py.apiserver.store.admission_hook.AdmissionHook`).

:class:`RequestAdmission` binds the chain to the attributes the handlers
resolved (operation, resource, user, options) and fills in the objects when
the store calls it, at the points upstream's registry admits. It also
carries what the plugins said back: ``warnings`` (for the response) and
``audit_annotations`` (for the audit event).

Retries: a guaranteed update re-runs ``mutate``/``validate`` on a conflict;
``validate`` first undoes what the previous attempt's plugins charged
(ResourceQuota), so a request charges once, for the attempt that is stored.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from k8py.apiserver.admission.attributes import AdmissionAttributes, Operation
from k8py.apiserver.admission.chain import AdmissionChain

__all__ = ["RequestAdmission"]

Object = dict[str, Any]


class RequestAdmission:
    def __init__(self, chain: AdmissionChain, attributes: AdmissionAttributes) -> None:
        self.chain = chain
        self.attributes = attributes

    @property
    def warnings(self) -> list[str]:
        return self.attributes.warnings

    @property
    def audit_annotations(self) -> dict[str, str]:
        return self.attributes.audit_annotations

    def _bind(self, obj: Object | None, old: Object | None) -> AdmissionAttributes:
        a = self.attributes
        a.object = obj
        a.old_object = old
        if obj is not None and not a.name:
            a.name = (obj.get("metadata") or {}).get("name") or ""
        return a

    async def mutate(self, obj: Object, old: Object | None) -> Object:
        a = self._bind(obj, old)
        await self.chain.admit(a)
        return a.object if a.object is not None else obj

    async def validate(self, obj: Object, old: Object | None) -> None:
        await self.abort()  # a retried attempt: what the last one charged is given back first
        await self.chain.validate(self._bind(obj, old))

    async def delete(self, old: Object) -> None:
        a = self._bind(None, old)
        await self.chain.admit(a)
        await self.chain.validate(a)

    async def admit_object(self, obj: Object | None) -> Object | None:
        """Both phases for a request whose object is not stored as such (a Binding, an Eviction, exec options)."""
        a = self._bind(obj, None)
        await self.chain.admit(a)
        await self.chain.validate(a)
        return a.object

    async def abort(self) -> None:
        rollbacks, self.attributes.rollbacks = self.attributes.rollbacks, []
        for rollback in rollbacks:
            await asyncio.shield(rollback())

    def for_create(self) -> "RequestAdmission":
        """As a CREATE; the sinks stay shared, so warnings reach the same response."""
        a = self.attributes
        return RequestAdmission(self.chain, dataclasses.replace(
            a, operation=Operation.CREATE, object=None, old_object=None, warnings=a.warnings,
            audit_annotations=a.audit_annotations, rollbacks=[]))
