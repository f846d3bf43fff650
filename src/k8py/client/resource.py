"""Resource addressing: which collection a request is about, and its URL path.

A :class:`Resource` is the client's whole knowledge of a resource type: group,
version, plural, scope and kind. It is a small frozen value, so it can key
dicts (the informer factory shares one informer per resource) and be written
as a module constant (:mod:`k8py.client.resources` has the built-ins), or be
found at run time through discovery (:mod:`k8py.client.discovery`).

All URL building happens here, in :meth:`Resource.path`, so that the REST
client, the reflector and discovery never format paths themselves:

- core group: ``/api/v1/...``; named groups: ``/apis/<group>/<version>/...``;
- namespaced with a namespace: ``.../namespaces/<ns>/<plural>[/<name>[/<sub>]]``;
- namespaced without a namespace: the all-namespaces collection ``.../<plural>``
  (list, watch only);
- cluster-scoped: ``.../<plural>[/<name>[/<sub>]]`` (a namespace is an error).

Path segments are percent-encoded, so a name can never escape its segment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote

__all__ = ["Resource"]


#: what ``quote(value, safe="")`` leaves as is: nearly every name, so the quoting is skipped
_UNRESERVED = re.compile(r"[A-Za-z0-9_.~-]+").fullmatch


def _segment(value: str) -> str:
    if not value or value in (".", ".."):
        raise ValueError(f"invalid path segment: {value!r}")
    return value if _UNRESERVED(value) else quote(value, safe="")


@dataclass(frozen=True, slots=True)
class Resource:
    """One resource type of the API (e.g. ``Resource("", "v1", "pods", True, "Pod")``)."""

    group: str
    version: str
    plural: str
    namespaced: bool = True
    kind: str = ""

    @property
    def api_version(self) -> str:
        """``v1`` or ``apps/v1``: what objects of this resource carry."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version_path(self) -> str:
        """``/api/v1`` or ``/apis/<group>/<version>``."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    @property
    def qualified(self) -> str:
        """``pods`` or ``deployments.apps`` (how upstream names it in messages)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """The URL path of the collection, an object, or an object's subresource."""
        parts = [self.group_version_path]
        if self.namespaced:
            if namespace:
                parts.append(f"/namespaces/{_segment(namespace)}")
            elif name:
                raise ValueError(f"{self.qualified} is namespaced: a namespace is required to address {name!r}")
        elif namespace:
            raise ValueError(f"{self.qualified} is cluster-scoped: no namespace expected, got {namespace!r}")
        parts.append(f"/{self.plural}")
        if name:
            parts.append(f"/{_segment(name)}")
            if subresource:
                parts.append(f"/{_segment(subresource)}")
        elif subresource:
            raise ValueError("a subresource needs an object name")
        return "".join(parts)

    def __str__(self) -> str:
        return f"{self.qualified}/{self.version}"
