"""The API server process: storage, registry, watch cache, HTTP, bootstrap.

:class:`APIServer` wires the pieces and owns their lifecycle::

    storage.start() → registry (built-ins) → cacher.start() (list + watch)
    → bootstrap objects (:mod:`~k8py.apiserver.bootstrap_objects`) → HTTP listening

It listens on the secure port (HTTPS, ``secure_port``; the serving pair
from ``tls_cert_file``/``tls_private_key_file`` or self-signed in
``cert_dir``, see :mod:`~k8py.apiserver.secure_serving`) and, only when
asked, on an insecure port (plain HTTP, loopback only, every request
``UNSECURED``). Requests over TLS go through :attr:`APIServer.authenticator`
(x509 with ``client_ca_file``, ``token_auth_file``, the configured token
authenticators, service-account and bootstrap tokens, anonymous; its lists
may be extended before ``start()``); :attr:`APIServer.authorizer`
(``authorization_modes``, or ``config.authorizer``) decides impersonation and
then the request. Those guards, admission, audit and overload are built by
:class:`~k8py.apiserver.access_control.AccessControl`; the settings are
:class:`~k8py.apiserver.server_config.APIServerConfig`.

``start()`` returns when the server is ready (``/readyz`` is 200): the watch
cache has loaded and the system namespaces and the ``kubernetes`` Service
exist. ``stop()`` closes watches, the listener and the store, in that order.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import ssl
from typing import Any

from aiohttp import web

from k8py.api.errors import StatusError
from k8py.apiserver.access_control import AccessControl
from k8py.apiserver.aggregator import Aggregator
from k8py.apiserver.app import build_app
from k8py.apiserver.authn.oidc_discovery import OIDCDiscovery
from k8py.apiserver.bootstrap_objects import BootstrapObjects
from k8py.apiserver.authn.self_subject_review import serve_self_subject_review
from k8py.apiserver.authz.filter import AUTHORIZER, CONSISTENT
from k8py.apiserver.crd import CRD_DEFINITION, CRDRegistrar
from k8py.apiserver.endpoint_reconciler import EndpointReconciler
from k8py.apiserver.flow import FlowRecorder
from k8py.apiserver.handlers.access_review import ACCESS_REVIEW_HANDLERS
from k8py.apiserver.handlers.csr_approval import fill_requester
from k8py.apiserver.handlers.token_request import TOKEN_ISSUER
from k8py.apiserver.handlers.token_review import API_AUDIENCES, TOKEN_AUTHENTICATORS, serve_token_review
from k8py.apiserver.handlers.verbs import ResourceHandlers
from k8py.apiserver.admission.service_ips import ServiceAllocator
from k8py.apiserver.admission.service_repair import ServiceRepair
from k8py.apiserver.metrics import APIMetrics
from k8py.apiserver.openapi.discovery import Discovery
from k8py.apiserver.openapi.v3 import OpenAPIService
from k8py.apiserver.registry import Registry
from k8py.apiserver.resources import admissionregistration_v1alpha1, register_builtins
from k8py.apiserver.webhooks.mutating_policy import FEATURE_GATE as MUTATING_POLICY_GATE
from k8py.apiserver.secure_serving import ServingCertificate, is_loopback, server_ssl_context, serving_certificate
from k8py.apiserver.server_config import APIServerConfig
from k8py.apiserver.store.object_meta import rfc3339
from k8py.apiserver.store.object_store import ObjectStore
from k8py.apiserver.streaming import KUBELETS, RESOURCE_METRICS, KubeletClient, ResourceMetrics
from k8py.apiserver.watch.cacher import Cacher
from k8py.apiserver.watch.watcher import WatchLimits
from k8py.apiserver.webhooks.admission_plugins import close_webhook_plugins
from k8py.apiserver.webhooks.policy_status import PolicyStatusWriter
from k8py.storage import Storage
from k8py.storage.encryption import EncryptedStorage, ProviderChain, load_encryption_config

__all__ = ["APIServer", "APIServerConfig"]

log = logging.getLogger(__name__)


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
        if self.config.feature_gates.get(MUTATING_POLICY_GATE):
            for definition in admissionregistration_v1alpha1.DEFINITIONS:
                self.registry.add(definition)
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
        if getattr(storage, "events_carry_written_values", False):
            # the cache builds this server's own writes from what the write path knows (see watch.stored_hints)
            self.store.note_stored = self.cacher.hints.note
        self.service_allocator = ServiceAllocator(self.registry, self.cacher, storage, self.config.service_cidr,
                                                  self.config.service_node_port_range)
        self.store.allocate_new.append(self.service_allocator.allocate)
        self.store.allocate_update.append(self.service_allocator)
        self.service_repair = ServiceRepair(self.registry, self.store, self.service_allocator,
                                            interval=self.config.service_repair_interval,
                                            leak_grace=self.config.service_repair_leak_grace,
                                            leak_passes=self.config.service_repair_leak_passes)
        self._allocator_task: asyncio.Task[None] | None = None
        self._repair_task: asyncio.Task[None] | None = None
        self._reconciler_task: asyncio.Task[None] | None = None
        self.crds = CRDRegistrar(self.registry, storage, self.store, self.cacher)
        #: authentication, authorization, admission, audit and overload (see access_control)
        guards = self.access_control = AccessControl(
            self.config, registry=self.registry, cacher=self.cacher, store=self.store, metrics=self.metrics)
        self.admission_context = guards.admission_context
        self.admission = guards.admission
        self.policy = guards.policy
        self.rbac = guards.rbac
        self.authorizer = guards.authorizer
        self.store.allocate_new.append(guards.escalation)
        self.store.allocate_update.append(guards.escalation)
        self.authenticator = guards.authenticator
        self.middlewares = guards.middlewares
        self.auditor = guards.auditor
        self.overload = guards.overload
        self.service_accounts = guards.service_accounts
        self.token_issuer = guards.token_issuer
        self.token_authenticators = guards.token_authenticators
        self.kubelets = KubeletClient(self._get_object, **self._kubelet_tls())
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
            self.registry, self.cacher, self.store, identity=guards.front_proxy_identity(),
            now=lambda: rfc3339(), check_interval=self.config.apiservice_check_interval)
        self._aggregator_task: asyncio.Task[None] | None = None
        self._policy_status_task: asyncio.Task[None] | None = None
        self._flow_control_task: asyncio.Task[None] | None = None
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
        self.overload.install(self.app)
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
        releases_from = await self.storage.current_revision()
        await self.service_repair.run_once()
        self._allocator_task = asyncio.create_task(
            self.service_allocator.run(releases_from), name="service-allocation-releases")
        self._repair_task = asyncio.create_task(self.service_repair.run(), name="service-allocation-repair")
        await BootstrapObjects(self.registry, self.store, self.storage, self.cacher,
                               self.config.kubernetes_service_ip).ensure_all()
        await self.aggregator.bootstrap()
        self._aggregator_task = asyncio.create_task(self.aggregator.run(), name="aggregator")
        self._policy_status_task = asyncio.create_task(
            PolicyStatusWriter(self.registry, self.cacher, self.store).run(), name="admission-policy-status")
        # ready means the cache already shows the bootstrap objects, their first status included
        await self.cacher.wait_consistent(timeout=5.0)
        await self.overload.write_conditions(self.store, now=lambda: rfc3339())
        await self.cacher.wait_consistent(timeout=5.0)
        self._flow_control_task = asyncio.create_task(self.overload.run(self.store, now=lambda: rfc3339()), name="flow-control")
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
        for task in (self._allocator_task, self._repair_task):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self._allocator_task = self._repair_task = None
        if self._flow_control_task is not None:
            self._flow_control_task.cancel()
            await asyncio.gather(self._flow_control_task, return_exceptions=True)
            self._flow_control_task = None
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

    async def serve_forever(self) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await self.stop()

