"""PodDriver: plays the kubelet's part in controller tests.

Controllers create pods; nothing runs them until the scheduler and the
kubelet exist. The driver watches pods and moves each through the status a
kubelet would write, decided per pod by ``outcome(pod)``:

- ``"Ready"`` (default): ``Running``, containers running, ``Ready`` and
  ``ContainersReady`` conditions ``True`` (lastTransitionTime now), a podIP;
- ``"Running"``: running but not ready;
- ``"Failed"`` / ``"Succeeded"``: terminated with exit code 1 / 0;
- ``None``: left ``Pending`` (the driver does nothing).

With ``node_name`` the driver first binds each unbound pod to that node
(``pods/binding``, as the scheduler would); a bound pod that is being deleted
gracefully is then finished with grace 0, as the kubelet does once its
containers are stopped. ``hold()`` stops acting (pods stay as they are) until
``release()``, for tests that need pods to stay unready for a while.

It uses a real informer and real writes against the API server under test;
it is a stand-in only for the kubelet's *process* side (there is no runtime).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from datetime import datetime, timezone
from typing import Any, Callable

from k8py.api.errors import Conflict, NotFound, StatusError
from k8py.client.keys import object_key, split_key
from k8py.client.rate_limiting_queue import RateLimitingQueue
from k8py.client.controller_loop import ControllerLoop
from k8py.client.resources import PODS
from k8py.client.rest import PatchType, RestClient
from k8py.client.shared_informer import SharedIndexInformer, drop_managed_fields

__all__ = ["PodDriver", "Outcome"]

logger = logging.getLogger(__name__)

Outcome = Callable[[dict[str, Any]], str | None]
_ip_counter = itertools.count(2)


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _next_ip() -> str:
    n = next(_ip_counter)
    return f"127.65.{(n // 250) % 250}.{n % 250 + 1}"


def status_for(pod: dict[str, Any], outcome: str) -> dict[str, Any]:
    now = _now()
    containers = [c.get("name", "c") for c in (pod.get("spec") or {}).get("containers") or ()] or ["c"]
    ready = outcome == "Ready"
    if outcome in ("Ready", "Running"):
        phase = "Running"
        state: dict[str, Any] = {"running": {"startedAt": now}}
    else:
        phase = outcome
        state = {"terminated": {"exitCode": 0 if outcome == "Succeeded" else 1, "reason": "Completed" if outcome == "Succeeded" else "Error",
                                "startedAt": now, "finishedAt": now}}
    flag = "True" if ready else "False"
    conditions = [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
        {"type": "Initialized", "status": "True", "lastTransitionTime": now},
        {"type": "ContainersReady", "status": flag, "lastTransitionTime": now},
        {"type": "Ready", "status": flag, "lastTransitionTime": now},
    ]
    return {
        "phase": phase, "conditions": conditions, "startTime": now, "podIP": _next_ip(), "hostIP": "127.0.0.1",
        "containerStatuses": [
            {"name": n, "ready": ready, "restartCount": 0, "image": "img", "imageID": "", "started": phase == "Running", "state": state}
            for n in containers
        ],
    }


class PodDriver:
    def __init__(
        self, client: RestClient, *, namespace: str | None = None, outcome: Outcome | None = None,
        node_name: str | None = None, workers: int = 4,
    ) -> None:
        self.client = client
        self.outcome: Outcome = outcome or (lambda pod: "Ready")
        self.node_name = node_name
        self.informer = SharedIndexInformer(client, PODS, namespace=namespace, transform=drop_managed_fields)
        self.queue: RateLimitingQueue[str] = RateLimitingQueue(name="")
        self.loop = ControllerLoop(name="pod-driver", queue=self.queue, sync=self._sync, workers=workers, max_retries=None)
        self.informer.add_event_handler(on_add=self._enqueue, on_update=lambda old, new: self._enqueue(new),
                                        on_delete=lambda obj: None)
        self._held = False
        self.handled: dict[str, str] = {}

    def _enqueue(self, obj: Any) -> None:
        if not self._held:
            self.queue.add(object_key(obj))

    def hold(self) -> None:
        self._held = True

    def release(self) -> None:
        self._held = False
        for key in self.informer.indexer.list_keys():
            self.queue.add(key)

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self.informer.run(), name="pod-driver-informer")
            await self.informer.wait_for_cache_sync()
            await self.loop.run()

    async def _sync(self, key: str) -> None:
        if self._held:
            return
        namespace, name = split_key(key)
        pod = self.informer.lister.try_get(namespace, name)
        if pod is None:
            return
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        try:
            if meta.get("deletionTimestamp"):
                if spec.get("nodeName"):
                    await self.client.delete(PODS, namespace, name, grace_period_seconds=0)
                return
            if self.node_name and not spec.get("nodeName"):
                binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": namespace},
                           "target": {"apiVersion": "v1", "kind": "Node", "name": self.node_name}}
                await self.client.create(PODS, binding, namespace=namespace, name=name, subresource="binding")
                return  # the update brings the pod back
            if status.get("phase") in ("Succeeded", "Failed"):
                return
            outcome = self.outcome(pod)
            if outcome is None or self.handled.get(meta.get("uid", "")) == outcome:
                return
            await self.client.patch(PODS, namespace, name, {"status": status_for(pod, outcome)},
                                    patch_type=PatchType.MERGE, subresource="status")
            self.handled[meta.get("uid", "")] = outcome
        except (NotFound, Conflict):
            return
        except StatusError as err:
            logger.warning("pod driver write failed", extra={"pod": key, "error": str(err)})
            raise
