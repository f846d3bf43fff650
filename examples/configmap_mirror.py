"""configmap-mirror: a small controller built on k8py.client, end to end.

Every ConfigMap labelled ``mirror=true`` gets a copy named ``<name>-mirror``
in the same namespace, kept in step with the source's data; when the source
is deleted or loses the label, the copy is deleted. A copy is recognised by
its label ``k8py.example/mirror-of: <source name>``: the controller never
touches a ConfigMap that is not its own, it reports a ``MirrorConflict``
Warning on the source instead.

The pieces (see ``docs/03-client-walkthrough.md``):

- a :class:`SharedIndexInformer` on ConfigMaps (Reflector → DeltaFIFO →
  Indexer → handlers); the handlers only turn changes into *source keys*
  (``namespace/name``) on a rate-limited work queue;
- a :class:`ControllerLoop` whose ``sync(key)`` reads the latest state from
  the informer's lister and makes the mirror match; errors are retried with
  per-key backoff;
- an :class:`EventRecorder` that writes ``Mirrored``/``MirrorUpdated``/
  ``MirrorConflict`` Events on the source ConfigMap;
- a :class:`LeaderElector` on the Lease ``configmap-mirror``, so that several
  replicas can run and only one acts. The informer and the workers run only
  while leading; on SIGTERM/SIGINT the replica releases the Lease and exits 0,
  and a replica that loses its lease exits 1 (as Kubernetes components do).

Run it against any cluster::

    python examples/configmap_mirror.py --identity mirror-1 [--kubeconfig PATH] [--namespace default]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import socket
import sys
from typing import Any

from k8py.api.errors import AlreadyExists, NotFound
from k8py.client.controller_loop import ControllerLoop
from k8py.client.event_recorder import EventBroadcaster, EventRecorder
from k8py.client.keys import DeletedFinalStateUnknown, object_key, split_key
from k8py.client.kubeconfig import load_kubeconfig
from k8py.client.leader_election import LeaderElector
from k8py.client.rate_limiting_queue import RateLimitingQueue
from k8py.client.resources import CONFIGMAPS
from k8py.client.rest import RestClient
from k8py.client.shared_informer import SharedIndexInformer, drop_managed_fields

logger = logging.getLogger("configmap-mirror")

COMPONENT = "configmap-mirror"
SOURCE_LABEL = "mirror"
MIRROR_OF = "k8py.example/mirror-of"


def _meta(obj: Any) -> dict[str, Any]:
    return obj.get("metadata") or {}


def source_key_for(obj: Any) -> str | None:
    """The source key a change to ``obj`` concerns: its own, or its source's if it is a mirror."""
    if isinstance(obj, DeletedFinalStateUnknown):
        return source_key_for(obj.obj) if obj.obj is not None else obj.key
    meta = _meta(obj)
    source = (meta.get("labels") or {}).get(MIRROR_OF)
    if source:
        return f"{meta.get('namespace')}/{source}"
    return object_key(obj)


class MirrorController:
    def __init__(self, client: RestClient, recorder: EventRecorder, *, namespace: str, workers: int = 2) -> None:
        self.client = client
        self.recorder = recorder
        self.informer = SharedIndexInformer(client, CONFIGMAPS, namespace=namespace, transform=drop_managed_fields)
        self.lister = self.informer.lister
        self.queue: RateLimitingQueue[str] = RateLimitingQueue(name=COMPONENT)
        self.loop = ControllerLoop(name=COMPONENT, queue=self.queue, sync=self.sync, workers=workers, on_give_up=self._give_up)
        self.informer.add_event_handler(
            on_add=self._enqueue,
            on_update=lambda old, new: self._enqueue(new),
            on_delete=self._enqueue,
        )

    def _enqueue(self, obj: Any) -> None:
        key = source_key_for(obj)
        if key:
            self.queue.add(key)

    async def run(self) -> None:
        """Run the informer, wait for its cache, then the workers; until cancelled."""
        async with asyncio.TaskGroup() as group:
            group.create_task(self.informer.run(), name="configmaps-informer")
            await self.informer.wait_for_cache_sync()
            logger.info("cache synced; starting workers")
            await self.loop.run()

    async def sync(self, key: str) -> None:
        namespace, name = split_key(key)
        source = self.lister.try_get(namespace, name)
        mirror_name = f"{name}-mirror"
        mirror = self.lister.try_get(namespace, mirror_name)
        wanted = source is not None and (_meta(source).get("labels") or {}).get(SOURCE_LABEL) == "true"
        if mirror is not None and (_meta(mirror).get("labels") or {}).get(MIRROR_OF) != name:
            if wanted:
                self.recorder.event(source, "Warning", "MirrorConflict",
                                    f"{mirror_name} exists and is not managed by {COMPONENT}", resource=CONFIGMAPS)
            return
        if not wanted:
            if mirror is not None:
                try:
                    await self.client.delete(CONFIGMAPS, namespace, mirror_name)
                except NotFound:
                    pass
                logger.info("deleted mirror", extra={"mirror": f"{namespace}/{mirror_name}"})
            return
        assert source is not None
        data, binary = source.get("data") or {}, source.get("binaryData") or {}
        if mirror is None:
            body = {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": mirror_name, "namespace": namespace, "labels": {MIRROR_OF: name}},
                "data": data, **({"binaryData": binary} if binary else {}),
            }
            try:
                await self.client.create(CONFIGMAPS, body)
            except AlreadyExists:
                return  # the cache is behind; the watch will bring the mirror and queue the key again
            self.recorder.event(source, "Normal", "Mirrored", f"created {namespace}/{mirror_name}", resource=CONFIGMAPS)
            return
        if (mirror.get("data") or {}) == data and (mirror.get("binaryData") or {}) == binary:
            return
        updated = {**mirror, "data": data}
        if binary:
            updated["binaryData"] = binary
        else:
            updated.pop("binaryData", None)
        await self.client.update(CONFIGMAPS, updated)  # a Conflict is retried by the loop with backoff
        self.recorder.event(source, "Normal", "MirrorUpdated", f"updated {namespace}/{mirror_name}", resource=CONFIGMAPS)

    def _give_up(self, key: str, error: Exception) -> None:
        namespace, name = split_key(key)
        source = self.lister.try_get(namespace, name)
        if source is not None:
            self.recorder.event(source, "Warning", "MirrorFailed", f"giving up after retries: {error}", resource=CONFIGMAPS)


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--identity", default=socket.gethostname(), help="this replica's name in the Lease")
    parser.add_argument("--kubeconfig", default=None, help="default: $KUBECONFIG or ~/.kube/config")
    parser.add_argument("--namespace", default=None, help="default: the kubeconfig context's")
    parser.add_argument("--lease-duration", type=float, default=15.0)
    parser.add_argument("--renew-deadline", type=float, default=10.0)
    parser.add_argument("--retry-period", type=float, default=2.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)

    config = load_kubeconfig(args.kubeconfig, namespace=args.namespace)
    namespace = config.namespace
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    async with RestClient(config) as client:
        broadcaster = EventBroadcaster(client)
        recorder = broadcaster.new_recorder(COMPONENT, host=socket.gethostname())
        controller = MirrorController(client, recorder, namespace=namespace)
        elector = LeaderElector(
            client, namespace, COMPONENT, args.identity,
            lease_duration=args.lease_duration, renew_deadline=args.renew_deadline, retry_period=args.retry_period,
            on_started_leading=controller.run,
            on_new_leader=lambda who: logger.info("leader is now %s", who or "(none)"),
            event_recorder=recorder,
        )
        events = asyncio.create_task(broadcaster.run(), name="event-broadcaster")
        election = asyncio.create_task(elector.run(), name="leader-election")
        stopping = asyncio.create_task(stop.wait(), name="wait-for-signal")
        print(f"{args.identity}: running; waiting for the {namespace}/{COMPONENT} lease", flush=True)
        await asyncio.wait({election, stopping}, return_when=asyncio.FIRST_COMPLETED)
        lost = election.done()
        for task in (election, stopping):
            task.cancel()
        await asyncio.wait({election, stopping})
        try:
            await asyncio.wait_for(broadcaster.flush(), timeout=2.0)  # write what is queued, briefly
        except TimeoutError:
            pass
        events.cancel()
        await asyncio.wait({events})
        if lost and election.exception() is not None:
            raise election.exception()  # type: ignore[misc]
    print(f"{args.identity}: {'lost the lease' if lost else 'stopped; lease released'}", flush=True)
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
