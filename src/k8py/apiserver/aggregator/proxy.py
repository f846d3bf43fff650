"""Relay one request to the aggregated API server that serves its group/version.

As upstream's ``proxyHandler``: the request goes to the Service's endpoint
over TLS (verified against the APIService's ``caBundle`` with the name
``<service>.<namespace>.svc``, or not at all with ``insecureSkipTLSVerify``)
presenting the front-proxy client certificate; the caller's credentials
(``Authorization``, impersonation headers) are dropped and its identity is
sent as ``X-Remote-User`` / ``X-Remote-Group`` / ``X-Remote-Extra-*``. The
response is streamed back as it arrives, so watches work; a WebSocket
upgrade is relayed message for message (:mod:`.websocket`), an ``Upgrade:
SPDY/3.1`` one byte for byte once the backend switches protocols (:mod:`.upgrade`). A backend that
cannot be reached is a ``503 ServiceUnavailable`` naming the APIService.
"""

from __future__ import annotations

import asyncio
import logging

import aiohttp
from aiohttp import web

from k8py.api.errors import ServiceUnavailable, StatusError
from k8py.apiserver.authn.user import UNSECURED, USER_KEY
from k8py.apiserver.aggregator.front_proxy import remote_user_headers
from k8py.apiserver.aggregator.remote import RemoteAPIs, RemoteAPIService
from k8py.apiserver.aggregator.upgrade import is_spdy, relay_upgrade
from k8py.apiserver.aggregator.websocket import is_websocket, relay_websocket

__all__ = ["proxy_request"]

log = logging.getLogger(__name__)

#: not forwarded: hop-by-hop, the caller's credentials, headers the proxy sets itself
_DROPPED = frozenset(h.lower() for h in (
    "Authorization", "Connection", "Keep-Alive", "Proxy-Authorization", "Proxy-Authenticate", "TE", "Trailer",
    "Transfer-Encoding", "Upgrade", "Host", "Content-Length", "X-Remote-User", "X-Remote-Group",
))
_DROPPED_PREFIXES = ("impersonate-", "x-remote-extra-")
_RESPONSE_DROPPED = frozenset(("connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding"))


async def proxy_request(request: web.Request, remote: RemoteAPIs, entry: RemoteAPIService) -> web.StreamResponse:
    try:
        target = remote.target(entry)
    except StatusError as err:
        raise ServiceUnavailable(f'the server is currently unable to handle the request ({entry.name}: {err.message})') from None
    headers = [(k, v) for k, v in request.headers.items()
               if k.lower() not in _DROPPED and not k.lower().startswith(_DROPPED_PREFIXES)]
    user = request.get(USER_KEY, UNSECURED)
    headers += remote_user_headers(user)
    if request.remote:
        headers.append(("X-Forwarded-For", request.remote))
    url = target.url(request.path_qs)
    if is_websocket(request):
        return await relay_websocket(request, remote.session(), url, headers, ssl=entry.ssl,
                                     server_hostname=target.server_name, name=entry.name,
                                     refused=lambda: _relay(request, remote, entry, url, headers, target.server_name))
    if is_spdy(request):
        return await relay_upgrade(request, url, headers, ssl_context=entry.ssl, server_hostname=target.server_name,
                                   name=entry.name)
    return await _relay(request, remote, entry, url, headers, target.server_name)


async def _relay(request: web.Request, remote: RemoteAPIs, entry: RemoteAPIService, url: str,
                 headers: list[tuple[str, str]], server_name: str | None) -> web.StreamResponse:
    body = await request.read() if request.body_exists else None
    try:
        upstream = await remote.session().request(
            request.method, url, data=body, headers=headers, ssl=entry.ssl, server_hostname=server_name,
            allow_redirects=False, timeout=aiohttp.ClientTimeout(total=None, connect=10.0, sock_connect=10.0))
    except asyncio.CancelledError:
        raise
    except (aiohttp.ClientError, OSError) as err:
        log.warning("aggregated API server unreachable", extra={"apiservice": entry.name, "error": str(err)})
        raise ServiceUnavailable(f"the server is currently unable to handle the request ({entry.name}: {err})") from None
    try:
        response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        for key, value in upstream.headers.items():
            if key.lower() not in _RESPONSE_DROPPED:
                response.headers.add(key, value)
        if "content-encoding" in upstream.headers:
            response.headers["Content-Encoding"] = upstream.headers["content-encoding"]
        await response.prepare(request)
        async for chunk in upstream.content.iter_any():
            await response.write(chunk)
        await response.write_eof()
        return response
    finally:
        upstream.release()
