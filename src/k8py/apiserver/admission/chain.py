"""The admission chain: every enabled plugin, mutating ones first, then validating ones.

Upstream's ``admission.chainAdmissionHandler`` and its reinvocation handler:

- a plugin *handles* some operations (:meth:`AdmissionPlugin.handles`); the
  chain asks once per operation, when it is built, and keeps per operation
  the plugins to call, so a request pays only for the plugins that care;
  a plugin may also say which resources it *concerns* (an optional
  ``concerns(group, resource, subresource)``, True when absent): the chain asks
  once per (operation, resource, subresource) and keeps the answer, so a
  pods/binding or a Lease update does not call the plugins of pods
  themselves only to see them return (a call each, every write);
- :meth:`AdmissionChain.admit` calls ``admit`` of every mutating plugin, in
  the chain's order (upstream's recommended order, see ``plugins.ORDER``);
  a plugin may change ``attributes.object``; when a reinvocable plugin (a
  mutating policy or webhook) changed it, the mutating chain runs once more,
  in order, as upstream's reinvoker does: the in-tree plugins' ``admit``
  again (they are idempotent: they fill in only what is missing), and the
  policy and webhook plugins' ``reinvoke`` (:mod:`.reinvocation`: their
  ``IfNeeded`` mutators that ran before a change run again);
- :meth:`AdmissionChain.validate` then calls ``validate`` of every
  validating plugin, in the same order; a validating plugin must not change
  the object;
- the first plugin to raise (a :class:`~k8py.api.errors.StatusError`,
  usually Forbidden) ends the request with that error; nothing after it runs.

A plugin may be both (NamespaceLifecycle-style plugins only mutate; PodSecurity
only validates; webhooks and policies are one plugin each phase).
"""

from __future__ import annotations

from typing import Iterable, Protocol, runtime_checkable

from k8py.apiserver.admission.attributes import AdmissionAttributes, Operation

__all__ = ["AdmissionPlugin", "MutatingPlugin", "ValidatingPlugin", "AdmissionChain"]


class AdmissionPlugin(Protocol):
    """A named plugin; ``handles`` says for which operations it is called at all."""

    name: str

    def handles(self, operation: Operation) -> bool: ...


def _concerns(plugin: object, group: str, resource: str, subresource: str) -> bool:
    concerns = getattr(plugin, "concerns", None)
    return True if concerns is None else bool(concerns(group, resource, subresource))


@runtime_checkable
class MutatingPlugin(Protocol):
    name: str

    def handles(self, operation: Operation) -> bool: ...

    async def admit(self, attributes: AdmissionAttributes) -> None:
        """Change ``attributes.object`` (defaults, injected fields) or raise to refuse."""


@runtime_checkable
class ValidatingPlugin(Protocol):
    name: str

    def handles(self, operation: Operation) -> bool: ...

    async def validate(self, attributes: AdmissionAttributes) -> None:
        """Raise (Forbidden, Invalid) to refuse; add warnings or audit annotations; never mutate."""


class AdmissionChain:
    """The enabled plugins, in order. Immutable once built."""

    def __init__(self, plugins: Iterable[AdmissionPlugin] = ()) -> None:
        self.plugins: tuple[AdmissionPlugin, ...] = tuple(plugins)
        self._mutating = {op: tuple(p for p in self.plugins if isinstance(p, MutatingPlugin) and p.handles(op))
                          for op in Operation}
        self._validating = {op: tuple(p for p in self.plugins if isinstance(p, ValidatingPlugin) and p.handles(op))
                            for op in Operation}
        #: (mutating?, operation, group, resource, subresource) -> the plugins concerned, in order
        self._concerned: dict[tuple[bool, Operation, str, str, str], tuple[AdmissionPlugin, ...]] = {}

    def _plugins(self, mutating: bool, attributes: AdmissionAttributes) -> tuple[AdmissionPlugin, ...]:
        group, resource, sub = attributes.resource.group, attributes.resource.resource, attributes.subresource
        key = (mutating, attributes.operation, group, resource, sub)
        plugins = self._concerned.get(key)
        if plugins is None:
            table = self._mutating if mutating else self._validating
            plugins = tuple(p for p in table[attributes.operation] if _concerns(p, group, resource, sub))
            if len(self._concerned) < 4096:  # resources are few; custom ones may come and go
                self._concerned[key] = plugins
        return plugins

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.plugins]

    def plugin(self, name: str) -> AdmissionPlugin | None:
        """The enabled plugin called ``name`` (None when it is not enabled)."""
        return next((p for p in self.plugins if p.name == name), None)

    def handles(self, operation: Operation) -> bool:
        return bool(self._mutating[operation] or self._validating[operation])

    def mutates(self, operation: Operation) -> bool:
        return bool(self._mutating[operation])

    async def admit(self, attributes: AdmissionAttributes) -> None:
        plugins = self._plugins(True, attributes)
        for plugin in plugins:
            await plugin.admit(attributes)  # type: ignore[attr-defined]
        context = attributes.reinvocation
        if context.should_reinvoke and not context.is_reinvoke:
            # upstream's reinvoker calls the whole mutating chain again: the in-tree plugins run once
            # more (a container a policy or webhook injected gets its defaults and token mount), the
            # policy and webhook plugins run only their mutators that need it
            context.is_reinvoke = True
            for plugin in plugins:
                reinvoke = getattr(plugin, "reinvoke", None)
                if reinvoke is not None:
                    await reinvoke(attributes)
                else:
                    await plugin.admit(attributes)  # type: ignore[attr-defined]

    async def validate(self, attributes: AdmissionAttributes) -> None:
        for plugin in self._plugins(False, attributes):
            await plugin.validate(attributes)  # type: ignore[attr-defined]
