"""The API server's identity towards aggregated API servers (the front proxy).

An aggregated server trusts requests that come with a client certificate
signed by the *request-header* CA and reads the user from
``X-Remote-User`` / ``X-Remote-Group`` / ``X-Remote-Extra-<key>``. The CA and
the proxy's client certificate come from ``--requestheader-client-ca-file``
and ``--proxy-client-cert-file/--proxy-client-key-file``; without them a
front-proxy CA and a ``front-proxy-client`` certificate are made at start
(kept in memory), as ``k8py up`` would lay them out.

Aggregated servers learn the CA and the header names from the ConfigMap
``kube-system/extension-apiserver-authentication`` (upstream's keys, values
JSON lists), which :func:`authentication_configmap` writes.
"""

from __future__ import annotations

import os
import ssl
import tempfile
import urllib.parse
from dataclasses import dataclass
from typing import Any

import orjson

from k8py.apiserver.authn.user import UserInfo
from k8py.client.certs import encode_cert_pem, encode_private_key_pem, new_self_signed_ca

__all__ = ["FrontProxyIdentity", "FrontProxyConfigError", "remote_user_headers", "authentication_configmap", "CONFIGMAP_NAME"]

CONFIGMAP_NAME = "extension-apiserver-authentication"
USERNAME_HEADER = "X-Remote-User"
GROUP_HEADER = "X-Remote-Group"
EXTRA_PREFIX = "X-Remote-Extra-"


class FrontProxyConfigError(ValueError):
    """The front-proxy flags are incomplete or name files that cannot be read (the server does not start)."""


@dataclass
class FrontProxyIdentity:
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes
    allowed_names: tuple[str, ...] = ("front-proxy-client",)

    @classmethod
    def generate(cls) -> "FrontProxyIdentity":
        ca = new_self_signed_ca("front-proxy-ca")
        cert, key = ca.issue_client("front-proxy-client")
        return cls(ca.cert_pem, encode_cert_pem(cert), encode_private_key_pem(key))

    @classmethod
    def from_files(cls, ca_file: str, cert_file: str, key_file: str, allowed_names: tuple[str, ...] = ()) -> "FrontProxyIdentity":
        def read(path: str, flag: str) -> bytes:
            try:
                with open(path, "rb") as f:
                    return f.read()
            except OSError as err:
                raise FrontProxyConfigError(f"{flag} {path}: {err.strerror or err}") from None

        identity = cls(read(ca_file, "--requestheader-client-ca-file"), read(cert_file, "--proxy-client-cert-file"),
                       read(key_file, "--proxy-client-key-file"), allowed_names or ("front-proxy-client",))
        try:  # the pair must load (checked on a bare context: a default one would read the system's CAs first)
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(cert_file, key_file)
        except (ssl.SSLError, ValueError) as err:
            raise FrontProxyConfigError(f"--proxy-client-cert-file {cert_file} and --proxy-client-key-file {key_file} "
                                        f"are not a certificate and its key in PEM: {err}") from None
        return identity

    def client_context(self, ca_bundle_pem: str | None, *, insecure: bool) -> ssl.SSLContext:
        """A client context presenting the proxy certificate and trusting ``ca_bundle_pem``."""
        context = ssl.create_default_context(cadata=ca_bundle_pem) if ca_bundle_pem else ssl.create_default_context()
        if insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        self._load_pair(context)
        return context

    def _load_pair(self, context: ssl.SSLContext) -> None:
        with tempfile.TemporaryDirectory(prefix="k8py-front-proxy-") as tmp:  # load_cert_chain reads files only
            cert_file, key_file = os.path.join(tmp, "tls.crt"), os.path.join(tmp, "tls.key")
            with open(cert_file, "wb") as f:
                f.write(self.cert_pem)
            with open(os.open(key_file, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
                f.write(self.key_pem)
            context.load_cert_chain(cert_file, key_file)


def remote_user_headers(user: UserInfo) -> list[tuple[str, str]]:
    """The caller's identity for the aggregated server; an extra's key is path-escaped into the header
    name as upstream (``authentication.kubernetes.io/pod-name`` -> ``...%2Fpod-name``: ``/`` may not be in one)."""
    headers = [(USERNAME_HEADER, user.name)]
    headers += [(GROUP_HEADER, g) for g in user.groups]
    for key, values in user.extra.items():
        headers += [(EXTRA_PREFIX + urllib.parse.quote(key, safe="$&+,;=:@"), v) for v in values]
    return headers


def authentication_configmap(identity: FrontProxyIdentity) -> dict[str, Any]:
    def listed(*values: str) -> str:
        return orjson.dumps(list(values)).decode()

    return {
        "metadata": {"name": CONFIGMAP_NAME, "namespace": "kube-system"},
        "data": {
            "requestheader-client-ca-file": identity.ca_pem.decode(),
            "requestheader-allowed-names": listed(*identity.allowed_names),
            "requestheader-username-headers": listed(USERNAME_HEADER),
            "requestheader-group-headers": listed(GROUP_HEADER),
            "requestheader-extra-headers-prefix": listed(EXTRA_PREFIX),
        },
    }
