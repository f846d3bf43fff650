"""One HTTP request relayed to an upstream and its answer streamed back.

Shared by ``nodes/proxy`` (to a kubelet), ``pods/proxy`` and
``services/proxy`` (to a pod): the method, query, body and end-to-end headers
go through; hop-by-hop headers (RFC 9110 7.6.1), the ones aiohttp sets itself
and the client's ``Authorization`` (meant for the API server, not the
upstream) are dropped both ways. The answer is streamed as it arrives, so a
``containerLogs?follow=true`` stays open; an upstream that cannot be reached
is a 503 whose message says what was tried.
"""

from __future__ import annotations

import logging

import aiohttp
from aiohttp import web

from k8py.api.errors import ServiceUnavailable

__all__ = ["relay", "copy_body", "HOP_BY_HOP"]

log = logging.getLogger(__name__)

HOP_BY_HOP = frozenset(
    h.lower()
    for h in (
        "Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "TE", "Trailer",
        "Transfer-Encoding", "Upgrade", "Host", "Content-Length", "Authorization",
    )
)


async def relay(request: web.Request, session: aiohttp.ClientSession, url: str, *, unreachable: str,
                hint: str = "") -> web.StreamResponse:
    """Send ``request`` to ``url``; when it cannot be reached, 503 ``<unreachable> (<error>)<hint>``."""
    headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
    body = await request.read() if request.can_read_body else None
    try:
        upstream = await session.request(request.method, url, params=request.query, headers=headers, data=body,
                                         allow_redirects=False)
    except (aiohttp.ClientError, OSError) as err:
        raise ServiceUnavailable(f"{unreachable} ({err}){hint}") from None
    try:
        response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        for key, value in upstream.headers.items():
            if key.lower() not in HOP_BY_HOP:
                response.headers.add(key, value)
        await response.prepare(request)
        await copy_body(upstream, response, logger=log, ended_early="proxied stream ended early", extra={"url": url})
        return response
    finally:
        upstream.release()


async def copy_body(upstream: aiohttp.ClientResponse, response: web.StreamResponse, *, logger: logging.Logger,
                    ended_early: str, extra: dict[str, str]) -> None:
    """Write ``upstream``'s body to the prepared ``response`` as it arrives, then end it.

    A client or upstream that goes away mid-stream just ends the response: logged at debug as
    ``ended_early`` on the caller's ``logger``, never raised (the status line has been sent already).
    """
    try:
        async for chunk in upstream.content.iter_any():
            await response.write(chunk)
        await response.write_eof()
    except (ConnectionError, aiohttp.ClientConnectionError):
        logger.debug(ended_early, extra=extra)
