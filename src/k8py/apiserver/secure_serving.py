"""HTTPS for the API server: the serving certificate and the TLS context.

As kube-apiserver's ``SecureServingOptions``:

- ``--tls-cert-file``/``--tls-private-key-file`` are used when given;
  otherwise a self-signed pair is generated once into ``--cert-dir``
  (``apiserver.crt``/``apiserver.key``) for the bind address, ``localhost``
  and the ``kubernetes`` Service's names and ClusterIP, and reused on later
  starts (``MaybeDefaultWithSelfSignedCerts``).
- With ``--client-ca-file`` the server *requests* a client certificate but
  never fails the handshake over one: like Go's ``tls.RequestClientCert``,
  the certificate is checked afterwards by the x509 authenticator, so a bad,
  expired or untrusted certificate gets upstream's 401 ``Unauthorized``
  rather than a TLS alert. Python's :mod:`ssl` has no verify-callback, so
  :func:`_accept_any_client_certificate` installs one on the context's
  ``SSL_CTX`` through ``ctypes`` (the libssl :mod:`ssl` itself loaded). When
  that is impossible (no libssl found) the context falls back to OpenSSL's
  own verification against the CA (``CERT_OPTIONAL``): good certificates
  still authenticate, bad ones fail the handshake instead of getting 401.

Invariant: the returned context never *requires* a client certificate
(anonymous and token requests come without one).
"""

from __future__ import annotations

import ctypes
import ipaddress
import logging
import os
import shutil
import ssl
import tempfile
from dataclasses import dataclass

from k8py.client import certs

__all__ = ["ServingCertificate", "serving_certificate", "server_ssl_context", "SELF_SIGNED_DNS_NAMES"]

log = logging.getLogger(__name__)

#: the names upstream's self-signed serving certificate carries
SELF_SIGNED_DNS_NAMES = ("localhost", "kubernetes.default.svc", "kubernetes.default", "kubernetes")


@dataclass(frozen=True)
class ServingCertificate:
    cert_file: str
    key_file: str
    #: the bundle a client should trust (certificate-authority-data), when known
    ca_pem: bytes | None = None
    #: removed once loaded (see :func:`_ephemeral`)
    temporary_dir: str = ""


def serving_certificate(*, cert_file: str, key_file: str, cert_dir: str, host: str,
                        service_ip: str) -> ServingCertificate:
    """The serving pair to use: the given files, or a self-signed one in ``cert_dir``."""
    if cert_file or key_file:
        if not (cert_file and key_file):
            raise ValueError("--tls-cert-file and --tls-private-key-file must be given together")
        for path in (cert_file, key_file):
            if not os.path.isfile(path):
                raise ValueError(f"{path} does not exist: give an existing PEM file (or neither flag, for a self-signed certificate in --cert-dir)")
        return ServingCertificate(cert_file, key_file)
    if not cert_dir:
        return _ephemeral(host, service_ip)
    cert_path = os.path.join(cert_dir, "apiserver.crt")
    key_path = os.path.join(cert_dir, "apiserver.key")
    if not (os.path.exists(cert_path) and os.path.exists(key_path)):
        cert_pem, key_pem = _self_signed(host, service_ip)
        certs.write_pem(key_path, key_pem, private=True)
        certs.write_pem(cert_path, cert_pem)
        log.info("generated a self-signed serving certificate", extra={"cert": cert_path})
    return ServingCertificate(cert_path, key_path, ca_pem=certs.read_pem(cert_path))


def _self_signed(host: str, service_ip: str) -> tuple[bytes, bytes]:
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    ips = [ip for ip in ("127.0.0.1", service_ip) if ip and ip != host]
    return certs.generate_self_signed_cert_key(host, ips, SELF_SIGNED_DNS_NAMES)


def _ephemeral(host: str, service_ip: str) -> ServingCertificate:
    """No cert dir: a self-signed pair that lives only in memory once loaded.

    The files exist only in a private temporary directory until
    :func:`server_ssl_context` has read them (``ssl`` loads from files only).
    """
    cert_pem, key_pem = _self_signed(host, service_ip)
    directory = tempfile.mkdtemp(prefix="k8py-serving-")
    certs.write_pem(os.path.join(directory, "apiserver.key"), key_pem, private=True)
    certs.write_pem(os.path.join(directory, "apiserver.crt"), cert_pem)
    return ServingCertificate(os.path.join(directory, "apiserver.crt"), os.path.join(directory, "apiserver.key"),
                              ca_pem=cert_pem, temporary_dir=directory)


def server_ssl_context(serving: ServingCertificate, client_ca_file: str = "") -> ssl.SSLContext:
    """TLS 1.2+ with the serving pair; client certificates requested when a CA is given."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(serving.cert_file, serving.key_file)
    finally:
        if serving.temporary_dir:
            shutil.rmtree(serving.temporary_dir, ignore_errors=True)
    ctx.set_alpn_protocols(["http/1.1"])
    # no TLS 1.3 session tickets (OpenSSL sends two after every handshake): a client
    # keeps the last one with each connection (measured: some 10 KiB a connection, in
    # a controller manager holding sixty), and no client of the cluster resumes a
    # session with them — Python's clients never do, Go's only with a session cache,
    # which client-go does not set up. Each handshake is cheaper without them too.
    ctx.num_tickets = 0
    if client_ca_file:
        if not os.path.isfile(client_ca_file):
            raise ValueError(f"--client-ca-file {client_ca_file} does not exist")
        ctx.load_verify_locations(cafile=client_ca_file)
        ctx.verify_mode = ssl.CERT_OPTIONAL
        if not _accept_any_client_certificate(ctx):
            log.warning("client certificates are verified during the TLS handshake: a bad one is refused there, not with 401")
    return ctx


# -- the verify callback (see the module docstring) -------------------------

_VerifyCallback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p)
#: kept alive for the life of the process: OpenSSL holds the pointer
_ACCEPT = _VerifyCallback(lambda preverify_ok, store: 1)
_SSL_VERIFY_PEER = 0x01
_libssl: ctypes.CDLL | None = None


def _load_libssl() -> ctypes.CDLL | None:
    """The libssl that :mod:`ssl` is linked against (found in this process's maps)."""
    global _libssl
    if _libssl is None:
        try:
            with open("/proc/self/maps", encoding="utf-8") as f:
                paths = [line.split()[-1] for line in f if "/libssl.so" in line]
        except OSError:
            return None
        if not paths:
            return None
        lib = ctypes.CDLL(paths[0])
        lib.SSL_CTX_set_verify.argtypes = [ctypes.c_void_p, ctypes.c_int, _VerifyCallback]
        lib.SSL_CTX_set_verify.restype = None
        lib.SSL_CTX_get_verify_mode.argtypes = [ctypes.c_void_p]
        lib.SSL_CTX_get_verify_mode.restype = ctypes.c_int
        lib.SSL_CTX_get_verify_callback.argtypes = [ctypes.c_void_p]
        lib.SSL_CTX_get_verify_callback.restype = ctypes.c_void_p
        _libssl = lib
    return _libssl


def _accept_any_client_certificate(ctx: ssl.SSLContext) -> bool:
    """Make the handshake accept any client certificate; True when done.

    The ``SSL_CTX*`` is the first field after the object header of CPython's
    ``PySSLContext``; it is checked (its verify mode must read back as the
    one just set through :mod:`ssl`) before anything is written to it.
    """
    lib = _load_libssl()
    if lib is None:
        return False
    ssl_ctx = ctypes.c_void_p.from_address(id(ctx) + object.__basicsize__).value
    if not ssl_ctx or lib.SSL_CTX_get_verify_mode(ssl_ctx) != _SSL_VERIFY_PEER:
        return False
    lib.SSL_CTX_set_verify(ssl_ctx, _SSL_VERIFY_PEER, _ACCEPT)
    return lib.SSL_CTX_get_verify_callback(ssl_ctx) == ctypes.cast(_ACCEPT, ctypes.c_void_p).value


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
