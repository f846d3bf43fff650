"""One failure in the watch path stays with its watcher or its object.

A watcher whose encoding fails gets an ERROR event and is closed alone; a
lagged store watch is resumed from its revision (no reload, no watch ended);
a stored value that cannot be decoded is logged, counted and skipped, in the
live watch and when the cache loads (a server with one in its store starts).
Bad values are written straight into the store, as a bug or a disk fault
would leave them: the API would refuse them.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.support.servers import ServerThread, sqlite_storage

_TABLE = "application/json;as=Table;g=meta.k8s.io;v=v1"


def _post(url: str, path: str, body: dict[str, Any]) -> None:
    req = urllib.request.Request(f"{url}{path}", data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as resp:
        assert resp.status == 201


def _rv(url: str, path: str) -> str:
    with urllib.request.urlopen(f"{url}{path}") as resp:
        return json.loads(resp.read())["metadata"]["resourceVersion"]


class _Watch:
    """A watch read on a thread from a raw socket (closable while a read
    blocks); ``ended`` is set when the server ends the stream."""

    def __init__(self, url: str, path: str, *, accept: str = "application/json") -> None:
        rv = _rv(url, path)
        host, port = url.removeprefix("http://").rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)))
        request = f"GET {path}?watch=true&resourceVersion={rv}&timeoutSeconds=120 HTTP/1.1\r\nHost: x\r\nAccept: {accept}\r\n\r\n"
        self.sock.sendall(request.encode())
        self.buf = b""
        self.events: list[dict] = []
        self.ended = threading.Event()
        self.changed = threading.Condition()
        assert self._until(b"\r\n\r\n").startswith(b"HTTP/1.1 200")
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _until(self, sep: bytes) -> bytes:
        while sep not in self.buf:
            data = self.sock.recv(1 << 16)
            if not data:
                raise EOFError
            self.buf += data
        head, _, self.buf = self.buf.partition(sep)
        return head

    def _read(self) -> None:
        pending = b""
        try:
            while True:
                size = int(self._until(b"\r\n"), 16)
                if size == 0:
                    return  # the last chunk: the server ended the watch
                while len(self.buf) < size + 2:
                    data = self.sock.recv(1 << 16)
                    if not data:
                        raise EOFError
                    self.buf += data
                pending += self.buf[:size]
                self.buf = self.buf[size + 2 :]
                *lines, pending = pending.split(b"\n")
                with self.changed:
                    self.events.extend(json.loads(line) for line in lines if line.strip())
                    self.changed.notify_all()
        except (OSError, EOFError, ValueError):
            pass
        finally:
            with self.changed:
                self.ended.set()
                self.changed.notify_all()

    def wait_for(self, check, timeout: float = 60.0) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: check(self.events) or self.ended.is_set(), timeout), "timed out"
            assert check(self.events), f"watch ended={self.ended.is_set()} with {[e['type'] for e in self.events]}"

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.thread.join(30)


def _names(events: list[dict]) -> list[str]:
    return [e["object"]["metadata"]["name"] for e in events if e["type"] in ("ADDED", "MODIFIED", "DELETED")]


def _pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def _metric(url: str, name: str, resource: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics") as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith(f'{name}{{resource="{resource}"}}'):
                return float(line.split()[-1])
    return 0.0


def _store_create(server: ServerThread, key: str, value: bytes) -> None:
    assert server.server is not None
    server.call(server.server.storage.create(key, value))


def test_a_watcher_whose_encoding_fails_gets_an_error_and_the_others_carry_on(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path / "data"))) as server:
        pods = "/api/v1/namespaces/default/pods"
        table = _Watch(server.url, pods, accept=_TABLE)
        plain = _Watch(server.url, pods)
        try:
            bad = _pod("unprintable")
            bad["status"] = {"containerStatuses": "not a list"}  # the pod printer cannot print it
            _store_create(server, "/registry/pods/default/unprintable", json.dumps(bad).encode())
            table.wait_for(lambda evs: any(e["type"] == "ERROR" for e in evs))
            error = next(e for e in table.events if e["type"] == "ERROR")["object"]
            assert error["kind"] == "Status" and error["code"] == 500 and error["reason"] == "InternalError"
            assert table.ended.wait(30), "the failed watch must end after its ERROR event"
            _post(server.url, pods, _pod("good"))
            plain.wait_for(lambda evs: _names(evs) == ["unprintable", "good"])
            assert not plain.ended.is_set()
        finally:
            table.close()
            plain.close()


def test_an_undecodable_stored_object_is_skipped_and_counted(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path / "data"))) as server:
        cms = "/api/v1/namespaces/default/configmaps"
        watch = _Watch(server.url, cms)
        try:
            _store_create(server, "/registry/configmaps/default/broken", b"{not json")
            _post(server.url, cms, {"metadata": {"name": "fine"}})
            watch.wait_for(lambda evs: _names(evs) == ["fine"])
            assert not watch.ended.is_set()
            assert _metric(server.url, "apiserver_storage_decode_errors_total", "configmaps") == 1
        finally:
            watch.close()


def test_a_server_whose_store_holds_an_undecodable_object_still_starts(tmp_path):
    data = str(tmp_path / "data")
    with ServerThread(sqlite_storage(data)) as server:
        _post(server.url, "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "fine"}})
        _store_create(server, "/registry/configmaps/default/broken", b"\xff\xfe garbage")
    with ServerThread(sqlite_storage(data)) as server:  # the cache loads past it
        with urllib.request.urlopen(f"{server.url}/api/v1/namespaces/default/configmaps") as resp:
            names = [i["metadata"]["name"] for i in json.loads(resp.read())["items"]]
        assert names == ["fine"]
        assert _metric(server.url, "apiserver_storage_decode_errors_total", "configmaps") == 1


def test_a_lagged_store_watch_resumes_without_ending_any_watch(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="k8py.apiserver.watch.cacher")
    # a store watch queue of 1: any write batch of two events drops the cacher's watch
    with ServerThread(sqlite_storage(str(tmp_path / "data"), watch_queue_limit=1)) as server:
        cms = "/api/v1/namespaces/default/configmaps"
        watch = _Watch(server.url, cms)
        try:
            count = 120
            with ThreadPoolExecutor(8) as pool:  # concurrent creates share commits
                list(pool.map(lambda i: _post(server.url, cms, {"metadata": {"name": f"cm-{i:04d}"}}), range(count)))
            watch.wait_for(lambda evs: len(_names(evs)) == count)
            assert sorted(_names(watch.events)) == [f"cm-{i:04d}" for i in range(count)]
            assert not watch.ended.is_set()
            assert any("cacher watch lagged" in r.getMessage() for r in caplog.records), "the test did not make the store watch lag"
        finally:
            watch.close()
