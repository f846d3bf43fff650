"""A lean HTTP/1.1 transport for the REST client's plain requests.

Why: a controller or the scheduler spends most of its CPU per object in its
HTTP client. ``aiohttp``'s client costs ~150-250 µs of Python per request
(URL objects, timeouts, cookie jar, payload registry, response objects),
several times what a create costs the API server in JSON. Requests that carry
a JSON body and get one back need none of that: this module writes the
request in one ``write`` and parses the response with a handful of byte
operations, on pooled keep-alive connections.

Scope: :class:`Http1Transport` serves every request whose response is read
whole (``stream=False``); streamed ones (watches, ``follow`` logs) are handed
to the transport it wraps (:class:`~k8py.client.transport.AiohttpTransport`
by default), so long-lived streams keep aiohttp's flow control.

Semantics kept from the transport contract
(:mod:`k8py.client.transport`):

- failures below HTTP are :class:`TransportError`; ``request_sent=False``
  only when no connection could be opened (nothing reached the server);
- ``request.timeout`` bounds the whole exchange; a connection that timed out
  or failed mid-exchange is closed, never pooled again;
- a connection returns to the pool only after its response was read to the
  end and neither side asked to close it (``Connection: close``, HTTP/1.0,
  a body delimited by EOF); an idle connection the server has closed is
  dropped when it is next picked, not reused;
- response bodies may be ``Content-Length``, chunked or EOF-delimited, and
  ``gzip``/``deflate`` encoded (the request asks for neither).

At most ``pool_size`` requests are in flight at once (as aiohttp's connector
limit); the rest wait for a connection.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import zlib
from typing import AsyncIterator, Mapping
from urllib.parse import quote, urlencode, urlsplit

from k8py.client.config import ClientConfig
from k8py.client.transport import AiohttpTransport, HTTPRequest, HTTPResponse, Transport, TransportError

__all__ = ["Http1Transport"]

_PATH_SAFE = "/:@!$&'()*+,;=-._~%"
#: a path of only these characters is what ``quote(path, safe=_PATH_SAFE)`` returns unchanged
_UNQUOTED_PATH = re.compile(r"[A-Za-z0-9/:@!$&'()*+,;=._~%-]*").fullmatch
_MAX_HEADER_BYTES = 256 * 1024


class _Headers(dict[str, str]):
    """Response headers, looked up without regard to case (keys stored lower-case)."""

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        return dict.get(self, key.lower(), default)

    def __getitem__(self, key: str) -> str:
        return dict.__getitem__(self, key.lower())

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and dict.__contains__(self, key.lower())


_dict_get = dict.get
_dict_set = dict.__setitem__


def _header_lines(headers: Mapping[str, str]) -> str:
    """``Name: value\\r\\n`` lines; a line break in a name or value is refused (header injection)."""
    out = []
    for name, value in headers.items():
        if "\n" in value or "\r" in value or "\n" in name or "\r" in name:
            raise ValueError(f"header {name!r} contains a line break")
        out.append(f"{name}: {value}\r\n")
    return "".join(out)


class _Response:
    """A response whose body has been read already."""

    __slots__ = ("status", "headers", "_body")

    def __init__(self, status: int, headers: _Headers, body: bytes) -> None:
        self.status = status
        self.headers: Mapping[str, str] = headers
        self._body = body

    async def read(self) -> bytes:
        return self._body

    async def chunks(self) -> AsyncIterator[bytes]:
        if self._body:
            yield self._body

    def close(self) -> None:
        pass


class _Connection:
    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def usable(self) -> bool:
        return not self.writer.transport.is_closing() and not self.reader.at_eof()

    def close(self) -> None:
        try:
            self.writer.close()
        except RuntimeError:  # its loop is closed already: the socket went with it
            pass


class _Broken(Exception):
    """The exchange failed after the request may have been sent."""


class Http1Transport:
    """Plain requests on pooled keep-alive connections (see the module docstring)."""

    def __init__(
        self,
        config: ClientConfig,
        *,
        pool_size: int = 100,
        connect_timeout: float = 10.0,
        streams: Transport | None = None,
    ) -> None:
        self._config = config
        url = urlsplit(config.server)
        self._tls = url.scheme == "https"
        self._host = url.hostname or "localhost"
        self._port = url.port or (443 if self._tls else 80)
        self._prefix = url.path.rstrip("/")
        host = f"[{self._host}]" if ":" in self._host else self._host
        default_port = 443 if self._tls else 80
        self._host_header = host if self._port == default_port else f"{host}:{self._port}"
        self._pool_size = pool_size
        self._connect_timeout = connect_timeout
        self._streams: Transport = streams if streams is not None else AiohttpTransport(
            config, pool_size=pool_size, connect_timeout=connect_timeout)
        self._idle: list[_Connection] = []
        self._slots: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ssl: ssl.SSLContext | None = None
        self._closed = False
        self._fixed_key: tuple[str, dict[str, str]] | None = None
        self._fixed = ""

    # -- the contract -----------------------------------------------------------------

    async def send(self, request: HTTPRequest, *, stream: bool = False) -> HTTPResponse:
        if stream:
            return await self._streams.send(request, stream=True)
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # first use, or a client carried over to a new loop
            for conn in self._idle:
                conn.close()
            self._idle = []
            self._slots = asyncio.Semaphore(self._pool_size)
            self._loop = loop
        assert self._slots is not None
        head = self._head(request)
        async with self._slots:
            conn = await self._checkout()
            try:
                if request.timeout is None:
                    status, headers, body, reusable = await self._exchange(conn, head, request)
                else:
                    async with asyncio.timeout(request.timeout):
                        status, headers, body, reusable = await self._exchange(conn, head, request)
            except asyncio.CancelledError:
                conn.close()
                raise
            except TimeoutError as err:
                conn.close()
                raise TransportError(f"{request.method} {request.path}: timed out after {request.timeout}s",
                                     request_sent=True) from err
            except (OSError, _Broken, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as err:
                conn.close()
                raise TransportError(f"{request.method} {request.path}: {err!r}", request_sent=True) from err
            if reusable and not self._closed:
                self._idle.append(conn)
            else:
                conn.close()
        return _Response(status, headers, body)

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        await self._streams.close()

    # -- connections ----------------------------------------------------------------------

    async def _checkout(self) -> _Connection:
        while self._idle:
            conn = self._idle.pop()
            if conn.usable():
                return conn
            conn.close()
        if self._tls and self._ssl is None:
            self._ssl = self._config.ssl_context()
        try:
            async with asyncio.timeout(self._connect_timeout):
                reader, writer = await asyncio.open_connection(
                    self._host, self._port, ssl=self._ssl if self._tls else None,
                    server_hostname=(self._config.tls_server_name or self._host) if self._tls else None,
                    limit=_MAX_HEADER_BYTES,
                )
        except (OSError, TimeoutError, ssl.SSLError) as err:
            raise TransportError(f"cannot connect to {self._config.server}: {err!r}", request_sent=False) from err
        return _Connection(reader, writer)

    # -- one exchange ---------------------------------------------------------------------

    def _head(self, request: HTTPRequest) -> bytes:
        path = self._prefix + request.path
        # quote() walks the path in Python; a path it would leave as is (nearly all) skips it
        target = path if _UNQUOTED_PATH(path) else quote(path, safe=_PATH_SAFE)
        if request.params:
            target += "?" + urlencode(list(request.params))
        auth = self._config.auth_headers()
        fixed_key = (self._config.user_agent, auth)
        if fixed_key != self._fixed_key:  # Host, User-Agent and credentials, built once per change
            self._fixed = _header_lines({"Host": self._host_header, "User-Agent": self._config.user_agent, **auth})
            self._fixed_key = fixed_key
        if auth and not auth.keys().isdisjoint(request.headers):  # the request's own credentials win
            lines = _header_lines({"Host": self._host_header, "User-Agent": self._config.user_agent,
                                   **auth, **request.headers})
        else:
            lines = self._fixed + _header_lines(request.headers)
        body = request.body
        if body is not None or request.method in ("POST", "PUT", "PATCH"):
            lines += f"Content-Length: {len(body or b'')}\r\n"
        return f"{request.method} {target} HTTP/1.1\r\n{lines}\r\n".encode("latin-1")

    async def _exchange(self, conn: _Connection, head: bytes, request: HTTPRequest) -> tuple[int, _Headers, bytes, bool]:
        writer, reader = conn.writer, conn.reader
        writer.write(head + request.body if request.body else head)
        await writer.drain()
        raw = await reader.readuntil(b"\r\n\r\n")
        status_line, _, rest = raw.partition(b"\r\n")
        parts = status_line.split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
            raise _Broken(f"not an HTTP/1.x response: {status_line[:80]!r}")
        status = int(parts[1])
        headers = _Headers()
        # one decode for the block, plain dict operations per line (a response
        # carries ten headers or so, and this runs for every request)
        for line in rest.decode("latin-1").split("\r\n"):
            if not line:
                continue
            name, sep, value = line.partition(":")
            if not sep:
                raise _Broken(f"malformed header line: {line[:80]!r}")
            key = name.strip().lower()
            value = value.strip()
            prev = _dict_get(headers, key)
            _dict_set(headers, key, value if prev is None else f"{prev}, {value}")
        connection = (headers.get("connection") or "").lower()
        reusable = parts[0] == b"HTTP/1.1" and "close" not in connection
        if request.method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            body = b""
        elif "chunked" in (headers.get("transfer-encoding") or "").lower():
            body = await self._read_chunked(reader)
        elif headers.get("content-length") is not None:
            body = await reader.readexactly(int(headers["content-length"]))
        else:
            body = await reader.read()  # delimited by the server closing
            reusable = False
        encoding = (headers.get("content-encoding") or "").lower()
        if encoding in ("gzip", "deflate"):
            body = zlib.decompress(body, 16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS)
        return status, headers, body, reusable

    @staticmethod
    async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
        out = bytearray()
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass  # trailers
                return bytes(out)
            out += await reader.readexactly(size)
            if await reader.readexactly(2) != b"\r\n":
                raise _Broken("chunk not followed by CRLF")
