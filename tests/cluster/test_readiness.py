"""The supervisor's view of Node readiness: the Table kubectl prints, not the Nodes themselves."""

from __future__ import annotations

from k8py.client.config import ClientConfig
from k8py.client.resources import NODES
from k8py.client.rest import PatchType, RestClient
from k8py.cluster.readiness import Prober, ready_nodes
from tests.support.servers import ServerThread, sqlite_storage


def _node(name: str, *, unschedulable: bool = False) -> dict:  # type: ignore[type-arg]
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {"unschedulable": unschedulable}}


async def test_ready_nodes_are_the_rows_whose_status_is_ready(tmp_path) -> None:
    server = ServerThread(sqlite_storage(str(tmp_path / "api"))).start()
    try:
        async with RestClient(ClientConfig(server=server.url)) as client:
            for name, ready, cordoned in (("a", "True", False), ("b", "False", False), ("c", "True", True), ("d", "", False)):
                await client.create(NODES, _node(name, unschedulable=cordoned))
                if ready:
                    await client.patch(NODES, None, name, {"status": {"conditions": [{"type": "Ready", "status": ready}]}},
                                       patch_type=PatchType.MERGE, subresource="status")
        prober = Prober()
        assert await ready_nodes(prober, server.url) == ["a", "c"]  # c: Ready,SchedulingDisabled
        assert await ready_nodes(prober, server.url) == ["a", "c"]  # again, on the connection kept open
        prober.close()
    finally:
        server.stop()


async def test_no_answer_is_none() -> None:
    assert await ready_nodes(Prober(), "http://127.0.0.1:9") is None


async def test_the_prober_reads_chunked_and_closing_answers_and_reconnects_after_the_server_closed() -> None:
    from aiohttp import web

    calls: list[str] = []

    async def chunked(request: web.Request) -> web.StreamResponse:
        calls.append("chunked")
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        for part in (b'{"kind": ', b'"Status"}'):
            await response.write(part)
        await response.write_eof()
        return response

    async def closing(request: web.Request) -> web.Response:
        calls.append("closing")
        return web.Response(status=503, body=b"not yet", headers={"Connection": "close"})

    app = web.Application()
    app.router.add_get("/chunked", chunked)
    app.router.add_get("/closing", closing)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    prober = Prober(timeout=10)
    try:
        assert await prober.get(f"http://127.0.0.1:{port}/chunked") == (200, b'{"kind": "Status"}')
        assert await prober.get(f"http://127.0.0.1:{port}/closing") == (503, b"not yet")
        assert not await prober.ok(f"http://127.0.0.1:{port}/closing")
        assert await prober.get(f"http://127.0.0.1:{port}/missing") == (404, b"404: Not Found")
    finally:
        prober.close()
        await runner.cleanup()
    assert await prober.get(f"http://127.0.0.1:{port}/chunked") is None  # gone: an answer of None, no exception
    assert calls == ["chunked", "closing", "closing"]


def test_the_supervisor_imports_neither_aiohttp_nor_cryptography() -> None:
    """It is a long-lived process of every cluster: its health checks need no HTTP library,
    and its certificates are made by a child (k8py.cluster.supervisor)."""
    import subprocess
    import sys

    check = ("import sys, k8py.cli.main, k8py.cluster.supervisor; "
             "print(sorted({m.split('.')[0] for m in sys.modules} & {'aiohttp', 'cryptography'}))")
    run = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"
