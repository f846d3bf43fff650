"""The webhook and policy plugins, registered with the admission chain by name.

:func:`register_webhook_plugins` makes MutatingAdmissionWebhook,
ValidatingAdmissionPolicy and ValidatingAdmissionWebhook available to
``admission.plugins.build_chain`` (upstream's names, in upstream's slots:
after the built-in mutating plugins, before ResourceQuota). The three share
one :class:`~k8py.apiserver.webhooks.WebhookPlugins` per server (one HTTPS
session, one set of lookups), kept in the plugin context's ``extra`` under
:data:`CONTEXT_KEY` so the server can close it (:func:`close_webhook_plugins`).
"""

from __future__ import annotations

from typing import Any

from k8py.apiserver.admission.plugins import PluginContext, register
from k8py.apiserver.webhooks import WebhookPlugins, build_webhook_plugins

__all__ = ["register_webhook_plugins", "close_webhook_plugins", "CONTEXT_KEY", "AUTHORIZER_KEY"]

CONTEXT_KEY = "webhook_plugins"
#: where the server puts its authorizer for the plugins (CEL's authorizer library)
AUTHORIZER_KEY = "authorizer"


def _plugins(context: PluginContext) -> WebhookPlugins:
    plugins = context.extra.get(CONTEXT_KEY)
    if plugins is None:
        # the server puts its authorizer in ``extra`` once built (after the chain): read it at request time
        plugins = context.extra[CONTEXT_KEY] = build_webhook_plugins(
            context.registry, context.cacher, authorizer=lambda: context.extra.get(AUTHORIZER_KEY))
    return plugins


def register_webhook_plugins() -> None:
    register("MutatingAdmissionPolicy", lambda context: _plugins(context).mutating_policy)
    register("MutatingAdmissionWebhook", lambda context: _plugins(context).mutating)
    register("ValidatingAdmissionPolicy", lambda context: _plugins(context).policy)
    register("ValidatingAdmissionWebhook", lambda context: _plugins(context).validating)


async def close_webhook_plugins(context: Any) -> None:
    plugins = context.extra.pop(CONTEXT_KEY, None)
    if plugins is not None:
        await plugins.close()
