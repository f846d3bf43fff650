"""The admission plugins k8py ships, registered by name (upstream's ``RegisterAllAdmissionPlugins``).

:func:`register_builtin_plugins` is idempotent; the server calls it before it
builds its chain. Another package's plugins (NodeRestriction, the webhook and
policy plugins) register the same way with :func:`~k8py.apiserver.admission.plugins.register`,
either here or from the server's wiring.
"""

from __future__ import annotations

from k8py.apiserver.admission.attributes import AdmissionAttributes, Operation
from k8py.apiserver.admission.default_toleration_seconds import DefaultTolerationSeconds
from k8py.apiserver.admission.limit_ranger import LimitRanger
from k8py.apiserver.admission.namespace_lifecycle import NamespaceLifecycle
from k8py.apiserver.admission.node_restriction import NodeRestriction
from k8py.apiserver.admission.node_taint import TaintNodesByCondition
from k8py.apiserver.admission.plugins import PluginContext, register
from k8py.apiserver.admission.pod_security import PodSecurity, PodSecurityConfig
from k8py.apiserver.admission.priority import PriorityAdmission
from k8py.apiserver.admission.resource_quota import ResourceQuotaAdmission
from k8py.apiserver.admission.service_account import ServiceAccountAdmission

__all__ = ["register_builtin_plugins"]


def _default_toleration_seconds(ctx: PluginContext) -> DefaultTolerationSeconds:
    cfg = ctx.plugin_config("DefaultTolerationSeconds")
    return DefaultTolerationSeconds(not_ready_seconds=int(cfg.get("defaultNotReadyTolerationSeconds", 300)),
                                    unreachable_seconds=int(cfg.get("defaultUnreachableTolerationSeconds", 300)))


def register_builtin_plugins() -> None:
    register("AlwaysAdmit", lambda ctx: AlwaysAdmit())
    register("AlwaysDeny", lambda ctx: AlwaysDeny())
    register("NamespaceLifecycle", lambda ctx: NamespaceLifecycle(ctx.registry, ctx.cacher, ctx.store))
    register("LimitRanger", lambda ctx: LimitRanger(ctx.registry, ctx.cacher))
    register("ServiceAccount", lambda ctx: ServiceAccountAdmission(ctx.registry, ctx.cacher, ctx.store))
    register("TaintNodesByCondition", lambda ctx: TaintNodesByCondition())
    register("PodSecurity", lambda ctx: PodSecurity(ctx.registry, ctx.cacher,
                                                    PodSecurityConfig.from_api(ctx.plugin_config("PodSecurity"))))
    register("Priority", lambda ctx: PriorityAdmission(ctx.registry, ctx.cacher))
    register("DefaultTolerationSeconds", _default_toleration_seconds)
    register("ResourceQuota", lambda ctx: ResourceQuotaAdmission(ctx.registry, ctx.cacher, ctx.store))
    register("NodeRestriction", lambda ctx: NodeRestriction())


class AlwaysAdmit:
    """``AlwaysAdmit``: admits everything (upstream keeps it, deprecated, for completeness)."""

    name = "AlwaysAdmit"

    def handles(self, operation: Operation) -> bool:
        return True

    async def validate(self, attributes: AdmissionAttributes) -> None:
        return None


class AlwaysDeny:
    """``AlwaysDeny``: refuses every write, with upstream's message (a test and lock-down tool)."""

    name = "AlwaysDeny"

    def handles(self, operation: Operation) -> bool:
        return True

    async def validate(self, attributes: AdmissionAttributes) -> None:
        raise attributes.forbidden("admission control is denying all modifications")
