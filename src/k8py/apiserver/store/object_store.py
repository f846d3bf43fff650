"""The generic object store: create, read, update for any registered resource.

Upstream's ``registry/generic/registry.Store``: the one code path every kind
takes between an HTTP handler and the revisioned store. Kind-specific
behaviour comes only from the definition's :class:`Strategy`.

Stored values are the object's JSON *without* ``metadata.resourceVersion``:
the store's ``mod_revision`` is the resourceVersion, stamped on read, so a
value never disagrees with its own revision.

Updates are optimistic: read, compute, write guarded on the revision read.
A conflict is retried when the client gave no resourceVersion (an
unconditional update or a patch), and reported as 409 when it did.
No-op updates (the same bytes) are not written: the object keeps its
resourceVersion and no watch event is produced, as upstream.
"""

from __future__ import annotations

import asyncio

import time
from typing import Any, Awaitable, Callable, Protocol

import orjson

from k8py.api.errors import AlreadyExists, BadRequest, Conflict, NotFound, RequestEntityTooLarge
from k8py.api.go_shape import fill_go_fields
from k8py.api.names import generate_name
from k8py.apiserver.store.admission_hook import AdmissionHook
from k8py.apiserver.store.field_managers import FieldManager
from k8py.apiserver.store.key_locks import KeyLocks
from k8py.apiserver.store.object_meta import (
    carry_meta_for_update,
    parse_resource_version,
    prepare_meta_for_create,
    raise_if_invalid,
    validate_meta,
)
from k8py.apiserver.registry import ResourceDefinition, to_served, to_stored
from k8py.storage.encryption import StaleKeyValue
from k8py.storage import (
    KeyExistsError,
    KeyNotFoundError,
    KeyValue,
    RevisionConflictError,
    Storage,
    ValueTooLargeError,
)

__all__ = ["ObjectStore", "decode_stored", "encode_for_store", "load_object", "dump_object",
           "load_object_async", "dump_object_async"]

Object = dict[str, Any]
#: computes the new object from the current one (patch, status update, ...)
Mutation = Callable[[Object], Object | Awaitable[Object]]

_MAX_RETRIES = 16


def decode_stored(kv: KeyValue) -> Object:
    obj = orjson.loads(kv.value)
    obj.setdefault("metadata", {})["resourceVersion"] = str(kv.mod_revision)
    return obj


def encode_for_store(obj: Object) -> bytes:
    meta = obj.get("metadata") or {}
    rv = meta.pop("resourceVersion", None)
    try:
        return orjson.dumps(obj)
    finally:
        if rv is not None:
            meta["resourceVersion"] = rv


def load_object(definition: ResourceDefinition, kv: KeyValue) -> Object:
    """The stored object as ``definition`` serves it (converted for a view)."""
    obj = decode_stored(kv)
    if definition.converter is not None:
        obj = definition.converter.from_storage(obj)
    return obj


def dump_object(definition: ResourceDefinition, obj: Object) -> bytes:
    """The bytes to store for ``obj`` (converted to the stored form for a view)."""
    if definition.converter is not None:
        return encode_for_store(definition.converter.to_storage(obj))
    return encode_for_store(obj)


async def load_object_async(definition: ResourceDefinition, kv: KeyValue) -> Object:
    """:func:`load_object` for any converter, one that does I/O (a CRD's
    conversion webhook) too: what the request path uses."""
    if definition.converter is None:
        return decode_stored(kv)
    return (await to_served(definition, [decode_stored(kv)]))[0]


async def dump_object_async(definition: ResourceDefinition, obj: Object) -> bytes:
    """:func:`dump_object` for any converter (see :func:`load_object_async`)."""
    if definition.converter is None:
        return encode_for_store(obj)
    return encode_for_store((await to_stored(definition, [obj]))[0])


class UpdateAllocator(Protocol):
    """Allocations an update may need (a Service turned NodePort needs node ports).

    ``allocate_update`` fills ``new`` in place (claims in the store); after the
    update, ``release_unused(old, new, stored)`` frees what ``new`` claimed and
    ``stored`` does not hold (``stored`` None: the update failed), and what
    ``old`` held that ``stored`` dropped."""

    def applies(self, definition: ResourceDefinition) -> bool: ...

    async def allocate_update(self, definition: ResourceDefinition, old: Object, new: Object, *, dry_run: bool) -> None: ...

    async def release_unused(self, old: Object, new: Object, stored: Object | None) -> None: ...


class ObjectStore:
    def __init__(self, storage: Storage, *, clock: Callable[[], float] = time.time) -> None:
        self.storage = storage
        self.clock = clock
        #: internal mutations of new objects that are not admission plugins, after the
        #: request's mutating admission and before validation (admission itself comes
        #: in per request, as an :class:`AdmissionHook`)
        self.admit_new: list[Callable[[ResourceDefinition, Object], None]] = []
        #: set by the server: allocations for new objects made in the store
        #: (cluster IPs, node ports), after ``admit_new``; each returns a
        #: rollback (or None) that is awaited if the object is then not stored
        self.allocate_new: list[Callable[..., Awaitable[Callable[[], Awaitable[None]] | None]]] = []
        #: set by the server: the same for updates (:class:`UpdateAllocator`)
        self.allocate_update: list[UpdateAllocator] = []
        #: read-modify-writes of one object queue up here instead of racing
        self._update_locks = KeyLocks()

    # -- create -------------------------------------------------------------

    async def create(
        self,
        definition: ResourceDefinition,
        namespace: str,
        obj: Object,
        *,
        dry_run: bool = False,
        manager: FieldManager | None = None,
        admission: AdmissionHook | None = None,
    ) -> Object:
        self._check_type(definition, obj)
        name_given = bool((obj.get("metadata") or {}).get("name"))
        prepare_meta_for_create(definition, obj, namespace, now=self.clock())
        strategy = definition.strategy
        strategy.default(obj)
        strategy.prepare_for_create(obj)
        if admission is not None:
            obj = await admission.mutate(obj, None)
            self._check_type(definition, obj)
        for admit in self.admit_new:
            admit(definition, obj)
        rollbacks = []
        try:
            for allocate in self.allocate_new:
                rollback = await allocate(definition, obj, dry_run=dry_run)
                if rollback is not None:
                    rollbacks.append(rollback)
            stored = await self._validate_and_store(definition, obj, dry_run=dry_run, manager=manager,
                                                    name_given=name_given, admission=admission)
        except BaseException:
            if admission is not None:
                await admission.abort()
            for rollback in rollbacks:
                await asyncio.shield(rollback())
            raise
        if dry_run:
            for rollback in rollbacks:
                await rollback()
        return stored

    async def _validate_and_store(self, definition: ResourceDefinition, obj: Object, *, dry_run: bool,
                                  manager: FieldManager | None, name_given: bool,
                                  admission: AdmissionHook | None) -> Object:
        strategy = definition.strategy
        if manager is not None:
            obj = manager.record(definition, None, obj)
        raise_if_invalid(definition, obj, validate_meta(definition, obj) + strategy.validate(obj))
        fill_go_fields(definition.api_version, definition.kind, obj)  # stored and served in upstream's shape
        meta = obj["metadata"]
        if admission is not None:
            await admission.validate(obj, None)
        if dry_run:
            return obj
        generated = not name_given and bool(meta.get("generateName"))
        for _ in range(8):
            key = definition.key(meta.get("namespace", ""), meta["name"])
            try:
                kv = await self.storage.create(key, await dump_object_async(definition, obj))
            except KeyExistsError:
                if generated and meta.get("generateName") and meta["name"].startswith(meta["generateName"]):
                    meta["name"] = generate_name(meta["generateName"])
                    continue
                raise AlreadyExists.for_object(definition.plural, meta["name"], definition.group) from None
            except ValueTooLargeError as err:
                raise RequestEntityTooLarge(f"the object is too large to store: {err}") from None
            meta["resourceVersion"] = str(kv.mod_revision)
            return obj
        raise AlreadyExists.for_object(definition.plural, meta["name"], definition.group)

    # -- read ---------------------------------------------------------------

    async def get(self, definition: ResourceDefinition, namespace: str, name: str) -> Object:
        kv = await self.storage.get(definition.key(namespace, name))
        if kv is None:
            raise NotFound.for_object(definition.plural, name, definition.group)
        return await load_object_async(definition, kv)

    # -- update -------------------------------------------------------------

    async def update(
        self,
        definition: ResourceDefinition,
        namespace: str,
        name: str,
        obj: Object,
        *,
        subresource: str = "",
        dry_run: bool = False,
        manager: FieldManager | None = None,
        admission: AdmissionHook | None = None,
    ) -> tuple[Object, bool]:
        """PUT. Returns (object, created)."""
        self._check_type(definition, obj)
        meta = obj.get("metadata") or {}
        if meta.get("name") and meta["name"] != name:
            raise BadRequest(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
            )
        if definition.namespaced and meta.get("namespace") and namespace and meta["namespace"] != namespace:
            raise BadRequest(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        precondition = meta.get("resourceVersion") or ""

        def replace(_current: Object) -> Object:
            return orjson.loads(orjson.dumps(obj))

        try:
            result = await self.guaranteed_update(
                definition,
                namespace,
                name,
                replace,
                subresource=subresource,
                precondition_rv=precondition,
                dry_run=dry_run,
                manager=manager,
                admission=admission,
            )
            return result, False
        except NotFound:
            if not definition.strategy.allow_create_on_update or subresource:
                raise
            if precondition:
                raise
            obj.setdefault("metadata", {})["name"] = name
            creating = None if admission is None else admission.for_create()
            return await self.create(definition, namespace, obj, dry_run=dry_run, manager=manager, admission=creating), True

    async def guaranteed_update(
        self,
        definition: ResourceDefinition,
        namespace: str,
        name: str,
        mutate: Mutation,
        *,
        subresource: str = "",
        precondition_rv: str = "",
        dry_run: bool = False,
        apply_defaults: bool = True,
        manager: FieldManager | None = None,
        admission: AdmissionHook | None = None,
    ) -> Object:
        """Read, mutate, validate, write guarded on the revision read; retry on
        conflict unless the client pinned a resourceVersion.

        A mutation's result inherits the resourceVersion of the object it was
        given, so that alone is no pin: on a lost race the object is read again
        and the mutation re-run, and only a version the request itself carried
        (``precondition_rv``, or one a patch body sets, which then differs from
        the fresh read) becomes a Conflict, as upstream's GuaranteedUpdate does.

        ``admission`` is run inside, on each attempt, against the object read
        (see :mod:`~k8py.apiserver.store.admission_hook`)."""
        if admission is not None:
            try:
                return await self._guaranteed_update_hooked(
                    definition, namespace, name, mutate, subresource=subresource, precondition_rv=precondition_rv,
                    dry_run=dry_run, apply_defaults=apply_defaults, manager=manager, admission=admission)
            except BaseException:
                await admission.abort()
                raise
        return await self._guaranteed_update_hooked(
            definition, namespace, name, mutate, subresource=subresource, precondition_rv=precondition_rv,
            dry_run=dry_run, apply_defaults=apply_defaults, manager=manager, admission=None)

    async def _guaranteed_update_hooked(
        self,
        definition: ResourceDefinition,
        namespace: str,
        name: str,
        mutate: Mutation,
        *,
        subresource: str,
        precondition_rv: str,
        dry_run: bool,
        apply_defaults: bool,
        manager: FieldManager | None,
        admission: AdmissionHook | None,
    ) -> Object:
        key = definition.key(namespace, name)
        hooks = [] if subresource else [h for h in self.allocate_update if h.applies(definition)]
        if not hooks:
            async with self._update_locks.hold(key):
                return await self._guaranteed_update(
                    definition, key, name, mutate, subresource=subresource, precondition_rv=precondition_rv,
                    dry_run=dry_run, apply_defaults=apply_defaults, manager=manager, admission=admission,
                )
        seen: list[tuple[Object, Object]] = []

        async def allocating(current: Object) -> Object:
            old = orjson.loads(orjson.dumps(current))
            new = mutate(current)
            if not isinstance(new, dict):
                new = await new
            for hook in hooks:
                await hook.allocate_update(definition, old, new, dry_run=dry_run)
            seen.append((old, new))
            return new

        try:
            async with self._update_locks.hold(key):
                result = await self._guaranteed_update(
                    definition, key, name, allocating, subresource=subresource, precondition_rv=precondition_rv,
                    dry_run=dry_run, apply_defaults=apply_defaults, manager=manager, admission=admission,
                )
        except BaseException:
            for hook in hooks:
                for old, new in seen:
                    await asyncio.shield(hook.release_unused(old, new, None))
            raise
        for hook in hooks:
            for old, new in seen:
                await hook.release_unused(old, new, None if dry_run else result)
        return result

    async def _guaranteed_update(
        self,
        definition: ResourceDefinition,
        key: str,
        name: str,
        mutate: Mutation,
        *,
        subresource: str,
        precondition_rv: str,
        dry_run: bool,
        apply_defaults: bool,
        manager: FieldManager | None,
        admission: AdmissionHook | None,
    ) -> Object:
        strategy = definition.strategy
        for _ in range(_MAX_RETRIES):
            kv = await self.storage.get(key)
            if kv is None:
                raise NotFound.for_object(definition.plural, name, definition.group)
            old = await load_object_async(definition, kv)
            new = mutate(orjson.loads(orjson.dumps(old)))
            if not isinstance(new, dict):
                new = await new
            self._check_type(definition, new)
            new_meta = new.setdefault("metadata", {})
            rv = precondition_rv or new_meta.get("resourceVersion") or ""
            expected = parse_resource_version(rv)  # "0" is none; unparsable fails as upstream's versioner
            if expected and expected != kv.mod_revision:
                raise Conflict.modified(definition.plural, name, definition.group)
            if new_meta.get("uid") and new_meta["uid"] != old["metadata"].get("uid"):
                raise Conflict.for_object(
                    definition.plural,
                    name,
                    f"Precondition failed: UID in precondition: {new_meta['uid']}, "
                    f"UID in object meta: {old['metadata'].get('uid', '')}",
                    definition.group,
                )
            if new_meta.get("name") and new_meta["name"] != name:
                raise BadRequest(
                    f"the name of the object ({new_meta['name']}) does not match the name on the URL ({name})"
                )
            new_meta["name"] = name
            carry_meta_for_update(definition, new, old)
            defaulted = False
            if admission is not None:
                if apply_defaults and not subresource:
                    strategy.default(new)  # mutating admission sees the defaulted object, as upstream
                    defaulted = True
                new = await admission.mutate(new, old)
                self._check_type(definition, new)
                new.setdefault("metadata", {})["name"] = name
                carry_meta_for_update(definition, new, old)
            if subresource == "status":
                strategy.prepare_for_status_update(new, old)
            elif subresource:
                # internal writers (pods/binding) own both spec and status; others
                # (pods/ephemeralcontainers) are narrowed by the strategy
                strategy.prepare_for_subresource_update(subresource, new, old)
            else:
                if apply_defaults and not defaulted:
                    strategy.default(new)
                strategy.prepare_for_update(new, old)
                if strategy.tracks_generation and strategy.spec_changed(new, old):
                    new["metadata"]["generation"] = int(old["metadata"].get("generation") or 1) + 1
            if manager is not None:
                new = manager.record(definition, old, new, subresource)
            causes = validate_meta(definition, new)
            if subresource in ("", "status"):
                # internal writers (pods/binding) change what the update rules
                # forbid (spec.nodeName), as upstream's binding REST does
                causes += strategy.validate_update(new, old)
            else:
                causes += strategy.validate_subresource_update(subresource, new, old)
            raise_if_invalid(definition, new, causes)
            fill_go_fields(definition.api_version, definition.kind, new)
            if admission is not None:
                await admission.validate(new, old)
            value = await dump_object_async(definition, new)
            if value == kv.value and not isinstance(kv, StaleKeyValue):
                # nothing changed: no write, no event, same resourceVersion (a value read with an
                # old encryption key is rewritten: that is how keys are rotated)
                return old
            meta = new["metadata"]
            if (
                meta.get("deletionTimestamp")
                and old["metadata"].get("finalizers")
                and not meta.get("finalizers")
                and not meta.get("deletionGracePeriodSeconds")
            ):
                # the last finalizer of an object being deleted is gone: delete it now
                if dry_run:
                    return new
                try:
                    deleted = await self.storage.delete(key, expected_revision=kv.mod_revision)
                except RevisionConflictError:
                    if precondition_rv:
                        raise Conflict.modified(definition.plural, name, definition.group) from None
                    continue  # re-read and re-mutate: a pin inside the mutation fails the check above
                except KeyNotFoundError:
                    raise NotFound.for_object(definition.plural, name, definition.group) from None
                meta["resourceVersion"] = str(deleted.mod_revision)
                return new
            if dry_run:
                return new
            try:
                written = await self.storage.update(key, value, expected_revision=kv.mod_revision)
            except RevisionConflictError:
                if precondition_rv:
                    raise Conflict.modified(definition.plural, name, definition.group) from None
                continue  # re-read and re-mutate: a pin inside the mutation fails the check above
            except KeyNotFoundError:
                raise NotFound.for_object(definition.plural, name, definition.group) from None
            except ValueTooLargeError as err:
                raise RequestEntityTooLarge(f"the object is too large to store: {err}") from None
            meta["resourceVersion"] = str(written.mod_revision)
            return new
        raise Conflict.for_object(
            definition.plural, name, "too many concurrent updates; try again", definition.group
        )

    # -- helpers ------------------------------------------------------------

    @staticmethod
    def _check_type(definition: ResourceDefinition, obj: Object) -> None:
        if not isinstance(obj, dict):
            raise BadRequest("the body of the request must be a JSON object")
        kind = obj.get("kind")
        api_version = obj.get("apiVersion")
        if kind and kind != definition.kind:
            raise BadRequest(
                f"the kind of the object ({kind}) does not match the kind of the URL ({definition.kind})"
            )
        if api_version and api_version != definition.api_version:
            raise BadRequest(
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({definition.api_version})"
            )
        if list(obj)[:2] != ["kind", "apiVersion"]:  # upstream's field order: kind, apiVersion first
            rest = [(k, v) for k, v in obj.items() if k not in ("kind", "apiVersion")]
            obj.clear()
            obj["kind"] = definition.kind
            obj["apiVersion"] = definition.api_version
            obj.update(rest)
        else:
            obj["kind"] = definition.kind
            obj["apiVersion"] = definition.api_version

