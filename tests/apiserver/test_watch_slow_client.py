"""A watch client that stops reading does not lose or reorder events: once its
connection is backed up the cacher stops writing to it directly, and the
stream's own task writes the queued events as the client catches up."""

from __future__ import annotations

import json
import socket
import time
import urllib.request

from tests.support.servers import ServerThread, sqlite_storage


def _create(url: str, name: str, filler: str) -> None:
    body = json.dumps({"metadata": {"name": name}, "data": {"f": filler}}).encode()
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as resp:
        assert resp.status == 201


class _ChunkedReader:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def _fill(self) -> None:
        data = self.sock.recv(1 << 20)
        assert data, "the server closed the watch early"
        self.buf += data

    def until(self, sep: bytes) -> bytes:
        while sep not in self.buf:
            self._fill()
        head, _, self.buf = self.buf.partition(sep)
        return head

    def exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


_BASE = "/api/v1/namespaces/default/configmaps"


def _open_watch(url: str, query: str) -> tuple[socket.socket, _ChunkedReader]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with urllib.request.urlopen(f"{url}{_BASE}") as resp:
        rv = json.loads(resp.read())["metadata"]["resourceVersion"]
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
    sock.connect((host, int(port)))
    sock.sendall(f"GET {_BASE}?watch=true&resourceVersion={rv}&timeoutSeconds=60{query} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    reader = _ChunkedReader(sock)
    assert reader.until(b"\r\n\r\n").startswith(b"HTTP/1.1 200")  # the watch is live
    return sock, reader


def _read_until(reader: _ChunkedReader, count: int) -> list[dict]:
    """Every event (bookmarks included) until ``count`` objects have arrived."""
    events: list[dict] = []
    while sum(e["type"] != "BOOKMARK" for e in events) < count:
        size = int(reader.until(b"\r\n"), 16)
        chunk = reader.exactly(size)
        reader.exactly(2)
        events.extend(json.loads(line) for line in chunk.split(b"\n") if line)
    return events


def test_a_client_that_stops_reading_still_gets_every_event_in_order(apiserver):
    count = 600  # ~18 MB of events: far more than socket buffers and the direct-write limit
    sock, reader = _open_watch(apiserver.url, "")
    filler = "x" * 30000
    for i in range(count):  # while the watch client reads nothing
        _create(f"{apiserver.url}{_BASE}", f"cm-{i:05d}", filler)
    events = _read_until(reader, count)
    sock.close()
    assert {e["type"] for e in events} == {"ADDED"}
    assert [e["object"]["metadata"]["name"] for e in events] == [f"cm-{i:05d}" for i in range(count)]


def test_a_bookmark_never_overtakes_the_events_queued_for_a_slow_reader(tmp_path):
    """A bookmark carries a revision only once every event up to it is on the wire:
    a reflector that resumes from a bookmark must not skip queued events."""
    count = 400  # ~12 MB: the stream backs up and its own task writes the rest
    with ServerThread(sqlite_storage(str(tmp_path / "data")), bookmark_interval=0.01) as server:
        sock, reader = _open_watch(server.url, "&allowWatchBookmarks=true")
        filler = "x" * 30000
        for i in range(count):  # while the watch client reads nothing
            _create(f"{server.url}{_BASE}", f"cm-{i:05d}", filler)
        events = _read_until(reader, count)
        sock.close()
    rvs = [(e["type"], int(e["object"]["metadata"]["resourceVersion"])) for e in events]
    for (type_a, rv_a), (type_b, rv_b) in zip(rvs, rvs[1:]):
        assert rv_b > rv_a or (type_b == "BOOKMARK" and rv_b == rv_a), f"{type_b} {rv_b} after {type_a} {rv_a}"
    assert any(t == "BOOKMARK" for t, _ in rvs)
    assert [e["object"]["metadata"]["name"] for e in events if e["type"] != "BOOKMARK"] == [f"cm-{i:05d}" for i in range(count)]


def _frames(reader: _ChunkedReader, count: int) -> list[bytes]:
    frames: list[bytes] = []
    objects = 0
    while objects < count:
        size = int(reader.until(b"\r\n"), 16)
        frames.append(reader.exactly(size))
        reader.exactly(2)
        objects += sum(1 for line in frames[-1].split(b"\n") if line and b'"BOOKMARK"' not in line[:20])
    return frames


def test_a_backlog_is_written_in_bounded_frames(apiserver):
    count = 400  # ~12 MB queued while the client reads nothing
    sock, reader = _open_watch(apiserver.url, "")
    filler = "x" * 30000
    for i in range(count):
        _create(f"{apiserver.url}{_BASE}", f"cm-{i:05d}", filler)
    frames = _frames(reader, count)
    sock.close()
    # a frame is cut once it reaches 1 MiB: at most one more object beyond that
    assert max(len(f) for f in frames) < 1024 * 1024 + 64 * 1024, [len(f) for f in frames]


def _terminated_watchers(url: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics") as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith('apiserver_terminated_watchers_total{resource="configmaps"}'):
                return float(line.split()[-1])
    return 0.0


def _wait_closed_by_server(url: str, sock: socket.socket) -> None:
    deadline = time.monotonic() + 60
    while _terminated_watchers(url) < 1:
        assert time.monotonic() < deadline, "the server never gave up on the stuck watch client"
        time.sleep(0.05)  # polling a condition (the metric), not synchronising on time
    sock.settimeout(30)
    try:
        while sock.recv(1 << 20):
            pass  # what the server had sent before aborting; then EOF
    except ConnectionResetError:
        pass  # an abort: the connection is reset


def test_a_client_that_stays_backed_up_past_the_deadline_is_disconnected(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path / "data")), watch_slow_client_timeout=0.5) as server:
        sock, _ = _open_watch(server.url, "")
        filler = "x" * 30000
        for i in range(300):  # ~9 MB: the connection backs up and never drains
            _create(f"{server.url}{_BASE}", f"cm-{i:05d}", filler)
        _wait_closed_by_server(server.url, sock)
        sock.close()
        # the server carries on serving others
        _create(f"{server.url}{_BASE}", "after", "y")


def test_a_backlog_beyond_the_byte_bound_ends_the_watch(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path / "data")), watch_max_pending_bytes=2 * 1024 * 1024) as server:
        sock, _ = _open_watch(server.url, "")
        filler = "x" * 30000
        for i in range(400):  # ~12 MB owed: more than the 2 MB bound once the socket is full
            _create(f"{server.url}{_BASE}", f"cm-{i:05d}", filler)
        _wait_closed_by_server(server.url, sock)
        sock.close()
