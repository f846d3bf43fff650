"""HTTPS for the kubelet's server, and who may call it.

As the kubelet's ``--tls-cert-file``/``--tls-private-key-file`` and
``--client-ca-file``:

- with a serving pair given, the server speaks TLS with it; with
  ``serverTLSBootstrap`` (and no pair), with the certificate the cluster
  issues it (:mod:`.serving_certificate`, see :func:`serving_certificate`);
  with only a client CA, a self-signed pair is made once in ``ROOT_DIR/pki``
  (``kubelet.crt``/``kubelet.key``, for the node's address and name) and
  kept; with neither, plain HTTP (a standalone test kubelet);
- with TLS on, every request but ``/healthz`` is authenticated (a client
  certificate of ``--client-ca-file``, a bearer token by TokenReview,
  anonymous when allowed) and authorized (``--authorization-mode``, a
  SubjectAccessReview for ``nodes/<subresource>``) by
  :class:`~k8py.kubelet.server_auth.KubeletAuth`. Plain HTTP has neither
  (a standalone test kubelet: bind it to loopback).
"""

from __future__ import annotations

import os
import ssl
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from aiohttp import web

from k8py.client import certs
from k8py.kubelet.server_auth import KubeletAuth
from k8py.kubelet.serving_certificate import ServingCertificate

if TYPE_CHECKING:
    from k8py.kubelet.config import KubeletConfig
    from k8py.kubelet.server_auth import Creator

__all__ = ["server_ssl_context", "serving_options", "serving_certificate"]


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


def serving_certificate(config: "KubeletConfig", client: Any) -> ServingCertificate | None:
    """The manager of a cluster-issued serving certificate, with ``serverTLSBootstrap`` and no pair given."""
    if not config.server_tls_bootstrap or config.tls_cert_file or client is None:
        return None
    return ServingCertificate(client, node_name=config.node_name,
                              cert_dir=config.cert_dir or os.path.join(config.root_dir, "pki"),
                              addresses=(config.address,), client_ca_file=config.client_ca_file)


def serving_options(config: "KubeletConfig", client: "Creator | None" = None, *, serving: ServingCertificate | None = None,
                    ) -> tuple[ssl.SSLContext | None, tuple[Callable[..., Awaitable[web.StreamResponse]], ...]]:
    """The TLS context and middlewares a kubelet's server runs with, from its config;
    ``client`` (the kubelet's API client) makes the TokenReviews and SubjectAccessReviews;
    ``serving``: the cluster-issued certificate's manager (:func:`serving_certificate`)."""
    if serving is not None:
        ctx: ssl.SSLContext | None = serving.context
    else:
        ctx = server_ssl_context(cert_file=config.tls_cert_file, key_file=config.tls_private_key_file,
                                 client_ca_file=config.client_ca_file, root_dir=config.root_dir,
                                 address=config.address, node_name=config.node_name)
    if ctx is None:
        return None, ()
    auth = KubeletAuth(node_name=config.node_name, client=client, anonymous=config.anonymous_auth,
                       token_webhook=config.authentication_token_webhook, authorization_mode=config.authorization_mode,
                       token_cache_ttl=config.authentication_token_webhook_cache_ttl,
                       authorized_ttl=config.authorization_webhook_cache_authorized_ttl,
                       unauthorized_ttl=config.authorization_webhook_cache_unauthorized_ttl)
    return ctx, (auth.middleware,)
