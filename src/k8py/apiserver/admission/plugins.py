"""The admission plugins by name, in upstream's order, and the flags that pick them.

:data:`ORDER` is kube-apiserver's ``AllOrderedPlugins``: the chain always
runs enabled plugins in this order, whatever order the flags name them in
(webhooks, policies and ResourceQuota last, as upstream). :data:`DEFAULT_ON`
is what ``--enable-admission-plugins`` adds to (upstream's
``DefaultOffAdmissionPlugins`` complement, less what k8py does not serve).

A plugin is made by a factory registered under its name with
:func:`register` (``factory(context) -> plugin``); the built-in ones are
registered in :mod:`k8py.apiserver.admission` (``__init__``) and other
packages register theirs the same way before the server builds its chain.
A name in :data:`ORDER` that nobody registered is skipped when it is only a
default, and refused when a flag asks for it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from k8py.apiserver.admission.chain import AdmissionChain, AdmissionPlugin
from k8py.apiserver.registry import Registry
from k8py.apiserver.store.object_store import ObjectStore
from k8py.apiserver.watch.cacher import Cacher

__all__ = ["ORDER", "DEFAULT_ON", "PluginContext", "PluginFactory", "register", "registered", "build_chain",
           "AdmissionConfigError"]

log = logging.getLogger(__name__)

#: upstream's AllOrderedPlugins (kube-apiserver 1.32)
ORDER: tuple[str, ...] = (
    "AlwaysAdmit",
    "NamespaceAutoProvision",
    "NamespaceLifecycle",
    "NamespaceExists",
    "LimitPodHardAntiAffinityTopology",
    "LimitRanger",
    "ServiceAccount",
    "NodeRestriction",
    "TaintNodesByCondition",
    "AlwaysPullImages",
    "ImagePolicyWebhook",
    "PodSecurity",
    "PodNodeSelector",
    "Priority",
    "DefaultTolerationSeconds",
    "PodTolerationRestriction",
    "EventRateLimit",
    "ExtendedResourceToleration",
    "DefaultStorageClass",
    "StorageObjectInUseProtection",
    "OwnerReferencesPermissionEnforcement",
    "PersistentVolumeClaimResize",
    "RuntimeClass",
    "CertificateApproval",
    "CertificateSigning",
    "ClusterTrustBundleAttest",
    "CertificateSubjectRestriction",
    "DefaultIngressClass",
    "DenyServiceExternalIPs",
    # webhooks, policies, quota and deny go last
    "MutatingAdmissionPolicy",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionWebhook",
    "ResourceQuota",
    "AlwaysDeny",
)

#: on unless ``--disable-admission-plugins`` names them: upstream's default-on set, less
#: TaintNodesByCondition (a bare API server has no node lifecycle controller to lift its
#: taint; ``k8py up``, which runs one, enables it)
DEFAULT_ON: frozenset[str] = frozenset({
    "NamespaceLifecycle", "LimitRanger", "ServiceAccount", "PodSecurity",
    "Priority", "DefaultTolerationSeconds", "DefaultStorageClass", "StorageObjectInUseProtection",
    "PersistentVolumeClaimResize", "RuntimeClass", "CertificateApproval", "CertificateSigning",
    "ClusterTrustBundleAttest", "CertificateSubjectRestriction", "DefaultIngressClass",
    "MutatingAdmissionWebhook", "ValidatingAdmissionPolicy", "ValidatingAdmissionWebhook", "ResourceQuota",
})


class AdmissionConfigError(ValueError):
    """A bad ``--enable/--disable-admission-plugins`` or plugin configuration (the server refuses to start)."""


@dataclass
class PluginContext:
    """What a plugin factory may use: the server's registry, watch cache and store, and its configuration."""

    registry: Registry
    cacher: Cacher
    store: ObjectStore
    #: plugin name -> its configuration (``--admission-control-config-file``'s ``plugins[].configuration``)
    config: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: anything else the server hands plugins (authorizer, service resolver, ...), by name
    extra: dict[str, Any] = field(default_factory=dict)

    def plugin_config(self, name: str) -> Mapping[str, Any]:
        return self.config.get(name) or {}


PluginFactory = Callable[[PluginContext], AdmissionPlugin]

_FACTORIES: dict[str, PluginFactory] = {}


def register(name: str, factory: PluginFactory) -> None:
    """Make plugin ``name`` (one of :data:`ORDER`) available to the chain."""
    if name not in ORDER:
        raise ValueError(f"{name!r} is not an admission plugin name upstream knows; add it to plugins.ORDER first")
    _FACTORIES[name] = factory


def registered() -> list[str]:
    return [n for n in ORDER if n in _FACTORIES]


def _split(values: Iterable[str]) -> list[str]:
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def enabled_names(enable: Iterable[str] = (), disable: Iterable[str] = ()) -> list[str]:
    """The plugins the flags select, in :data:`ORDER` (upstream's ``enabledPluginNames``)."""
    on, off = _split(enable), _split(disable)
    for name in on + off:
        if name not in ORDER:
            raise AdmissionConfigError(
                f"admission plugin {name!r} is unknown: known plugins are {', '.join(sorted(ORDER))}")
    both = sorted(set(on) & set(off))
    if both:
        raise AdmissionConfigError(
            f"{both} in enable-admission-plugins and disable-admission-plugins overlapped: name each plugin in one of them")
    missing = [n for n in on if n not in _FACTORIES]
    if missing:
        raise AdmissionConfigError(
            f"admission plugins {', '.join(missing)} are not implemented in k8py: "
            f"available are {', '.join(registered())}")
    wanted = (DEFAULT_ON | set(on)) - set(off)
    return [n for n in ORDER if n in wanted and n in _FACTORIES]


def build_chain(context: PluginContext, *, enable: Iterable[str] = (), disable: Iterable[str] = ()) -> AdmissionChain:
    names = enabled_names(enable, disable)
    chain = AdmissionChain(_FACTORIES[name](context) for name in names)
    log.info("admission chain built", extra={"plugins": ",".join(chain.names)})
    return chain
