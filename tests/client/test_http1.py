"""The lean HTTP/1.1 transport against a real aiohttp server: the body
framings and encodings a server may choose, keep-alive reuse and when a
connection must not be reused, and the TransportError contract."""

from __future__ import annotations

import asyncio
import gzip
import socket
from typing import AsyncIterator

import pytest
from aiohttp import web

from k8py.client.config import ClientConfig
from k8py.client.http1 import Http1Transport
from k8py.client.transport import HTTPRequest, TransportError


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[web.Request], set[int]]]:
    seen: list[web.Request] = []
    peers: set[int] = set()

    async def echo(request: web.Request) -> web.StreamResponse:
        seen.append(request)
        peers.add(request.transport.get_extra_info("peername")[1])
        body = await request.read()
        return web.json_response({"method": request.method, "path": request.raw_path, "body": body.decode(),
                                  "auth": request.headers.get("Authorization", "")})

    async def chunked(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for part in (b'{"a":', b'"chunked"', b"}"):
            await resp.write(part)
        await resp.write_eof()
        return resp

    async def gzipped(request: web.Request) -> web.Response:
        return web.Response(body=gzip.compress(b'{"a":"gzip"}'), headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})

    async def closing(request: web.Request) -> web.Response:
        peers.add(request.transport.get_extra_info("peername")[1])
        return web.Response(body=b"{}", headers={"Connection": "close"})

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.Response(body=b"{}")

    async def missing(request: web.Request) -> web.Response:
        return web.json_response({"kind": "Status", "code": 404}, status=404, headers={"Retry-After": "3"})

    async def repeated(request: web.Request) -> web.Response:
        from multidict import CIMultiDict

        headers = CIMultiDict([("X-Thing", "a"), ("x-thing", "b"), ("Warning", '299 - "é"')])
        return web.Response(body=b"{}", headers=headers)

    app = web.Application()
    app.router.add_route("*", "/echo/{tail:.*}", echo)
    app.router.add_get("/repeated", repeated)
    app.router.add_get("/chunked", chunked)
    app.router.add_get("/gzip", gzipped)
    app.router.add_get("/close", closing)
    app.router.add_get("/slow", slow)
    app.router.add_get("/missing", missing)
    runner = web.AppRunner(app, keepalive_timeout=0.3)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}", seen, peers
    finally:
        await runner.cleanup()


async def test_requests_carry_method_path_query_body_and_auth_and_reuse_one_connection(server):
    url, seen, peers = server
    t = Http1Transport(ClientConfig(server=url, token="secret"))
    try:
        for i in range(3):
            resp = await t.send(HTTPRequest("POST", "/echo/a:b", (("labelSelector", "app=x,tier!=y"),),
                                            {"Content-Type": "application/json"}, b'{"n":%d}' % i))
            assert resp.status == 200
            assert resp.headers.get("content-type", "").startswith("application/json")
            assert resp.headers["Content-Type"] == resp.headers["content-type"]
        import orjson
        body = orjson.loads(await resp.read())
        assert body == {"method": "POST", "path": "/echo/a:b?labelSelector=app%3Dx%2Ctier%21%3Dy", "body": '{"n":2}', "auth": "Bearer secret"}
        assert seen[-1].query["labelSelector"] == "app=x,tier!=y"
        assert len(peers) == 1  # keep-alive: the same connection each time
    finally:
        await t.close()


async def test_header_names_ignore_case_and_repeats_are_joined(server):
    url, _, _ = server
    transport = Http1Transport(ClientConfig(server=url))
    try:
        response = await transport.send(HTTPRequest("GET", "/repeated", (), {}, None, 5.0))
        assert response.headers.get("X-THING") == "a, b" and "x-Thing" in response.headers
        assert response.headers["warning"] == '299 - "é"'.encode().decode("latin-1")  # bytes as sent, latin-1
        assert response.headers.get("content-length") == "2"
    finally:
        await transport.close()


async def test_chunked_and_gzip_bodies_are_decoded(server):
    url, _, _ = server
    t = Http1Transport(ClientConfig(server=url))
    try:
        assert await (await t.send(HTTPRequest("GET", "/chunked"))).read() == b'{"a":"chunked"}'
        assert await (await t.send(HTTPRequest("GET", "/gzip"))).read() == b'{"a":"gzip"}'
        resp = await t.send(HTTPRequest("GET", "/missing"))
        assert resp.status == 404 and resp.headers.get("Retry-After") == "3"
    finally:
        await t.close()


async def test_a_connection_the_server_closes_is_not_reused(server):
    url, _, peers = server
    t = Http1Transport(ClientConfig(server=url))
    try:
        await t.send(HTTPRequest("GET", "/close"))
        await t.send(HTTPRequest("GET", "/close"))
        assert len(peers) == 2
        await t.send(HTTPRequest("GET", "/echo/x"))
        await asyncio.sleep(0.8)  # past the server's keep-alive timeout: it closes the idle connection
        resp = await t.send(HTTPRequest("GET", "/echo/y"))
        assert resp.status == 200 and len(peers) == 4
    finally:
        await t.close()


async def test_a_refused_connection_was_never_sent_and_a_timeout_was(server):
    url, _, _ = server
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    t = Http1Transport(ClientConfig(server=f"http://127.0.0.1:{free}"))
    with pytest.raises(TransportError) as refused:
        await t.send(HTTPRequest("POST", "/x", body=b"{}"))
    assert refused.value.request_sent is False
    await t.close()
    t = Http1Transport(ClientConfig(server=url))
    try:
        with pytest.raises(TransportError) as timed_out:
            await t.send(HTTPRequest("GET", "/slow", timeout=0.2))
        assert timed_out.value.request_sent is True
        assert (await t.send(HTTPRequest("GET", "/echo/after"))).status == 200  # a fresh connection
    finally:
        await t.close()


async def test_streamed_requests_go_to_the_wrapped_transport(server):
    url, _, _ = server
    t = Http1Transport(ClientConfig(server=url))
    try:
        resp = await t.send(HTTPRequest("GET", "/chunked"), stream=True)
        got = b"".join([c async for c in resp.chunks()])
        resp.close()
        assert got == b'{"a":"chunked"}'
        assert type(resp).__name__ == "_AiohttpResponse"
    finally:
        await t.close()


def test_a_transport_carried_over_to_a_new_loop_opens_fresh_connections(server_url_thread):
    t = Http1Transport(ClientConfig(server=server_url_thread))
    for _ in range(2):  # each asyncio.run is a new loop; the pooled connection of the first is not reused
        assert asyncio.run(t.send(HTTPRequest("GET", "/"))).status == 200
    asyncio.run(t.close())


@pytest.fixture
def server_url_thread():
    """A plain HTTP server on its own thread and loop (outlives the test's loops)."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, name="http1-test-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
