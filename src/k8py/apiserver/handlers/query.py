"""What a list or watch asks for: namespace, label and field selectors.

Parsed once per request from the query string, then used as a predicate on
cached objects (``matches``) and on decoded objects read from the store
(``matches_object``). Unsupported field selectors are rejected up front with
upstream's 400 (``field label not supported: <f>``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Hashable, Mapping

from k8py.api.errors import BadRequest
from k8py.api.selectors import FieldSelector, LabelSelector, parse_field_selector, parse_label_selector
from k8py.apiserver.registry import ResourceDefinition
from k8py.apiserver.watch.watch_cache import CachedObject

__all__ = ["Query", "parse_query"]

_META_FIELDS = ("metadata.name", "metadata.namespace")


@dataclass(frozen=True, slots=True)
class Query:
    definition: ResourceDefinition
    namespace: str  # "" = all namespaces (or cluster-scoped)
    labels: LabelSelector
    fields: FieldSelector
    #: the value the query pins the resource's indexed field to (pods:
    #: spec.nodeName=X), so lists and watches use the index
    index_value: str | None
    #: a view's field names -> the stored form's (events.k8s.io regarding.name
    #: -> involvedObject.name): cached objects carry the stored form's fields
    aliases: Mapping[str, str] = field(default_factory=dict)
    #: the one object name the query pins (metadata.name=X), so one-object
    #: watches are indexed by name
    name_value: str | None = None

    @property
    def selection_key(self) -> Hashable:
        """Equal for queries that select the same objects (watchers with
        equal keys share each event's decision)."""
        return (id(self.definition), self.namespace, self.labels, self.fields, tuple(sorted(self.aliases.items())))

    @property
    def selects_everything(self) -> bool:
        return self.labels.empty and self.fields.empty

    def matches(self, obj: CachedObject) -> bool:
        if self.namespace and obj.namespace != self.namespace:
            return False
        if not self.labels.empty and not self.labels.matches(obj.labels):
            return False
        if not self.fields.empty:

            def getter(path: str) -> str | None:
                if path == "metadata.name":
                    return obj.name
                if path == "metadata.namespace":
                    return obj.namespace
                return obj.field(self.aliases.get(path, path))

            return self.fields.matches(getter)
        return True

    def matches_object(self, obj: dict[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        if self.namespace and meta.get("namespace", "") != self.namespace:
            return False
        if not self.labels.empty and not self.labels.matches(meta.get("labels") or {}):
            return False
        if not self.fields.empty:
            return self.fields.matches(lambda path: self.definition.field_value(obj, path) or "")
        return True


def parse_query(definition: ResourceDefinition, namespace: str, params: Mapping[str, str]) -> Query:
    labels = parse_label_selector(params.get("labelSelector", "") or "")
    fields = parse_field_selector(params.get("fieldSelector", "") or "")
    for path in fields.fields:
        if path not in _META_FIELDS and path not in definition.field_getters:
            raise BadRequest(f"field label not supported: {path}")
    # a fieldSelector on metadata.namespace narrows like the URL namespace does
    ns_from_fields = fields.equality_value("metadata.namespace")
    if not namespace and ns_from_fields is not None and definition.namespaced:
        namespace = ns_from_fields
    index_value = None
    if definition.indexed_field:
        index_value = fields.equality_value(definition.indexed_field)
    aliases = dict(definition.converter.field_aliases) if definition.converter is not None else {}
    name_value = fields.equality_value("metadata.name")
    return Query(definition, namespace if definition.namespaced else "", labels, fields, index_value, aliases, name_value)
