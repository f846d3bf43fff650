"""The registry of served resources: what the API server knows about each kind.

The API server is generic over resources. Everything kind-specific lives in a
:class:`ResourceDefinition` — names and scope for URLs and discovery, the
subresources served, the fields a ``fieldSelector`` may use, and a
:class:`Strategy` with the hooks upstream's ``rest.RESTCreateStrategy`` /
``RESTUpdateStrategy`` have (defaulting, validation, status/spec separation).
Built-in kinds are registered at start-up (``k8py.apiserver.resources``);
custom resources will be registered the same way at run time, and
:class:`Registry` tells its listeners (discovery, the watch cache) when the set
changes (``on_change`` for an addition or replacement, ``on_remove`` when a
resource stops being served).

Invariants:

- a definition is immutable once registered; re-registering a (group,
  resource) replaces it and bumps ``Registry.generation``;
- storage keys are ``/registry/<storage_resource>/<namespace>/<name>`` for
  namespaced kinds and ``/registry/<storage_resource>/<name>`` for cluster ones,
  as upstream lays them out in etcd.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Protocol

from k8py.api import schema as upstream_schema
from k8py.api.errors import Cause

__all__ = [
    "Converter",
    "AsyncConverter",
    "to_stored",
    "to_served",
    "FieldGetter",
    "ScaleSpec",
    "Strategy",
    "ResourceDefinition",
    "Registry",
    "REGISTRY_PREFIX",
]

REGISTRY_PREFIX = "/registry/"

Object = dict[str, Any]
FieldGetter = Callable[[Object], str | None]


class Converter(Protocol):
    """Converts a view's objects to and from the stored form (see ``converter``)."""

    #: view field selector -> stored form's field
    field_aliases: Mapping[str, str]

    def to_storage(self, obj: Object) -> Object: ...

    def from_storage(self, obj: Object) -> Object: ...


class AsyncConverter(Converter, Protocol):
    """A converter that must do I/O (a CRD's conversion webhook): the request
    path converts through :func:`to_stored` and :func:`to_served`, which
    await it, and never calls the sync methods (which raise)."""

    is_async: bool

    async def to_storage_many(self, objs: list[Object]) -> list[Object]: ...

    async def from_storage_many(self, objs: list[Object]) -> list[Object]: ...


def _async_converter(definition: ResourceDefinition) -> AsyncConverter | None:
    converter = definition.converter
    return converter if getattr(converter, "is_async", False) else None  # type: ignore[return-value]


async def to_stored(definition: ResourceDefinition, objs: list[Object]) -> list[Object]:
    """``objs`` (as ``definition`` serves them) in the stored form."""
    converter = definition.converter
    if converter is None:
        return objs
    slow = _async_converter(definition)
    if slow is not None:
        return await slow.to_storage_many(objs)
    return [converter.to_storage(o) for o in objs]


async def to_served(definition: ResourceDefinition, objs: list[Object]) -> list[Object]:
    """Stored ``objs`` as ``definition`` serves them."""
    converter = definition.converter
    if converter is None:
        return objs
    slow = _async_converter(definition)
    if slow is not None:
        return await slow.from_storage_many(objs)
    return [converter.from_storage(o) for o in objs]


class Strategy:
    """Kind-specific hooks, called by the generic handlers in this order.

    create:  ``default`` → ``prepare_for_create`` → ``validate``
    update:  ``default`` → ``prepare_for_update`` → ``validate_update``
    status:  ``prepare_for_status_update`` → ``validate_update``
    delete:  ``begin_termination`` (the object stays, terminating) or
             ``grace_period`` (0: gone at once, unless finalizers hold it)

    ``prepare_*`` mutate ``obj`` in place. ``validate*`` return causes; an
    empty list means valid. The base class implements upstream's generic
    behaviour: when the kind has a ``status`` subresource, the main resource
    ignores status changes and ``/status`` ignores everything but status.
    """

    #: the kind has a status subresource (status/spec separation applies)
    has_status: bool = False
    #: metadata.generation is tracked (bumped when anything but metadata/status changes)
    tracks_generation: bool = False
    #: an immediate DELETE answers with the deleted object rather than a Status
    return_deleted_object: bool = False
    #: PUT to a missing name creates it (upstream AllowCreateOnUpdate)
    allow_create_on_update: bool = False
    #: (plural, subresource): a POST to this collection is served by that
    #: subresource of that resource in the same group/version, the object
    #: named by the body (core/v1 ``bindings`` -> ``pods/binding``)
    create_through: tuple[str, str] | None = None

    def default(self, obj: Object) -> None:
        """Fill defaults in place (built-in kinds: ``StandardStrategy``
        applies :mod:`k8py.apiserver.defaults`)."""

    def prepare_for_create(self, obj: Object) -> None:
        if self.has_status:
            obj.pop("status", None)
            initial = self.initial_status(obj)
            if initial is not None:
                obj["status"] = initial

    def initial_status(self, obj: Object) -> Object | None:
        """The status a new object starts with (e.g. a Pod's ``phase: Pending``)."""
        return None

    def prepare_for_update(self, obj: Object, old: Object) -> None:
        if self.has_status:
            if "status" in old:
                obj["status"] = old["status"]
            else:
                obj.pop("status", None)

    def prepare_for_status_update(self, obj: Object, old: Object) -> None:
        """Only ``status`` (and metadata labels/annotations are kept from
        ``old``): everything else is reset to the stored object."""
        status = obj.get("status")
        meta = obj.get("metadata") or {}
        obj.clear()
        obj.update({k: v for k, v in old.items() if k != "status"})
        obj["metadata"] = dict(old.get("metadata") or {})
        # upstream: /status may not change metadata except resourceVersion
        if "resourceVersion" in meta:
            obj["metadata"]["resourceVersion"] = meta["resourceVersion"]
        if status is not None:
            obj["status"] = status

    def prepare_for_subresource_update(self, subresource: str, obj: Object, old: Object) -> None:
        """A write through another subresource (``binding``, a pod's
        ``ephemeralcontainers``): by default the writer owns what it changes."""

    def validate_subresource_update(self, subresource: str, obj: Object, old: Object) -> list[Cause]:
        """Causes refusing a write through ``subresource`` (default: none)."""
        return []

    def validate(self, obj: Object) -> list[Cause]:
        return []

    def validate_update(self, obj: Object, old: Object) -> list[Cause]:
        return self.validate(obj)

    def grace_period(self, obj: Object, requested: int | None) -> int:
        """Seconds the object stays after a DELETE, marked deleting, for
        someone to finish it (upstream ``CheckGracefulDelete``; pods: their
        kubelet); ``requested`` is DeleteOptions' ``gracePeriodSeconds``. 0 =
        delete at once (the default)."""
        return 0

    def begin_termination(self, obj: Object) -> bool:
        """True if a DELETE of ``obj`` only starts its termination (a
        namespace with ``spec.finalizers``): the object is marked deleting and
        kept, after this hook has set what it shows meanwhile in place (its
        ``status``). Raise a StatusError to refuse the DELETE (a namespace
        already terminating). The default: False."""
        return False

    def spec_changed(self, obj: Object, old: Object) -> bool:
        """Whether a change counts for ``metadata.generation``."""
        ignored = ("metadata", "status", "apiVersion", "kind")
        keys = (set(obj) | set(old)) - set(ignored)
        return any(obj.get(k) != old.get(k) for k in keys)


@dataclass(frozen=True, slots=True)
class ScaleSpec:
    """Where a kind keeps what its ``/scale`` subresource shows."""

    replicas_path: tuple[str, ...] = ("spec", "replicas")
    status_replicas_path: tuple[str, ...] = ("status", "replicas")
    selector_path: tuple[str, ...] = ("spec", "selector")
    #: the selector is a plain label map (ReplicationController), not a LabelSelector
    selector_is_map: bool = False


@dataclass(frozen=True, slots=True)
class ResourceDefinition:
    group: str  # "" for the core group
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    #: subresources served besides the main resource: "status", "scale", "binding", ...
    subresources: frozenset[str] = frozenset()
    verbs: tuple[str, ...] = (
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    )
    strategy: Strategy = field(default_factory=Strategy)
    #: extra fieldSelector fields beyond metadata.name / metadata.namespace
    field_getters: Mapping[str, FieldGetter] = field(default_factory=dict)
    #: the field indexed so watches filtered on it do not scan everything
    #: (pods: spec.nodeName)
    indexed_field: str = ""
    scale: ScaleSpec | None = None
    #: the store namespace; two definitions may share one (events / events.k8s.io)
    storage_resource: str = ""
    #: the OpenAPI definition name, e.g. io.k8s.api.core.v1.Pod
    openapi_name: str = ""
    #: set when this definition is a view of another kind's stored form
    #: (events.k8s.io/v1 Events over core/v1): converts on the way in and out
    converter: Converter | None = None
    #: served for a CustomResourceDefinition (no strategic merge patch, as upstream)
    custom: bool = False
    #: the table printer (a ``k8py.apiserver.printers.Printer``) when the kind
    #: brings its own (a CRD's additionalPrinterColumns); None: by (group, kind)
    printer: Any = None
    #: a custom resource's structural schema (the version's openAPIV3Schema):
    #: what pruning and fieldValidation walk instead of an upstream definition
    structural_schema: Mapping[str, Any] | None = None
    #: derived once (every request asks for them): ``api_version`` and ``key_prefix``
    _api_version: str = field(init=False, repr=False, compare=False, default="")
    _key_prefix: str = field(init=False, repr=False, compare=False, default="")

    def __post_init__(self) -> None:
        object.__setattr__(self, "_api_version", f"{self.group}/{self.version}" if self.group else self.version)
        object.__setattr__(self, "_key_prefix", f"{REGISTRY_PREFIX}{self.storage_resource or self.plural}/")

    @property
    def api_version(self) -> str:
        return self._api_version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def storage_key_resource(self) -> str:
        # built-ins live under their plural (/registry/deployments/...), as
        # upstream lays them out; custom resources set ``storage_resource`` to
        # "<group>/<plural>".
        return self.storage_resource or self.plural

    @property
    def key_prefix(self) -> str:
        """``/registry/pods/`` — every object of this resource lives under it."""
        return self._key_prefix

    def key(self, namespace: str, name: str) -> str:
        if self.namespaced:
            return f"{self._key_prefix}{namespace}/{name}"
        return f"{self._key_prefix}{name}"

    def namespace_prefix(self, namespace: str) -> str:
        return f"{self._key_prefix}{namespace}/" if self.namespaced and namespace else self._key_prefix

    def field_value(self, obj: Object, path: str) -> str | None:
        """The value of a fieldSelector field, or None if the kind has no such field."""
        meta = obj.get("metadata") or {}
        if path == "metadata.name":
            return meta.get("name", "")
        if path == "metadata.namespace":
            return meta.get("namespace", "") if self.namespaced else ""
        getter = self.field_getters.get(path)
        return getter(obj) if getter else None

    @property
    def schema_name(self) -> str | None:
        """The upstream OpenAPI definition of this kind (``io.k8s.api.core.v1.Pod``),
        or None when upstream has none (custom resources): what patching,
        field validation and managed fields walk."""
        name = self.openapi_name or upstream_schema.gvk_definition_name(self.group, self.version, self.kind)
        return name if name and upstream_schema.definition(name) is not None else None

    @property
    def qualified(self) -> str:
        """``pods`` or ``deployments.apps``, as upstream names it in messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


class Registry:
    """All served resources, by group/version/plural. Listeners are called
    with the definition whenever one is added or replaced."""

    def __init__(self) -> None:
        self._by_gvr: dict[tuple[str, str, str], ResourceDefinition] = {}
        self._listeners: list[Callable[[ResourceDefinition], None]] = []
        self._remove_listeners: list[Callable[[ResourceDefinition], None]] = []
        self.generation = 0

    def add(self, definition: ResourceDefinition) -> None:
        key = (definition.group, definition.version, definition.plural)
        self._by_gvr[key] = definition
        self.generation += 1
        for listener in list(self._listeners):
            listener(definition)

    def remove(self, group: str, version: str, plural: str) -> ResourceDefinition | None:
        """Stop serving a resource (a deleted CustomResourceDefinition);
        listeners of ``on_remove`` are told. Returns what was removed."""
        definition = self._by_gvr.pop((group, version, plural), None)
        if definition is None:
            return None
        self.generation += 1
        for listener in list(self._remove_listeners):
            listener(definition)
        return definition

    def on_remove(self, listener: Callable[[ResourceDefinition], None]) -> None:
        self._remove_listeners.append(listener)

    def on_change(self, listener: Callable[[ResourceDefinition], None]) -> None:
        self._listeners.append(listener)

    def get(self, group: str, version: str, plural: str) -> ResourceDefinition | None:
        return self._by_gvr.get((group, version, plural))

    def by_kind(self, group: str, version: str, kind: str) -> ResourceDefinition | None:
        for d in self._by_gvr.values():
            if d.group == group and d.version == version and d.kind == kind:
                return d
        return None

    def __iter__(self) -> Iterator[ResourceDefinition]:
        return iter(list(self._by_gvr.values()))

    def group_versions(self) -> dict[str, list[str]]:
        """group -> versions served, in registration order ("" is core)."""
        out: dict[str, list[str]] = {}
        for d in self._by_gvr.values():
            versions = out.setdefault(d.group, [])
            if d.version not in versions:
                versions.append(d.version)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceDefinition]:
        return [d for d in self._by_gvr.values() if d.group == group and d.version == version]
