"""The status manager: the source of truth for what the API server should be told.

Pod workers hand it each pod's freshly computed status (``set_status``);
it keeps only the newest per pod and one writer task sends them:

- **only changes**: a status equal to the last one written is not sent;
  what is sent is a JSON merge patch from the last written status to the
  new one (lists replaced, removed keys nulled), on ``pods/status``;
- **batched**: a burst of updates to one pod becomes one write; many pods
  are written concurrently, at most ``concurrency`` at a time;
- **never stale**: each pod's status carries a version that only grows; a
  write in flight when a newer status arrives is followed by another, and
  an older one is never sent after a newer one.

It also finishes deletions, as upstream's does: once a pod with a
``deletionTimestamp`` is terminated on this node (``terminated``) and its
final status is written, it deletes the pod with grace period 0 and a UID
precondition. With ``final_status_when_deleted=False`` (the simulated nodes,
as kwok) a pod being deleted that has no finalizers is deleted at once,
without its final status: once the delete with grace 0 is through the pod is
gone, and the status would be written only for its DELETED event — at
10,000 pods deleted, 10,000 writes and as many watch events to every pod
watcher for nothing. A pod with finalizers stays after the delete, so whoever
holds them (the Job controller's tracking finalizer counts phases) gets its
final status first, as on a real node.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Mapping

from k8py.api.errors import Conflict, NotFound, StatusError
from k8py.client.resources import PODS
from k8py.client.rest import PatchType, RestClient

__all__ = ["StatusManager", "merge_diff"]

logger = logging.getLogger(__name__)


def merge_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch turning ``old`` into ``new``."""
    patch: dict[str, Any] = {}
    for key in old:
        if key not in new:
            patch[key] = None
    for key, value in new.items():
        before = old.get(key, _MISSING)
        if isinstance(value, dict) and isinstance(before, dict):
            sub = merge_diff(before, value)
            if sub:
                patch[key] = sub
        elif before != value:
            patch[key] = value
    return patch


_MISSING = object()


@dataclass
class _Entry:
    namespace: str
    name: str
    status: dict[str, Any]
    version: int
    sent: dict[str, Any]
    sent_version: int = 0
    delete_when_done: bool = False
    deleted: bool = False
    #: being deleted, no finalizers, and the manager does not write a deleted pod's final status
    skip_final_status: bool = False


class StatusManager:
    def __init__(self, client: RestClient, *, concurrency: int = 16, final_status_when_deleted: bool = True) -> None:
        self.client = client
        self.final_status_when_deleted = final_status_when_deleted
        self._entries: dict[str, _Entry] = {}
        self._dirty: set[str] = set()
        self._wake = asyncio.Event()
        self._limit = asyncio.Semaphore(concurrency)
        self._inflight: set[str] = set()
        self.writes = 0

    def set_status(self, pod: Mapping[str, Any], status: dict[str, Any]) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        e = self._entries.get(uid)
        if e is None:
            e = self._entries[uid] = _Entry(meta.get("namespace", "default"), meta["name"], status, 1, dict(pod.get("status") or {}))
        elif e.status == status:
            return
        else:
            e.status = status
            e.version += 1
        if e.status != e.sent:
            self._mark(uid)

    def status(self, uid: str) -> dict[str, Any] | None:
        e = self._entries.get(uid)
        return e.status if e else None

    def terminated(self, pod: Mapping[str, Any]) -> None:
        """The pod is stopped on this node: delete it once its status is written (if it is being deleted)."""
        e = self._entries.get(pod["metadata"]["uid"])
        if e is not None and pod["metadata"].get("deletionTimestamp") and not e.deleted:
            e.delete_when_done = True
            e.skip_final_status = not self.final_status_when_deleted and not pod["metadata"].get("finalizers")
            self._mark(pod["metadata"]["uid"])

    def forget(self, uid: str) -> None:
        self._entries.pop(uid, None)
        self._dirty.discard(uid)

    def synced(self, uid: str) -> bool:
        e = self._entries.get(uid)
        return e is None or (e.sent_version == e.version and uid not in self._dirty and uid not in self._inflight)

    def _mark(self, uid: str) -> None:
        self._dirty.add(uid)
        self._wake.set()

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            while True:
                await self._wake.wait()
                self._wake.clear()
                for uid in list(self._dirty):
                    if uid in self._inflight:
                        continue  # the write in flight re-marks it if a newer status came
                    self._dirty.discard(uid)
                    self._inflight.add(uid)
                    tg.create_task(self._write(uid), name=f"pod-status-{uid[:8]}")

    async def _write(self, uid: str) -> None:
        try:
            async with self._limit:
                e = self._entries.get(uid)
                if e is None:
                    return
                version, status = e.version, e.status
                if e.skip_final_status and e.delete_when_done and not e.deleted:
                    e.sent_version = version
                    await self._delete(uid, e)
                    return
                if status != e.sent:
                    patch = merge_diff(e.sent, status)
                    try:
                        await self.client.patch(PODS, e.namespace, e.name, {"status": patch},
                                                patch_type=PatchType.MERGE, subresource="status")
                        self.writes += 1
                    except NotFound:
                        self.forget(uid)
                        return
                    except StatusError as err:
                        logger.warning("pod status write failed", extra={"pod": f"{e.namespace}/{e.name}", "error": str(err)})
                        await asyncio.sleep(1.0)
                        self._mark(uid)
                        return
                    e.sent = status
                    e.sent_version = version
                else:
                    e.sent_version = version
                if e.delete_when_done and e.version == version and not e.deleted:
                    await self._delete(uid, e)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # transport failures: try again shortly
            logger.warning("pod status write failed", extra={"uid": uid, "error": str(err)})
            await asyncio.sleep(1.0)
            self._mark(uid)
        finally:
            self._inflight.discard(uid)
            e2 = self._entries.get(uid)
            if e2 is not None and e2.version != e2.sent_version:
                self._mark(uid)  # a newer status arrived while this write was in flight

    async def _delete(self, uid: str, e: _Entry) -> None:
        try:
            await self.client.request_json(
                "DELETE", PODS.path(e.namespace, e.name),
                body={"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0, "preconditions": {"uid": uid}})
        except (NotFound, Conflict):
            pass
        e.deleted = True
        logger.info("pod deleted after termination", extra={"pod": f"{e.namespace}/{e.name}"})
