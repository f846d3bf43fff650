"""PodControl: create pods from a template, delete pods, and say so in Events.

What ``pkg/controller``'s ``RealPodControl`` does for every workload
controller:

- a pod from a template gets the template's labels, annotations, finalizers
  and spec, ``generateName: <owner name>-``, the owner's namespace and one
  controller ownerReference; the API server picks the name;
- success and failure are recorded on the *owner* as upstream words them:
  ``SuccessfulCreate`` "Created pod: NAME", ``FailedCreate`` "Error creating:
  ERR", ``SuccessfulDelete`` "Deleted pod: NAME", ``FailedDelete`` "Error
  deleting: ERR";
- :func:`slow_start_batch` runs creates slow-start (1, then each success lets
  two more start: upstream's batches of 1, 2, 4, ... without waiting for a
  whole batch) and starts no more after the first failure, so a template the
  API rejects fails after one request, not five hundred.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Mapping

from k8py.api.errors import NotFound, StatusError
from k8py.client.event_recorder import EventRecorder
from k8py.client.indexer import deep_copy
from k8py.client.resource import Resource
from k8py.client.resources import PODS
from k8py.client.rest import RestClient

__all__ = ["PodControl", "pod_from_template", "slow_start_batch", "largest_batch", "SLOW_START_INITIAL_BATCH_SIZE"]

SLOW_START_INITIAL_BATCH_SIZE = 1


def pod_from_template(template: Mapping[str, Any], namespace: str, owner_name: str, ref: Mapping[str, Any] | None,
                      *, copy_spec: bool = True) -> dict[str, Any]:
    """The pod a template stands for. ``copy_spec=False`` shares the template's
    spec instead of copying it: only for a pod that is serialized and
    dropped, never changed (a create of thousands of pods then costs no copy
    each)."""
    tmeta = template.get("metadata") or {}
    meta: dict[str, Any] = {"generateName": f"{owner_name}-", "namespace": namespace}
    for field in ("labels", "annotations"):
        if tmeta.get(field):
            meta[field] = dict(tmeta[field])
    if tmeta.get("finalizers"):
        meta["finalizers"] = list(tmeta["finalizers"])
    if ref is not None:
        meta["ownerReferences"] = [dict(ref)]
    spec = template.get("spec") or {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": deep_copy(spec) if copy_spec else spec}


async def slow_start_batch(count: int, initial_batch_size: int, fn: Callable[[], Awaitable[None]]) -> tuple[int, Exception | None]:
    """Call ``fn`` ``count`` times, slow-start: ``(successes, first error)``.

    Upstream runs batches of 1, 2, 4, ... and waits for each whole batch; this
    runs the same doubling as a window: ``initial_batch_size`` calls at first,
    and each success lets two more start, so no more calls have started than
    the batches would have started once every earlier batch succeeded
    (``initial + 2 * successes``), but the next ones start as each call
    returns, not when the slowest call of its batch does (a batch of 256
    creates otherwise left the API server with nothing to do while its last
    answers came back). After the first failure nothing more starts; the
    calls in flight are awaited and counted. Cancelling the caller cancels
    the calls in flight."""
    if count <= 0:
        return 0, None
    loop = asyncio.get_running_loop()
    allowance = min(count, max(1, initial_batch_size))
    started = successes = 0
    first: BaseException | None = None
    running: set[asyncio.Future[None]] = set()
    finished: list[asyncio.Future[None]] = []
    wake: asyncio.Future[None] | None = None

    def done(task: asyncio.Future[None]) -> None:
        running.discard(task)
        finished.append(task)
        if wake is not None and not wake.done():
            wake.set_result(None)

    try:
        while True:
            while first is None and allowance > 0 and started < count:
                task = asyncio.ensure_future(fn())
                task.add_done_callback(done)
                running.add(task)
                started += 1
                allowance -= 1
            if not running and not finished:
                break
            if not finished:
                wake = loop.create_future()
                await wake
            for task in finished:
                if task.cancelled():
                    raise asyncio.CancelledError()
                error = task.exception()
                if error is None:
                    successes += 1
                    allowance += 2
                elif first is None:
                    first = error
            finished.clear()
    finally:
        for task in list(running):
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
    if first is None:
        return successes, None
    if isinstance(first, asyncio.CancelledError):
        raise first
    return successes, first if isinstance(first, Exception) else RuntimeError(repr(first))


def largest_batch(count: int, initial: int) -> int:
    """The biggest of upstream's batches (``initial``, then doubling) for ``count``
    calls; the window of :func:`slow_start_batch` is at least as wide once they
    all succeeded. Where the next sync of the same owner starts."""
    largest, remaining, batch = 0, count, min(count, initial)
    while batch > 0:
        largest = max(largest, batch)
        remaining -= batch
        batch = min(2 * batch, remaining)
    return max(largest, SLOW_START_INITIAL_BATCH_SIZE)


class PodControl:
    """Creates and deletes pods for a controller, recording events on its owners."""

    def __init__(self, client: RestClient, recorder: EventRecorder) -> None:
        self.client = client
        self.recorder = recorder

    async def create_pod(
        self, namespace: str, template: Mapping[str, Any], owner: Mapping[str, Any], owner_resource: Resource,
        ref: Mapping[str, Any], *, name: str | None = None, mutate: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Create one pod from ``template`` owned through ``ref``; raises on failure."""
        owner_name = (owner.get("metadata") or {}).get("name") or ""
        # nothing changes the pod after this but ``mutate``: without one, the
        # body only goes through the encoder, so the template's spec is shared
        pod = pod_from_template(template, namespace, owner_name, ref, copy_spec=mutate is not None)
        if name:
            pod["metadata"]["name"] = name
            pod["metadata"].pop("generateName", None)
        if mutate is not None:
            mutate(pod)
        if not (pod["metadata"].get("labels") or {}):
            raise ValueError("unable to create pods, no labels")
        try:
            created = await self.client.create(PODS, pod, namespace=namespace)
        except StatusError as err:
            if err.reason != "AlreadyExists" or not name:
                self.recorder.eventf(owner, "Warning", "FailedCreate", "Error creating: %s", err.message or str(err), resource=owner_resource)
            raise
        self.recorder.eventf(owner, "Normal", "SuccessfulCreate", "Created pod: %s", created["metadata"]["name"], resource=owner_resource)
        return created

    async def delete_pod(self, namespace: str, name: str, owner: Mapping[str, Any], owner_resource: Resource) -> None:
        """Delete a pod; NotFound is returned as is (the caller decides what it means)."""
        try:
            await self.client.delete(PODS, namespace, name)
        except NotFound:
            raise
        except StatusError as err:
            self.recorder.eventf(owner, "Warning", "FailedDelete", "Error deleting: %s", err.message or str(err), resource=owner_resource)
            raise
        self.recorder.eventf(owner, "Normal", "SuccessfulDelete", "Deleted pod: %s", name, resource=owner_resource)
