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

The first read of an update is the watch cache's copy when the server wires
one in (``cached_read``), as upstream's GuaranteedUpdate starts from its
cached object: it saves a store read per write (pods/binding, status
updates, patches). It is only a guess: the write stays guarded on the
revision read, and a lost race, any refusal computed from the copy (a
precondition, a Conflict of the mutation, validation) and a no-op are
decided again on a fresh store read, so every outcome is the one the store's
state gives. Dry runs and converted views always read the store.
No-op updates (the same bytes) are not written: the object keeps its
resourceVersion and no watch event is produced, as upstream.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable, Protocol

import orjson

from k8py.api.errors import AlreadyExists, BadRequest, Conflict, NotFound, RequestEntityTooLarge, StatusError
from k8py.api.go_shape import fill_go_fields
from k8py.api.names import generate_name
from k8py.apiserver.store.admission_hook import AdmissionHook
from k8py.apiserver.store.field_managers import FieldManager
from k8py.apiserver.store.key_locks import KeyLocks
from k8py.apiserver.store.object_meta import (
    prepare_meta_for_create,
    raise_if_invalid,
    validate_meta,
)
from k8py.apiserver.registry import ResourceDefinition
from k8py.apiserver.store.update_attempt import Current, Mutation, Retry, attempt_update
from k8py.apiserver.store.stored_form import (
    check_type,
    decode_stored,
    dump_object,
    dump_object_async,
    encode_for_store,
    load_object,
    load_object_async,
)
from k8py.storage.encryption import StaleKeyValue
from k8py.storage import (
    KeyExistsError,
    Storage,
    ValueTooLargeError,
)

__all__ = ["ObjectStore", "decode_stored", "encode_for_store", "load_object", "dump_object",
           "load_object_async", "dump_object_async"]

Object = dict[str, Any]

_MAX_RETRIES = 16


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
        #: set by the server: the watch cache's copy of a key as (JSON with its
        #: resourceVersion, revision), or None; what an update tries first
        self.cached_read: Callable[[ResourceDefinition, str], tuple[bytes, int] | None] | None = None
        #: set by the server: told of each value about to be written, with the
        #: dict it was encoded from (the watch cache's shortcut; it must not keep the dict)
        self.note_stored: Callable[[ResourceDefinition, str, bytes, Object], None] | None = None
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
        check_type(definition, obj)
        name_given = bool((obj.get("metadata") or {}).get("name"))
        prepare_meta_for_create(definition, obj, namespace, now=self.clock())
        strategy = definition.strategy
        strategy.default(obj)
        strategy.prepare_for_create(obj)
        if admission is not None:
            obj = await admission.mutate(obj, None)
            check_type(definition, obj)
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
                value = await dump_object_async(definition, obj)
                if self.note_stored is not None:
                    self.note_stored(definition, key, value, obj)
                kv = await self.storage.create(key, value)
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
        check_type(definition, obj)
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

        replace.replaces_current = True  # type: ignore[attr-defined]  # see attempt_update

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
        from_cache = self.cached_read is not None and not dry_run and definition.converter is None
        for _ in range(_MAX_RETRIES):
            current = self._cached_current(definition, key) if from_cache else None
            if current is None:
                current = await self._stored_current(definition, key, name)
            try:
                return await attempt_update(
                    self.storage, definition, key, name, mutate, current, subresource=subresource, precondition_rv=precondition_rv,
                    dry_run=dry_run, apply_defaults=apply_defaults, manager=manager, admission=admission,
                    note_stored=self.note_stored)
            except Retry:
                from_cache = False  # a lost race (or an unsure no-op): decide on the stored state
            except StatusError:
                if not current.cached:
                    raise
                from_cache = False  # the cached copy may be behind: refuse only on the stored state
        raise Conflict.for_object(
            definition.plural, name, "too many concurrent updates; try again", definition.group
        )

    def _cached_current(self, definition: ResourceDefinition, key: str) -> Current | None:
        assert self.cached_read is not None
        found = self.cached_read(definition, key)
        if found is None:
            return None
        data, revision = found
        return Current(orjson.loads(data), data, None, revision, stale_key=False)

    async def _stored_current(self, definition: ResourceDefinition, key: str, name: str) -> Current:
        kv = await self.storage.get(key)
        if kv is None:
            raise NotFound.for_object(definition.plural, name, definition.group)
        old = await load_object_async(definition, kv)
        data = kv.value if definition.converter is None else orjson.dumps(old)
        return Current(old, data, kv.value, kv.mod_revision, stale_key=isinstance(kv, StaleKeyValue))
