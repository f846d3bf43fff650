"""A tiny HTTPS server for admission webhooks (and aggregated APIs) in tests.

:class:`HTTPSServer` serves an aiohttp Application over TLS on a free
loopback port, on its own event loop in a background thread, so it answers
while the test (or an API server thread) blocks. Its serving certificate is
issued by a fresh CA from :mod:`k8py.client.certs` for ``127.0.0.1``,
``localhost`` and any extra DNS names (``<svc>.<ns>.svc`` for a webhook
reached through a Service); ``ca_bundle`` is that CA as the API carries it
(base64 of PEM).

:func:`review_app` builds an app whose routes answer AdmissionReviews with a
function of the request (``allow``, ``deny``, ``patch`` helpers below).
"""

from __future__ import annotations

import asyncio
import base64
import os
import ssl
import tempfile
import threading
from typing import Any, Awaitable, Callable

import orjson
from aiohttp import web

from k8py.client.certs import encode_cert_pem, encode_private_key_pem, new_self_signed_ca

__all__ = ["HTTPSServer", "SERVER", "review_app", "allow", "deny", "patch_response"]

Object = dict[str, Any]
SERVER: web.AppKey["HTTPSServer"] = web.AppKey("server")
Reviewer = Callable[[Object], Object | Awaitable[Object]]


class HTTPSServer:
    """See the module docstring; ``app[SERVER]`` is the server (its ``requests`` log)."""

    def __init__(self, app: web.Application, *, dns_names: tuple[str, ...] = (), client_ca_pem: bytes | None = None) -> None:
        self.app = app
        self.ca = new_self_signed_ca("webhook-test-ca")
        self.cert, self.key = self.ca.issue_serving("webhook", dns_names=("localhost", *dns_names), ips=("127.0.0.1",))
        self.client_ca_pem = client_ca_pem
        self.port = 0
        self.requests: list[Object] = []  # every AdmissionReview request received, in order
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="test-https-server", daemon=True)
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._dir = tempfile.mkdtemp(prefix="k8py-https-")

    @property
    def ca_pem(self) -> bytes:
        return self.ca.cert_pem

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.ca.cert_pem).decode()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def _context(self) -> ssl.SSLContext:
        cert_file, key_file = os.path.join(self._dir, "tls.crt"), os.path.join(self._dir, "tls.key")
        with open(cert_file, "wb") as f:
            f.write(encode_cert_pem(self.cert))
        with open(key_file, "wb") as f:
            f.write(encode_private_key_pem(self.key))
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert_file, key_file)
        if self.client_ca_pem is not None:
            context.load_verify_locations(cadata=self.client_ca_pem.decode())
            context.verify_mode = ssl.CERT_OPTIONAL
        return context

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._main())
        finally:
            self.loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=self._context())
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await runner.cleanup()

    def __enter__(self) -> "HTTPSServer":
        self.app[SERVER] = self
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the test HTTPS server did not start")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
        for name in os.listdir(self._dir):
            os.unlink(os.path.join(self._dir, name))
        os.rmdir(self._dir)


def review_app(routes: dict[str, Reviewer]) -> web.Application:
    """An app answering AdmissionReviews at each path with ``routes[path](request)``
    (returning the ``response`` without its uid)."""
    app = web.Application()

    def handler(reviewer: Reviewer) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def serve(request: web.Request) -> web.Response:
            review = orjson.loads(await request.read())
            req = review["request"]
            request.app[SERVER].requests.append(req)
            result = reviewer(req)
            if not isinstance(result, dict):
                result = await result
            body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": req["uid"], **result}}
            return web.Response(body=orjson.dumps(body), content_type="application/json")
        return serve

    for path, reviewer in routes.items():
        app.router.add_post(path, handler(reviewer))
    return app


def allow(**extra: Any) -> Object:
    return {"allowed": True, **extra}


def deny(message: str, code: int = 403, reason: str = "") -> Object:
    status: Object = {"message": message, "code": code}
    if reason:
        status["reason"] = reason
    return {"allowed": False, "status": status}


def patch_response(ops: list[Object], **extra: Any) -> Object:
    return {"allowed": True, "patchType": "JSONPatch", "patch": base64.b64encode(orjson.dumps(ops)).decode(), **extra}
