"""How to reach an API server: :class:`ClientConfig`, and in-cluster config.

A :class:`ClientConfig` is the resolved result of a kubeconfig
(:mod:`k8py.client.kubeconfig`) or of a pod's service account
(:func:`in_cluster_config`): the server URL, how to trust it, how to
authenticate, and the default namespace. It is plain data; the transport
turns it into an :class:`ssl.SSLContext` and an ``Authorization`` header.

Token files are re-read (at most once a minute, as client-go's
``cachingTokenSource``), because bound service-account tokens rotate while a
long-running controller keeps its config.

Certificate and key *data* (base64 in a kubeconfig) are written to private
temporary files only for the duration of :meth:`ClientConfig.ssl_context`,
because :mod:`ssl` loads client certificates from files only.
"""

from __future__ import annotations

import os
import ssl
import tempfile
import time
from dataclasses import dataclass, field

__all__ = ["ClientConfig", "ConfigError", "in_cluster_config", "SERVICE_ACCOUNT_DIR"]

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
_TOKEN_FILE_REFRESH = 60.0


class ConfigError(ValueError):
    """A kubeconfig or in-cluster environment that cannot be used."""


@dataclass
class ClientConfig:
    """Everything a client needs to talk to one API server."""

    server: str
    namespace: str = "default"
    ca_file: str | None = None
    ca_data: bytes | None = None
    cert_file: str | None = None
    cert_data: bytes | None = None
    key_file: str | None = None
    key_data: bytes | None = None
    token: str | None = None
    token_file: str | None = None
    username: str | None = None
    password: str | None = None
    insecure_skip_tls_verify: bool = False
    tls_server_name: str | None = None
    user_agent: str = "k8py-client/0.1"
    _token_cache: tuple[float, str] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.server = self.server.rstrip("/")
        if not self.server.startswith(("http://", "https://")):
            raise ConfigError(f"server URL must start with http:// or https://: {self.server!r}")

    @property
    def is_tls(self) -> bool:
        return self.server.startswith("https://")

    def bearer_token(self) -> str | None:
        """The token to send: ``token`` if set, else the (cached) content of ``token_file``."""
        if self.token:
            return self.token
        if not self.token_file:
            return None
        now = time.monotonic()
        if self._token_cache is not None and now - self._token_cache[0] < _TOKEN_FILE_REFRESH:
            return self._token_cache[1]
        try:
            with open(self.token_file, encoding="utf-8") as f:
                token = f.read().strip()
        except OSError as err:
            if self._token_cache is not None:
                return self._token_cache[1]  # keep the last good token, as client-go does
            raise ConfigError(f"cannot read token file {self.token_file}: {err}") from err
        self._token_cache = (now, token)
        return token

    def auth_headers(self) -> dict[str, str]:
        token = self.bearer_token()
        if token:
            return {"Authorization": f"Bearer {token}"}
        if self.username is not None and self.password is not None:
            import base64

            raw = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
            return {"Authorization": f"Basic {raw}"}
        return {}

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context for an ``https`` server (``None`` for plain HTTP)."""
        if not self.is_tls:
            return None
        if self.insecure_skip_tls_verify:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        elif self.ca_data:
            ctx = ssl.create_default_context(cadata=self.ca_data.decode("ascii", "replace"))
        elif self.ca_file:
            ctx = ssl.create_default_context(cafile=self.ca_file)
        else:
            ctx = ssl.create_default_context()
        if self.cert_file or self.cert_data:
            with _pem_file(self.cert_file, self.cert_data) as cert, _pem_file(self.key_file, self.key_data) as key:
                assert cert is not None
                ctx.load_cert_chain(cert, key or None)
        return ctx


class _pem_file:
    """A path for PEM that is either already a file or given as bytes."""

    def __init__(self, path: str | None, data: bytes | None) -> None:
        self._path = path
        self._data = data
        self._tmp: str | None = None

    def __enter__(self) -> str | None:
        if self._data is None:
            return self._path
        fd, self._tmp = tempfile.mkstemp(prefix="k8py-", suffix=".pem")
        with os.fdopen(fd, "wb") as f:
            f.write(self._data)
        return self._tmp

    def __exit__(self, *exc: object) -> None:
        if self._tmp is not None:
            os.unlink(self._tmp)


def in_cluster_config(
    *,
    environ: dict[str, str] | None = None,
    service_account_dir: str = SERVICE_ACCOUNT_DIR,
) -> ClientConfig:
    """The config of a process running in a pod (client-go's ``InClusterConfig``).

    Needs ``KUBERNETES_SERVICE_HOST``/``KUBERNETES_SERVICE_PORT`` and the
    mounted service-account token; the CA and namespace files are used when
    present. The token is read from its file on use, so rotation is seen.
    """
    env = os.environ if environ is None else environ
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise ConfigError("unable to load in-cluster configuration, KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be defined")
    token_file = os.path.join(service_account_dir, "token")
    if not os.path.exists(token_file):
        raise ConfigError(f"service account token file {token_file} does not exist")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # IPv6 literal
    ca_file = os.path.join(service_account_dir, "ca.crt")
    namespace = "default"
    ns_file = os.path.join(service_account_dir, "namespace")
    if os.path.exists(ns_file):
        with open(ns_file, encoding="utf-8") as f:
            namespace = f.read().strip() or "default"
    return ClientConfig(
        server=f"https://{host}:{port}",
        namespace=namespace,
        ca_file=ca_file if os.path.exists(ca_file) else None,
        token_file=token_file,
    )
