"""The Reflector against a real server: list, watch, resume, relist on 410, bookmarks, streaming lists."""

from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator

import pytest
from aiohttp import web

from k8py.client.backoff import Backoff
from k8py.client.config import ClientConfig
from k8py.client.indexer import Indexer
from k8py.client.reflector import Reflector
from k8py.client.resources import CONFIGMAPS
from k8py.client.rest import RestClient, RetryPolicy
from tests.client.conftest import configmap, eventually
from tests.client.fault_proxy import FaultProxy
from tests.support.servers import ServerThread, sqlite_storage


def _fast_backoff() -> Backoff:
    return Backoff(initial=0.02, cap=0.2)


@contextlib.asynccontextmanager
async def running(reflector: Reflector) -> AsyncIterator[Reflector]:
    task = asyncio.create_task(reflector.run(), name="test-reflector")
    try:
        yield reflector
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _names(store: Indexer) -> set[str]:
    return {o["metadata"]["name"] for o in store.list()}


async def _server_state(client: RestClient, namespace: str = "default") -> dict[str, str]:
    listed = await client.list(CONFIGMAPS, namespace)
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in listed["items"]}


def _cache_state(store: Indexer) -> dict[str, str]:
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in store.list()}


@pytest.mark.parametrize("use_watch_list", [False, True])
async def test_lists_then_follows_changes(client, use_watch_list):
    await client.create(CONFIGMAPS, configmap("before"))
    store = Indexer()
    async with running(Reflector(client, CONFIGMAPS, store, namespace="default", use_watch_list=use_watch_list, backoff=_fast_backoff())) as r:
        await eventually(lambda: "before" in _names(store))
        await client.create(CONFIGMAPS, configmap("after"))
        await client.delete(CONFIGMAPS, "default", "before")
        await eventually(lambda: _names(store) == {"after"})
        assert r.relist_count == 0
        assert int(r.last_sync_resource_version) >= int((await client.get(CONFIGMAPS, "default", "after"))["metadata"]["resourceVersion"])
    assert store.get_by_key("default/after")["kind"] == "ConfigMap"


async def test_paginated_list_fills_the_store(client):
    for i in range(23):
        await client.create(CONFIGMAPS, configmap(f"p{i}"))
    store = Indexer()
    async with running(Reflector(client, CONFIGMAPS, store, namespace="default", use_watch_list=False, page_size=5)):
        await eventually(lambda: len(store) == 23)


async def test_broken_watch_resumes_from_last_rv_without_relisting(apiserver, client):
    async with FaultProxy(apiserver.url) as proxy:
        async with RestClient(ClientConfig(server=proxy.url), retry=RetryPolicy(initial=0.02, cap=0.1)) as via_proxy:
            store = Indexer()
            async with running(Reflector(via_proxy, CONFIGMAPS, store, namespace="default", backoff=_fast_backoff())) as r:
                await eventually(lambda: r.last_sync_resource_version != "")
                for i in range(5):
                    assert proxy.cut_all() >= 0
                    await client.create(CONFIGMAPS, configmap(f"r{i}"))
                    await eventually(lambda i=i: f"r{i}" in _names(store))
                assert r.relist_count == 0
                assert r.watch_count >= 5
                assert _cache_state(store) == await _server_state(client)


async def test_relists_after_410_when_history_is_gone(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path / "d")), watch_cache_capacity=10, bookmark_interval=60) as server:
        async with RestClient(ClientConfig(server=server.url)) as client, FaultProxy(server.url) as proxy:
            async with RestClient(ClientConfig(server=proxy.url), retry=RetryPolicy(max_attempts=2, initial=0.02, cap=0.05)) as via_proxy:
                await client.create(CONFIGMAPS, configmap("gone"))
                store = Indexer()
                async with running(Reflector(via_proxy, CONFIGMAPS, store, namespace="default", use_watch_list=False, backoff=_fast_backoff())) as r:
                    await eventually(lambda: "gone" in _names(store))
                    proxy.block()
                    await client.delete(CONFIGMAPS, "default", "gone")
                    for i in range(30):
                        await client.create(CONFIGMAPS, configmap(f"n{i}"))
                    proxy.unblock()
                    await eventually(lambda: r.relist_count >= 1)
                    await eventually(lambda: len(store) == 30)
                    assert r.expired_count >= 1
                    assert _cache_state(store) == await _server_state(client)


async def test_bookmarks_advance_the_resource_version(client):
    store = Indexer()
    async with running(Reflector(client, CONFIGMAPS, store, namespace="default", use_watch_list=False)) as r:
        await eventually(lambda: r.last_sync_resource_version != "")
        elsewhere = await client.create(CONFIGMAPS, configmap("other", namespace="kube-system"))
        target = int(elsewhere["metadata"]["resourceVersion"])
        await eventually(lambda: int(r.last_sync_resource_version) >= target, timeout=5)
        assert len(store) == 0


async def test_falls_back_to_list_and_watch_when_streaming_lists_are_refused():
    calls: list[str] = []
    item = {"metadata": {"name": "only", "namespace": "default", "resourceVersion": "5"}}

    async def handler(request: web.Request) -> web.StreamResponse:
        q = request.query
        if q.get("sendInitialEvents") == "true":
            calls.append("watchlist")
            return web.json_response({"kind": "Status", "status": "Failure", "reason": "BadRequest", "code": 400, "message": "nope"}, status=400)
        if q.get("watch") == "true":
            calls.append("watch")
            response = web.StreamResponse()
            await response.prepare(request)
            await asyncio.sleep(5)
            return response
        calls.append("list")
        return web.json_response({"kind": "ConfigMapList", "metadata": {"resourceVersion": "5"}, "items": [item]})

    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        async with RestClient(ClientConfig(server=f"http://127.0.0.1:{runner.addresses[0][1]}")) as c:
            store = Indexer()
            async with running(Reflector(c, CONFIGMAPS, store, namespace="default", backoff=_fast_backoff())) as r:
                await eventually(lambda: "watch" in calls)
                assert calls[:3] == ["watchlist", "list", "watch"]
                assert r.use_watch_list is False
                assert _names(store) == {"only"}
    finally:
        await runner.cleanup()


async def test_periodic_full_relist_reconciles_the_store(client):
    await client.create(CONFIGMAPS, configmap("x"))
    store = Indexer()
    async with running(Reflector(client, CONFIGMAPS, store, namespace="default", full_relist_period=0.5, use_watch_list=False)) as r:
        await eventually(lambda: "x" in _names(store))
        store.delete(store.get_by_key("default/x"))  # the cache diverges
        await eventually(lambda: r.relist_count >= 1, timeout=5)
        await eventually(lambda: "x" in _names(store))


async def test_http_410_on_watch_start_relists():
    lists: list[str] = []
    watches: list[str] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        q = request.query
        if q.get("watch") == "true":
            watches.append(q.get("resourceVersion", ""))
            if q.get("resourceVersion") == "5":
                return web.json_response({"kind": "Status", "status": "Failure", "reason": "Expired", "code": 410,
                                          "message": "too old resource version: 5 (6)"}, status=410)
            response = web.StreamResponse()
            await response.prepare(request)
            await asyncio.sleep(5)
            return response
        lists.append(q.get("resourceVersion", ""))
        rv, name = ("5", "old") if len(lists) == 1 else ("7", "new")
        return web.json_response({"kind": "ConfigMapList", "metadata": {"resourceVersion": rv},
                                  "items": [{"metadata": {"name": name, "namespace": "default", "resourceVersion": rv}}]})

    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        async with RestClient(ClientConfig(server=f"http://127.0.0.1:{runner.addresses[0][1]}")) as c:
            store = Indexer()
            async with running(Reflector(c, CONFIGMAPS, store, namespace="default", use_watch_list=False, backoff=_fast_backoff())) as r:
                await eventually(lambda: watches[-1:] == ["7"])
                assert lists == ["0", "5"]  # first from any cached state, then not older than the last seen
                assert r.relist_count == 1 and r.expired_count == 1
                assert _names(store) == {"new"} and r.last_sync_resource_version == "7"
    finally:
        await runner.cleanup()


async def test_failures_back_off_exponentially_on_the_injected_clock():
    import socket

    from k8py.client.clock import FakeClock

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    clock = FakeClock()
    async with RestClient(ClientConfig(server=f"http://127.0.0.1:{port}"), retry=RetryPolicy(max_attempts=1), clock=clock) as c:
        reflector = Reflector(c, CONFIGMAPS, Indexer(), use_watch_list=False, clock=clock,
                              backoff=Backoff(initial=1, cap=4, jitter=0, clock=clock))
        async with running(reflector):
            delays = []
            for _ in range(4):
                await eventually(lambda: clock.sleepers() == 1, timeout=5)
                delays.append(clock.next_deadline() - clock.monotonic())
                clock.advance(delays[-1])
            assert delays == [1, 2, 4, 4]
            assert reflector.last_sync_resource_version == ""
