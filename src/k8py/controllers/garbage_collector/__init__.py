"""The garbage collector (``garbagecollector``): cascading deletion across
every served resource, in the three propagation modes.

Modules: ``monitors`` (discovery and metadata-only informers), ``graph``
(the ownerReference graph fed by them), ``collector`` (the attempt-to-delete
and attempt-to-orphan workers that read the API and delete or patch).
Watches every deletable resource; writes deletes, ownerReference removals
and the ``foregroundDeletion``/``orphan`` finalizers' removal.
"""

from __future__ import annotations

from k8py.controllers.context import ControllerContext
from k8py.controllers.garbage_collector.collector import GarbageCollector

__all__ = ["GarbageCollector", "new_controller"]


def new_controller(ctx: ControllerContext) -> GarbageCollector:
    return GarbageCollector(ctx)
