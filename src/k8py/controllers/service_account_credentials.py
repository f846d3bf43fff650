"""``--use-service-account-credentials``: each controller talks to the API server as its own service account.

Upstream's ``SAControllerClientBuilder``. With it, the controller manager's own
identity (``system:kube-controller-manager``) is used only to read (the shared
informers), to lead, and to make credentials: for each controller it ensures
the ``kube-system/<service account>`` upstream names (``replicaset-controller``,
``generic-garbage-collector``, …) and asks for a token of it (TokenRequest,
``serviceaccounts/<name>/token``); the controller's writes then carry that
identity, which the bootstrap policy's ``system:controller:<name>`` role
authorizes — exactly what upstream grants each controller.

Tokens are refreshed at 80% of their life (a background task) and swapped into
the client in place: requests read the token per request. A controller with no
service account upstream (``serviceaccount-token``) keeps the manager's client.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import Callable

from k8py.api.errors import AlreadyExists, NotFound
from k8py.client.resources import SERVICE_ACCOUNTS
from k8py.client.rest import RestClient

__all__ = ["CONTROLLER_SERVICE_ACCOUNTS", "ServiceAccountClients"]

logger = logging.getLogger(__name__)

NAMESPACE = "kube-system"
#: controller (``--controllers`` name) -> the kube-system service account upstream runs it as
CONTROLLER_SERVICE_ACCOUNTS: dict[str, str] = {
    "replicaset": "replicaset-controller",
    "replicationcontroller": "replication-controller",
    "deployment": "deployment-controller",
    "job": "job-controller",
    "cronjob": "cronjob-controller",
    "daemonset": "daemon-set-controller",
    "statefulset": "statefulset-controller",
    "garbagecollector": "generic-garbage-collector",
    "namespace": "namespace-controller",
    "serviceaccount": "service-account-controller",
    "podgc": "pod-garbage-collector",
    "nodeipam": "node-controller",
    "nodelifecycle": "node-controller",
    "ttl-after-finished": "ttl-after-finished-controller",
    "endpoint": "endpoint-controller",
    "endpointslice": "endpointslice-controller",
    "endpointslicemirroring": "endpointslicemirroring-controller",
    "disruption": "disruption-controller",
    "horizontalpodautoscaling": "horizontal-pod-autoscaler",
    "resourcequota": "resourcequota-controller",
    "taint-eviction-controller": "taint-eviction-controller",
    "clusterrole-aggregation": "clusterrole-aggregation-controller",
    "root-ca-cert-publisher": "root-ca-cert-publisher",
    "csrsigning": "certificate-controller",
    "csrapproving": "certificate-controller",
}

#: what is asked for (upstream's client builder asks for an hour)
TOKEN_SECONDS = 3600
#: accounts made at once by :meth:`ServiceAccountClients.prepare`
PREPARE_CONCURRENCY = 4


class ServiceAccountClients:
    def __init__(self, root: RestClient, *, clock: Callable[[], float] = time.time) -> None:
        self.root = root
        self.clock = clock
        self._clients: dict[str, RestClient] = {}
        #: service account -> when its token should be renewed
        self._renew_at: dict[str, float] = {}

    def client(self, controller: str) -> RestClient:
        """The client of ``controller`` (after :meth:`prepare`); the manager's own for others."""
        account = CONTROLLER_SERVICE_ACCOUNTS.get(controller)
        return self._clients.get(account, self.root) if account else self.root

    async def prepare(self, controllers: list[str]) -> None:
        """Ensure the service accounts of ``controllers`` and a client with a token for each.

        :data:`PREPARE_CONCURRENCY` accounts at a time, not one after another:
        each is three requests (read, create, TokenRequest) and no controller
        starts before all are done, so on a new cluster some 75 round trips in
        a row stood between the manager's start and its first controller (the
        Node lifecycle controller, which lifts a new Node's not-ready taint).
        Bounded, as each request in flight is a connection the manager's
        client then keeps open."""
        accounts = sorted({CONTROLLER_SERVICE_ACCOUNTS[c] for c in controllers if c in CONTROLLER_SERVICE_ACCOUNTS} - set(self._clients))
        slots = asyncio.Semaphore(PREPARE_CONCURRENCY)
        async with asyncio.TaskGroup() as group:
            for account in accounts:
                group.create_task(self._prepare_one(account, slots), name=f"controller-credentials-{account}")

    async def _prepare_one(self, account: str, slots: asyncio.Semaphore) -> None:
        async with slots:
            await self._ensure_account(account)
            token, expires = await self._token(account)
        config = dataclasses.replace(self.root.config, token=token, token_file=None, cert_file=None, cert_data=None,
                                     key_file=None, key_data=None, username=None, password=None, _token_cache=None)
        config.user_agent = f"{self.root.config.user_agent}/{account}"
        self._clients[account] = RestClient(config, retry=self.root.retry)
        self._renew_at[account] = self._renewal(expires)

    def _renewal(self, expires: float) -> float:
        now = self.clock()
        return now + max(1.0, (expires - now) * 0.8)

    async def _ensure_account(self, account: str) -> None:
        try:
            await self.root.get(SERVICE_ACCOUNTS, NAMESPACE, account)
        except NotFound:
            try:
                await self.root.create(SERVICE_ACCOUNTS, {"apiVersion": "v1", "kind": "ServiceAccount",
                                                          "metadata": {"name": account, "namespace": NAMESPACE}},
                                       namespace=NAMESPACE)
            except AlreadyExists:
                pass

    async def _token(self, account: str) -> tuple[str, float]:
        review = await self.root.create(SERVICE_ACCOUNTS, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                                           "spec": {"expirationSeconds": TOKEN_SECONDS}},
                                        namespace=NAMESPACE, name=account, subresource="token")
        status = review.get("status") or {}
        expires = self.clock() + TOKEN_SECONDS
        stamp = status.get("expirationTimestamp")
        if stamp:
            from datetime import datetime

            expires = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        return status["token"], expires

    async def run(self) -> None:
        """Renew tokens at 80% of their life, until cancelled."""
        while True:
            now = self.clock()
            due = [a for a, at in self._renew_at.items() if at <= now]
            for account in due:
                try:
                    await self._ensure_account(account)
                    token, expires = await self._token(account)
                except Exception as err:  # retried soon; the old token may still be good
                    logger.warning("cannot renew a controller's token", extra={"account": account, "error": str(err)})
                    self._renew_at[account] = now + 10.0
                    continue
                self._clients[account].config.token = token
                self._renew_at[account] = self._renewal(expires)
            wait = min((at for at in self._renew_at.values()), default=now + 60.0) - now
            await asyncio.sleep(max(1.0, min(wait, 60.0)))

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()
