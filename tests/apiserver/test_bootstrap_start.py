"""The API server's bootstrap on a fresh store creates its objects without reading
each one first (the watch cache, just loaded, already says the store is empty),
and on a restart still finds what is there and writes nothing."""

from __future__ import annotations

import os
from typing import Any

from k8py.apiserver.server import APIServer, APIServerConfig
from k8py.storage.sqlite import SqliteStorage


class CountingStorage(SqliteStorage):
    """The embedded store, counting the single-key reads it is asked for."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.gets = 0

    async def get(self, key: str, *args: Any, **kwargs: Any) -> Any:
        self.gets += 1
        return await super().get(key, *args, **kwargs)


def _server(path: str) -> APIServer:
    return APIServer(CountingStorage(path), APIServerConfig(endpoint_reconciler_interval=0.0, secure_port=None, insecure_port=0))


async def test_a_fresh_store_is_bootstrapped_without_a_read_per_object(tmp_path) -> None:
    path = os.path.join(tmp_path, "db")
    server = _server(path)
    await server.start()
    try:
        storage = server.storage
        assert isinstance(storage, CountingStorage)
        listed = await storage.list("/registry/")
        assert len(listed.kvs) > 150  # namespaces, RBAC, priority classes, flow control, the kubernetes Service
        assert storage.gets < 10, f"{storage.gets} single-key reads on a fresh store"
        crd = server.registry.get("rbac.authorization.k8s.io", "v1", "clusterroles")
        assert (await server.store.get(crd, "", "cluster-admin"))["rules"]
        revision = await storage.current_revision()
    finally:
        await server.stop()

    server = _server(path)  # a restart: everything is found, nothing is written again
    await server.start()
    try:
        after = await server.storage.list("/registry/")
        bootstrapped = ("/registry/namespaces/", "/registry/clusterroles/", "/registry/clusterrolebindings/", "/registry/roles/",
                        "/registry/rolebindings/", "/registry/priorityclasses/", "/registry/services/specs/")
        changed = [kv.key for kv in after.kvs if kv.mod_revision > revision and kv.key.startswith(bootstrapped)]
        assert changed == []
        assert len(after.kvs) >= len(listed.kvs)
    finally:
        await server.stop()


def test_the_cel_engine_is_loaded_only_when_a_program_is_compiled(tmp_path) -> None:
    """A started API server with no CEL rules, policies or matchConditions has not
    imported the CEL engine or protobuf (45 ms of CPU before its first answer,
    4 MB); the first compile loads them. In a fresh interpreter: this test
    process may have loaded them for another test."""
    import json
    import subprocess
    import sys

    script = f"""
import asyncio, json, os, sys
from k8py.apiserver.server import APIServer, APIServerConfig
from k8py.storage.sqlite import SqliteStorage

async def main():
    server = APIServer(SqliteStorage({os.path.join(tmp_path, "db")!r}),
                       APIServerConfig(endpoint_reconciler_interval=0.0, secure_port=None, insecure_port=0))
    await server.start()
    try:
        started = {{m: m in sys.modules for m in ("cel_expr_python", "google.protobuf", "k8py.apiserver.cel.program")}}
        from k8py.apiserver import cel
        value = cel.compile("self.a + 1 == 2", ["self"]).evaluate({{"self": {{"a": 1}}}})
        print(json.dumps({{"started": started, "value": value, "loaded": "cel_expr_python" in sys.modules}}))
    finally:
        await server.stop()

asyncio.run(main())
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert result["started"] == {"cel_expr_python": False, "google.protobuf": False, "k8py.apiserver.cel.program": False}
    assert result["value"] is True and result["loaded"] is True
