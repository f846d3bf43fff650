"""Is it up yet? The questions ``k8py up`` asks over HTTP while it starts.

Plain HTTP GETs (the supervisor polls them; a health check may wait 30 s
for its answer: a simulated kubelet running 5,000 nodes on a busy machine
answers ``/healthz`` in tens of seconds, and is up all the same): a
component's ``/healthz`` (or the API server's ``/readyz``), and the names of
the Nodes whose ``Ready`` condition is ``True``. Errors are answers ("not
yet"), never exceptions: the caller polls until its own deadline.

Why not aiohttp: the supervisor is a long-lived process of every cluster,
and these GETs are all it asks of HTTP; aiohttp and its dependencies were a
third of its memory and a fifth of a second of its CPU at each start, while
the zygote imports the API server's modules on the other core. A
:class:`Prober` keeps one HTTP/1.1 keep-alive connection per server it asks
(so a poll every few milliseconds is not a TLS handshake each time), and
drops it on any error or on a response it cannot reuse the connection
after; the next question opens a new one.
"""

from __future__ import annotations

import asyncio
import ssl
from urllib.parse import urlencode, urlsplit

import orjson

__all__ = ["Prober", "ready_nodes", "node_is_ready"]

_TIMEOUT = 30.0
_MAX_BODY = 64 * 1024 * 1024


class Prober:
    """GETs to the cluster's servers (``https://`` ones with ``ssl_context``).
    One question at a time per server; use one Prober per polling task."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None, *, timeout: float = _TIMEOUT) -> None:
        self.ssl_context = ssl_context
        self.timeout = timeout
        self._conns: dict[tuple[str, str, int], tuple[asyncio.StreamReader, asyncio.StreamWriter]] = {}

    async def get(self, url: str, *, params: dict[str, str] | None = None,
                  headers: dict[str, str] | None = None) -> tuple[int, bytes] | None:
        """``(status, body)``, or None when the server does not answer (in time)."""
        return await self.request("GET", url, params=params, headers=headers)

    async def post_json(self, url: str, body: object) -> tuple[int, bytes] | None:
        """POST ``body`` as JSON (the one write ``k8py up`` makes itself); as :meth:`get`."""
        return await self.request("POST", url, body=orjson.dumps(body), headers={"Content-Type": "application/json"})

    async def request(self, method: str, url: str, *, params: dict[str, str] | None = None,
                      headers: dict[str, str] | None = None, body: bytes = b"") -> tuple[int, bytes] | None:
        parts = urlsplit(url)
        key = (parts.scheme, parts.hostname or "127.0.0.1", parts.port or (443 if parts.scheme == "https" else 80))
        path = (parts.path or "/") + ("?" + parts.query if parts.query else "")
        if params:
            path += ("&" if "?" in path else "?") + urlencode(params)
        lines = [f"{method} {path} HTTP/1.1", f"Host: {parts.netloc}", "Accept-Encoding: identity",
                 *(f"{k}: {v}" for k, v in (headers or {}).items())]
        if body or method != "GET":
            lines.append(f"Content-Length: {len(body)}")
        request = ("\r\n".join(lines) + "\r\n\r\n").encode() + body
        try:
            return await asyncio.wait_for(self._exchange(key, request), self.timeout)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError, ssl.SSLError):
            self._drop(key)
            return None

    async def _exchange(self, key: tuple[str, str, int], request: bytes) -> tuple[int, bytes]:
        conn = self._conns.pop(key, None)
        if conn is not None and conn[0].at_eof():
            conn[1].close()
            conn = None
        if conn is None:
            scheme, host, port = key
            conn = await asyncio.open_connection(host, port, ssl=self.ssl_context if scheme == "https" else None)
        reader, writer = conn
        try:
            return self._keep(key, conn, await self._ask(reader, writer, request))
        except BaseException:  # an error, a timeout or a cancellation mid-exchange: the connection is unusable
            writer.close()
            raise

    def _keep(self, key: tuple[str, str, int], conn: tuple[asyncio.StreamReader, asyncio.StreamWriter],
              answer: tuple[int, bytes, bool]) -> tuple[int, bytes]:
        status, body, reusable = answer
        if reusable:
            self._conns[key] = conn
        else:
            conn[1].close()
        return status, body

    @staticmethod
    async def _ask(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> tuple[int, bytes, bool]:
        writer.write(request)
        await writer.drain()
        status_line = await reader.readuntil(b"\r\n")
        version, status = status_line.split(b" ", 2)[:2]
        fields: dict[bytes, bytes] = {}
        while (line := await reader.readuntil(b"\r\n")) != b"\r\n":
            name, _, value = line.partition(b":")
            fields[name.strip().lower()] = value.strip()
        if fields.get(b"transfer-encoding", b"").lower() == b"chunked":
            body = bytearray()
            while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
                body += await reader.readexactly(size)
                await reader.readexactly(2)
                if len(body) > _MAX_BODY:
                    raise ValueError("response too large")
            while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers
                pass
            body = bytes(body)
        elif b"content-length" in fields:
            body = await reader.readexactly(min(int(fields[b"content-length"]), _MAX_BODY))
        else:  # delimited by the end of the connection
            body = await reader.read(_MAX_BODY)
            fields[b"connection"] = b"close"
        return int(status), body, fields.get(b"connection", b"").lower() != b"close" and version == b"HTTP/1.1"

    def _drop(self, key: tuple[str, str, int]) -> None:
        conn = self._conns.pop(key, None)
        if conn is not None:
            conn[1].close()

    async def ok(self, url: str) -> bool:
        answer = await self.get(url)
        return answer is not None and answer[0] == 200

    def close(self) -> None:
        for key in list(self._conns):
            self._drop(key)


def node_is_ready(node: dict) -> bool:  # type: ignore[type-arg]
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (node.get("status") or {}).get("conditions") or ())


#: the Nodes as ``kubectl get nodes`` has them: a Table of names and statuses, without the
#: objects (at 5,000 nodes some 0.5 MB instead of 20 MB to encode and parse at every poll)
_TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io, application/json"}


async def ready_nodes(prober: Prober, api_url: str) -> list[str] | None:
    """Names of the Ready nodes, or None when the API server does not answer."""
    answer = await prober.get(f"{api_url}/api/v1/nodes", params={"includeObject": "None"}, headers=_TABLE)
    if answer is None or answer[0] != 200:
        return None
    try:
        doc = orjson.loads(answer[1])
    except orjson.JSONDecodeError:
        return None
    if doc.get("kind") != "Table":  # a server without tables: the Nodes themselves
        return sorted(n["metadata"]["name"] for n in doc.get("items") or [] if node_is_ready(n))
    columns = [c.get("name", "").lower() for c in doc.get("columnDefinitions") or []]
    if "name" not in columns or "status" not in columns:
        return None
    name, status = columns.index("name"), columns.index("status")
    return sorted(str(row["cells"][name]) for row in doc.get("rows") or []
                  if str(row["cells"][status]).split(",")[0] == "Ready")
