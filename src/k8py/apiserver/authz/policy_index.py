"""The RBAC objects as the authorizer reads them: from the watch cache, indexed by subject.

The authorizer runs on every request, so it never lists. :class:`CachedPolicy`
(the :class:`PolicyLister` the API server gives the RBAC authorizer) reads the
four rbac.authorization.k8s.io caches the server already keeps and derives,
lazily, an index of bindings by subject:

- a ``User`` subject is indexed under ``u:<name>``, a ``Group`` under
  ``g:<name>``, and a ``ServiceAccount`` under the user name it authenticates
  as, ``u:system:serviceaccount:<ns>:<name>`` — so one lookup per user name and
  group finds every binding that applies;
- roles are decoded once per change, and kept by name.

Invariant: a derived view is rebuilt when (and only when) its cache changed —
a cache's stamp is its object map's identity (a reload replaces it) plus the
revision of its newest event. Reads in between are dict lookups. Nothing here
awaits: a request sees the policy as of the cache's revision, as upstream's
informer-backed authorizer does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Protocol, Sequence

import orjson

from k8py.apiserver.authn.user import UserInfo
from k8py.apiserver.registry import Registry
from k8py.apiserver.watch.cacher import Cacher
from k8py.apiserver.watch.watch_cache import WatchCache

__all__ = ["PolicyLister", "CachedPolicy", "Binding", "subject_keys", "SERVICE_ACCOUNT_PREFIX"]

GROUP = "rbac.authorization.k8s.io"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
Object = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Binding:
    """What a RoleBinding or ClusterRoleBinding says, for resolution."""

    kind: str  # RoleBinding | ClusterRoleBinding
    namespace: str
    name: str
    role_kind: str  # Role | ClusterRole
    role_name: str
    #: the subject through which it applies, as upstream describes it (``Group "system:authenticated"``)
    subject: str = ""

    def describe(self) -> str:
        """Upstream's binding describer: ``ClusterRoleBinding "b" of ClusterRole "r" to User "u"``."""
        name = self.name if self.kind == "ClusterRoleBinding" else f"{self.name}/{self.namespace}"
        return f'{self.kind} "{name}" of {self.role_kind} "{self.role_name}" to {self.subject}'


class PolicyLister(Protocol):
    """The reads the RBAC authorizer needs (upstream's RoleGetter,
    RoleBindingLister, ClusterRoleGetter, ClusterRoleBindingLister)."""

    def cluster_role_rules(self, name: str) -> Sequence[Object] | None: ...

    def role_rules(self, namespace: str, name: str) -> Sequence[Object] | None: ...

    def cluster_role_bindings_for(self, keys: Iterable[str]) -> list[Binding]: ...

    def role_bindings_for(self, namespace: str, keys: Iterable[str]) -> list[Binding]: ...

    def stamp(self) -> tuple[Any, ...]:
        """Changes whenever any RBAC object changed (for callers' caches)."""
        ...


def subject_keys(user: UserInfo) -> list[str]:
    return [f"u:{user.name}", *(f"g:{g}" for g in user.groups)]


def _subject_key(subject: Object, binding_namespace: str) -> tuple[str, str] | None:
    """(index key, description) of a subject."""
    kind = subject.get("kind")
    name = subject.get("name") or ""
    if kind == "User":
        return f"u:{name}", f'User "{name}"'
    if kind == "Group":
        return f"g:{name}", f'Group "{name}"'
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return f"u:{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}", f'ServiceAccount "{name}/{namespace}"'
    return None


def _stamp(cache: WatchCache) -> tuple[int, int]:
    return id(cache.objects), cache.ring[-1].rv if cache.ring else -1


@dataclass
class _View:
    stamp: tuple[int, int] = (0, -2)
    #: roles: (namespace, name) -> rules; bindings: subject key -> bindings
    roles: dict[tuple[str, str], list[Object]] = field(default_factory=dict)
    bindings: dict[str, list[Binding]] = field(default_factory=dict)


class CachedPolicy:
    def __init__(self, cacher: Cacher, registry: Registry) -> None:
        self._cacher = cacher
        self._registry = registry
        self._views: dict[str, _View] = {}

    def _cache(self, plural: str) -> WatchCache | None:
        definition = self._registry.get(GROUP, "v1", plural)
        if definition is None:
            return None
        return self._cacher.cache_for(definition)

    def _view(self, plural: str) -> _View:
        view = self._views.get(plural)
        cache = self._cache(plural)
        if cache is None:
            return view or _View()
        stamp = _stamp(cache)
        if view is not None and view.stamp == stamp:
            return view
        view = _View(stamp=stamp)
        binding_kind = {"rolebindings": "RoleBinding", "clusterrolebindings": "ClusterRoleBinding"}.get(plural)
        for cached in list(cache.objects.values()):
            obj = orjson.loads(cached.data)
            if binding_kind is None:
                view.roles[(cached.namespace, cached.name)] = [r for r in obj.get("rules") or [] if isinstance(r, dict)]
                continue
            ref = obj.get("roleRef") or {}
            for subject in obj.get("subjects") or []:
                found = _subject_key(subject, cached.namespace) if isinstance(subject, dict) else None
                if found is None:
                    continue
                key, described = found
                binding = Binding(binding_kind, cached.namespace, cached.name, ref.get("kind", ""), ref.get("name", ""),
                                  described)
                view.bindings.setdefault(key if binding_kind == "ClusterRoleBinding" else f"{cached.namespace}/{key}",
                                         []).append(binding)
        self._views[plural] = view
        return view

    def stamp(self) -> tuple[Any, ...]:
        out = []
        for plural in ("clusterroles", "roles", "clusterrolebindings", "rolebindings"):
            cache = self._cache(plural)
            out.append(_stamp(cache) if cache is not None else None)
        return tuple(out)

    def cluster_role_rules(self, name: str) -> Sequence[Object] | None:
        return self._view("clusterroles").roles.get(("", name))

    def role_rules(self, namespace: str, name: str) -> Sequence[Object] | None:
        return self._view("roles").roles.get((namespace, name))

    def cluster_role_bindings_for(self, keys: Iterable[str]) -> list[Binding]:
        index = self._view("clusterrolebindings").bindings
        return _unique(b for k in keys for b in index.get(k, ()))

    def role_bindings_for(self, namespace: str, keys: Iterable[str]) -> list[Binding]:
        index = self._view("rolebindings").bindings
        return _unique(b for k in keys for b in index.get(f"{namespace}/{k}", ()))


def _unique(bindings: Iterable[Binding]) -> list[Binding]:
    seen: set[tuple[str, str]] = set()
    out = []
    for b in bindings:
        if (b.namespace, b.name) not in seen:
            seen.add((b.namespace, b.name))
            out.append(b)
    return sorted(out, key=lambda b: (b.namespace, b.name))
