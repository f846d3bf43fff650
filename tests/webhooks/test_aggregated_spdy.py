"""The front-proxy identity with extras (keys path-escaped into header names, as upstream), and
an ``Upgrade: SPDY/3.1`` request (kubectl's older exec/attach/port-forward protocol) to an aggregated API
goes through the API server's proxy: the backend sees the front-proxy identity and the protocol version the
client asked for, answers 101, and SPDY streams then flow both ways through the tunnel, half-closes included;
a backend that refuses the upgrade answers with its own Status."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from k8py.api import spdy
from k8py.apiserver.aggregator.upgrade import hijack
from k8py.kubelet.runtime.cri.spdy_client import SpdySession, StreamRefused
from tests.support.kube import Kubectl
from tests.support.servers import ServerThread, sqlite_storage
from tests.support.webhook_server import HTTPSServer
from tests.webhooks.test_aggregated_api import GROUP, GV, VERSION, register_wardle, wait_for

pytestmark = pytest.mark.kubectl

EXEC = f"/apis/{GV}/namespaces/wardle/flunders/first/exec"


async def spdy_echo(request: web.Request) -> web.StreamResponse:
    """A tiny exec server: greets on stdout, echoes stdin upper-cased, ends stdout when stdin ends."""
    if request.query.get("command") == "refuse":
        return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 400,
                                  "reason": "BadRequest", "message": "flunder first does not run commands"}, status=400)
    if request.headers.get("Upgrade") != "SPDY/3.1":
        return web.json_response({"kind": "Status", "code": 400, "message": "not an upgrade"}, status=400)
    version = request.headers.get("X-Stream-Protocol-Version", "")
    user = request.headers.get("X-Remote-User", "")
    response, tunnel = await hijack(request, [("X-Stream-Protocol-Version", version)])
    frames_in, frames_out = spdy.FrameReader(), spdy.FrameWriter()
    streams: dict[str, int] = {}
    try:
        while data := await tunnel.read():
            for frame in frames_in.feed(data):
                if isinstance(frame, spdy.ControlFrame) and frame.type == spdy.SYN_STREAM:
                    streams[frame.header("streamtype")] = frame.stream_id
                    await tunnel.write(frames_out.syn_reply(frame.stream_id))
                    if frame.header("streamtype") == "stdout":
                        await tunnel.write(frames_out.data(frame.stream_id, f"hello {user} over {version}\n".encode()))
                elif isinstance(frame, spdy.DataFrame) and frame.stream_id == streams.get("stdin"):
                    if frame.data:
                        await tunnel.write(frames_out.data(streams["stdout"], frame.data.upper()))
                    if frame.fin:
                        await tunnel.write(frames_out.data(streams["stdout"], b"", fin=True))
    finally:
        tunnel.close()
    return response


def spdy_app() -> web.Application:
    async def discovery(request: web.Request) -> web.Response:
        return web.json_response({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GV, "resources": [
            {"name": "flunders", "singularName": "flunder", "namespaced": True, "kind": "Flunder", "verbs": ["get"]},
            {"name": "flunders/exec", "singularName": "", "namespaced": True, "kind": "FlunderExecOptions",
             "verbs": ["create", "get"]}]})

    async def who(request: web.Request) -> web.Response:
        remote = {k: v for k, v in request.headers.items() if k.lower().startswith("x-remote-")}
        return web.json_response({"kind": "FlunderList", "apiVersion": GV, "metadata": {}, "items": [], "remote": remote})

    app = web.Application()
    app.router.add_get(f"/apis/{GV}", discovery)
    app.router.add_post(EXEC, spdy_echo)
    app.router.add_get(f"/apis/{GV}/namespaces/wardle/flunders", who)
    return app


@pytest.fixture
def apiserver(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path / "data")), apiservice_check_interval=1.0) as server:
        yield server


def test_a_spdy_stream_is_tunnelled_to_the_aggregated_server(apiserver, tmp_path):
    kubectl = Kubectl(apiserver.url, str(tmp_path / "home"))
    front_proxy_ca = apiserver.server.aggregator.identity.ca_pem
    with HTTPSServer(spdy_app(), dns_names=("api.wardle.svc",), client_ca_pem=front_proxy_ca) as backend:
        register_wardle(kubectl, backend)
        wait_for(lambda: "True" in kubectl.run("get", "apiservice", f"{VERSION}.{GROUP}", "--no-headers").stdout,
                 what="the APIService to become Available")

        async def talk() -> tuple[bytes, bytes, bytes, int, str]:
            async with await SpdySession.connect(f"{apiserver.url}{EXEC}?command=sh&stdin=true", "v4.channel.k8s.io") as session:
                stdout = await session.open_stream({"streamType": "stdout"})
                stdin = await session.open_stream({"streamType": "stdin"})
                greeting = await asyncio.wait_for(stdout.read(), 30)
                await stdin.write(b"echo me, " + b"x" * 200_000)  # more than one frame, more than one TCP read
                echoed = b""
                while len(echoed) < 9 + 200_000:
                    chunk = await asyncio.wait_for(stdout.read(), 30)
                    assert chunk, "stdout ended early"
                    echoed += chunk
                await stdin.close_write()
                rest = await asyncio.wait_for(stdout.read_all(), 30)  # stdin's end ends stdout
            try:
                await SpdySession.connect(f"{apiserver.url}{EXEC}?command=refuse", "v4.channel.k8s.io")
            except StreamRefused as refused:
                return greeting, echoed, rest, refused.status, refused.body
            raise AssertionError("the refused upgrade was accepted")

        greeting, echoed, rest, status, body = asyncio.run(talk())
    assert greeting == b"hello system:unsecured over v4.channel.k8s.io\n"
    assert echoed == b"ECHO ME, " + b"X" * 200_000
    assert rest == b""
    assert status == 400 and "flunder first does not run commands" in body


def test_the_callers_extras_reach_the_aggregated_server_with_their_keys_escaped(apiserver, tmp_path):
    import httpx

    kubectl = Kubectl(apiserver.url, str(tmp_path / "home"))
    with HTTPSServer(spdy_app(), dns_names=("api.wardle.svc",), client_ca_pem=apiserver.server.aggregator.identity.ca_pem) as backend:
        register_wardle(kubectl, backend)
        wait_for(lambda: "True" in kubectl.run("get", "apiservice", f"{VERSION}.{GROUP}", "--no-headers").stdout,
                 what="the APIService to become Available")
        r = httpx.get(f"{apiserver.url}/apis/{GV}/namespaces/wardle/flunders", timeout=30, headers={
            "Impersonate-User": "system:serviceaccount:wardle:bot", "Impersonate-Group": "system:serviceaccounts",
            "Impersonate-Extra-authentication.kubernetes.io%2fpod-name": "bot-0", "Impersonate-Extra-scopes": "view"})
    assert r.status_code == 200, r.text
    remote = {k.lower(): v for k, v in r.json()["remote"].items()}
    assert remote["x-remote-user"] == "system:serviceaccount:wardle:bot"
    assert remote["x-remote-extra-authentication.kubernetes.io%2fpod-name"] == "bot-0"
    assert remote["x-remote-extra-scopes"] == "view"
