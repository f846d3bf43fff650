"""Admission webhooks and admission policies: the API server calling out, or
running CEL, before a write is stored.

``attributes``        the view of an admission request the dispatchers read
``rules``             rules, scope, matchPolicy, namespace/object selectors (pure)
``conditions``        the seam to the CEL environment; expression variables
``configurations``    webhook configurations kept parsed from the watch cache
``service_resolver``  a Service reference -> an address on this machine + TLS name
``client``            the HTTPS round trip (caBundle, timeout, Go's error text)
``review``            AdmissionReview v1 written and its answer checked
``dispatcher``        one webhook: should it be called, call it, what its answer means
``mutating``          the MutatingAdmissionWebhook plugin (JSONPatch, reinvocation)
``validating``        the ValidatingAdmissionWebhook plugin (in parallel)
``policy_source``     ValidatingAdmissionPolicies compiled, bindings paired with them
``validating_policy`` the ValidatingAdmissionPolicy plugin (CEL; params; Deny/Warn/Audit)

:func:`build_webhook_plugins` wires both plugins for a server: the admission
chain calls ``MutatingWebhookDispatcher.admit``,
``ValidatingPolicyPlugin.validate`` and ``ValidatingWebhookDispatcher.validate``
in its MutatingAdmissionWebhook, ValidatingAdmissionPolicy and
ValidatingAdmissionWebhook slots. Everything is read from the watch cache;
no request reads the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from k8py.apiserver.authz.attributes import Authorizer

from k8py.apiserver.registry import Registry, to_served, to_stored
from k8py.apiserver.watch.cacher import Cacher
from k8py.apiserver.webhooks.client import WebhookClient
from k8py.apiserver.webhooks.conditions import ExpressionCompiler, authorize_with, cel_compiler
from k8py.apiserver.webhooks.configurations import WebhookSource
from k8py.apiserver.webhooks.dispatcher import WebhookCaller
from k8py.apiserver.webhooks.mutating import MutatingWebhookDispatcher
from k8py.apiserver.webhooks.mutating_policy import MutatingPolicyPlugin, MutatingPolicySource
from k8py.apiserver.webhooks.service_resolver import ServiceResolver
from k8py.apiserver.webhooks.policy_source import PolicySource
from k8py.apiserver.webhooks.validating import ValidatingWebhookDispatcher
from k8py.apiserver.webhooks.validating_policy import ValidatingPolicyPlugin

__all__ = ["WebhookPlugins", "build_webhook_plugins", "ClusterLookups"]


class ClusterLookups:
    """What matching needs from the served resources, read from the registry and the watch cache."""

    def __init__(self, registry: Registry, cacher: Cacher) -> None:
        self.registry = registry
        self.cacher = cacher
        self._generation = -1
        self._versions: dict[tuple[str, str], list[str]] = {}

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        definition = self.registry.get("", "v1", "namespaces")
        if definition is None:
            return None
        cached = self.cacher.cache_for(definition).objects.get(definition.key("", namespace))
        return cached.labels if cached is not None else None

    def equivalents(self, group: str, resource: str) -> Iterable[str]:
        """The served versions of ``group``/``resource`` (asked for every rule that did not match
        exactly: kept per registry generation)."""
        if self._generation != self.registry.generation:
            versions: dict[tuple[str, str], list[str]] = {}
            for d in self.registry:
                versions.setdefault((d.group, d.plural), []).append(d.version)
            self._versions, self._generation = versions, self.registry.generation
        return self._versions.get((group, resource.split("/", 1)[0]), ())

    async def convert(self, obj: dict[str, Any] | None, group: str, resource: str, from_version: str,
                      to_version: str) -> dict[str, Any] | None:
        """``obj`` (of ``group/from_version`` ``resource``) as ``to_version`` serves it, through the
        stored form: what a webhook or policy matched by ``matchPolicy: Equivalent`` is given."""
        plural = resource.split("/", 1)[0]
        source, target = self.registry.get(group, from_version, plural), self.registry.get(group, to_version, plural)
        if obj is None or source is None or target is None or from_version == to_version:
            return obj
        stored = await to_stored(source, [obj])
        return (await to_served(target, stored))[0]

    def kind_of(self, group: str, version: str, resource: str) -> str | None:
        definition = self.registry.get(group, version, resource.split("/", 1)[0])
        return definition.kind if definition is not None else None


@dataclass
class WebhookPlugins:
    mutating: MutatingWebhookDispatcher
    validating: ValidatingWebhookDispatcher
    policy: ValidatingPolicyPlugin
    mutating_policy: MutatingPolicyPlugin
    client: WebhookClient
    resolver: ServiceResolver
    lookups: ClusterLookups

    async def close(self) -> None:
        await self.client.close()


def build_webhook_plugins(registry: Registry, cacher: Cacher, compiler: ExpressionCompiler | None = cel_compiler,
                          authorizer: Callable[[], Authorizer | None] = lambda: None) -> WebhookPlugins:
    """The plugins of one server; ``authorizer`` gets the server's authorizer (for CEL's authorizer library)."""
    resolver = ServiceResolver(registry, cacher)
    client = WebhookClient(resolver)
    lookups = ClusterLookups(registry, cacher)

    def caller(mutating: bool) -> WebhookCaller:
        return WebhookCaller(client, namespace_labels=lookups.namespace_labels, equivalents=lookups.equivalents,
                             kind_of=lookups.kind_of, mutating=mutating, authorize=lambda: authorize_with(authorizer()),
                             convert=lookups.convert)

    mutating = MutatingWebhookDispatcher(
        WebhookSource(registry, cacher, "mutatingwebhookconfigurations", compiler), caller(True))
    validating = ValidatingWebhookDispatcher(
        WebhookSource(registry, cacher, "validatingwebhookconfigurations", compiler), caller(False))
    policy = ValidatingPolicyPlugin(PolicySource(registry, cacher, compiler), registry, cacher,
                                    namespace_labels=lookups.namespace_labels, equivalents=lookups.equivalents,
                                    authorize=lambda: authorize_with(authorizer()), convert=lookups.convert,
                                    kind_of=lookups.kind_of)
    mutating_policy = MutatingPolicyPlugin(
        MutatingPolicySource(registry, cacher, compiler), registry, cacher, namespace_labels=lookups.namespace_labels,
        equivalents=lookups.equivalents, authorize=lambda: authorize_with(authorizer()), convert=lookups.convert,
        kind_of=lookups.kind_of)
    return WebhookPlugins(mutating, validating, policy, mutating_policy, client, resolver, lookups)
