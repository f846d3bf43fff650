"""HTTPS for the kubelet's server, and who may call it.

As the kubelet's ``--tls-cert-file``/``--tls-private-key-file`` and
``--client-ca-file``:

- with a serving pair given, the server speaks TLS with it; with only a
  client CA, a self-signed pair is made once in ``ROOT_DIR/pki``
  (``kubelet.crt``/``kubelet.key``, for the node's address and name) and
  kept; with neither, plain HTTP (a standalone test kubelet);
- with a client CA, every request but ``/healthz`` must come with a client
  certificate issued by it (OpenSSL verifies it in the handshake; a missing
  one is 401 ``Unauthorized``). That is the API server (``k8py up`` gives it
  ``kube-apiserver-kubelet-client``) or an administrator. Upstream then asks
  the API server whether that user may use ``nodes/proxy`` (webhook
  authorization); k8py trusts any certificate of the cluster CA.
"""

from __future__ import annotations

import os
import ssl
from typing import TYPE_CHECKING, Awaitable, Callable

from aiohttp import web

from k8py.client import certs

if TYPE_CHECKING:
    from k8py.kubelet.config import KubeletConfig

__all__ = ["server_ssl_context", "client_certificate_middleware", "serving_options"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_UNAUTHORIZED = b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}\n'


def server_ssl_context(*, cert_file: str, key_file: str, client_ca_file: str, root_dir: str,
                       address: str, node_name: str) -> ssl.SSLContext | None:
    """The server's TLS context, or None for plain HTTP (no TLS flag given)."""
    if not (cert_file or client_ca_file):
        return None
    if not cert_file:
        cert_file, key_file = _self_signed(root_dir, address, node_name)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert_file, key_file or None)
    if client_ca_file:
        ctx.load_verify_locations(cafile=client_ca_file)
        ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx


def _self_signed(root_dir: str, address: str, node_name: str) -> tuple[str, str]:
    cert_file, key_file = os.path.join(root_dir, "pki", "kubelet.crt"), os.path.join(root_dir, "pki", "kubelet.key")
    if not (os.path.exists(cert_file) and os.path.exists(key_file)):
        cert_pem, key_pem = certs.generate_self_signed_cert_key(address or "127.0.0.1", alternate_dns=[node_name, "localhost"])
        certs.write_pem(key_file, key_pem, private=True)
        certs.write_pem(cert_file, cert_pem)
    return cert_file, key_file


@web.middleware
async def client_certificate_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """401 for a request without a (verified) client certificate, except ``/healthz``."""
    if request.path != "/healthz":
        transport = request.transport
        ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
        if ssl_object is None or not ssl_object.getpeercert():
            return web.Response(status=401, body=_UNAUTHORIZED, content_type="application/json")
    return await handler(request)


def serving_options(config: "KubeletConfig") -> tuple[ssl.SSLContext | None, tuple[Callable[..., Awaitable[web.StreamResponse]], ...]]:
    """The TLS context and middlewares a kubelet's server runs with, from its config."""
    ctx = server_ssl_context(cert_file=config.tls_cert_file, key_file=config.tls_private_key_file,
                             client_ca_file=config.client_ca_file, root_dir=config.root_dir,
                             address=config.address, node_name=config.node_name)
    return ctx, ((client_certificate_middleware,) if config.client_ca_file else ())
