"""The ServiceAccount controller (``serviceaccount``): a ``default``
ServiceAccount in every active namespace, recreated if deleted (upstream
``serviceaccounts_controller``). Tokens come with authentication.

Queue ``serviceaccount`` of namespace names: a namespace added or updated,
or a ServiceAccount deleted, queues its namespace; ``sync`` creates what is
missing in a namespace that is not terminating.
"""

from __future__ import annotations

from typing import Any

from k8py.api.errors import AlreadyExists, Forbidden, NotFound
from k8py.client.keys import DeletedFinalStateUnknown
from k8py.client.resources import NAMESPACES, SERVICE_ACCOUNTS
from k8py.controllers.context import ControllerContext
from k8py.controllers.keyed_controller import KeyedController

__all__ = ["ServiceAccountController", "new_controller", "SERVICE_ACCOUNTS_TO_ENSURE"]

SERVICE_ACCOUNTS_TO_ENSURE = ("default",)


class ServiceAccountController(KeyedController):
    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, name="serviceaccount", queue_name="serviceaccount")
        self.namespaces = ctx.informers.informer(NAMESPACES)
        self.accounts = ctx.informers.informer(SERVICE_ACCOUNTS)
        self.wait_for(self.namespaces, self.accounts)
        self.namespaces.add_event_handler(on_add=self._namespace, on_update=lambda old, new: self._namespace(new))
        self.accounts.add_event_handler(on_delete=self._account_deleted)

    def _namespace(self, ns: Any) -> None:
        self.queue.add((ns.get("metadata") or {}).get("name"))

    def _account_deleted(self, obj: Any) -> None:
        sa = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        if sa is not None and (sa.get("metadata") or {}).get("name") in SERVICE_ACCOUNTS_TO_ENSURE:
            self.queue.add((sa.get("metadata") or {}).get("namespace"))

    async def sync(self, namespace: str) -> None:
        ns = self.namespaces.lister.try_get(None, namespace)
        if ns is None or (ns.get("status") or {}).get("phase", "Active") != "Active" or (ns.get("metadata") or {}).get("deletionTimestamp"):
            return
        for name in SERVICE_ACCOUNTS_TO_ENSURE:
            if self.accounts.lister.try_get(namespace, name) is not None:
                continue
            body = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}}
            try:
                await self.client.create(SERVICE_ACCOUNTS, body, namespace=namespace)
            except (AlreadyExists, NotFound):
                continue
            except Forbidden as err:
                if "being terminated" in (err.message or ""):
                    return
                raise


def new_controller(ctx: ControllerContext) -> ServiceAccountController:
    return ServiceAccountController(ctx)
