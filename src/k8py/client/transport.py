"""The network seam of the REST client: one ``send`` for every request.

Everything above this module (REST verbs, watch, discovery, reflector) speaks
:class:`HTTPRequest` → :class:`HTTPResponse` through a :class:`Transport`.
:class:`AiohttpTransport` is the real one: a single :class:`aiohttp.ClientSession`
(one connection pool, keep-alive) per client, created lazily on the running
loop. A test, or a future in-process transport, only has to implement
``send`` and ``close``.

Failures below HTTP (refused, reset, timed out, TLS) surface as
:class:`TransportError` and nothing else, with ``request_sent`` telling the
retry logic whether the server may have seen the request: ``False`` only when
the connection could not be established, which makes even a POST safe to
retry.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import AsyncIterator, Mapping, Protocol, Sequence

import aiohttp

from k8py.client.config import ClientConfig

__all__ = ["HTTPRequest", "HTTPResponse", "Transport", "TransportError", "AiohttpTransport"]


class TransportError(ConnectionError):
    """The request failed below HTTP. ``request_sent=False``: it never left."""

    def __init__(self, message: str, *, request_sent: bool) -> None:
        super().__init__(message)
        self.request_sent = request_sent


@dataclass(slots=True)
class HTTPRequest:
    method: str
    path: str  # absolute path, e.g. /api/v1/namespaces/default/pods
    params: Sequence[tuple[str, str]] = ()
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes | None = None
    #: total seconds for a plain request; for a streamed one, the gap allowed
    #: between two chunks (None: wait forever)
    timeout: float | None = 60.0


class HTTPResponse(Protocol):
    status: int
    headers: Mapping[str, str]

    async def read(self) -> bytes: ...

    def chunks(self) -> AsyncIterator[bytes]: ...

    def close(self) -> None: ...


class Transport(Protocol):
    async def send(self, request: HTTPRequest, *, stream: bool = False) -> HTTPResponse: ...

    async def close(self) -> None: ...


class _AiohttpResponse:
    __slots__ = ("_resp", "status", "headers")

    def __init__(self, resp: aiohttp.ClientResponse) -> None:
        self._resp = resp
        self.status = resp.status
        self.headers: Mapping[str, str] = resp.headers

    async def read(self) -> bytes:
        try:
            return await self._resp.read()
        except (aiohttp.ClientError, asyncio.TimeoutError) as err:
            raise TransportError(f"reading response: {err!r}", request_sent=True) from err
        finally:
            self._resp.release()

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            async for data in self._resp.content.iter_any():
                yield data
        except (aiohttp.ClientError, asyncio.TimeoutError) as err:
            raise TransportError(f"stream broken: {err!r}", request_sent=True) from err

    def close(self) -> None:
        self._resp.close()


class AiohttpTransport:
    """The real transport (see the module docstring)."""

    def __init__(self, config: ClientConfig, *, pool_size: int = 100, connect_timeout: float = 10.0) -> None:
        self._config = config
        self._pool_size = pool_size
        self._connect_timeout = connect_timeout
        self._session: aiohttp.ClientSession | None = None

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            ssl_ctx = self._config.ssl_context()
            connector = aiohttp.TCPConnector(limit=self._pool_size, ssl=ssl_ctx if ssl_ctx is not None else False)
            self._session = aiohttp.ClientSession(
                base_url=self._config.server,
                connector=connector,
                headers={"User-Agent": self._config.user_agent},
                auto_decompress=True,
            )
        return self._session

    async def send(self, request: HTTPRequest, *, stream: bool = False) -> HTTPResponse:
        session = self._get_session()
        if stream:
            timeout = aiohttp.ClientTimeout(total=None, connect=self._connect_timeout, sock_read=request.timeout)
        else:
            timeout = aiohttp.ClientTimeout(total=request.timeout, connect=self._connect_timeout)
        headers = {**self._config.auth_headers(), **request.headers}
        kwargs = {}
        if self._config.tls_server_name:
            kwargs["server_hostname"] = self._config.tls_server_name
        try:
            resp = await session.request(
                request.method,
                request.path,
                params=list(request.params) or None,
                data=request.body,
                headers=headers,
                timeout=timeout,
                **kwargs,  # type: ignore[arg-type]
            )
        except aiohttp.ClientConnectorError as err:
            raise TransportError(f"cannot connect to {self._config.server}: {err}", request_sent=False) from err
        except (aiohttp.ClientError, asyncio.TimeoutError) as err:
            raise TransportError(f"{request.method} {request.path}: {err!r}", request_sent=True) from err
        return _AiohttpResponse(resp)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
