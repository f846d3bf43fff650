"""Admission reinvocation (upstream's ``reinvocationPolicy: IfNeeded``, KEP-1872) across plugins.

A mutating plugin whose mutators may ask to be called again (the
MutatingAdmissionPolicy and MutatingAdmissionWebhook plugins) keeps, in the
request's :class:`ReinvocationContext`, a :class:`PluginState`: the object as
it left it (``last_output``), its ``IfNeeded`` mutators that ran before a
change (``pending``) and those that ran since (``invoked``). A plugin that
changed the object sets ``should_reinvoke``.

After the chain's mutating pass, if ``should_reinvoke`` is set, the chain
runs its mutating plugins once more, in order: the in-tree ones' ``admit``
(as upstream's reinvoker, which calls the whole chain again: a sidecar a
webhook injected gets its LimitRanger defaults and service-account token
mount), and ``reinvoke`` of every plugin that has one: it calls its pending
mutators again, and its invoked ones too when someone else (a later plugin,
or an in-tree one in this pass) changed the object since its
``last_output`` — so a policy that defaulted a field from a label sees the
label a webhook added after it. Nobody is called a third time.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ReinvocationContext", "PluginState", "context_of"]

Object = dict[str, Any]


@dataclass
class PluginState:
    last_output: Object | None = None
    #: the IfNeeded mutators (named as the plugin likes) that ran before a change: they run once more
    pending: list[Any] = field(default_factory=list)
    #: the IfNeeded mutators that ran since the last change (they run again if the object changes later)
    invoked: list[Any] = field(default_factory=list)

    def finished(self, obj: Object | None) -> None:
        self.last_output = copy.deepcopy(obj)

    def changed_since(self, obj: Object | None) -> bool:
        return obj != self.last_output


@dataclass
class ReinvocationContext:
    should_reinvoke: bool = False
    is_reinvoke: bool = False
    plugins: dict[str, PluginState] = field(default_factory=dict)

    def plugin(self, name: str) -> PluginState:
        state = self.plugins.get(name)
        if state is None:
            state = self.plugins[name] = PluginState()
        return state


def context_of(attrs: Any) -> ReinvocationContext | None:
    """The request's context (None for attributes made without one, e.g. a plugin called on its own)."""
    return getattr(attrs, "reinvocation", None)
