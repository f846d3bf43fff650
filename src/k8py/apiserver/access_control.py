"""Who a request is, whether it may go on, and what it must pass: the API server's guards, wired.

:class:`AccessControl` builds, from :class:`~k8py.apiserver.server_config.APIServerConfig`,
everything that stands between a connection and the handlers:

- the admission chain (upstream's plugin order, ``--enable/--disable-admission-plugins``);
- the authorizers (``--authorization-mode``: AlwaysAllow, AlwaysDeny, Node, RBAC, asked in
  order by a :class:`~k8py.apiserver.authz.chain.Union`) and the RBAC escalation check the
  store runs on every Role and binding write;
- the authenticator chain (request authenticators, x509 with ``--client-ca-file``, the static
  token file, configured token authenticators, service-account and bootstrap tokens,
  anonymous) and the service-account token issuer;
- the request middlewares, in the order they must run (see :attr:`AccessControl.middlewares`), API
  Priority and Fairness among them (:attr:`AccessControl.overload`, installed on the app for its headers);
- the front-proxy identity the aggregator presents to aggregated servers.

It owns no task and no socket: :class:`~k8py.apiserver.server.APIServer` keeps the lifecycle
and exposes these same objects as its attributes (``server.authorizer``, ``server.admission``…).
"""

from __future__ import annotations

import logging
from typing import Any

from k8py.api.service_account_keys import generate_signing_key, load_signing_key, load_verifying_keys
from k8py.apiserver.admission.builtin import register_builtin_plugins
from k8py.apiserver.admission.chain import AdmissionChain
from k8py.apiserver.admission.plugins import PluginContext, build_chain
from k8py.apiserver.aggregator import FrontProxyIdentity
from k8py.apiserver.aggregator.front_proxy import FrontProxyConfigError
from k8py.apiserver.audit.auditor import Auditor
from k8py.apiserver.audit.log_backend import LogBackend
from k8py.apiserver.audit.policy import load_policy
from k8py.apiserver.authn.authenticator import TokenAuthenticator
from k8py.apiserver.authn.bootstrap_token import BootstrapTokenAuthenticator
from k8py.apiserver.authn.chain import AuthenticatorChain, authentication_middleware
from k8py.apiserver.authn.service_account import (
    ServiceAccountTokenAuthenticator, ServiceAccountTokens, TokenIssuer,
)
from k8py.apiserver.authn.token_file import StaticTokenAuthenticator
from k8py.apiserver.authn.x509 import X509Authenticator
from k8py.apiserver.authz.attributes import AlwaysAllow, Authorizer
from k8py.apiserver.authz.chain import MODES, AlwaysDeny, Union
from k8py.apiserver.authz.escalation import EscalationCheck
from k8py.apiserver.authz.filter import authorization_middleware
from k8py.apiserver.authz.impersonation import impersonation_middleware
from k8py.apiserver.authz.node import NodeAuthorizer
from k8py.apiserver.authz.policy_index import CachedPolicy
from k8py.apiserver.authz.rbac import RBACAuthorizer
from k8py.apiserver.metrics import APIMetrics
from k8py.apiserver.overload import FlowControl
from k8py.apiserver.registry import Registry
from k8py.apiserver.server_config import APIServerConfig
from k8py.apiserver.store.object_store import ObjectStore
from k8py.apiserver.watch.cacher import Cacher
from k8py.apiserver.webhooks.admission_plugins import AUTHORIZER_KEY, register_webhook_plugins
from k8py.apiserver.webhooks.mutating_policy import FEATURE_GATE as MUTATING_POLICY_GATE

__all__ = ["AccessControl", "CachedCoreObjects"]

log = logging.getLogger(__name__)


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


class AccessControl:
    """The guards of one API server (see the module docstring); built once, before ``start()``."""

    def __init__(self, config: APIServerConfig, *, registry: Registry, cacher: Cacher, store: ObjectStore,
                 metrics: APIMetrics) -> None:
        self.config = config
        register_builtin_plugins()
        register_webhook_plugins()
        #: what plugin factories get; other parts of the server add to ``extra`` before the chain is built
        self.admission_context = PluginContext(registry, cacher, store, config=config.admission_plugin_config)
        self.admission: AdmissionChain = build_chain(self.admission_context,
                                                     enable=tuple(config.enable_admission_plugins) + (
                                                         (MUTATING_POLICY_GATE,)
                                                         if config.feature_gates.get(MUTATING_POLICY_GATE) else ()),
                                                     disable=config.disable_admission_plugins)
        self.policy = CachedPolicy(cacher, registry)
        self.rbac = RBACAuthorizer(self.policy)
        self._node_authorizer = lambda: NodeAuthorizer(cacher, registry)
        self.authorizer: Authorizer = config.authorizer or Union(
            [self._authorizer(mode) for mode in config.authorization_modes])
        self.admission_context.extra[AUTHORIZER_KEY] = self.authorizer  # CEL's authorizer library in policies
        #: the store runs it on Role/ClusterRole/binding writes (escalation and bind checks)
        self.escalation = EscalationCheck(self.authorizer, self.rbac, cacher.wait_consistent)
        self.authenticator = self._authenticator_chain()
        #: inside the Status middleware, in order: authentication (the chain over TLS,
        #: UNSECURED on plain HTTP), impersonation, audit, then authorization
        self.middlewares: list[Any] = [authentication_middleware(self.authenticator),
                                       impersonation_middleware(lambda: self.authorizer)]
        self.auditor: Auditor | None = None
        if config.audit_policy_file and config.audit_log_path:
            # after authentication (the event names the user), before authorization (a 403 is audited)
            self.auditor = Auditor(load_policy(config.audit_policy_file), LogBackend(
                config.audit_log_path, max_bytes=int(config.audit_log_maxsize * 1024 * 1024),
                max_backups=config.audit_log_maxbackup, max_age_days=config.audit_log_maxage))
            self.middlewares.append(self.auditor.middleware)
            # outermost: a request that fails authentication is audited too (upstream's WithFailedAuthenticationAudit)
            self.middlewares.insert(0, self.auditor.failed_authentication_middleware)
        #: after audit (a 429 is audited), before authorization: an overloaded server refuses before any work
        self.overload = FlowControl(registry, cacher, max_readonly=config.max_requests_inflight,
                                    max_mutating=config.max_mutating_requests_inflight,
                                    wait_limit=config.flow_control_wait_limit,
                                    borrowing_period=config.flow_control_borrowing_period, metrics=metrics.registry)
        self.middlewares.append(self.overload.middleware)
        if config.authorizer is not None or tuple(config.authorization_modes) != ("AlwaysAllow",):
            # last: it reads request[USER_KEY], so authentication must come before it in this list
            self.middlewares.append(authorization_middleware(self.authorizer, cacher.wait_consistent))
        self.service_accounts = self._service_account_tokens()
        self.token_issuer = TokenIssuer(self.service_accounts)
        lookup = CachedCoreObjects(registry, cacher)
        #: the bearer-token authenticators, in order (the authentication chain and TokenReview
        #: ask them; the same list as ``authenticator.token_authenticators``)
        self.token_authenticators: list[Any] = self.authenticator.token_authenticators
        self.token_authenticators += [
            ServiceAccountTokenAuthenticator(self.service_accounts, lookup),
            BootstrapTokenAuthenticator(lookup, clock=self.service_accounts.clock),
        ]

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

    def _authorizer(self, mode: str) -> Any:
        if mode == "AlwaysAllow":
            return AlwaysAllow()
        if mode == "AlwaysDeny":
            return AlwaysDeny()
        if mode == "RBAC":
            return self.rbac
        if mode == "Node":
            return self._node_authorizer()
        raise ValueError(f"--authorization-mode: unknown mode {mode!r}; use a comma-separated list of {', '.join(MODES)}")

    def front_proxy_identity(self) -> FrontProxyIdentity | None:
        """The aggregator's client identity from the flags (None: a CA and certificate are made at start)."""
        c = self.config
        files = (c.requestheader_client_ca_file, c.proxy_client_cert_file, c.proxy_client_key_file)
        if not any(files):
            return None
        if not all(files):
            raise FrontProxyConfigError("--requestheader-client-ca-file, --proxy-client-cert-file and --proxy-client-key-file "
                             "go together: give all three (or none, and a front-proxy CA is made at start)")
        return FrontProxyIdentity.from_files(*files, allowed_names=tuple(c.requestheader_allowed_names))

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
