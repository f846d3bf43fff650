"""A cheap loopback HTTP/1.1 load generator for the benchmarks.

Raw asyncio streams (no client framework), keep-alive connections, one request
in flight per connection, so the client costs little CPU and the server is
what gets measured. ``WatchReader`` counts watch events on a chunked stream by
the ``{"type":"`` marker; the sampled reader decodes lines to measure delivery
latency from a timestamp the writer put in the object.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import orjson

_MARK = b'{"type":"'


def pod_body(name: str, namespace: str, *, stamp: bool = False) -> bytes:
    """A realistic Pod (~2 KB of JSON once defaulted)."""
    annotations = {"bench.k8py.io/owner": "bench", "bench.k8py.io/description": "x" * 120}
    if stamp:
        annotations["bench.k8py.io/sent"] = repr(time.time())
    return orjson.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {"app": "bench", "tier": "backend", "release": "stable", "index": name[-2:].strip("-") or "0"},
                "annotations": annotations,
            },
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.example.com/team/app:1.2.3",
                        "args": ["--port=8080", "--log-level=info"],
                        "ports": [{"name": "http", "containerPort": 8080}],
                        "env": [{"name": f"VAR_{i}", "value": f"value-{i}"} for i in range(6)],
                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                        "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 5},
                        "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}],
                    }
                ],
                "volumes": [{"name": "config", "configMap": {"name": "app-config"}}],
            },
        }
    )


class HttpConnection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str) -> None:
        self.reader = reader
        self.writer = writer
        self.host = host

    #: TLS for every connection opened (set once by a benchmark that measures HTTPS)
    ssl_context: Any = None

    @classmethod
    async def open(cls, addr: str) -> "HttpConnection":
        host, port = addr.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port), limit=2**26, ssl=cls.ssl_context)
        return cls(reader, writer, addr)

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        self.writer.write(head + body)
        status_line = await self.reader.readline()
        status = int(status_line.split()[1])
        length = 0
        chunked = False
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
        if chunked:
            parts = []
            while True:
                size = int((await self.reader.readline()).strip(), 16)
                if size == 0:
                    await self.reader.readline()
                    break
                parts.append(await self.reader.readexactly(size))
                await self.reader.readline()
            return status, b"".join(parts)
        return status, await self.reader.readexactly(length) if length else b""

    def close(self) -> None:
        self.writer.close()



async def create_rate(addr: str, n: int, namespace: str, *, concurrency: int = 16, name_prefix: str = "tp") -> float:
    """Pods created per second: ``n`` POSTs of :func:`pod_body` spread over ``concurrency`` keep-alive connections."""
    conns = [await HttpConnection.open(addr) for _ in range(concurrency)]
    path = f"/api/v1/namespaces/{namespace}/pods"

    async def worker(c: HttpConnection, idx: range) -> None:
        for i in idx:
            status, _ = await c.request("POST", path, pod_body(f"{name_prefix}-{i}", namespace))
            assert status == 201, status

    start = time.perf_counter()
    await asyncio.gather(*(worker(c, range(w, n, concurrency)) for w, c in enumerate(conns)))
    elapsed = time.perf_counter() - start
    for c in conns:
        c.close()
    return n / elapsed

class WatchReader:
    """Counts events on one watch stream; optionally samples latency."""

    def __init__(self, *, sample: bool = False) -> None:
        self.sample = sample
        self.count = 0
        self.last_at = 0.0
        self.latencies: list[float] = []
        self._task: asyncio.Task | None = None
        self._session: aiohttp.ClientSession | None = None
        self._conn: HttpConnection | None = None

    async def start(self, addr: str, path: str) -> None:
        if self.sample:
            self._session = aiohttp.ClientSession()
            resp = await self._session.get(f"http://{addr}{path}", timeout=aiohttp.ClientTimeout(total=None))
            self._task = asyncio.create_task(self._read_lines(resp))
        else:
            conn = self._conn = await HttpConnection.open(addr)
            conn.writer.write(f"GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n".encode())
            self._task = asyncio.create_task(self._count(conn))

    async def _count(self, conn: HttpConnection) -> None:
        tail = b""
        reader = conn.reader
        while True:
            data = await reader.read(1 << 20)
            if not data:
                return
            buf = tail + data
            n = buf.count(_MARK)
            if n:
                self.count += n
                self.last_at = time.perf_counter()
            tail = buf[-(len(_MARK) - 1):]

    async def _read_lines(self, resp: aiohttp.ClientResponse) -> None:
        buf = b""
        async for chunk in resp.content.iter_any():
            buf += chunk
            *lines, buf = buf.split(b"\n")
            now = time.time()
            for line in lines:
                if not line:
                    continue
                event = orjson.loads(line)
                self.count += 1
                self.last_at = time.perf_counter()
                sent = ((event["object"].get("metadata") or {}).get("annotations") or {}).get("bench.k8py.io/sent")
                if sent:
                    self.latencies.append(now - float(sent))

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._conn is not None:
            self._conn.close()  # the server ends the watch, rather than keep writing to it
        if self._session is not None:
            asyncio.get_running_loop().create_task(self._session.close())
