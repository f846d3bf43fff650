"""Fixtures for controller tests: a real API server (SQLite), a REST client,
a running controller manager with chosen controllers, and the pod driver."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator

import pytest

from k8py.client.config import ClientConfig
from k8py.client.rest import RestClient, RetryPolicy
from k8py.controllers.context import ControllerOptions
from k8py.controllers.controller_manager import ControllerManager
from tests.support.http_fault_proxy import HTTPFaultProxy
from tests.support.pod_driver import PodDriver
from tests.support.servers import ServerThread, sqlite_storage


@pytest.fixture
def server(tmp_path) -> Iterator[ServerThread]:
    with ServerThread(sqlite_storage(str(tmp_path / "data")), bookmark_interval=1.0) as s:
        yield s


@pytest.fixture
async def client(server) -> AsyncIterator[RestClient]:
    async with RestClient(ClientConfig(server=server.url), retry=RetryPolicy(initial=0.02, cap=0.2)) as c:
        yield c


@contextlib.asynccontextmanager
async def running(coro: Awaitable[Any], name: str) -> AsyncIterator[asyncio.Task[Any]]:
    task = asyncio.ensure_future(coro)
    task.set_name(name)
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]


@pytest.fixture
async def start_manager(client) -> AsyncIterator[Callable[..., Awaitable[ControllerManager]]]:
    """``await start_manager("replicaset", options=...)``: a running manager (stopped at teardown)."""
    stack = contextlib.AsyncExitStack()

    async def start(*names: str, options: ControllerOptions | None = None, via: str | None = None, **kw: Any) -> ControllerManager:
        """``via``: another URL for the manager's client (a fault proxy in front of the server)."""
        manager_client = client
        if via is not None:
            manager_client = await stack.enter_async_context(
                RestClient(ClientConfig(server=via), retry=RetryPolicy(initial=0.02, cap=0.2)))
        manager = ControllerManager(manager_client, controllers=list(names) or "*", options=options, **kw)
        await stack.enter_async_context(running(manager.run(), "controller-manager"))
        await asyncio.wait_for(manager.started.wait(), 30)
        return manager

    async with stack:
        yield start


@pytest.fixture
async def proxy(server) -> AsyncIterator[HTTPFaultProxy]:
    async with HTTPFaultProxy(server.url) as p:
        yield p


@pytest.fixture
async def driver(client) -> AsyncIterator[PodDriver]:
    d = PodDriver(client)
    async with running(d.run(), "pod-driver"):
        await d.informer.wait_for_cache_sync()
        yield d


async def eventually(check: Callable[[], Any], timeout: float = 30.0, period: float = 0.05) -> Any:
    """Poll ``check`` (sync or async) until it returns something truthy; fail after ``timeout``."""
    deadline = asyncio.get_running_loop().time() + timeout
    last: Any = None
    while True:
        last = check()
        if asyncio.iscoroutine(last):
            last = await last
        if last:
            return last
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met in {timeout}s (last: {last!r})")
        await asyncio.sleep(period)
