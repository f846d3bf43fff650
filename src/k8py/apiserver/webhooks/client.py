"""The HTTPS call to a webhook: where (URL or Service), which CA, how long.

:class:`WebhookClient` turns a ``clientConfig`` into a request: the URL as
given, or ``https://<service>.<namespace>.svc:<port><path>`` dialled at the
address :class:`ServiceResolver` finds; the server certificate verified
against ``caBundle`` (base64 PEM), or the system roots when it is empty; a
``?timeout=<n>s`` query, as upstream adds, and the timeout enforced on the
whole round trip. One ``aiohttp`` session for all webhooks (connections are
kept alive per host); SSL contexts are cached by CA bundle.

Failures raise :class:`CallError` with the text upstream's Go client would
print (``Post "https://…?timeout=10s": context deadline exceeded``), which
the dispatchers wrap into ``failed calling webhook "<name>": failed to call
webhook: …``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import ssl
from typing import Any, Mapping

import aiohttp
import orjson

from k8py.api.errors import StatusError
from k8py.apiserver.webhooks.service_resolver import ServiceResolver

__all__ = ["WebhookClient", "CallError", "ssl_context_for"]

Object = dict[str, Any]

_contexts: dict[tuple[str, bool], ssl.SSLContext] = {}


class CallError(Exception):
    """A webhook could not be called or answered garbage (message as upstream's)."""


def ssl_context_for(ca_bundle: str | None, *, insecure: bool = False) -> ssl.SSLContext:
    """A client context trusting ``ca_bundle`` (base64 of PEM, as the API carries it)."""
    key = (ca_bundle or "", insecure)
    context = _contexts.get(key)
    if context is not None:
        return context
    if insecure:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif ca_bundle:
        try:
            pem = base64.b64decode(ca_bundle, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError) as err:
            raise CallError(f"the caBundle is not base64-encoded PEM: {err}") from None
        try:
            context = ssl.create_default_context(cadata=pem)
        except ssl.SSLError as err:
            raise CallError(f"x509: the caBundle holds no valid certificate: {err}") from None
    else:
        context = ssl.create_default_context()
    _contexts[key] = context
    return context


def _go_reason(err: BaseException) -> str:
    """What Go's net/http would say for this failure."""
    if isinstance(err, (asyncio.TimeoutError, TimeoutError)):
        return "context deadline exceeded"
    if isinstance(err, aiohttp.ClientConnectorCertificateError):
        cert_error = err.certificate_error
        text = getattr(cert_error, "verify_message", "") or str(cert_error)
        if "unable to get local issuer" in text or "self-signed" in text or "self signed" in text:
            return "tls: failed to verify certificate: x509: certificate signed by unknown authority"
        if "Hostname mismatch" in text or "IP address mismatch" in text:
            return f"tls: failed to verify certificate: x509: certificate is not valid for the requested name ({text})"
        return f"tls: failed to verify certificate: {text}"
    if isinstance(err, aiohttp.ClientConnectorError):
        os_error = err.os_error
        if isinstance(os_error, ConnectionRefusedError):
            return f"dial tcp {err.host}:{err.port}: connect: connection refused"
        return f"dial tcp {err.host}:{err.port}: {os_error.strerror or os_error}"
    if isinstance(err, aiohttp.ServerDisconnectedError):
        return "EOF"
    return str(err) or type(err).__name__


class WebhookClient:
    def __init__(self, resolver: ServiceResolver) -> None:
        self.resolver = resolver
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=None),
                json_serialize=lambda o: orjson.dumps(o).decode(),
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def target(self, config: Mapping[str, Any], timeout: float) -> tuple[str, str, str | None]:
        """(URL as printed, URL dialled, TLS server name or None)."""
        query = f"?timeout={int(timeout)}s"
        if config.get("url"):
            url = str(config["url"]) + query
            return url, url, None
        service = config.get("service") or {}
        port = int(service.get("port") or 443)
        path = service.get("path") or ""
        target = self.resolver.resolve(service.get("namespace", ""), service.get("name", ""), port)
        shown = f"https://{target.server_name}:{port}{path}{query}"
        return shown, target.url(path) + query, target.server_name

    async def post(self, config: Mapping[str, Any], body: Object, *, timeout: float,
                   headers: Mapping[str, str] | None = None) -> Object:
        """POST ``body`` as JSON and return the decoded JSON answer."""
        try:
            shown, url, server_name = self.target(config, timeout)
        except StatusError as err:
            raise CallError(err.message) from None
        context = ssl_context_for(config.get("caBundle"))
        data = orjson.dumps(body)
        try:
            async with asyncio.timeout(timeout):
                async with self._client().post(
                    url, data=data, ssl=context, server_hostname=server_name,
                    headers={"Content-Type": "application/json", "Accept": "application/json", **(headers or {})},
                ) as response:
                    raw = await response.read()
                    status = response.status
        except asyncio.CancelledError:
            raise
        except (aiohttp.ClientError, OSError, TimeoutError) as err:
            raise CallError(f'Post "{shown}": {_go_reason(err)}') from None
        if status < 200 or status >= 300:
            raise CallError(f"an error on the server (\"{raw.decode(errors='replace').strip()}\") has prevented the request from succeeding")
        try:
            answer = orjson.loads(raw)
        except orjson.JSONDecodeError as err:
            raise CallError(f"failed to decode the webhook's response: {err}") from None
        if not isinstance(answer, dict):
            raise CallError("the webhook's response is not a JSON object")
        return answer
