"""One attempt of a guaranteed update: mutate, admit, validate, write guarded.

:class:`~k8py.apiserver.store.object_store.ObjectStore` runs
:func:`attempt_update` in its retry loop. An attempt starts from a
:class:`Current` (the store's value, or the watch cache's copy as a first
guess) and either returns the result or raises :class:`Retry` when it lost
a race (the guarded write found a newer revision) or cannot trust a cached
copy's no-op; the loop then reads the store and runs it again. Every other
outcome (Conflict, Invalid, Forbidden, ...) is raised as is; the loop
re-decides those too when they were computed from a cached copy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable

import orjson

from k8py.api.errors import BadRequest, Conflict, NotFound, RequestEntityTooLarge
from k8py.api.go_shape import fill_go_fields
from k8py.apiserver.registry import ResourceDefinition
from k8py.apiserver.store.admission_hook import AdmissionHook
from k8py.apiserver.store.field_managers import FieldManager
from k8py.apiserver.store.object_meta import carry_meta_for_update, parse_resource_version, raise_if_invalid, validate_meta
from k8py.apiserver.store.stored_form import check_type, dump_object_async, encode_for_store
from k8py.storage import KeyNotFoundError, RevisionConflictError, Storage, ValueTooLargeError

__all__ = ["Current", "Mutation", "Retry", "attempt_update"]

Object = dict[str, Any]
#: computes the new object from the current one (patch, status update, ...); it may change
#: the object it is given (its own copy), unless it carries ``replaces_current = True``: then
#: it ignores it (a PUT's body replaces the object), and is given the current object itself
Mutation = Callable[[Object], Object | Awaitable[Object]]


class Retry(Exception):
    """The attempt lost a race, or cannot tell a no-op from a cached copy: read the store."""


@dataclass(slots=True)
class Current:
    """The state one update attempt starts from: read from the store, or the
    watch cache's copy (``value`` None), which is only a first guess."""

    old: Object
    data: bytes  # old's JSON (a private copy for the mutation is decoded from it)
    value: bytes | None  # the stored value; None when the copy came from the watch cache
    revision: int
    stale_key: bool  # read with an old encryption key: rewrite even if unchanged

    @property
    def cached(self) -> bool:
        return self.value is None

    def fresh_copy(self) -> Object:
        obj = orjson.loads(self.data)
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.revision)
        return obj

    def unchanged(self, value: bytes) -> bool:
        """True if ``value`` is what is stored (no write due). From a cached
        copy a no-op is not trusted (the stored value may be encrypted with an
        old key, to be rewritten): the store is read and the attempt re-run."""
        if self.value is not None:
            return value == self.value and not self.stale_key
        # the copy's JSON is the stored value plus ',"resourceVersion":"N"' in
        # its metadata: a value of another length is a change (the common case,
        # decided without decoding); one of the same length is decoded to see
        if len(value) != len(self.data) - len(',"resourceVersion":""') - len(str(self.revision)):
            return False
        if value == encode_for_store(orjson.loads(self.data)):
            raise Retry()
        return False


async def attempt_update(
storage: Storage,
    definition: ResourceDefinition,
    key: str,
    name: str,
    mutate: Mutation,
    current: Current,
    *,
    subresource: str,
    precondition_rv: str,
    dry_run: bool,
    apply_defaults: bool,
    manager: FieldManager | None,
    admission: AdmissionHook | None,
    note_stored: Callable[[ResourceDefinition, str, bytes, Object], None] | None = None,
) -> Object:
    """One read-mutate-write on ``current``; raises :class:`Retry` on a lost race.
    ``note_stored`` is told of the value about to be written (see ObjectStore)."""
    strategy = definition.strategy
    old = current.old
    # a mutation that ignores what it is given (a PUT's replace says so) is not handed a
    # private copy of the current object: decoding one was a tenth of an update's cost
    new = mutate(current.old if getattr(mutate, "replaces_current", False) else current.fresh_copy())
    if not isinstance(new, dict):
        new = await new
    check_type(definition, new)
    new_meta = new.setdefault("metadata", {})
    rv = precondition_rv or new_meta.get("resourceVersion") or ""
    expected = parse_resource_version(rv)  # "0" is none; unparsable fails as upstream's versioner
    if expected and expected != current.revision:
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
        check_type(definition, new)
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
    if subresource != "binding":
        causes = validate_meta(definition, new)
        if subresource in ("", "status"):
            causes += strategy.validate_update(new, old)
        else:
            causes += strategy.validate_subresource_update(subresource, new, old)
        raise_if_invalid(definition, new, causes)
        fill_go_fields(definition.api_version, definition.kind, new)
    # else: pods/binding sets spec.nodeName (which the update rules forbid) and a
    # complete PodScheduled condition on a pod validated and shaped when it was
    # stored, and carries its metadata over: as upstream's binding REST, which
    # writes through the raw storage, it is not validated again (validating and
    # shaping the whole pod were a third of a bind's cost)
    if admission is not None:
        await admission.validate(new, old)
    value = await dump_object_async(definition, new)
    if current.unchanged(value):
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
            deleted = await storage.delete(key, expected_revision=current.revision)
        except RevisionConflictError:
            if precondition_rv:
                raise Conflict.modified(definition.plural, name, definition.group) from None
            raise Retry() from None  # re-read and re-mutate: a pin inside the mutation fails the check above
        except KeyNotFoundError:
            raise NotFound.for_object(definition.plural, name, definition.group) from None
        meta["resourceVersion"] = str(deleted.mod_revision)
        return new
    if dry_run:
        return new
    if note_stored is not None:
        note_stored(definition, key, value, new)  # no await since the encoding: ``new`` is what ``value`` holds
    try:
        written = await storage.update(key, value, expected_revision=current.revision)
    except RevisionConflictError:
        if precondition_rv:
            raise Conflict.modified(definition.plural, name, definition.group) from None
        raise Retry() from None  # re-read and re-mutate: a pin inside the mutation fails the check above
    except KeyNotFoundError:
        raise NotFound.for_object(definition.plural, name, definition.group) from None
    except ValueTooLargeError as err:
        raise RequestEntityTooLarge(f"the object is too large to store: {err}") from None
    meta["resourceVersion"] = str(written.mod_revision)
    return new

