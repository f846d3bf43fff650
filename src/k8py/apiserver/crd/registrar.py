"""Serving CustomResourceDefinitions: from a stored CRD to a served resource.

:class:`CRDRegistrar` follows the CRD keys in the store (its own watch, so
every API server in front of one store serves the same CRDs) and, for each
change:

1. decides which names are accepted (a plural or kind another CRD of the
   group already holds is a conflict, as upstream's naming controller says);
2. registers a definition per served version in the :class:`Registry`
   (discovery, OpenAPI and the watch cache follow the registry), removes
   versions no longer served, and waits until the new caches are loaded;
3. writes the CRD's ``status`` (``acceptedNames``, ``storedVersions``, the
   ``NamesAccepted`` and ``Established`` conditions) when it differs;
4. for a CRD being deleted (the cleanup finalizer set by its DELETE): deletes
   every custom object, then removes the finalizer, and once the CRD is gone
   stops serving its resource.

Invariants: ``Established`` is written only after the resource is in the
registry with a loaded cache, so a client that waits for it can use the
resource at once; the registrar never writes a status equal to the stored one
(several API servers agree without ping-pong).
"""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import Any

from k8py.api.errors import Conflict, NotFound, StatusError
from k8py.apiserver.crd.custom import definitions_for
from k8py.apiserver.crd.definition import CLEANUP_FINALIZER, CRD_DEFINITION
from k8py.apiserver.handlers.deletion import DeleteOptions, delete_object
from k8py.apiserver.registry import Registry, ResourceDefinition
from k8py.apiserver.store.object_meta import rfc3339
from k8py.apiserver.store.object_store import ObjectStore, decode_stored, load_object
from k8py.apiserver.watch.cacher import Cacher
from k8py.apiserver.webhooks.client import WebhookClient
from k8py.apiserver.webhooks.service_resolver import ServiceResolver
from k8py.storage import Storage
from k8py.storage.interface import CompactedError, EventType, StorageError, WatchLaggedError

__all__ = ["CRDRegistrar"]

log = logging.getLogger(__name__)

Object = dict[str, Any]

#: seconds between passes over a deleted CRD's objects still held by finalizers
CLEANUP_RETRY = 0.5


class CRDRegistrar:
    def __init__(self, registry: Registry, storage: Storage, store: ObjectStore, cacher: Cacher) -> None:
        self.registry = registry
        self.storage = storage
        self.store = store
        self.cacher = cacher
        #: CRD name -> the CRD as last seen
        self.crds: dict[str, Object] = {}
        #: CRD name -> the (group, version, plural) it registered
        self._served: dict[str, set[tuple[str, str, str]]] = {}
        self._task: asyncio.Task[None] | None = None
        self._cleanups: dict[str, asyncio.Task[None]] = {}
        self._lock = asyncio.Lock()
        #: calls the conversion webhooks of CRDs whose strategy is Webhook
        self.conversion_client = WebhookClient(ServiceResolver(registry, cacher))

    async def start(self) -> None:
        """Serve every stored CRD, then follow changes."""
        result = await self.storage.list(CRD_DEFINITION.key_prefix)
        for kv in result.kvs:
            await self._changed(load_object(CRD_DEFINITION, kv))
        self._task = asyncio.create_task(self._run(result.revision), name="crd-registrar")

    async def close(self) -> None:
        tasks = [t for t in [self._task, *self._cleanups.values()] if t is not None]
        self._task = None
        self._cleanups.clear()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        await self.conversion_client.close()

    async def _run(self, revision: int) -> None:
        while True:
            try:
                async for batch in self.storage.watch(CRD_DEFINITION.key_prefix, after=revision):
                    for event in batch.events:
                        if event.type is EventType.DELETE:
                            await self._deleted(decode_stored(event.kv))
                        else:
                            await self._changed(load_object(CRD_DEFINITION, event.kv))
                    revision = max(revision, batch.revision)
                return
            except asyncio.CancelledError:
                raise
            except WatchLaggedError as err:
                revision = err.revision  # delivered up to there: go on
                continue
            except (CompactedError, StorageError) as err:
                log.warning("CRD watch failed; relisting", extra={"error": str(err)})
            except Exception:  # a bug must not stop serving CRDs for good
                log.exception("CRD registrar crashed; relisting")
            await asyncio.sleep(0.5)
            result = await self.storage.list(CRD_DEFINITION.key_prefix)
            present = set()
            for kv in result.kvs:
                crd = load_object(CRD_DEFINITION, kv)
                present.add(crd["metadata"]["name"])
                await self._changed(crd)
            for name in set(self.crds) - present:
                await self._deleted(self.crds[name])
            revision = result.revision

    # -- one CRD ---------------------------------------------------------------

    def _accepted_names(self, crd: Object) -> tuple[Object, str, str]:
        """(acceptedNames, reason, message) for ``crd`` against the other CRDs of its group."""
        spec = crd["spec"]
        names = spec["names"]
        name = crd["metadata"]["name"]
        for other_name, other in self.crds.items():
            if other_name == name or other["spec"].get("group") != spec["group"]:
                continue
            accepted = (other.get("status") or {}).get("acceptedNames") or {}
            if accepted.get("plural") == names["plural"]:
                return {}, "PluralConflict", f'"{names["plural"]}" is already in use'
            if accepted.get("kind") == names["kind"]:
                return {}, "KindConflict", f'"{names["kind"]}" is already in use'
        accepted = {k: copy.deepcopy(v) for k, v in names.items() if v not in (None, "", [])}
        return accepted, "NoConflicts", "no conflicts found"

    async def _changed(self, crd: Object) -> None:
        async with self._lock:
            name = crd["metadata"]["name"]
            self.crds[name] = crd
            accepted, reason, message = self._accepted_names(crd)
            wanted: list[ResourceDefinition] = definitions_for(crd, self.conversion_client) if accepted else []
            keys = {(d.group, d.version, d.plural) for d in wanted}
            for key in self._served.get(name, set()) - keys:
                self.registry.remove(*key)
            for definition in wanted:
                self.registry.add(definition)
            self._served[name] = keys
        for definition in wanted:
            await self.cacher.loaded(definition)
        await self._write_status(crd, accepted, reason, message)
        meta = crd["metadata"]
        if meta.get("deletionTimestamp") and CLEANUP_FINALIZER in (meta.get("finalizers") or []):
            if name not in self._cleanups:
                self._cleanups[name] = asyncio.create_task(self._cleanup(crd), name=f"crd-cleanup-{name}")

    async def _deleted(self, crd: Object) -> None:
        async with self._lock:
            name = crd["metadata"]["name"]
            self.crds.pop(name, None)
            for key in self._served.pop(name, set()):
                self.registry.remove(*key)
        log.info("stopped serving a deleted CustomResourceDefinition", extra={"crd": name})

    async def _write_status(self, crd: Object, accepted: Object, reason: str, message: str) -> None:
        if crd["metadata"].get("deletionTimestamp"):
            return  # terminating: only the Terminating condition changes now
        names_ok = bool(accepted)
        wanted = {
            "NamesAccepted": ("True" if names_ok else "False", reason, message),
            "Established": ("True", "InitialNamesAccepted", "the initial names have been accepted") if names_ok
            else ("False", "NotAccepted", "not all names are accepted"),
        }
        storage_versions = [v["name"] for v in crd["spec"].get("versions") or [] if v.get("storage")]

        def mutate(current: Object) -> Object:
            status = copy.deepcopy(current.get("status") or {})
            conditions = [c for c in status.get("conditions") or [] if c.get("type") not in wanted]
            old = {c.get("type"): c for c in status.get("conditions") or []}
            for ctype, (value, why, text) in wanted.items():
                prior = old.get(ctype) or {}
                since = prior.get("lastTransitionTime") if prior.get("status") == value else None
                conditions.append({"type": ctype, "status": value, "lastTransitionTime": since or rfc3339(),
                                   "reason": why, "message": text})
            order = {"NamesAccepted": 0, "Established": 1}
            conditions.sort(key=lambda c: order.get(c["type"], 2))
            status["conditions"] = conditions
            status["acceptedNames"] = accepted or status.get("acceptedNames") or {"kind": "", "plural": ""}
            stored = list(status.get("storedVersions") or [])
            for v in storage_versions:
                if names_ok and v not in stored:
                    stored.append(v)
            status["storedVersions"] = stored
            return {**current, "status": status}

        try:
            await self.store.guaranteed_update(CRD_DEFINITION, "", crd["metadata"]["name"], mutate, subresource="status")
        except NotFound:
            pass  # deleted meanwhile
        except StatusError as err:
            log.warning("could not write a CRD's status", extra={"crd": crd["metadata"]["name"], "error": str(err)})

    async def _cleanup(self, crd: Object) -> None:
        """Delete every object of a deleted CRD, then let the CRD go."""
        name = crd["metadata"]["name"]
        try:
            definitions = definitions_for(crd)
            if definitions:
                definition = definitions[0]
                while True:
                    result = await self.storage.list(definition.key_prefix)
                    if not result.kvs:
                        break
                    for kv in result.kvs:
                        obj = decode_stored(kv)
                        meta = obj.get("metadata") or {}
                        if meta.get("deletionTimestamp"):
                            continue  # already going; its finalizers hold it
                        try:
                            await delete_object(self.store, definition, meta.get("namespace", ""), meta["name"],
                                                DeleteOptions())
                        except (NotFound, Conflict):
                            pass
                    await asyncio.sleep(CLEANUP_RETRY)

            def drop_finalizer(current: Object) -> Object:
                new = copy.deepcopy(current)
                new["metadata"]["finalizers"] = [f for f in new["metadata"].get("finalizers") or []
                                                 if f != CLEANUP_FINALIZER]
                return new

            await self.store.guaranteed_update(CRD_DEFINITION, "", name, drop_finalizer)
        except NotFound:
            pass
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("deleting a CRD's objects failed", extra={"crd": name})
        finally:
            self._cleanups.pop(name, None)
