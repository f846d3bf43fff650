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
- :func:`slow_start_batch` runs creates in batches of 1, 2, 4, ... and stops at
  the first batch with a failure, so a template the API rejects fails after
  one request, not five hundred.
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

__all__ = ["PodControl", "pod_from_template", "slow_start_batch", "SLOW_START_INITIAL_BATCH_SIZE"]

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
    """Call ``fn`` ``count`` times in doubling batches; ``(successes, first error)``."""
    remaining = count
    successes = 0
    batch = min(remaining, initial_batch_size)
    while batch > 0:
        results = await asyncio.gather(*(fn() for _ in range(batch)), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        for r in errors:
            if isinstance(r, asyncio.CancelledError):
                raise r
        successes += batch - len(errors)
        if errors:
            first = errors[0]
            return successes, first if isinstance(first, Exception) else RuntimeError(repr(first))
        remaining -= batch
        batch = min(2 * batch, remaining)
    return successes, None


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
