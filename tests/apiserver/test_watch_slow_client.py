"""A watch client that stops reading does not lose or reorder events: once its
connection is backed up the cacher stops writing to it directly, and the
stream's own task writes the queued events as the client catches up."""

from __future__ import annotations

import json
import socket
import urllib.request


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


def test_a_client_that_stops_reading_still_gets_every_event_in_order(apiserver):
    count = 600  # ~18 MB of events: far more than socket buffers and the direct-write limit
    host, port = apiserver.url.removeprefix("http://").rsplit(":", 1)
    base = "/api/v1/namespaces/default/configmaps"
    with urllib.request.urlopen(f"{apiserver.url}{base}") as resp:
        rv = json.loads(resp.read())["metadata"]["resourceVersion"]
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
    sock.connect((host, int(port)))
    sock.sendall(f"GET {base}?watch=true&resourceVersion={rv}&timeoutSeconds=60 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    reader = _ChunkedReader(sock)
    assert reader.until(b"\r\n\r\n").startswith(b"HTTP/1.1 200")  # the watch is live
    filler = "x" * 30000
    for i in range(count):  # while the watch client reads nothing
        _create(f"{apiserver.url}{base}", f"cm-{i:05d}", filler)
    names: list[str] = []
    while len(names) < count:
        size = int(reader.until(b"\r\n"), 16)
        chunk = reader.exactly(size)
        reader.exactly(2)
        for line in chunk.split(b"\n"):
            if line:
                event = json.loads(line)
                assert event["type"] == "ADDED"
                names.append(event["object"]["metadata"]["name"])
    sock.close()
    assert names == [f"cm-{i:05d}" for i in range(count)]
