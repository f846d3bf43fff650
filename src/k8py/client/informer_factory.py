"""InformerFactory: one shared informer per resource type (and scope) per process.

Components ask the factory, never construct informers themselves, so that the
controller manager's twenty controllers watching pods share one watch and
one cache (client-go's ``SharedInformerFactory``)::

    factory = InformerFactory(client, resync_period=0, transform=drop_managed_fields)
    pods = factory.informer(PODS)
    pods.add_event_handler(on_add=..., on_update=..., on_delete=...)
    factory.start()                      # starts informers not yet started
    await factory.wait_for_cache_sync()
    ...
    await factory.shutdown()

An informer is keyed by (resource, namespace, label selector, field
selector); asking again returns the same one. :meth:`start` may be called
again after adding informers; each runs as a named task owned by the
factory until :meth:`shutdown` (or cancel :meth:`run`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from k8py.client.listers import Lister
from k8py.client.resource import Resource
from k8py.client.rest import RestClient
from k8py.client.shared_informer import SharedIndexInformer, TransformFunc

__all__ = ["InformerFactory"]

_Key = tuple[Resource, str | None, str | None, str | None]


class InformerFactory:
    def __init__(
        self,
        client: RestClient,
        *,
        namespace: str | None = None,
        resync_period: float = 0.0,
        transform: TransformFunc | None = None,
        **informer_options: Any,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.resync_period = resync_period
        self.transform = transform
        self._options = informer_options
        self._informers: dict[_Key, SharedIndexInformer] = {}
        self._tasks: dict[_Key, asyncio.Task[None]] = {}

    def informer(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        **options: Any,
    ) -> SharedIndexInformer:
        """The shared informer for this resource and scope (created on first use)."""
        ns = namespace if namespace is not None else (self.namespace if resource.namespaced else None)
        key = (resource, ns, label_selector, field_selector)
        informer = self._informers.get(key)
        if informer is None:
            informer = SharedIndexInformer(
                self.client, resource, namespace=ns, label_selector=label_selector, field_selector=field_selector,
                resync_period=self.resync_period, transform=self.transform, **{**self._options, **options},
            )
            self._informers[key] = informer
        return informer

    def existing(self, group: str, plural: str) -> SharedIndexInformer | None:
        """The cluster-wide, unfiltered informer of ``group``/``plural`` if some
        component already asked for one (any version), else ``None``: for a
        reader that wants to share a watch others keep but not to start one
        of full objects itself (the garbage collector's monitors)."""
        for (resource, ns, labels, fields), informer in self._informers.items():
            if (resource.group, resource.plural) == (group, plural) and ns is None and labels is None and fields is None:
                return informer
        return None

    def lister(self, resource: Resource, **scope: Any) -> Lister:
        return self.informer(resource, **scope).lister

    def start(self) -> None:
        """Start every informer not started yet (needs a running loop)."""
        for key, informer in self._informers.items():
            if key not in self._tasks:
                self._tasks[key] = asyncio.create_task(informer.run(), name=f"informer-{informer.resource.qualified}")

    async def wait_for_cache_sync(self, timeout: float | None = None) -> bool:
        """Wait until every started informer has synced; ``False`` on timeout."""
        started = [self._informers[k] for k in self._tasks]
        results = await asyncio.gather(*(i.wait_for_cache_sync(timeout) for i in started))
        return all(results)

    async def shutdown(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        # raises CancelledError only if *this* task is cancelled meanwhile
        await asyncio.gather(*tasks, return_exceptions=True)

    async def run(self) -> None:
        """Start the informers and wait until cancelled, then shut them down."""
        self.start()
        try:
            await asyncio.gather(*self._tasks.values())
        finally:
            await self.shutdown()
