"""The scheduler: informers feed the cache and the queue; one loop pops a pod,
runs its profile's scheduling cycle, assumes it on the chosen node, and hands
the binding cycle to its own task so the next pod is scheduled at once.

Cycle of one pod (upstream ``scheduleOne``)::

    pop ─▶ schedule (PreFilter, Filter, PostFilter on failure, Score) ─▶ assume
        ─▶ Reserve ─▶ Permit ─▶ [task] WaitOnPermit ─▶ PreBind ─▶ Bind ─▶ PostBind

Failures anywhere undo in reverse (Unreserve, forget the assumption), record a
``FailedScheduling`` Event and the ``PodScheduled=False`` condition, and put
the pod back in the queue (unschedulable, or backoff for errors). Success is
a ``Scheduled`` Event; the API server sets ``PodScheduled=True`` on binding.

The scheduler is also the framework's :class:`~k8py.scheduler.framework.interfaces.Handle`:
plugins read node views, nominated and waiting pods, and the client through it.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any, Callable, Sequence

from k8py.client.clock import Clock, RealClock
from k8py.client.resources import NAMESPACES, NODES, PODS
from k8py.client.rest import PatchType, RestClient
from k8py.client.shared_informer import SharedIndexInformer, drop_managed_fields
from k8py.scheduler.cache import SchedulerCache
from k8py.scheduler.event_handlers import EventHandlers
from k8py.scheduler.framework.diagnosis import Diagnosis, FitError
from k8py.scheduler.framework.interfaces import ClusterEventHint, CycleState
from k8py.scheduler.framework.runtime import Framework
from k8py.scheduler.framework.status import Code, Status, as_error
from k8py.scheduler.framework.types import NodeInfo, PodInfo, QueuedPodInfo
from k8py.scheduler.framework.waiting_pods import WaitingPods
from k8py.scheduler.metrics import SchedulerMetrics
from k8py.scheduler.pod_status import (REASON_SCHEDULER_ERROR, REASON_UNSCHEDULABLE, scheduled_message,
                                       status_patch, unschedulable_condition)
from k8py.scheduler.profile import SchedulerConfig, build_frameworks
from k8py.scheduler.queue import SchedulingQueue
from k8py.scheduler.schedule_one import NoNodesAvailable, PodScheduler, filter_with_nominated_pods

__all__ = ["Scheduler"]

logger = logging.getLogger(__name__)

Object = dict[str, Any]


class Scheduler:
    def __init__(
        self,
        client: RestClient,
        config: SchedulerConfig | None = None,
        *,
        recorder: Any = None,
        clock: Clock | None = None,
        rng: Callable[[], float] = random.random,
        assumed_ttl: float = 900.0,
        metrics: SchedulerMetrics | None = None,
    ) -> None:
        self.client = client
        self.config = config or SchedulerConfig()
        self.clock: Clock = clock or RealClock()
        self.recorder = recorder
        self.cache = SchedulerCache(assumed_ttl=assumed_ttl)
        self.metrics = metrics or SchedulerMetrics()
        self.waiting_pods = WaitingPods()
        self.frameworks: dict[str, Framework] = build_frameworks(self.config, self, waiting_pods=self.waiting_pods)
        first = next(iter(self.frameworks.values()))
        self.queue = SchedulingQueue(
            less=first.less, sort_key=first.sort_key, pre_enqueue=self._pre_enqueue, hints=self._collect_hints(), clock=self.clock,
            initial_backoff=self.config.pod_initial_backoff, max_backoff=self.config.pod_max_backoff,
        )
        self.algorithm = PodScheduler(rng=rng)
        self.handlers = EventHandlers(self)
        self.pod_informer = SharedIndexInformer(client, PODS, transform=drop_managed_fields, clock=self.clock)
        self.node_informer = SharedIndexInformer(client, NODES, transform=drop_managed_fields, clock=self.clock)
        self.namespace_informer = SharedIndexInformer(client, NAMESPACES, transform=drop_managed_fields, clock=self.clock)
        h = self.handlers
        self.pod_informer.add_event_handler(h.on_pod_add, h.on_pod_update, h.on_pod_delete)
        self.node_informer.add_event_handler(h.on_node_add, h.on_node_update, h.on_node_delete)
        #: bumped on every namespace change: plugins that cache by namespace labels
        #: (InterPodAffinity's namespaceSelector) include it in their keys
        self.namespace_generation = 0
        self.namespace_informer.add_event_handler(self._namespace_changed, lambda old, new: self._namespace_changed(new),
                                                  self._namespace_changed)
        self.metrics.sample_queue(self.queue.counts)
        self.metrics.sample_cache(lambda: len(self.cache.nodes), self.cache.pod_count)
        self._tasks: set[asyncio.Task[Any]] = set()
        self.synced = False
        self.scheduling = False

    # -- Handle (what plugins see) ---------------------------------------------------------

    @property
    def nodes(self) -> Sequence[NodeInfo]:
        return self.cache.nodes

    def node(self, name: str) -> NodeInfo | None:
        return self.cache.node(name)

    def image_node_count(self, image: str) -> int:
        return self.cache.image_node_count(image)

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return self.queue.nominator.pods_for_node(node_name)

    def framework_for(self, pod: PodInfo) -> Framework | None:
        return self.frameworks.get(pod.scheduler_name)

    def run_filters_with_nominated_pods(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        fwk = self.framework_for(pod)
        assert fwk is not None
        return filter_with_nominated_pods(fwk, state, pod, node, self.nominated_pods_for_node)

    def get_waiting_pod(self, uid: str) -> Any:
        return self.waiting_pods.get(uid)

    def _namespace_changed(self, obj: Any) -> None:
        self.namespace_generation += 1

    def namespace_labels(self, namespace: str) -> dict[str, str] | None:
        ns = self.namespace_informer.indexer.get_by_key(namespace)
        return ((ns.get("metadata") or {}).get("labels") or {}) if ns is not None else None

    async def clear_lower_nominations(self, node_name: str, preemptor: PodInfo) -> None:
        """Pods of lower priority nominated to ``node_name`` lose the nomination
        (the preemptor takes the room) and are tried again."""
        for other in self.queue.nominator.pods_for_node(node_name):
            if other.priority >= preemptor.priority or other.key == preemptor.key:
                continue
            self.queue.nominator.delete(other.key)
            current = self.pod_informer.indexer.get_by_key(other.key)
            if current is not None:
                patch = status_patch(current, None, "")
                if patch is not None:
                    await self._patch_status(other.namespace, other.name, patch)
                self.queue.update(current)

    def pod_lister(self) -> list[Object]:
        return self.pod_informer.indexer.list()

    # -- wiring ---------------------------------------------------------------------------------

    def _collect_hints(self) -> dict[str, list[ClusterEventHint]]:
        hints: dict[str, list[ClusterEventHint]] = {}
        for fwk in self.frameworks.values():
            for name, plugin in fwk.plugins.items():
                if name not in hints and hasattr(plugin, "events_to_register"):
                    hints[name] = list(plugin.events_to_register())
        return hints

    def _pre_enqueue(self, pod: PodInfo) -> Status | None:
        fwk = self.frameworks.get(pod.scheduler_name)
        return fwk.run_pre_enqueue(pod) if fwk is not None else None

    def on_cluster_event(self, resource: str, actions: Sequence[str], old: Any, new: Any) -> None:
        moved = self.queue.move_on_event(resource, actions, old, new)
        if moved:
            event = f"{resource}{actions[0]}"
            self.metrics.incoming("active", event, moved)

    def reject_waiting_pod(self, pod: Object, message: str) -> None:
        waiting = self.waiting_pods.get((pod.get("metadata") or {}).get("uid") or "")
        if waiting is not None:
            for plugin in list(waiting.pending):
                waiting.reject(plugin, message)

    def spawn(self, coro: Any, name: str) -> None:
        """Run ``coro`` on a task owned by the scheduler (cancelled when it stops)."""
        self._spawn(coro, name)

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- running --------------------------------------------------------------------------------

    async def run(self) -> None:
        """Informers, then (once synced) the scheduling loop; until cancelled."""
        async with asyncio.TaskGroup() as group:
            group.create_task(self.run_informers(), name="scheduler-informers")
            await self.wait_for_sync()
            await self.run_scheduling()

    async def run_informers(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self.node_informer.run(), name="scheduler-node-informer")
            group.create_task(self.pod_informer.run(), name="scheduler-pod-informer")
            group.create_task(self.namespace_informer.run(), name="scheduler-namespace-informer")

    async def wait_for_sync(self) -> None:
        await self.node_informer.wait_for_cache_sync()
        await self.pod_informer.wait_for_cache_sync()
        await self.namespace_informer.wait_for_cache_sync()
        self.synced = True
        logger.info("scheduler caches synced", extra={"nodes": len(self.cache.nodes), "pods": self.cache.pod_count()})

    async def run_scheduling(self) -> None:
        """The scheduling loop plus the queue's and the cache's timers, until cancelled."""
        self.scheduling = True
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self.queue.run(), name="scheduler-queue-timers")
                group.create_task(self._cleanup_assumed(), name="scheduler-cache-cleanup")
                group.create_task(self._schedule_loop(), name="scheduler-loop")
        finally:
            self.scheduling = False
            for task in list(self._tasks):
                task.cancel()
            if self._tasks:
                await asyncio.wait(list(self._tasks))

    async def _cleanup_assumed(self) -> None:
        while True:
            await self.clock.sleep(1.0)
            if self.cache.cleanup_expired(self.clock.monotonic()):
                self.queue.move_all()

    async def _schedule_loop(self) -> None:
        while True:
            qpi = await self.queue.pop()
            try:
                await self.schedule_one(qpi)
            except asyncio.CancelledError:
                raise
            except Exception:  # never let one pod stop the loop
                logger.exception("scheduling cycle failed", extra={"pod": qpi.key})
                self.queue.add_unschedulable(qpi, backoff_only=True)
            await asyncio.sleep(0)  # let informers and binds run between cycles

    # -- one pod ------------------------------------------------------------------------------------

    def _skip(self, pod: PodInfo) -> bool:
        return bool((pod.pod.get("metadata") or {}).get("deletionTimestamp")) or self.cache.is_assumed(pod.key)

    async def schedule_one(self, qpi: QueuedPodInfo) -> None:
        pod = qpi.info
        fwk = self.frameworks.get(pod.scheduler_name)
        if fwk is None or self._skip(pod):
            self.queue.done(pod.key)
            return
        start = self.clock.monotonic()
        state = CycleState()
        nominated_node = (pod.pod.get("status") or {}).get("nominatedNodeName") or ""
        nominated = self.nominated_pods_for_node if self.queue.nominator else None
        try:
            result = self.algorithm.schedule(fwk, state, pod, self.cache.nodes, nominated, nominated_node, self.cache.node,
                                             changes=self.cache)
        except FitError as err:
            nominating: str | None = None
            if fwk.has("postFilter"):
                post, status = await fwk.run_post_filter(state, pod, err.diagnosis)
                if status is not None and status.message():
                    err.diagnosis.post_filter_msg = status.message()
                nominating = post.nominated_node_name if post is not None else ""
            self._fail(fwk, qpi, Status(Code.UNSCHEDULABLE, (str(err),)), start, diagnosis=err.diagnosis, nominated_node=nominating)
            return
        except NoNodesAvailable as err:
            self._fail(fwk, qpi, Status(Code.UNSCHEDULABLE, (str(err),)), start, diagnosis=Diagnosis())
            return
        except Exception as err:
            logger.exception("scheduling algorithm failed", extra={"pod": pod.key})
            self._fail(fwk, qpi, Status(Code.ERROR, (str(err),)), start)
            return

        node_name = result.node_name
        assumed = pod.with_node(node_name)
        self.cache.assume_pod(assumed)
        self.queue.nominator.delete(pod.key)
        status = fwk.run_reserve(state, assumed, node_name)
        if status is not None:
            self._undo(fwk, state, assumed, node_name)
            self._fail(fwk, qpi, status, start, diagnosis=_diagnosis_of(status))
            return
        status = fwk.run_permit(state, assumed, node_name)
        if status is not None and not status.is_wait():
            self._undo(fwk, state, assumed, node_name)
            self._fail(fwk, qpi, status, start, diagnosis=_diagnosis_of(status))
            return
        self._spawn(self._binding_cycle(fwk, state, qpi, assumed, node_name, start), name=f"bind-{pod.key}")

    def _undo(self, fwk: Framework, state: CycleState, assumed: PodInfo, node_name: str) -> None:
        fwk.run_unreserve(state, assumed, node_name)
        self.cache.forget_pod(assumed.key)

    async def _binding_cycle(self, fwk: Framework, state: CycleState, qpi: QueuedPodInfo, assumed: PodInfo,
                             node_name: str, start: float) -> None:
        try:
            status = await fwk.wait_on_permit(assumed)
            if status is None:
                status = await fwk.run_pre_bind(state, assumed, node_name)
            if status is None:
                bind_start = self.clock.monotonic()
                status = await fwk.run_bind(state, assumed, node_name)
                self.metrics.binding_duration.observe(self.clock.monotonic() - bind_start)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # e.g. the API server unreachable: undo and retry the pod
            logger.warning("binding cycle failed", extra={"pod": assumed.key, "error": str(err)})
            status = as_error(err)
        if status is not None:
            self._undo(fwk, state, assumed, node_name)
            # the freed resources may let an unschedulable pod fit
            self.queue.move_on_event("AssignedPod", ("Delete",), assumed.pod, None)
            if status.code is Code.ERROR:
                status = Status(Code.ERROR, (f"binding rejected: {status.message()}",), plugin=status.plugin)
            self._fail(fwk, qpi, status, start, diagnosis=_diagnosis_of(status))
            return
        self.cache.finish_binding(assumed.key, self.clock.monotonic())
        self.queue.done(assumed.key)
        elapsed = self.clock.monotonic() - start
        self.metrics.attempt("scheduled", fwk.profile_name, elapsed)
        self.metrics.pod_attempts.observe(qpi.attempts)
        if self.recorder is not None:
            self.recorder.eventf(assumed.pod, None, "Normal", "Scheduled", "Binding",
                                 scheduled_message(assumed.namespace, assumed.name, node_name), resource=PODS)
        fwk.run_post_bind(state, assumed, node_name)

    def _fail(self, fwk: Framework, qpi: QueuedPodInfo, status: Status, start: float, *,
              diagnosis: Diagnosis | None = None, nominated_node: str | None = None) -> None:
        pod = qpi.info
        error = status.code is Code.ERROR
        result = "error" if error else "unschedulable"
        self.metrics.attempt(result, fwk.profile_name, self.clock.monotonic() - start)
        current = self.pod_informer.indexer.get_by_key(pod.key)
        if current is None or (current.get("spec") or {}).get("nodeName"):
            self.queue.done(pod.key)
            return
        qpi.info = PodInfo(current)
        if diagnosis is not None:
            qpi.unschedulable_plugins = set(diagnosis.unschedulable_plugins)
            qpi.pending_plugins = set(diagnosis.pending_plugins)
        else:
            qpi.unschedulable_plugins = set()
        self.queue.add_unschedulable(qpi, backoff_only=error)
        if nominated_node:
            self.queue.nominator.add(qpi.info, nominated_node)
        message = status.message()
        logger.info("unable to schedule pod", extra={"pod": pod.key, "reason": message})
        if self.recorder is not None:
            self.recorder.eventf(current, None, "Warning", "FailedScheduling", "Scheduling", message, resource=PODS)
        reason = REASON_SCHEDULER_ERROR if error else REASON_UNSCHEDULABLE
        patch = status_patch(current, unschedulable_condition(reason, message), nominated_node)
        if patch is not None:
            self._spawn(self._patch_status(pod.namespace, pod.name, patch), name=f"status-{pod.key}")

    async def _patch_status(self, namespace: str, name: str, patch: Object) -> None:
        try:
            await self.client.patch(PODS, namespace, name, patch, patch_type=PatchType.STRATEGIC, subresource="status")
        except asyncio.CancelledError:
            raise
        except Exception as err:  # the pod may be gone; the next attempt writes again
            logger.warning("could not update pod status", extra={"pod": f"{namespace}/{name}", "error": str(err)})


def _diagnosis_of(status: Status) -> Diagnosis:
    d = Diagnosis()
    if status.plugin and status.code is not Code.ERROR:
        d.unschedulable_plugins.add(status.plugin)
    return d
