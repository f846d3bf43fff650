"""The ReplicaSet controller (and, with another :class:`ReplicaSetKind`, the
ReplicationController manager): keep ``spec.replicas`` pods matching the
selector.

One ``sync(key)`` of ``namespace/name``, as upstream's ``syncReplicaSet``:

1. read the ReplicaSet from the cache (gone: forget its expectations);
2. claim the active pods of its namespace (adopt matching orphans, release
   owned pods that stopped matching; :mod:`controller_ref_manager`);
3. only if its *expectations* allow it and it is not being deleted, manage
   replicas: create the missing pods in slow-start batches (1, 2, 4, ...), at
   most :data:`BURST_REPLICAS` per sync, or delete the surplus, least
   valuable first (:mod:`pod_ranking`). Deletions wait, as upstream, until
   every create and delete asked for has been seen in the pod cache. Creates
   need less: the pods the server has acknowledged creating and the cache
   has not shown yet are counted beside the cache
   (:meth:`~k8py.controllers.expectations.UIDTrackingExpectations.creations_in_flight`),
   so the next 500 start as soon as the last sync ends instead of after the
   watch has delivered all of the previous 500 (upstream drains the API
   server to idle there, every 500 pods); a sync that still has creates to
   do queues itself again at once. Unlike upstream, which starts again
   from 1 on every sync, the next sync of the same ReplicaSet starts from the
   biggest batch that fully succeeded: its template is known to work, and a
   scale-up of thousands of pods is then not paced by a dozen round trips
   per 500 pods. Any failed create resets it to 1 (so a template that starts
   failing still fails fast);
4. write ``status`` (replicas, fullyLabeledReplicas, readyReplicas,
   availableReplicas, observedGeneration, the ReplicaFailure condition) when
   it changed; a burst of a scale-up that has more creates to come writes it
   while its creates run, not after them (it is computed from the pods at
   the sync's start either way, as upstream's), so the API server is not
   left idle for that round trip between bursts;
5. look again after ``minReadySeconds`` if ready pods are not available yet.

Why expectations matter: the pod informer lags the writes, so without them a
second sync right after a create would count too few pods and create again.
With them, a sync between the write and its watch event counts the pod as
in flight. A failed create or delete lowers the expectation at once (no event
will come for it).

Pod events feed the queue: a pod with a controller reference queues its owner
(and lowers the owner's expectations on ADDED / DELETED); an orphan queues
every ReplicaSet whose selector matches it, so one can adopt it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from k8py.api.errors import Conflict, Forbidden, NotFound, StatusError
from k8py.api.selectors import LabelSelector
from k8py.client.keys import DeletedFinalStateUnknown, object_key, split_key
from k8py.client.resource import Resource
from k8py.client.resources import PODS, REPLICASETS, REPLICATION_CONTROLLERS
from k8py.controllers.context import ControllerContext
from k8py.controllers.controller_ref_manager import ControllerRefManager, recheck_owner
from k8py.controllers.expectations import UIDTrackingExpectations
from k8py.controllers.keyed_controller import KeyedController
from k8py.controllers.owner_refs import CONTROLLER_UID_INDEX, controller_ref, ensure_controller_uid_index, new_controller_ref, owned_or_orphaned
from k8py.controllers.pod_control import SLOW_START_INITIAL_BATCH_SIZE, PodControl, largest_batch, slow_start_batch
from k8py.controllers.pod_ranking import pods_to_delete
from k8py.controllers.pod_status import filter_active_pods, is_pod_ready
from k8py.controllers.replicaset_status import calculate_status, only_observed_generation_differs, replicas_of
from k8py.controllers.selectors import selector_from_dict
from k8py.controllers.written import WrittenObjects

__all__ = [
    "ReplicaSetController",
    "ReplicaSetKind",
    "REPLICA_SET_KIND",
    "REPLICATION_CONTROLLER_KIND",
    "calculate_status",
    "BURST_REPLICAS",
    "new_controller",
]

logger = logging.getLogger(__name__)

BURST_REPLICAS = 500
"""At most this many creates or deletes per sync (upstream ``BurstReplicas``)."""


def _rs_selector(obj: Mapping[str, Any]) -> LabelSelector:
    return selector_from_dict((obj.get("spec") or {}).get("selector"))


def _rc_selector(obj: Mapping[str, Any]) -> LabelSelector:
    selector = (obj.get("spec") or {}).get("selector")
    if not selector:
        return LabelSelector.match_nothing()
    return selector_from_dict({"matchLabels": selector})


@dataclass(frozen=True)
class ReplicaSetKind:
    """What differs between ReplicaSets and ReplicationControllers."""

    resource: Resource
    name: str
    queue_name: str
    component: str
    selector_of: Callable[[Mapping[str, Any]], LabelSelector]


REPLICA_SET_KIND = ReplicaSetKind(REPLICASETS, "replicaset", "replicaset", "replicaset-controller", _rs_selector)
REPLICATION_CONTROLLER_KIND = ReplicaSetKind(
    REPLICATION_CONTROLLERS, "replicationcontroller", "replicationmanager", "replication-controller", _rc_selector
)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


_replicas = replicas_of


class ReplicaSetController(KeyedController):
    """See the module docstring."""

    def __init__(self, ctx: ControllerContext, kind: ReplicaSetKind = REPLICA_SET_KIND, *, burst_replicas: int = BURST_REPLICAS) -> None:
        super().__init__(ctx, name=kind.name, queue_name=kind.queue_name)
        self.kind = kind
        self.burst_replicas = burst_replicas
        self.informer = ctx.informers.informer(kind.resource)
        self.pod_informer = ctx.informers.informer(PODS)
        self.lister = self.informer.lister
        self.pod_lister = self.pod_informer.lister
        ensure_controller_uid_index(self.pod_informer)
        ensure_controller_uid_index(self.informer)
        self.expectations = UIDTrackingExpectations(clock=ctx.clock)
        self._batch_start: dict[str, int] = {}
        self._written = WrittenObjects()
        """The ReplicaSet as our last status write returned it, until the cache has caught up: a sync
        that follows its own write at once (the next burst of a scale-up) would otherwise PUT from a
        stale resourceVersion, and pay a conflict, a GET and a second PUT every time."""
        self.recorder = ctx.recorder(kind.component)
        self.pod_control = PodControl(ctx.client, self.recorder)
        self.wait_for(self.informer, self.pod_informer)
        self.informer.add_event_handler(on_add=self.enqueue, on_update=self._update_rs, on_delete=self._delete_rs)
        self.pod_informer.add_event_handler(on_add=self._add_pod, on_update=self._update_pod, on_delete=self._delete_pod)

    # -- event handlers -----------------------------------------------------------------

    def _update_rs(self, old: Any, new: Any) -> None:
        self.enqueue(new)

    def _delete_rs(self, obj: Any) -> None:
        key = object_key(obj)
        self.expectations.delete(key)
        self._written.forget(key)
        self.queue.add(key)

    def _resolve(self, namespace: str, ref: Mapping[str, Any] | None) -> Any | None:
        """The owner a controller reference names, if it is one of ours and still the same object."""
        if ref is None or ref.get("kind") != self.kind.resource.kind:
            return None
        owner = self.lister.try_get(namespace, ref.get("name") or "")
        if owner is None or _meta(owner).get("uid") != ref.get("uid"):
            return None
        return owner

    def _matching_owners(self, pod: Mapping[str, Any]) -> list[Any]:
        labels = _meta(pod).get("labels") or {}
        if not labels:
            return []
        owners = []
        for rs in self.lister.list(namespace=_meta(pod).get("namespace")):
            selector = self._selector_or_none(rs)
            if selector is not None and not selector.empty and selector.matches(labels):
                owners.append(rs)
        return owners

    def _selector_or_none(self, rs: Mapping[str, Any]) -> LabelSelector | None:
        try:
            return self.kind.selector_of(rs)
        except StatusError:
            return None

    def _add_pod(self, pod: Any) -> None:
        if _meta(pod).get("deletionTimestamp"):
            self._delete_pod(pod)  # a restarted manager sees a pod already being deleted
            return
        ref = controller_ref(pod)
        if ref is not None:
            owner = self._resolve(_meta(pod).get("namespace") or "", ref)
            if owner is None:
                return
            key = object_key(owner)
            self.expectations.creation_observed(key)
            self.expectations.creation_seen(key, object_key(pod))
            self.queue.add(key)
            return
        for owner in self._matching_owners(pod):
            self.enqueue(owner)

    def _update_pod(self, old: Any, new: Any) -> None:
        if _meta(old).get("resourceVersion") == _meta(new).get("resourceVersion"):
            return  # a resync: nothing changed
        labels_changed = _meta(old).get("labels") != _meta(new).get("labels")
        if _meta(new).get("deletionTimestamp"):
            self._delete_pod(new)
            if labels_changed:
                self._delete_pod(old)
            return
        namespace = _meta(new).get("namespace") or ""
        new_ref, old_ref = controller_ref(new), controller_ref(old)
        ref_changed = new_ref != old_ref
        if ref_changed and old_ref is not None:
            owner = self._resolve(namespace, old_ref)
            if owner is not None:
                self.enqueue(owner)
        if new_ref is not None:
            owner = self._resolve(namespace, new_ref)
            if owner is None:
                return
            self.enqueue(owner)
            min_ready = int((owner.get("spec") or {}).get("minReadySeconds") or 0)
            if min_ready > 0 and not is_pod_ready(old) and is_pod_ready(new):
                self.enqueue_after(owner, min_ready + 1)
            return
        if labels_changed or ref_changed:
            for owner in self._matching_owners(new):
                self.enqueue(owner)

    def _delete_pod(self, obj: Any) -> None:
        pod = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        if pod is None:
            return
        owner = self._resolve(_meta(pod).get("namespace") or "", controller_ref(pod))
        if owner is None:
            return
        key = object_key(owner)
        self.expectations.deletion_observed_of(key, object_key(pod))
        self.expectations.creation_seen(key, object_key(pod))
        self.queue.add(key)

    # -- sync ----------------------------------------------------------------------------

    async def sync(self, key: str) -> float | None:
        namespace, name = split_key(key)
        rs = self.lister.try_get(namespace, name)
        if rs is None:
            self.expectations.delete(key)
            self._batch_start.pop(key, None)
            self._written.forget(key)
            return None
        rs = self._written.latest(key, rs)
        # None: a deletion is still unobserved, so replicas are not managed (upstream)
        in_flight = self.expectations.creations_in_flight(key, self.pod_informer.indexer.__contains__)
        try:
            selector = self.kind.selector_of(rs)
        except StatusError as err:
            logger.error("invalid selector", extra={"key": key, "error": str(err)})
            return None
        active = filter_active_pods(owned_or_orphaned(self.pod_informer, rs))
        manager = ControllerRefManager(self.client, rs, self.kind.resource, PODS, selector,
                                       recheck_owner(self.client, self.kind.resource, rs))
        pods = await manager.claim(active)  # ours and still matching: decided without an await
        manage_error: Exception | None = None
        writes, more_to_create = 0, False
        written_early: Mapping[str, Any] | None = None
        if in_flight is not None and not _meta(rs).get("deletionTimestamp"):
            manage = asyncio.ensure_future(self.manage_replicas(pods, rs, key, in_flight=in_flight))
            if len(pods) + in_flight + self.burst_replicas < _replicas(rs):
                # Mid-way through a scale-up: creates remain after this burst, so
                # this sync's status is written whatever its creates do; it is
                # written while they run, not after them (the API server otherwise
                # idled for a status PUT's round trip and the status's pass over
                # every pod between bursts). From the pods at sync start, as
                # upstream's status is; a failed create writes its condition after.
                try:
                    written_early = await self._write_status_early(key, rs, pods)
                except BaseException:
                    manage.cancel()
                    await asyncio.gather(manage, return_exceptions=True)
                    raise
            try:
                writes, more_to_create = await manage
            except Exception as err:  # noqa: BLE001 - reported in status, then retried by the loop
                manage_error = err
        if written_early is not None and manage_error is None:
            updated = written_early
        else:
            base = written_early if written_early is not None else rs
            status = calculate_status(base, pods, manage_error, self.clock.now())
            if writes and not more_to_create and only_observed_generation_differs(base, status):
                # The pods just created or deleted will change the counts when their
                # watch events arrive, and each event queues this key: that sync
                # writes observedGeneration together with them. Upstream writes it
                # alone first, one PUT (and one ReplicaSet event for every watcher)
                # more per scale; the next sync is never more than a watch event away.
                return None
            try:
                updated = await self.update_status(base, status)
                if updated is not base:
                    self._written.remember(key, updated)
            except Conflict:
                # the ReplicaSet changed again (its watch event queues this key): no backoff
                if manage_error is not None:
                    raise manage_error from None
                return None
            if manage_error is not None:
                raise manage_error
        if more_to_create:
            self.queue.add(key)  # the next burst at once, not when the watch catches up
        min_ready = int((rs.get("spec") or {}).get("minReadySeconds") or 0)
        st = updated.get("status") or {}
        if min_ready > 0 and st.get("readyReplicas", 0) == _replicas(updated) and st.get("availableReplicas", 0) != _replicas(updated):
            return float(min_ready)
        return None

    async def _write_status_early(self, key: str, rs: Mapping[str, Any], pods: list[Any]) -> Mapping[str, Any] | None:
        """Write the status of a sync whose creates are running (see :meth:`sync`);
        ``None`` if it could not be written (the sync writes it after its creates)."""
        # one turn of the loop first: the creates just started send their
        # requests before this pass over every pod takes the loop
        await asyncio.sleep(0)
        status = calculate_status(rs, pods, None, self.clock.now())
        try:
            updated = await self.update_status(rs, status)
        except Exception as err:  # noqa: BLE001 - written after the creates instead
            logger.debug("status not written during the creates", extra={"key": key, "error": repr(err)})
            return None
        if updated is not rs:
            self._written.remember(key, updated)
        return updated

    async def manage_replicas(self, pods: list[Any], rs: Mapping[str, Any], key: str, *, in_flight: int = 0) -> tuple[int, bool]:
        """Create or delete towards ``spec.replicas``, counting ``in_flight``
        acknowledged creates the cache has not shown: ``(pods created or deleted,
        whether more creates remain after this burst)``. Raises the first failure."""
        diff = len(pods) + in_flight - _replicas(rs)
        if diff < 0:
            count = min(-diff, self.burst_replicas)
            self.expectations.expect_more_creations(key, count)
            namespace = _meta(rs).get("namespace") or ""
            template = (rs.get("spec") or {}).get("template") or {}
            ref = new_controller_ref(rs, self.kind.resource)

            async def create() -> None:
                try:
                    created = await self.pod_control.create_pod(namespace, template, rs, self.kind.resource, ref)
                except Forbidden as err:
                    if "being terminated" in (err.message or ""):
                        return  # the namespace is going away: not a failure of ours
                    raise
                pod_key = f"{namespace}/{created['metadata']['name']}"
                if pod_key not in self.pod_informer.indexer:
                    self.expectations.created(key, pod_key)

            initial = self._batch_start.get(key, SLOW_START_INITIAL_BATCH_SIZE)
            successes, error = await slow_start_batch(count, initial, create)
            for _ in range(count - successes):
                self.expectations.creation_observed(key)  # no event will come for these
            if error is not None:
                self._batch_start.pop(key, None)
                raise error
            self._batch_start[key] = largest_batch(count, initial)
            return successes, -diff > count
        if diff > 0 and in_flight == 0:
            count = min(diff, self.burst_replicas)
            related = self._related_pods(rs)
            victims = pods_to_delete(pods, related, count, self.clock.now())
            victim_keys = [object_key(p) for p in victims]
            self.expectations.expect_deletions_of(key, victim_keys)
            results = await asyncio.gather(
                *(self.pod_control.delete_pod(_meta(p)["namespace"], _meta(p)["name"], rs, self.kind.resource) for p in victims),
                return_exceptions=True,
            )
            first: Exception | None = None
            for pod_key, result in zip(victim_keys, results):
                if isinstance(result, asyncio.CancelledError):
                    raise result
                if isinstance(result, BaseException):
                    self.expectations.deletion_observed_of(key, pod_key)
                    if not isinstance(result, NotFound) and first is None:
                        first = result if isinstance(result, Exception) else RuntimeError(repr(result))
            if first is not None:
                raise first
            return len(victims), False
        return 0, False

    def _related_pods(self, rs: Mapping[str, Any]) -> list[Any]:
        """Active pods of this ReplicaSet and of its siblings (same controller, e.g. one Deployment)."""
        owner = controller_ref(rs)
        uids = {_meta(rs).get("uid")}
        if owner is not None:
            # the siblings through the index by controller uid, not a scan of the
            # namespace (a thousand Deployments rolling in one namespace made every
            # scale-down sync read every ReplicaSet)
            for other in self.informer.indexer.by_index(CONTROLLER_UID_INDEX, owner.get("uid") or ""):
                uids.add(_meta(other).get("uid"))
        pods = [p for uid in uids for p in self.pod_informer.indexer.by_index(CONTROLLER_UID_INDEX, uid or "")]
        return filter_active_pods(pods)

    async def update_status(self, rs: Mapping[str, Any], status: dict[str, Any]) -> Mapping[str, Any]:
        """Write ``status`` (with observedGeneration) if it differs; one retry on a conflict."""
        generation = _meta(rs).get("generation")
        current: Mapping[str, Any] = rs
        for attempt in range(2):
            wanted = {**status, **({"observedGeneration": generation} if generation is not None else {})}
            if (current.get("status") or {}) == wanted:
                return current
            body = {**current, "status": wanted}  # only encoded, never changed: no deep copy
            try:
                return await self.client.update_status(self.kind.resource, body)
            except Conflict:
                if attempt:
                    raise
                meta = _meta(rs)
                current = await self.client.get(self.kind.resource, meta.get("namespace"), meta["name"])
                generation = _meta(current).get("generation")
        return current


def new_controller(ctx: ControllerContext) -> ReplicaSetController:
    return ReplicaSetController(ctx, REPLICA_SET_KIND)
