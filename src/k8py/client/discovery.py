"""Which resources a server serves, cached: ``/api``, ``/apis`` and each group version.

:meth:`Discovery.server_resources` walks the legacy and named groups once and
keeps the result for ``ttl`` clock seconds (kubectl keeps its disk cache for
10 minutes too); :meth:`Discovery.invalidate` forgets it, and a lookup miss
refreshes it once before giving up, so a freshly created CRD is found.

Lookups (:meth:`Discovery.resource_for`) accept what a kubectl user types:
plural (``pods``), singular (``pod``), kind (``Pod``, case-insensitive) or
short name (``po``), optionally qualified by group (``deployments.apps``) or
with an explicit ``group=``. Preferred versions win when a resource is served
in several. Subresources (``pods/status``) are not listed as resources.

It reads through :class:`JSONGetter`, one narrow method (``RestClient`` is
one), so discovery and the REST client do not import each other: the REST
client builds a ``Discovery`` over itself on first use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from k8py.api.errors import NotFound
from k8py.client.clock import Clock, RealClock
from k8py.client.resource import Resource

__all__ = ["Discovery", "APIResourceInfo", "JSONGetter"]


class JSONGetter(Protocol):
    """What discovery needs of a client: one request's decoded JSON body
    (raising :class:`~k8py.api.errors.StatusError` subclasses on errors)."""

    async def request_json(self, method: str, path: str) -> Any: ...


@dataclass(frozen=True, slots=True)
class APIResourceInfo:
    """A discovered resource with what discovery says about it."""

    resource: Resource
    singular: str
    short_names: tuple[str, ...]
    verbs: tuple[str, ...]
    subresources: tuple[str, ...]
    preferred: bool


class Discovery:
    def __init__(self, client: JSONGetter, *, ttl: float = 600.0, clock: Clock | None = None) -> None:
        self._client = client
        self._ttl = ttl
        self._clock: Clock = clock if clock is not None else RealClock()
        self._cache: list[APIResourceInfo] | None = None
        self._fetched_at = 0.0

    def invalidate(self) -> None:
        self._cache = None

    async def server_resources(self) -> list[APIResourceInfo]:
        """Every resource of every served group version (cached)."""
        if self._cache is not None and self._clock.monotonic() - self._fetched_at < self._ttl:
            return self._cache
        group_versions: list[tuple[str, str, bool]] = []
        core = await self._client.request_json("GET", "/api")
        for version in core.get("versions") or ():
            group_versions.append(("", version, version == (core.get("versions") or [""])[0]))
        groups = await self._client.request_json("GET", "/apis")
        for group in groups.get("groups") or ():
            preferred = (group.get("preferredVersion") or {}).get("version")
            for version in group.get("versions") or ():
                group_versions.append((group["name"], version["version"], version["version"] == preferred))
        found: list[APIResourceInfo] = []
        for group, version, preferred in group_versions:
            path = f"/apis/{group}/{version}" if group else f"/api/{version}"
            try:
                doc = await self._client.request_json("GET", path)
            except NotFound:
                continue  # a group version that went away between the two calls
            found.extend(_parse_resource_list(group, version, preferred, doc))
        self._cache = found
        self._fetched_at = self._clock.monotonic()
        return found

    async def resource_for(self, name: str, *, group: str | None = None) -> Resource:
        """The resource a user means by ``name`` (see the module docstring).

        Raises :class:`~k8py.api.errors.NotFound` if nothing matches after one refresh.
        """
        if group is None and "." in name:
            name, group = name.split(".", 1)
        for attempt in range(2):
            match = _lookup(await self.server_resources(), name, group)
            if match is not None:
                return match
            if attempt == 0:
                self.invalidate()
        raise NotFound(f'the server doesn\'t have a resource type "{name}"')


def _parse_resource_list(group: str, version: str, preferred: bool, doc: dict[str, Any]) -> list[APIResourceInfo]:
    subresources: dict[str, list[str]] = {}
    entries = doc.get("resources") or ()
    for entry in entries:
        if "/" in entry.get("name", ""):
            parent, sub = entry["name"].split("/", 1)
            subresources.setdefault(parent, []).append(sub)
    out = []
    for entry in entries:
        plural = entry.get("name", "")
        if not plural or "/" in plural:
            continue
        resource = Resource(entry.get("group") or group, entry.get("version") or version, plural,
                            bool(entry.get("namespaced")), entry.get("kind", ""))
        out.append(APIResourceInfo(
            resource=resource,
            singular=entry.get("singularName") or entry.get("kind", "").lower(),
            short_names=tuple(entry.get("shortNames") or ()),
            verbs=tuple(entry.get("verbs") or ()),
            subresources=tuple(subresources.get(plural, ())),
            preferred=preferred,
        ))
    return out


def _lookup(infos: list[APIResourceInfo], name: str, group: str | None) -> Resource | None:
    lowered = name.lower()
    best: APIResourceInfo | None = None
    for info in infos:
        if group is not None and info.resource.group != group:
            continue
        if lowered not in (info.resource.plural, info.singular, info.resource.kind.lower()) and lowered not in info.short_names:
            continue
        # preferred version first; among equals, the core group before named ones (kubectl's priority)
        if best is None or (info.preferred and not best.preferred) or (
            info.preferred == best.preferred and info.resource.group == "" and best.resource.group != ""
        ):
            best = info
    return best.resource if best is not None else None
