"""Discovery documents, built from the registry.

Legacy discovery: ``/api`` (APIVersions), ``/apis`` (APIGroupList),
``/apis/<group>`` (APIGroup), ``/api/v1`` and ``/apis/<g>/<v>``
(APIResourceList). Aggregated discovery (``apidiscovery.k8s.io`` v2 and
v2beta1) is served from ``/api`` and ``/apis`` when ``Accept`` asks for it,
and the response's Content-Type then echoes the negotiated media type exactly
(kubectl treats anything else as legacy).

Group/versions served by aggregated API servers (remote APIServices) come
from an :class:`ExternalGroups` source (``k8py.apiserver.aggregator``): they
are listed after the local groups, with the resources their servers
reported, or none (``freshness: Stale`` in aggregated discovery) while a
server does not answer.

Documents are rebuilt only when the registry or the external source changes
(``Registry.generation``, ``ExternalGroups.generation``).
"""

from __future__ import annotations

from typing import Any, Protocol

import orjson

from k8py.apiserver.registry import Registry, ResourceDefinition

__all__ = ["Discovery", "ExternalGroups", "aggregated_media_type"]


class ExternalGroups(Protocol):
    """Group/versions served elsewhere (the aggregator's remote APIServices)."""

    @property
    def generation(self) -> int: ...

    def groups(self) -> dict[str, list[tuple[str, dict[str, Any] | None]]]:
        """group -> [(version, its APIResourceList or None)], preferred version first."""
        ...

_SUBRESOURCE_VERBS = {
    "status": ("get", "patch", "update"),
    "scale": ("get", "patch", "update"),
    "binding": ("create",),
    "eviction": ("create",),
    "finalize": ("update",),
    "ephemeralcontainers": ("get", "patch", "update"),
    "token": ("create",),
    "approval": ("get", "patch", "update"),
    "exec": ("create", "get"),
    "attach": ("create", "get"),
    "portforward": ("create", "get"),
    "proxy": ("create", "delete", "get", "patch", "update"),
}
_SUBRESOURCE_KIND = {
    "scale": ("autoscaling", "v1", "Scale"),
    "binding": ("", "v1", "Binding"),
    "eviction": ("policy", "v1", "Eviction"),
    "token": ("authentication.k8s.io", "v1", "TokenRequest"),
    "exec": ("", "v1", "PodExecOptions"),
    "attach": ("", "v1", "PodAttachOptions"),
    "portforward": ("", "v1", "PodPortForwardOptions"),
    "proxy": ("", "v1", "NodeProxyOptions"),
}


def aggregated_media_type(accept: str | None) -> str | None:
    """The aggregated-discovery media type the client asked for first, if any."""
    for part in (accept or "").split(","):
        pieces = [p.strip() for p in part.split(";")]
        if pieces[0] != "application/json":
            continue
        params = dict(p.split("=", 1) for p in pieces[1:] if "=" in p)
        if params.get("g") == "apidiscovery.k8s.io" and params.get("as") == "APIGroupDiscoveryList":
            version = params.get("v")
            if version in ("v2", "v2beta1"):
                return f"application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"
    return None


class Discovery:
    def __init__(self, registry: Registry, external: ExternalGroups | None = None) -> None:
        self.registry = registry
        self.external = external
        self._generation: tuple[int, int] = (-1, -1)
        self._cache: dict[Any, bytes] = {}

    def _external(self) -> dict[str, list[tuple[str, dict[str, Any] | None]]]:
        if self.external is None:
            return {}
        local = self.registry.group_versions()
        return {g: vs for g, vs in self.external.groups().items() if g and g not in local}

    def _cached(self, key: Any, build: Any) -> bytes:
        generation = (self.registry.generation, self.external.generation if self.external is not None else 0)
        if self._generation != generation:
            self._cache.clear()
            self._generation = generation
        value = self._cache.get(key)
        if value is None:
            value = self._cache[key] = orjson.dumps(build())
        return value

    # -- legacy ---------------------------------------------------------------

    def api_versions(self, server_address: str) -> bytes:
        return self._cached(
            ("api", server_address),
            lambda: {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
            },
        )

    def _group(self, group: str) -> dict[str, Any] | None:
        versions = self.registry.group_versions().get(group) or [v for v, _ in self._external().get(group, [])]
        if not versions:
            return None
        gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}

    def api_group_list(self) -> bytes:
        def build() -> dict[str, Any]:
            groups = [self._group(g) for g in [*self.registry.group_versions(), *self._external()] if g]
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [g for g in groups if g]}

        return self._cached("apis", build)

    def api_group(self, group: str) -> bytes | None:
        if not group or not (self.registry.group_versions().get(group) or self._external().get(group)):
            return None
        return self._cached(("group", group), lambda: {"kind": "APIGroup", "apiVersion": "v1", **self._group(group)})  # type: ignore[dict-item]

    def resource_list(self, group: str, version: str) -> bytes | None:
        definitions = _by_name(self.registry.in_group_version(group, version))
        if not definitions:
            return None

        def build() -> dict[str, Any]:
            resources: list[dict[str, Any]] = []
            for d in definitions:
                resources.append(_legacy_resource(d))
                for sub in sorted(d.subresources):
                    resources.append(_legacy_subresource(d, sub))
            return {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": f"{group}/{version}" if group else version,
                "resources": resources,
            }

        return self._cached(("resources", group, version), build)

    # -- aggregated -----------------------------------------------------------

    def aggregated(self, *, core: bool, media_type: str) -> bytes:
        api_version = "apidiscovery.k8s.io/" + ("v2beta1" if "v=v2beta1" in media_type else "v2")

        def build() -> dict[str, Any]:
            items = []
            for group, versions in self.registry.group_versions().items():
                if (group == "") != core:
                    continue
                items.append(
                    {
                        "metadata": {"name": group, "creationTimestamp": None},
                        "versions": [
                            {
                                "version": v,
                                "resources": [
                                    _aggregated_resource(d) for d in _by_name(self.registry.in_group_version(group, v))
                                ],
                                "freshness": "Current",
                            }
                            for v in versions
                        ],
                    }
                )
            if not core:
                for group, remote_versions in self._external().items():
                    items.append({
                        "metadata": {"name": group, "creationTimestamp": None},
                        "versions": [{"version": v, "resources": _aggregated_from_legacy(group, v, resources),
                                      "freshness": "Current" if resources is not None else "Stale"}
                                     for v, resources in remote_versions],
                    })
            return {"kind": "APIGroupDiscoveryList", "apiVersion": api_version, "metadata": {}, "items": items}

        return self._cached(("aggregated", core, api_version), build)


def _by_name(definitions: Any) -> list[ResourceDefinition]:
    """Upstream lists a group-version's resources sorted by name (its
    installer sorts the storage paths); kubectl's ``get all`` follows it."""
    return sorted(definitions, key=lambda d: d.plural)


def _legacy_resource(d: ResourceDefinition) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": d.plural,
        "singularName": d.singular,
        "namespaced": d.namespaced,
        "kind": d.kind,
        "verbs": list(d.verbs),
    }
    if d.short_names:
        out["shortNames"] = list(d.short_names)
    if d.categories:
        out["categories"] = list(d.categories)
    return out


def _legacy_subresource(d: ResourceDefinition, sub: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": f"{d.plural}/{sub}", "singularName": "", "namespaced": d.namespaced}
    group_kind = _SUBRESOURCE_KIND.get(sub)
    if group_kind is not None:
        group, version, kind = group_kind
        if group:
            out["group"] = group
            out["version"] = version
        out["kind"] = kind
    else:
        out["kind"] = d.kind
    out["verbs"] = list(_SUBRESOURCE_VERBS.get(sub, ("get",)))
    return out


def _aggregated_resource(d: ResourceDefinition) -> dict[str, Any]:
    out: dict[str, Any] = {
        "resource": d.plural,
        "responseKind": {"group": d.group, "version": d.version, "kind": d.kind},
        "scope": "Namespaced" if d.namespaced else "Cluster",
        "singularResource": d.singular,
        "verbs": list(d.verbs),
    }
    if d.short_names:
        out["shortNames"] = list(d.short_names)
    if d.categories:
        out["categories"] = list(d.categories)
    subs = []
    for sub in sorted(d.subresources):
        group, version, kind = _SUBRESOURCE_KIND.get(sub, (d.group, d.version, d.kind))
        subs.append(
            {
                "subresource": sub,
                "responseKind": {"group": group, "version": version, "kind": kind},
                "verbs": list(_SUBRESOURCE_VERBS.get(sub, ("get",))),
            }
        )
    if subs:
        out["subresources"] = subs
    return out


def _aggregated_from_legacy(group: str, version: str, resource_list: dict[str, Any] | None) -> list[dict[str, Any]]:
    """An aggregated server's legacy APIResourceList in the aggregated shape."""
    entries = (resource_list or {}).get("resources") or []
    out: dict[str, dict[str, Any]] = {}
    for r in entries:
        name = str(r.get("name", ""))
        if "/" in name:
            continue
        item: dict[str, Any] = {
            "resource": name,
            "responseKind": {"group": group, "version": version, "kind": r.get("kind", "")},
            "scope": "Namespaced" if r.get("namespaced") else "Cluster",
            "singularResource": r.get("singularName", ""),
            "verbs": list(r.get("verbs") or []),
        }
        if r.get("shortNames"):
            item["shortNames"] = list(r["shortNames"])
        if r.get("categories"):
            item["categories"] = list(r["categories"])
        out[name] = item
    for r in entries:
        name = str(r.get("name", ""))
        parent, _, sub = name.partition("/")
        if sub and parent in out:
            out[parent].setdefault("subresources", []).append({
                "subresource": sub,
                "responseKind": {"group": r.get("group", group), "version": r.get("version", version), "kind": r.get("kind", "")},
                "verbs": list(r.get("verbs") or []),
            })
    return [out[k] for k in sorted(out)]
