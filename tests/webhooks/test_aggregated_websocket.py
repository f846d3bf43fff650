"""A WebSocket (exec-style) request to an aggregated API goes through the API
server's proxy: the backend sees the front-proxy identity and the offered
subprotocol, messages flow both ways, the close code comes back, and a
backend that refuses the upgrade answers with its own Status."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from aiohttp import WSMsgType, web

from tests.support.kube import Kubectl
from tests.support.servers import ServerThread, sqlite_storage
from tests.support.webhook_server import HTTPSServer
from tests.webhooks.test_aggregated_api import GROUP, GV, VERSION, register_wardle, wait_for

pytestmark = pytest.mark.kubectl

EXEC = f"/apis/{GV}/namespaces/wardle/flunders/first/exec"


def exec_app() -> web.Application:
    async def exec_stream(request: web.Request) -> web.StreamResponse:
        if request.query.get("command") == "refuse":
            return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 400,
                                      "reason": "BadRequest", "message": "flunder first does not run commands"},
                                     status=400)
        ws = web.WebSocketResponse(protocols=("v5.channel.k8s.io",))
        await ws.prepare(request)
        await ws.send_str(f"hello {request.headers.get('X-Remote-User')} over {ws.ws_protocol}")
        async for msg in ws:
            if msg.type == WSMsgType.BINARY:
                if msg.data == b"\xffbye":
                    await ws.close(code=4000, message=b"done")
                    break
                await ws.send_bytes(b"\x01" + msg.data[1:].upper())
        return ws

    async def discovery(request: web.Request) -> web.Response:
        return web.json_response({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GV, "resources": [
            {"name": "flunders", "singularName": "flunder", "namespaced": True, "kind": "Flunder", "verbs": ["get"]},
            {"name": "flunders/exec", "singularName": "", "namespaced": True, "kind": "FlunderExecOptions",
             "verbs": ["create", "get"]}]})

    app = web.Application()
    app.router.add_get(f"/apis/{GV}", discovery)
    app.router.add_get(EXEC, exec_stream)
    return app


@pytest.fixture
def apiserver(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path / "data")), apiservice_check_interval=1.0) as server:
        yield server


@pytest.fixture
def kubectl(apiserver, tmp_path) -> Kubectl:
    return Kubectl(apiserver.url, str(tmp_path / "home"))


def test_a_websocket_stream_is_relayed_to_the_aggregated_server(apiserver, kubectl):
    front_proxy_ca = apiserver.server.aggregator.identity.ca_pem
    with HTTPSServer(exec_app(), dns_names=("api.wardle.svc",), client_ca_pem=front_proxy_ca) as backend:
        register_wardle(kubectl, backend)
        wait_for(lambda: "True" in kubectl.run("get", "apiservice", f"{VERSION}.{GROUP}", "--no-headers").stdout,
                 what="the APIService to become Available")

        async def talk() -> tuple[str, str, bytes, int | None, int, str]:
            async with aiohttp.ClientSession() as session:
                async with session.ws_connect(f"{apiserver.url}{EXEC}?command=sh",
                                              protocols=("v5.channel.k8s.io", "v4.channel.k8s.io")) as ws:
                    greeting = (await ws.receive(timeout=30)).data
                    await ws.send_bytes(b"\x00echo me")
                    echoed = (await ws.receive(timeout=30)).data
                    await ws.send_bytes(b"\xffbye")
                    closing = await ws.receive(timeout=30)
                    protocol = ws.protocol
                async with session.get(f"{apiserver.url}{EXEC}?command=refuse",
                                       headers={"Connection": "Upgrade", "Upgrade": "websocket",
                                                "Sec-WebSocket-Version": "13",
                                                "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}) as refused:
                    return greeting, protocol, echoed, closing.data, refused.status, (await refused.json())["message"]

        greeting, protocol, echoed, close_code, status, message = asyncio.run(talk())
    assert greeting == "hello system:unsecured over v5.channel.k8s.io"
    assert protocol == "v5.channel.k8s.io"
    assert echoed == b"\x01ECHO ME"
    assert close_code == 4000
    assert (status, message) == (400, "flunder first does not run commands")
