"""Fixtures for the proxy tests: a real API server with a Service range of
its own, the EndpointSlice controller, ``run_proxy`` in the test's loop, and
"pods" that are small asyncio HTTP/UDP servers on loopback addresses the test
picks (their statuses are written as a kubelet would write them).

Every address is drawn at random inside its range (Services in
127.192.0.0/12, pods in 127.64.0.0/10, the node's address for node ports in
127.128.0.0/16) so that tests of other sessions on this machine do not
collide with these."""

from __future__ import annotations

import asyncio
import contextlib
import random
from typing import Any, AsyncIterator, Iterator

import pytest

from k8py.client.config import ClientConfig
from k8py.client.resources import PODS
from k8py.client.rest import RestClient, RetryPolicy
from k8py.controllers.controller_manager import ControllerManager
from k8py.proxy.app import ProxyOptions, run_proxy
from tests.support.servers import ServerThread, sqlite_storage

NS = "default"


def random_service_cidr() -> str:
    return f"127.{random.randint(193, 207)}.{random.randint(0, 255)}.0/24"


def random_pod_ip() -> str:
    return f"127.{random.randint(100, 127)}.{random.randint(0, 255)}.{random.randint(2, 254)}"


@pytest.fixture
def server(tmp_path) -> Iterator[ServerThread]:
    with ServerThread(sqlite_storage(str(tmp_path / "data")), bookmark_interval=1.0,
                      service_cidr=random_service_cidr()) as s:
        yield s


@pytest.fixture
async def client(server) -> AsyncIterator[RestClient]:
    async with RestClient(ClientConfig(server=server.url), retry=RetryPolicy(initial=0.02, cap=0.2)) as c:
        yield c


@contextlib.asynccontextmanager
async def _running(coro: Any, name: str) -> AsyncIterator[asyncio.Task[Any]]:
    task = asyncio.ensure_future(coro)
    task.set_name(name)
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class Cluster:
    def __init__(self, client: RestClient, node_address: str) -> None:
        self.client = client
        self.node_address = node_address
        self.proxier: Any = None
        self._servers: dict[str, list[Any]] = {}

    async def start_pod(self, name: str, labels: dict[str, str], *, port: int = 8080, ready: bool = True,
                        node: str = "node-a", udp: bool = False, finalizers: list[str] | None = None) -> str:
        ip = random_pod_ip()
        servers: list[Any] = [await asyncio.start_server(lambda r, w: _answer(r, w, name), ip, port)]
        if udp:
            loop = asyncio.get_running_loop()
            transport, _ = await loop.create_datagram_endpoint(lambda: _UDPEcho(name), local_addr=(ip, port))
            servers.append(transport)
        self._servers[name] = servers
        meta: dict[str, Any] = {"name": name, "labels": labels}
        if finalizers:
            meta["finalizers"] = finalizers
        spec = {"nodeName": node, "containers": [{"name": "c", "image": "web", "ports": [{"name": "http", "containerPort": port}]}]}
        await self.client.create(PODS, {"metadata": meta, "spec": spec}, namespace=NS)
        await self.set_ready(name, ip, ready)
        return ip

    async def set_ready(self, name: str, ip: str, ready: bool) -> None:
        pod = await self.client.get(PODS, NS, name)
        pod["status"] = {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                         "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
        await self.client.update_status(PODS, pod)

    def stop_pod_servers(self, name: str) -> None:
        for s in self._servers.pop(name, []):
            s.close()

    def close(self) -> None:
        for name in list(self._servers):
            self.stop_pod_servers(name)


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, name: str) -> None:
    try:
        await reader.readuntil(b"\r\n\r\n")
        body = name.encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
        await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


class _UDPEcho(asyncio.DatagramProtocol):
    def __init__(self, name: str) -> None:
        self.name = name
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.transport.sendto(self.name.encode() + b":" + data, addr)


async def http_get(ip: str, port: int, *, timeout: float = 5.0) -> str:
    """The body a GET to ip:port answers (raises ConnectionRefusedError on REJECT)."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection(ip, port), timeout)
    try:
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), timeout)
    finally:
        writer.close()
    if not raw:
        raise ConnectionResetError("closed without an answer")
    return raw.split(b"\r\n\r\n", 1)[1].decode()


@pytest.fixture
async def cluster(server, client) -> AsyncIterator[Cluster]:
    node_address = f"127.128.{random.randint(0, 255)}.{random.randint(2, 254)}"
    c = Cluster(client, node_address)
    manager = ControllerManager(client, controllers=["endpointslice", "endpointslicemirroring"])
    config = ClientConfig(server=server.url)
    options = ProxyOptions(node_name="node-a", node_addresses=(node_address,), mode="userspace")

    def keep(proxier: Any) -> None:
        c.proxier = proxier

    async with _running(manager.run(), "controller-manager"):
        await asyncio.wait_for(manager.started.wait(), 30)
        async with _running(run_proxy(config, options, on_proxier=keep), "proxy"):
            while c.proxier is None:
                await asyncio.sleep(0.01)
            await asyncio.wait_for(c.proxier.synced.wait(), 30)
            try:
                yield c
            finally:
                c.close()


async def eventually(check: Any, timeout: float = 20.0, period: float = 0.05) -> Any:
    """Poll ``check`` until truthy; a connection error counts as "not yet"."""
    deadline = asyncio.get_running_loop().time() + timeout
    last: Any = None
    while True:
        try:
            last = check()
            if asyncio.iscoroutine(last):
                last = await last
        except (OSError, asyncio.TimeoutError) as err:
            last = err
        if last and not isinstance(last, BaseException):
            return last
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met in {timeout}s (last: {last!r})")
        await asyncio.sleep(period)
