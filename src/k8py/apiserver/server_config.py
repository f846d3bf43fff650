"""The API server's settings: one dataclass, filled from the flags by ``k8py apiserver``.

Kept apart from :mod:`~k8py.apiserver.server` so the wiring modules
(:mod:`~k8py.apiserver.access_control`) and the server read the same
settings without importing each other. Every field's comment names the flag
it comes from; defaults are upstream's where upstream has one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from k8py.apiserver.authn.authenticator import RequestAuthenticator, TokenAuthenticator
from k8py.apiserver.authn.service_account import DEFAULT_ISSUER
from k8py.apiserver.authz.attributes import Authorizer
from k8py.apiserver.watch.clock import WatchClock
from k8py.apiserver.watch.watcher import MAX_PENDING_BYTES, SLOW_CLIENT_TIMEOUT

__all__ = ["APIServerConfig"]


@dataclass
class APIServerConfig:
    #: the secure port's address (``--bind-address``)
    bind: str = "127.0.0.1"
    #: HTTPS (``--secure-port``; 0 picks a free port, None serves no HTTPS)
    secure_port: int | None = 6443
    #: plain HTTP on ``insecure_bind`` (``--insecure-port``; None: off), every request UNSECURED
    insecure_port: int | None = None
    #: must be a loopback address: the insecure port has no authentication
    insecure_bind: str = "127.0.0.1"
    tls_cert_file: str = ""
    tls_private_key_file: str = ""
    #: where a self-signed serving pair is kept when no files are given ("": in memory only)
    cert_dir: str = ""
    #: CAs client certificates must be issued by ("" = no x509 authentication)
    client_ca_file: str = ""
    #: upstream's static token CSV ("" = none)
    token_auth_file: str = ""
    anonymous_auth: bool = True
    #: request authenticators asked before x509 / token authenticators after the token file
    request_authenticators: list[RequestAuthenticator] = field(default_factory=list)
    token_authenticators: list[TokenAuthenticator] = field(default_factory=list)
    #: who may do what (impersonation now; every request once authorization is wired); AlwaysAllow when None
    authorizer: Authorizer | None = None
    #: the client certificate the server shows kubelets, and the CA it checks them with
    kubelet_client_certificate: str = ""
    kubelet_client_key: str = ""
    kubelet_certificate_authority: str = ""
    bookmark_interval: float = 30.0
    watch_cache_capacity: int = 10_000
    #: a watch client owed more than this many bytes is disconnected
    watch_max_pending_bytes: int = MAX_PENDING_BYTES
    #: a watch client whose connection stays backed up this long is disconnected
    watch_slow_client_timeout: float = SLOW_CLIENT_TIMEOUT
    #: what watch streams keep time by (tests pass a ManualClock); the event loop's when None
    watch_clock: WatchClock | None = None
    #: the range Service ClusterIPs are allocated from
    service_cidr: str = "127.192.0.0/12"
    #: the ClusterIP of the ``kubernetes`` Service ("" = the range's first address)
    kubernetes_service_ip: str = ""
    #: seconds between renewals of this server's Lease / rewrites of the kubernetes Endpoints
    endpoint_reconciler_interval: float = 10.0
    #: how long a Lease keeps a server in the kubernetes Endpoints without renewal
    endpoint_lease_duration: float = 15.0
    #: the range node ports are allocated from (``--service-node-port-range``)
    service_node_port_range: str = "30000-32767"
    #: seconds between passes of the cluster IP / node port repair loop (upstream: 3 minutes; 0 = at start only)
    service_repair_interval: float = 180.0
    #: a claim no Service uses is freed once it is this old and still unused after ``service_repair_leak_passes`` passes
    service_repair_leak_grace: float = 60.0
    service_repair_leak_passes: int = 3
    #: the shortest interval metrics.k8s.io takes a CPU rate over (a cold request waits this long)
    metrics_window: float = 1.0
    #: record the list-watch flow (every write, every watch event sent) for ``/debug/flow``
    trace: bool = False
    #: ``--enable-admission-plugins`` / ``--disable-admission-plugins`` (names; upstream's defaults otherwise)
    enable_admission_plugins: tuple[str, ...] = ()
    disable_admission_plugins: tuple[str, ...] = ()
    #: ``--feature-gates``: gate name -> on/off (only the alpha ``MutatingAdmissionPolicy`` is read)
    feature_gates: dict[str, bool] = field(default_factory=dict)
    #: plugin name -> its configuration (``--admission-control-config-file``)
    admission_plugin_config: dict[str, Any] = field(default_factory=dict)
    #: ``--encryption-provider-config``: an EncryptionConfiguration file ("" = stored as is)
    encryption_provider_config: str = ""
    #: ``--audit-policy-file`` and ``--audit-log-path`` (both needed for an audit log; "-" = stdout)
    audit_policy_file: str = ""
    audit_log_path: str = ""
    #: ``--audit-log-maxsize`` (megabytes before rotation; 0 = never), ``-maxbackup``, ``-maxage`` (days)
    audit_log_maxsize: float = 0
    audit_log_maxbackup: int = 0
    audit_log_maxage: int = 0
    #: ``--max-requests-inflight`` + ``--max-mutating-requests-inflight``: API Priority and Fairness'
    #: total seats, shared out among the priority levels (both 0 = no limit)
    max_requests_inflight: int = 400
    max_mutating_requests_inflight: int = 200
    #: seconds a request may wait in a flow-control queue before a 429 (upstream: a quarter of the request timeout)
    flow_control_wait_limit: float = 15.0
    #: seconds between re-sharings of seats among priority levels (borrowing; upstream 10 s)
    flow_control_borrowing_period: float = 10.0
    #: ``--authorization-mode``: authorizers asked in order (AlwaysAllow, AlwaysDeny, Node, RBAC)
    authorization_modes: tuple[str, ...] = ("AlwaysAllow",)
    #: seconds between availability checks of aggregated APIServices (and at once on a change)
    apiservice_check_interval: float = 30.0
    #: the front-proxy CA aggregated servers trust, and this server's client certificate
    #: signed by it (``--requestheader-client-ca-file``, ``--proxy-client-cert-file/-key-file``);
    #: all empty: a CA and certificate are made at start
    requestheader_client_ca_file: str = ""
    proxy_client_cert_file: str = ""
    proxy_client_key_file: str = ""
    #: ``--requestheader-allowed-names``: the client certificate names aggregated servers accept
    requestheader_allowed_names: tuple[str, ...] = ()
    #: ``--service-account-issuer`` (the first signs; all are accepted)
    service_account_issuers: tuple[str, ...] = (DEFAULT_ISSUER,)
    #: ``--service-account-signing-key-file``; "" = a key made at start (tokens die with the process)
    service_account_signing_key_file: str = ""
    #: ``--service-account-key-file`` (repeatable): more keys tokens may be signed with
    service_account_key_files: tuple[str, ...] = ()
    #: ``--api-audiences``; empty = the first issuer
    api_audiences: tuple[str, ...] = ()
    #: ``--service-account-max-token-expiration`` in seconds (None: no cap)
    service_account_max_token_expiration: int | None = None
    service_account_extend_token_expiration: bool = True
    service_account_jwks_uri: str = ""
    #: wall time (seconds since the epoch) for token issue and expiry; time.time when None
    token_clock: Callable[[], float] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
