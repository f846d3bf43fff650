"""The API server process: storage, registry, watch cache, HTTP, bootstrap.

:class:`APIServer` wires the pieces and owns their lifecycle::

    storage.start() → registry (built-ins) → cacher.start() (list + watch)
    → bootstrap objects → HTTP listening

It listens on the secure port (HTTPS, ``secure_port``; the serving pair
from ``tls_cert_file``/``tls_private_key_file`` or self-signed in
``cert_dir``, see :mod:`~k8py.apiserver.secure_serving`) and, only when
asked, on an insecure port (plain HTTP, loopback only, every request
``UNSECURED``). Requests over TLS go through :attr:`APIServer.authenticator`
(x509 with ``client_ca_file``, ``token_auth_file``, the configured token
authenticators, service-account and bootstrap tokens, anonymous; its lists
may be extended before ``start()``); :attr:`APIServer.authorizer`
(``authorization_modes``, or ``config.authorizer``) decides impersonation and
then the request.

``start()`` returns when the server is ready (``/readyz`` is 200): the watch
cache has loaded and the system namespaces and the ``kubernetes`` Service
exist. ``stop()`` closes watches, the listener and the store, in that order.
"""

from __future__ import annotations

import asyncio
import copy
import ipaddress
import logging
import socket
import ssl
from dataclasses import dataclass, field
from typing import Any, Callable

from aiohttp import web

from k8py.api.errors import AlreadyExists, StatusError
from k8py.apiserver.aggregator import Aggregator, FrontProxyIdentity
from k8py.apiserver.aggregator.front_proxy import FrontProxyConfigError
from k8py.apiserver.app import build_app
from k8py.apiserver.authn.bootstrap_token import BootstrapTokenAuthenticator
from k8py.apiserver.authn.oidc_discovery import OIDCDiscovery
from k8py.apiserver.authn.service_account import (
    DEFAULT_ISSUER, ServiceAccountTokenAuthenticator, ServiceAccountTokens, TokenIssuer,
)
from k8py.apiserver.handlers.csr_approval import fill_requester
from k8py.apiserver.handlers.token_request import TOKEN_ISSUER
from k8py.apiserver.handlers.token_review import API_AUDIENCES, TOKEN_AUTHENTICATORS, serve_token_review
from k8py.api.service_account_keys import generate_signing_key, load_signing_key, load_verifying_keys
from k8py.apiserver.crd import CRD_DEFINITION, CRDRegistrar
from k8py.apiserver.endpoint_reconciler import EndpointReconciler
from k8py.apiserver.watch.cacher import Cacher
from k8py.apiserver.watch.clock import WatchClock
from k8py.apiserver.watch.watcher import MAX_PENDING_BYTES, SLOW_CLIENT_TIMEOUT, WatchLimits
from k8py.apiserver.openapi.discovery import Discovery
from k8py.apiserver.handlers.verbs import ResourceHandlers
from k8py.apiserver.metrics import APIMetrics
from k8py.apiserver.flow import FlowRecorder
from k8py.apiserver.admission.builtin import register_builtin_plugins
from k8py.apiserver.admission.chain import AdmissionChain
from k8py.apiserver.admission.namespace_lifecycle import SYSTEM_NAMESPACES
from k8py.apiserver.admission.plugins import PluginContext, build_chain
from k8py.apiserver.webhooks.admission_plugins import close_webhook_plugins, register_webhook_plugins
from k8py.apiserver.webhooks.policy_status import PolicyStatusWriter
from k8py.apiserver.store.object_meta import rfc3339
from k8py.apiserver.store.object_store import ObjectStore
from k8py.apiserver.openapi.v3 import OpenAPIService
from k8py.apiserver.registry import Registry, ResourceDefinition
from k8py.apiserver.resources import register_builtins
from k8py.apiserver.streaming import KUBELETS, RESOURCE_METRICS, KubeletClient, ResourceMetrics
from k8py.apiserver.resources.scheduling import BUILTIN_PRIORITY_CLASSES
from k8py.apiserver.admission.service_ips import ServiceAllocator
from k8py.apiserver.authn.authenticator import RequestAuthenticator, TokenAuthenticator
from k8py.apiserver.authn.chain import AuthenticatorChain, authentication_middleware
from k8py.apiserver.authn.self_subject_review import serve_self_subject_review
from k8py.apiserver.authn.token_file import StaticTokenAuthenticator
from k8py.apiserver.authn.x509 import X509Authenticator
from k8py.apiserver.authz.attributes import Authorizer
from k8py.apiserver.authz.impersonation import impersonation_middleware
from k8py.apiserver.secure_serving import ServingCertificate, is_loopback, server_ssl_context, serving_certificate
from k8py.apiserver.authz.attributes import AlwaysAllow
from k8py.apiserver.authz.chain import MODES, AlwaysDeny, Union
from k8py.apiserver.authz.escalation import EscalationCheck
from k8py.apiserver.authz.filter import AUTHORIZER, CONSISTENT, authorization_middleware
from k8py.apiserver.handlers.access_review import ACCESS_REVIEW_HANDLERS
from k8py.apiserver.authz.node import NodeAuthorizer
from k8py.apiserver.authz.policy_index import CachedPolicy
from k8py.apiserver.authz.rbac import RBACAuthorizer
from k8py.apiserver.authz.reconcile import reconcile_bootstrap_policy
from k8py.apiserver.audit.auditor import Auditor
from k8py.apiserver.overload import InflightLimiter
from k8py.apiserver.audit.log_backend import LogBackend
from k8py.apiserver.audit.policy import load_policy
from k8py.storage import Storage
from k8py.storage.encryption import EncryptedStorage, ProviderChain, load_encryption_config

__all__ = ["APIServer", "APIServerConfig"]

log = logging.getLogger(__name__)


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
    #: the shortest interval metrics.k8s.io takes a CPU rate over (a cold request waits this long)
    metrics_window: float = 1.0
    #: record the list-watch flow (every write, every watch event sent) for ``/debug/flow``
    trace: bool = False
    #: ``--enable-admission-plugins`` / ``--disable-admission-plugins`` (names; upstream's defaults otherwise)
    enable_admission_plugins: tuple[str, ...] = ()
    disable_admission_plugins: tuple[str, ...] = ()
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
    #: ``--max-requests-inflight`` / ``--max-mutating-requests-inflight`` per priority level (0 = no limit)
    max_requests_inflight: int = 400
    max_mutating_requests_inflight: int = 200
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


class CachedCoreObjects:
    """core/v1 objects as the watch cache has them: what token authenticators look up."""

    def __init__(self, registry: Registry, cacher: Cacher) -> None:
        self.registry = registry
        self.cacher = cacher

    def get(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        d = self.registry.get("", "v1", plural)
        if d is None:
            return None
        cached = self.cacher.cache_for(d).objects.get(d.key(namespace, name))
        return None if cached is None else cached.decode()


class APIServer:
    def __init__(self, storage: Storage, config: APIServerConfig | None = None) -> None:
        self.config = config or APIServerConfig()
        if self.config.encryption_provider_config:
            # every reader (store, watch cache, lists) sees plaintext; the backend only ciphertext
            self.encryption = load_encryption_config(self.config.encryption_provider_config)
            self._encryption_index: dict[str, ProviderChain | None] | None = None
            storage = EncryptedStorage(storage, self._encryption_chain_for_key)  # type: ignore[assignment]
        self.storage = storage
        if not self.config.kubernetes_service_ip:
            self.config.kubernetes_service_ip = str(ipaddress.ip_network(self.config.service_cidr)[1])
        self.registry = Registry()
        if self.config.encryption_provider_config:
            forget = lambda _d: setattr(self, "_encryption_index", None)  # noqa: E731 - CRDs come and go
            self.registry.on_change(forget)
            self.registry.on_remove(forget)
        register_builtins(self.registry)
        self.registry.add(CRD_DEFINITION)
        self.metrics = APIMetrics()
        self._watch_event_counters: dict[str, Any] = {}
        self.cacher = Cacher(
            storage,
            self.registry,
            capacity=self.config.watch_cache_capacity,
            on_event=self._count_watch_event,
            watch_limits=WatchLimits(
                max_pending_bytes=self.config.watch_max_pending_bytes,
                slow_client_timeout=self.config.watch_slow_client_timeout,
                on_slow_close=lambda plural: self.metrics.terminated_watchers.labels(plural).inc(),
            ),
            on_undecodable=lambda plural: self.metrics.decode_errors.labels(plural).inc(),
            clock=self.config.watch_clock,
        )
        self.store = ObjectStore(storage)
        self.store.cached_read = self.cacher.current  # an update's first guess (see ObjectStore)
        self.service_allocator = ServiceAllocator(self.registry, self.cacher, storage, self.config.service_cidr,
                                                  self.config.service_node_port_range)
        self.store.allocate_new.append(self.service_allocator.allocate)
        self.store.allocate_update.append(self.service_allocator)
        self._allocator_task: asyncio.Task[None] | None = None
        self._reconciler_task: asyncio.Task[None] | None = None
        self.crds = CRDRegistrar(self.registry, storage, self.store, self.cacher)
        register_builtin_plugins()
        register_webhook_plugins()
        #: what plugin factories get; other parts of the server add to ``extra`` before the chain is built
        self.admission_context = PluginContext(self.registry, self.cacher, self.store,
                                               config=self.config.admission_plugin_config)
        self.admission: AdmissionChain = build_chain(self.admission_context,
                                                     enable=self.config.enable_admission_plugins,
                                                     disable=self.config.disable_admission_plugins)
        self.policy = CachedPolicy(self.cacher, self.registry)
        self.rbac = RBACAuthorizer(self.policy)
        self.authorizer: Authorizer = self.config.authorizer or Union(
            [self._authorizer(mode) for mode in self.config.authorization_modes])
        escalation = EscalationCheck(self.authorizer, self.rbac, self.cacher.wait_consistent)
        self.store.allocate_new.append(escalation)
        self.store.allocate_update.append(escalation)
        self.authenticator = self._authenticator_chain()
        #: inside the Status middleware, in order: authentication (the chain over TLS,
        #: UNSECURED on plain HTTP), impersonation, audit, then authorization
        self.middlewares: list[Any] = [authentication_middleware(self.authenticator),
                                       impersonation_middleware(lambda: self.authorizer)]
        self.auditor: Auditor | None = None
        if self.config.audit_policy_file and self.config.audit_log_path:
            # after authentication (the event names the user), before authorization (a 403 is audited)
            self.auditor = Auditor(load_policy(self.config.audit_policy_file), LogBackend(
                self.config.audit_log_path, max_bytes=int(self.config.audit_log_maxsize * 1024 * 1024),
                max_backups=self.config.audit_log_maxbackup, max_age_days=self.config.audit_log_maxage))
            self.middlewares.append(self.auditor.middleware)
        #: after audit (a 429 is audited), before authorization: an overloaded server refuses before any work
        self.overload = InflightLimiter(max_readonly=self.config.max_requests_inflight,
                                        max_mutating=self.config.max_mutating_requests_inflight,
                                        registry=self.metrics.registry)
        self.middlewares.append(self.overload.middleware)
        if self.config.authorizer is not None or tuple(self.config.authorization_modes) != ("AlwaysAllow",):
            # last: it reads request[USER_KEY], so authentication must come before it in this list
            self.middlewares.append(authorization_middleware(self.authorizer, self.cacher.wait_consistent))
        self.kubelets = KubeletClient(self._get_object, **self._kubelet_tls())
        self.service_accounts = self._service_account_tokens()
        self.token_issuer = TokenIssuer(self.service_accounts)
        lookup = CachedCoreObjects(self.registry, self.cacher)
        #: the bearer-token authenticators, in order (the authentication chain and TokenReview
        #: ask them; the same list as ``authenticator.token_authenticators``)
        self.token_authenticators: list[Any] = self.authenticator.token_authenticators
        self.token_authenticators += [
            ServiceAccountTokenAuthenticator(self.service_accounts, lookup),
            BootstrapTokenAuthenticator(lookup, clock=self.service_accounts.clock),
        ]
        self.handlers = ResourceHandlers(
            registry=self.registry,
            storage=storage,
            store=self.store,
            cacher=self.cacher,
            bookmark_interval=self.config.bookmark_interval,
            on_watch=lambda plural, delta: self.metrics.watchers.labels(plural).inc(delta),
            flow=FlowRecorder() if self.config.trace else None,
            admission=self.admission,
            create_handlers={"tokenreviews.authentication.k8s.io": serve_token_review,
                             "selfsubjectreviews.authentication.k8s.io": serve_self_subject_review,
                             **ACCESS_REVIEW_HANDLERS},
            create_hooks={"certificatesigningrequests.certificates.k8s.io": fill_requester},
        )
        self.aggregator = Aggregator(
            self.registry, self.cacher, self.store, identity=self._front_proxy_identity(),
            now=lambda: rfc3339(), check_interval=self.config.apiservice_check_interval)
        self._aggregator_task: asyncio.Task[None] | None = None
        self._policy_status_task: asyncio.Task[None] | None = None
        self.app = build_app(
            handlers=self.handlers,
            discovery=Discovery(self.registry, self.aggregator),
            openapi=OpenAPIService(self.registry),
            metrics=self.metrics,
            is_ready=lambda: self._ready,
            aggregator=self.aggregator,
            non_resource=OIDCDiscovery(self.service_accounts).routes(),
            middlewares=self.middlewares,
        )
        if self.auditor is not None:
            self.auditor.install(self.app)
        self.app[KUBELETS] = self.kubelets
        self.app[AUTHORIZER] = self.authorizer
        self.app[CONSISTENT] = self.cacher.wait_consistent
        self.app[TOKEN_ISSUER] = self.token_issuer
        self.app[TOKEN_AUTHENTICATORS] = self.token_authenticators
        self.app[API_AUDIENCES] = self.service_accounts.api_audiences
        self.app[RESOURCE_METRICS] = ResourceMetrics(self.kubelets, self._list_cached, min_window=self.config.metrics_window)
        self._ready = False
        self._runner: web.AppRunner | None = None
        self._sockets: list[socket.socket] = []
        if self.config.secure_port is None and self.config.insecure_port is None:
            raise ValueError("the API server needs a secure port or an insecure port to listen on")
        if self.config.insecure_port is not None and not is_loopback(self.config.insecure_bind):
            raise ValueError(f"the insecure port serves without authentication and binds to loopback only, not {self.config.insecure_bind!r}")
        #: the bound ports (known after start)
        self.secure_port: int | None = None
        self.insecure_port: int | None = None
        #: the serving certificate (after start, when serving HTTPS)
        self.serving: ServingCertificate | None = None

    def _count_watch_event(self, plural: str) -> None:
        # labels() costs microseconds per call and this runs per stored event: keep the children
        counter = self._watch_event_counters.get(plural)
        if counter is None:
            counter = self._watch_event_counters[plural] = self.metrics.watch_events.labels(plural)
        counter.inc()

    def _authenticator_chain(self) -> AuthenticatorChain:
        c = self.config
        request_authenticators = list(c.request_authenticators)
        if c.client_ca_file:
            request_authenticators.append(X509Authenticator.from_file(c.client_ca_file))
        token_authenticators: list[TokenAuthenticator] = []
        if c.token_auth_file:
            token_authenticators.append(StaticTokenAuthenticator.from_file(c.token_auth_file))
        token_authenticators += c.token_authenticators
        return AuthenticatorChain(request_authenticators=request_authenticators,
                                  token_authenticators=token_authenticators, anonymous=c.anonymous_auth)

    def _kubelet_tls(self) -> dict[str, str]:
        c = self.config
        return {"client_cert_file": c.kubelet_client_certificate, "client_key_file": c.kubelet_client_key,
                "ca_file": c.kubelet_certificate_authority}

    @staticmethod
    def _url(scheme: str, host: str, port: int | None) -> str:
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        host = host if ":" not in host else f"[{host}]"
        return f"{scheme}://{host}:{port}"

    @property
    def secure_url(self) -> str | None:
        return self._url("https", self.config.bind, self.secure_port) if self.secure_port is not None else None

    @property
    def insecure_url(self) -> str | None:
        return self._url("http", self.config.insecure_bind, self.insecure_port) if self.insecure_port is not None else None

    def _authorizer(self, mode: str) -> Any:
        if mode == "AlwaysAllow":
            return AlwaysAllow()
        if mode == "AlwaysDeny":
            return AlwaysDeny()
        if mode == "RBAC":
            return self.rbac
        if mode == "Node":
            return NodeAuthorizer(self.cacher, self.registry)
        raise ValueError(f"--authorization-mode: unknown mode {mode!r}; use a comma-separated list of {', '.join(MODES)}")

    def _front_proxy_identity(self) -> FrontProxyIdentity | None:
        c = self.config
        files = (c.requestheader_client_ca_file, c.proxy_client_cert_file, c.proxy_client_key_file)
        if not any(files):
            return None
        if not all(files):
            raise FrontProxyConfigError("--requestheader-client-ca-file, --proxy-client-cert-file and --proxy-client-key-file "
                             "go together: give all three (or none, and a front-proxy CA is made at start)")
        return FrontProxyIdentity.from_files(*files, allowed_names=tuple(c.requestheader_allowed_names))

    def _encryption_chain_for_key(self, key: str) -> ProviderChain | None:
        """The providers of the resource stored under ``key`` (``/registry/<resource>/...``)."""
        index = self._encryption_index
        if index is None:
            index = self._encryption_index = {
                d.key_prefix: self.encryption.chain_for(d.plural, d.group) for d in self.registry}
        parts = key.split("/", 4)  # "", "registry", resource[, plural of a custom resource], ...
        for prefix in ("/".join(parts[:3]) + "/", "/".join(parts[:4]) + "/"):
            if prefix in index:
                return index[prefix]
        return None

    @property
    def url(self) -> str:
        """The secure URL when serving HTTPS, else the insecure one."""
        return self.secure_url or self.insecure_url or ""

    @property
    def port(self) -> int:
        return self.secure_port if self.secure_port is not None else (self.insecure_port or 0)

    async def start(self) -> None:
        await self.storage.start()
        await self.cacher.start()
        await self.crds.start()
        await self.service_allocator.repair()
        self._allocator_task = asyncio.create_task(
            self.service_allocator.run(await self.storage.current_revision()), name="service-allocation-releases")
        await self._bootstrap()
        await self.aggregator.bootstrap()
        self._aggregator_task = asyncio.create_task(self.aggregator.run(), name="aggregator")
        self._policy_status_task = asyncio.create_task(
            PolicyStatusWriter(self.registry, self.cacher, self.store).run(), name="admission-policy-status")
        # ready means the cache already shows the bootstrap objects
        await self.cacher.wait_consistent(timeout=5.0)
        self._runner = web.AppRunner(self.app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        if self.config.secure_port is not None:
            self.serving = serving_certificate(
                cert_file=self.config.tls_cert_file, key_file=self.config.tls_private_key_file,
                cert_dir=self.config.cert_dir, host=self.config.bind,
                service_ip=self.config.kubernetes_service_ip)
            ssl_context = server_ssl_context(self.serving, self.config.client_ca_file)
            self.secure_port = await self._listen(self.config.bind, self.config.secure_port, ssl_context)
        if self.config.insecure_port is not None:
            self.insecure_port = await self._listen(self.config.insecure_bind, self.config.insecure_port, None)
        host = "127.0.0.1" if self.config.bind in ("0.0.0.0", "::", "") else self.config.bind
        if self.secure_port is None:
            host = self.config.insecure_bind
        self.endpoint_reconciler = EndpointReconciler(
            self.registry, self.store, address=host, port=self.port,
            interval=self.config.endpoint_reconciler_interval, lease_duration=self.config.endpoint_lease_duration)
        try:  # before ready: a client's first look already finds the kubernetes Endpoints
            await self.endpoint_reconciler.reconcile_once()
            await self.cacher.wait_consistent(timeout=5.0)
        except (StatusError, OSError) as err:
            log.warning("could not write the kubernetes endpoints; retrying in the background", extra={"error": str(err)})
        self._reconciler_task = asyncio.create_task(self.endpoint_reconciler.run(), name="kubernetes-endpoints")
        self._ready = True
        self.metrics.revision.set_function(lambda: self.cacher.revision)

    async def _listen(self, host: str, port: int, ssl_context: "ssl.SSLContext | None") -> int:
        assert self._runner is not None
        site = web.TCPSite(self._runner, host, port, reuse_address=True, backlog=1024, ssl_context=ssl_context)
        await site.start()
        server = site._server  # the bound socket tells the port when 0 was asked
        if server is not None and getattr(server, "sockets", None):
            return int(server.sockets[0].getsockname()[1])
        return port

    async def stop(self) -> None:
        self._ready = False
        if self._reconciler_task is not None:
            self._reconciler_task.cancel()
            await asyncio.gather(self._reconciler_task, return_exceptions=True)
            self._reconciler_task = None
            await self.endpoint_reconciler.remove_self()
        if self._allocator_task is not None:
            self._allocator_task.cancel()
            await asyncio.gather(self._allocator_task, return_exceptions=True)
            self._allocator_task = None
        if self._policy_status_task is not None:
            self._policy_status_task.cancel()
            await asyncio.gather(self._policy_status_task, return_exceptions=True)
            self._policy_status_task = None
        if self._aggregator_task is not None:
            self._aggregator_task.cancel()
            await asyncio.gather(self._aggregator_task, return_exceptions=True)
            self._aggregator_task = None
        await self.aggregator.close()
        await close_webhook_plugins(self.admission_context)
        await self.crds.close()
        await self.cacher.close()
        await self.kubelets.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.storage.close()

    def _service_account_tokens(self) -> ServiceAccountTokens:
        """The token configuration from the flags; a key file that does not load raises KeyFileError."""
        c = self.config
        if c.service_account_signing_key_file:
            signing = load_signing_key(c.service_account_signing_key_file)
        else:
            signing = generate_signing_key(ec_p256=True)
            log.info("no --service-account-signing-key-file: signing service-account tokens with a key made at start")
        verifying = [k for path in c.service_account_key_files for k in load_verifying_keys(path)]
        kwargs: dict[str, Any] = {"clock": c.token_clock} if c.token_clock is not None else {}
        return ServiceAccountTokens(
            issuers=tuple(c.service_account_issuers), signing_key=signing, verifying_keys=verifying,
            api_audiences=tuple(c.api_audiences), max_expiration=c.service_account_max_token_expiration,
            extend_expiration=c.service_account_extend_token_expiration, jwks_uri=c.service_account_jwks_uri, **kwargs,
        )

    async def _get_object(self, plural: str, namespace: str, name: str) -> dict[str, Any]:
        """A core/v1 object, read through the store (the streaming handlers' view)."""
        definition = self.registry.get("", "v1", plural)
        assert definition is not None
        return await self.store.get(definition, namespace, name)

    async def _list_cached(self, plural: str, namespace: str) -> list[dict[str, Any]]:
        """core/v1 objects as the watch cache has them (the metrics API's view)."""
        definition = self.registry.get("", "v1", plural)
        assert definition is not None
        return [c.decode() for c in self.cacher.cache_for(definition).candidates(namespace)]

    async def _bootstrap(self) -> None:
        """The objects every cluster has (upstream's bootstrap controllers)."""
        ns_def = self.registry.get("", "v1", "namespaces")
        assert ns_def is not None
        for name in SYSTEM_NAMESPACES:
            await self._ensure(ns_def, "", {"metadata": {"name": name}})
        svc_def = self.registry.get("", "v1", "services")
        assert svc_def is not None
        await self._ensure(
            svc_def,
            "default",
            {
                "metadata": {
                    "name": "kubernetes",
                    "labels": {"component": "apiserver", "provider": "kubernetes"},
                },
                "spec": {
                    "type": "ClusterIP",
                    "clusterIP": self.config.kubernetes_service_ip,
                    "clusterIPs": [self.config.kubernetes_service_ip],
                    "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
                    "sessionAffinity": "None",
                },
            },
        )
        pc_def = self.registry.get("scheduling.k8s.io", "v1", "priorityclasses")
        assert pc_def is not None
        for pc in BUILTIN_PRIORITY_CLASSES:
            await self._ensure(pc_def, "", copy.deepcopy(pc))
        await reconcile_bootstrap_policy(self.registry, self.store)

    async def _ensure(self, definition: Any, namespace: str, obj: dict[str, Any]) -> None:
        if await self.storage.get(definition.key(namespace, obj["metadata"]["name"])) is not None:
            return  # a restart: it is there already
        try:
            await self.store.create(definition, namespace, obj)
        except AlreadyExists:
            pass

    async def serve_forever(self) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await self.stop()

