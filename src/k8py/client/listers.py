"""Listers: typed reads of an informer's cache (client-go's generated listers).

A :class:`Lister` answers ``get(namespace, name)`` and ``list(selector)`` from
an :class:`~k8py.client.indexer.Indexer`, never from the API server, using the
namespace index for namespaced reads. As everything read from a cache, the
returned objects are shared: **do not mutate them**; ``deep_copy`` first.
"""

from __future__ import annotations

from typing import Any

from k8py.api.errors import NotFound
from k8py.api.selectors import LabelSelector, parse_label_selector
from k8py.client.indexer import NAMESPACE_INDEX, Indexer
from k8py.client.resource import Resource

__all__ = ["Lister"]


class Lister:
    def __init__(self, indexer: Indexer, resource: Resource) -> None:
        self.indexer = indexer
        self.resource = resource

    def get(self, namespace: str | None, name: str) -> Any:
        """The cached object; raises :class:`~k8py.api.errors.NotFound` (as client-go's listers)."""
        key = f"{namespace}/{name}" if self.resource.namespaced and namespace else name
        obj = self.indexer.get_by_key(key)
        if obj is None:
            raise NotFound.for_object(self.resource.plural, name, self.resource.group)
        return obj

    def try_get(self, namespace: str | None, name: str) -> Any | None:
        key = f"{namespace}/{name}" if self.resource.namespaced and namespace else name
        return self.indexer.get_by_key(key)

    def list(self, selector: str | LabelSelector | None = None, *, namespace: str | None = None) -> list[Any]:
        """Cached objects matching a label selector (all when ``None``), optionally in one namespace."""
        objs = self.indexer.by_index(NAMESPACE_INDEX, namespace) if namespace else self.indexer.list()
        if selector is None or selector == "":
            return objs
        parsed = parse_label_selector(selector) if isinstance(selector, str) else selector
        if parsed.empty:
            return objs
        return [o for o in objs if parsed.matches((o.get("metadata") or {}).get("labels"))]
