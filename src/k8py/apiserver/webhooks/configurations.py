"""Webhook configurations as the dispatchers see them, kept from the watch cache.

:class:`WebhookSource` reads Mutating- or ValidatingWebhookConfigurations
from the API server's watch cache (never the store) and keeps them parsed:
the flat, ordered list of :class:`Webhook` (configurations sorted by name,
webhooks in their order, as upstream's ``Webhook accessors``), with their
matchConditions compiled. The list is rebuilt only when a configuration's
resourceVersion changes, so a request costs a comparison of versions.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import orjson

from k8py.apiserver.registry import Registry
from k8py.apiserver.watch.cacher import Cacher
from k8py.apiserver.webhooks.conditions import CompiledExpression, CompileError, ExpressionCompiler

__all__ = ["Webhook", "WebhookSource", "MatchCondition"]

log = logging.getLogger(__name__)
Object = dict[str, Any]

CONDITION_VARIABLES = ("object", "oldObject", "request", "authorizer", "authorizer.requestResource")


@dataclass(frozen=True, slots=True)
class MatchCondition:
    name: str
    expression: str
    program: CompiledExpression | None
    error: str = ""  # why it did not compile


@dataclass(slots=True)
class Webhook:
    configuration: str
    index: int  # position in the flat list: the audit annotations' index
    spec: Object
    conditions: list[MatchCondition] = field(default_factory=list)

    @property
    def name(self) -> str:
        return str(self.spec.get("name", ""))


class WebhookSource:
    def __init__(self, registry: Registry, cacher: Cacher, plural: str,
                 compiler: ExpressionCompiler | None = None) -> None:
        self.registry = registry
        self.cacher = cacher
        self.plural = plural
        self.compiler = compiler
        self._versions: tuple[tuple[str, int], ...] = ()
        self._hooks: list[Webhook] = []

    def webhooks(self) -> list[Webhook]:
        definition = self.registry.get("admissionregistration.k8s.io", "v1", self.plural)
        if definition is None:
            return []
        objects = self.cacher.cache_for(definition).objects
        if not objects and not self._versions:
            return self._hooks  # the common case, every write: no configurations, none before
        versions = tuple(sorted((c.name, c.rv) for c in objects.values()))
        if versions != self._versions:
            self._hooks = self._build([orjson.loads(objects[definition.key("", name)].data) for name, _ in versions])
            self._versions = versions
        return self._hooks

    def _build(self, configurations: list[Object]) -> list[Webhook]:
        hooks: list[Webhook] = []
        for config in configurations:
            name = config["metadata"]["name"]
            for spec in config.get("webhooks") or []:
                hooks.append(Webhook(name, len(hooks), spec, [self._compile(c) for c in spec.get("matchConditions") or []]))
        return hooks

    def _compile(self, condition: Object) -> MatchCondition:
        name, expression = str(condition.get("name", "")), str(condition.get("expression", ""))
        if self.compiler is None:
            return MatchCondition(name, expression, None, "no CEL environment is configured on this API server")
        try:
            return MatchCondition(name, expression, self.compiler(expression, CONDITION_VARIABLES))
        except CompileError as err:
            log.warning("matchCondition does not compile", extra={"condition": name, "error": str(err)})
            return MatchCondition(name, expression, None, str(err))
