"""The cheapest client a benchmark can be: pre-encoded, pipelined POSTs, and a
watch reader that decodes only the events it needs.

A benchmark's load generator shares the machine's cores with the processes it
measures, so every microsecond it spends per object is taken from them. Here:

- every request (head and body) is encoded before the clock starts
  (:func:`prepare`);
- each connection keeps ``depth`` requests in flight (HTTP/1.1 pipelining:
  the API server answers them in order), written in one ``write`` and read
  back in one pass, so a request costs the generator (and the server) a
  fraction of a send and a receive;
- :class:`BoundWatcher` reads a pod watch and decodes only the events that
  name a node, to learn which pods are bound.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable, Iterable

import orjson

__all__ = ["prepare", "post_prepared", "post_all", "BoundWatcher"]


def prepare(addr: str, requests: Iterable[tuple[str, bytes]]) -> list[bytes]:
    """Each ``(path, body)`` as the bytes of one POST."""
    out = []
    for path, body in requests:
        out.append(b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                   % (path.encode(), addr.encode(), len(body), body))
    return out


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    lower = head.lower()
    at = lower.find(b"\r\ncontent-length:")
    if at >= 0:
        end = lower.index(b"\r\n", at + 2)
        return status, await reader.readexactly(int(head[at + 17:end]))
    if b"\r\ntransfer-encoding: chunked" in lower:
        parts = []
        while True:
            size = int((await reader.readline()).split(b";", 1)[0], 16)
            if size == 0:
                await reader.readline()
                return status, b"".join(parts)
            parts.append(await reader.readexactly(size))
            await reader.readline()
    return status, b""


async def post_prepared(addr: str, requests: list[bytes], *, connections: int = 16, depth: int = 4) -> float:
    """Send every prepared POST over ``connections`` connections, ``depth`` in
    flight on each; returns the seconds taken. A 409 (already exists) is fine;
    any other failure raises once all are sent."""
    host, port = addr.rsplit(":", 1)
    conns = [await asyncio.open_connection(host, int(port), limit=2**26) for _ in range(min(connections, len(requests)) or 1)]
    failures: list[bytes] = []
    position = 0

    async def worker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal position
        while position < len(requests):
            batch = requests[position:position + depth]
            position += len(batch)
            writer.write(b"".join(batch))
            for _ in batch:
                status, reply = await _read_response(reader)
                if status >= 300 and status != 409:
                    failures.append(reply[:300])

    started = time.perf_counter()
    try:
        await asyncio.gather(*(worker(r, w) for r, w in conns))
    finally:
        for _, writer in conns:
            writer.close()
    elapsed = time.perf_counter() - started
    if failures:
        raise RuntimeError(f"{len(failures)} requests failed, first: {failures[0]!r}")
    return elapsed


async def post_all(addr: str, requests: list[tuple[str, bytes]], connections: int = 16, depth: int = 4) -> float:
    """:func:`prepare` then :func:`post_prepared` (the encoding not timed)."""
    return await post_prepared(addr, prepare(addr, requests), connections=connections, depth=depth)


class BoundWatcher:
    """Reads ``namespace``'s pod watch from ``rv`` until ``want`` pods have a node.

    Only lines that mention ``"nodeName"`` are decoded (a pending pod's ADDED
    does not); ``on_event``, when given, gets every event decoded (slower:
    for workloads that act on other events).
    """

    def __init__(self, addr: str, namespace: str, want: int, rv: str,
                 on_event: Callable[[dict[str, Any]], Awaitable[None]] | None = None) -> None:
        self.addr, self.namespace, self.want, self.rv = addr, namespace, want, rv
        self.on_event = on_event
        self.bound: set[str] = set()

    async def run(self) -> float:
        """The time (``perf_counter``) the last wanted pod was seen bound."""
        host, port = self.addr.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port), limit=2**26)
        path = f"/api/v1/namespaces/{self.namespace}/pods?watch=true&resourceVersion={self.rv}"
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {self.addr}\r\n\r\n".encode())
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        bound, on_event = self.bound, self.on_event
        pending = b""
        try:
            while len(bound) < self.want:
                size = int((await reader.readline()).strip(), 16)
                data = pending + await reader.readexactly(size)
                await reader.readline()
                *lines, pending = data.split(b"\n")
                for line in lines:
                    if not line:
                        continue
                    if on_event is None and b'"nodeName"' not in line:
                        continue
                    event = orjson.loads(line)
                    if on_event is not None:
                        await on_event(event)
                    obj = event["object"]
                    if (obj.get("spec") or {}).get("nodeName") and event["type"] != "DELETED":
                        bound.add(obj["metadata"]["name"])
            return time.perf_counter()
        finally:
            writer.close()
