"""Real API servers for the RBAC tests (embedded store only: RBAC does not depend on the backend).

``secured`` runs with ``--authorization-mode=Node,RBAC``. Who a request is
comes from a stand-in authenticator installed before the server's
authentication middleware (which keeps an identity set before it): a bearer
token looked up in :data:`TOKENS` (a static token file in all but name), or
a service-account token checked by the server's own token authenticators
(helper tokens'). Everything after it — impersonation, authorization, escalation checks,
reviews — is the real code path. kubectl sends no bearer token over plain
HTTP, so it is the insecure port's ``system:unsecured`` (system:masters),
and ``--as``/``--as-group`` go through the real impersonation filter, which
allows a system:masters member to impersonate anyone.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import Any, Iterator

import kubernetes
import pytest
from aiohttp import web

from k8py.apiserver.authn.user import ALL_AUTHENTICATED, USER_KEY, UserInfo
from k8py.apiserver.handlers.token_review import TOKEN_AUTHENTICATORS
from k8py.apiserver.server import APIServer
from k8py.client.config import ClientConfig
from k8py.client.rest import RestClient, RetryPolicy
from k8py.controllers.clusterrole_aggregation import aggregated_rules
from k8py.controllers.controller_manager import ControllerManager
from tests.support.kube import Kubectl, official_client
from tests.support.servers import ServerThread, sqlite_storage

#: bearer token -> who it is
TOKENS: dict[str, UserInfo] = {
    "admin-token": UserInfo("admin", groups=("system:masters", ALL_AUTHENTICATED)),
    "alice-token": UserInfo("alice", groups=(ALL_AUTHENTICATED,)),
    "bob-token": UserInfo("bob", groups=("devs", ALL_AUTHENTICATED)),
    "node-a-token": UserInfo("system:node:node-a", groups=("system:nodes", ALL_AUTHENTICATED)),
    "node-b-token": UserInfo("system:node:node-b", groups=("system:nodes", ALL_AUTHENTICATED)),
    "scheduler-token": UserInfo("system:kube-scheduler", groups=(ALL_AUTHENTICATED,)),
    "cm-token": UserInfo("system:kube-controller-manager", groups=(ALL_AUTHENTICATED,)),
    "proxy-token": UserInfo("system:kube-proxy", groups=(ALL_AUTHENTICATED,)),
    "dns-token": UserInfo("system:k8py-dns", groups=(ALL_AUTHENTICATED,)),
}


@web.middleware
async def token_authentication(request: web.Request, handler: Any) -> web.StreamResponse:
    header = request.headers.get("Authorization", "")
    if header.startswith("Bearer ") and header[7:] in TOKENS:
        request[USER_KEY] = TOKENS[header[7:]]
    elif header.startswith("Bearer "):  # a service-account token: the server's own token authenticators
        user = None
        for authenticator in request.app.get(TOKEN_AUTHENTICATORS) or []:
            user = await authenticator.authenticate_token(header[7:])
            if user is not None:
                break
        if user is None:
            return web.json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                      "message": "Unauthorized", "reason": "Unauthorized", "code": 401}, status=401)
        request[USER_KEY] = user
    return await handler(request)


class SecuredServer(ServerThread):
    async def _main(self) -> None:  # as ServerThread's, with the stand-in authenticator first
        self._stop = asyncio.Event()
        try:
            self.server = APIServer(self._storage_factory(), self._config)
            self.server.app.middlewares.insert(1, token_authentication)
            await self.server.start()
        except BaseException as err:
            self._error = err
            self._started.set()
            return
        self._started.set()
        await self._stop.wait()
        await self.server.stop()


@pytest.fixture
def apiserver(tmp_path) -> Iterator[ServerThread]:
    with ServerThread(sqlite_storage(str(tmp_path / "data")), bookmark_interval=1.0) as server:
        yield server


@pytest.fixture
def k8s(apiserver):
    client = official_client(apiserver.url)
    yield client
    client.close()
    client.rest_client.pool_manager.clear()


@pytest.fixture
def kubectl(apiserver, tmp_path) -> Kubectl:
    return Kubectl(apiserver.url, str(tmp_path / "home"))


class ControllersThread:
    """A controller manager running the given controllers against ``url``, on its own loop."""

    def __init__(self, url: str, *names: str) -> None:
        self.url = url
        self.names = names
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="controllers", daemon=True)
        self._task: Any = None

    async def _run(self) -> None:
        async with RestClient(ClientConfig(server=self.url), retry=RetryPolicy(initial=0.02, cap=0.2)) as client:
            await ControllerManager(client, controllers=list(self.names)).run()

    def __enter__(self) -> "ControllersThread":
        self._thread.start()
        self._task = asyncio.run_coroutine_threadsafe(self._run(), self.loop)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.loop.call_soon_threadsafe(lambda: [t.cancel() for t in asyncio.all_tasks(self.loop)])
        try:
            self._task.result(30)
        except BaseException:  # cancelled, as asked
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(30)
        self.loop.close()


@pytest.fixture
def secured(tmp_path) -> Iterator[SecuredServer]:
    """Node,RBAC, with the ClusterRole aggregation controller running (admin, edit and view get their rules)."""
    with SecuredServer(sqlite_storage(str(tmp_path / "data")), bookmark_interval=1.0,
                       authorization_modes=("Node", "RBAC"), enable_admission_plugins=("NodeRestriction",)) as server:
        with ControllersThread(server.url, "clusterrole-aggregation"):
            wait_for_aggregation(server.url)
            yield server


def wait_for_aggregation(url: str, timeout: float = 60.0) -> None:
    client = official_client(url)
    try:
        rbac = kubernetes.client.RbacAuthorizationV1Api(client)
        deadline = time.monotonic() + timeout

        def converged() -> bool:  # each aggregated role holds exactly what its selectors gather now
            roles = [client.sanitize_for_serialization(r) for r in rbac.list_cluster_role().items]
            by_name = {r["metadata"]["name"]: r for r in roles}
            return all(by_name[n].get("rules") and by_name[n].get("rules") == aggregated_rules(by_name[n], roles)
                       for n in ("admin", "edit", "view"))

        while not converged():
            assert time.monotonic() < deadline, "the aggregation controller did not fill admin, edit and view"
            time.sleep(0.05)
    finally:
        client.close()


class As:
    def __init__(self, kubectl: Kubectl, args: list[str]) -> None:
        self._kubectl = kubectl
        self._args = args

    def run(self, *args: str, **kw: Any) -> Any:
        return self._kubectl.run(*self._args, *args, **kw)


class Clients:
    """kubectl and the official client for any token of :data:`TOKENS`."""

    def __init__(self, url: str, home: str) -> None:
        self.url = url
        self.home = home
        self._clients: list[kubernetes.client.ApiClient] = []

    def kubectl(self, token: str) -> "As":
        """kubectl as the user of ``token`` (through --as/--as-group, see above)."""
        user = TOKENS[token]
        args = [f"--as={user.name}", *(f"--as-group={g}" for g in user.groups if g != ALL_AUTHENTICATED)]
        return As(Kubectl(self.url, os.path.join(self.home, token)), args)

    def api(self, token: str) -> kubernetes.client.ApiClient:
        client = official_client(self.url)
        client.configuration.api_key = {"authorization": token}
        client.configuration.api_key_prefix = {"authorization": "Bearer"}
        self._clients.append(client)
        return client

    def close(self) -> None:
        for client in self._clients:
            client.close()
            client.rest_client.pool_manager.clear()


@pytest.fixture
def clients(secured, tmp_path) -> Iterator[Clients]:
    c = Clients(secured.url, str(tmp_path / "homes"))
    yield c
    c.close()
