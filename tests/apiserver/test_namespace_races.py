"""Writes decided against a watch cache that lags the store.

On etcd the watch cache trails the store by a few milliseconds; these tests
make that lag last (an in-memory store whose watches are paused on cue, see
``tests/support/fake_storage.py``) so the race is deterministic: a create
right after its namespace's deletion is refused (fresh-clone CI saw it
admitted on etcd), and ``deletecollection`` deletes what the store holds even
when the cache has not seen it.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any, Iterator

import pytest

from tests.support.fake_storage import MemoryStorage
from tests.support.servers import ServerThread


@pytest.fixture
def lagging() -> Iterator[tuple[ServerThread, MemoryStorage]]:
    storage = MemoryStorage()
    with ServerThread(lambda: storage) as server:
        yield server, storage


def _send(url: str, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"{url}{path}", data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def _on_loop(server: ServerThread, fn) -> None:
    async def call() -> None:
        fn()

    server.call(call())


def test_a_create_right_after_its_namespace_was_deleted_is_refused_though_the_cache_lags(lagging):
    server, storage = lagging
    assert _send(server.url, "POST", "/api/v1/namespaces", {"metadata": {"name": "dying", "finalizers": ["example.com/hold"]}})[0] == 201
    assert _send(server.url, "POST", "/api/v1/namespaces/dying/configmaps", {"metadata": {"name": "before"}})[0] == 201
    _on_loop(server, storage.pause_watches)  # from here the cache sees nothing new
    try:
        code, body = _send(server.url, "DELETE", "/api/v1/namespaces/dying")
        assert code in (200, 202) and body["metadata"]["deletionTimestamp"], body
        code, body = _send(server.url, "POST", "/api/v1/namespaces/dying/configmaps", {"metadata": {"name": "after"}})
        assert code == 403, body
        assert body["message"] == 'configmaps "after" is forbidden: unable to create new content in namespace dying because it is being terminated'
    finally:
        _on_loop(server, storage.resume_watches)


def test_deletecollection_deletes_what_the_store_holds_when_the_cache_lags(lagging):
    server, storage = lagging
    base = "/api/v1/namespaces/default/configmaps"
    assert _send(server.url, "POST", base, {"metadata": {"name": "seen"}})[0] == 201
    _on_loop(server, storage.pause_watches)
    try:
        assert _send(server.url, "POST", base, {"metadata": {"name": "unseen"}})[0] == 201
        code, body = _send(server.url, "DELETE", base)
        assert code == 200, body
        assert sorted(i["metadata"]["name"] for i in body["items"]) == ["seen", "unseen"]
    finally:
        _on_loop(server, storage.resume_watches)
    code, body = _send(server.url, "GET", f"{base}?resourceVersion=")
    assert code == 200 and body["items"] == []
