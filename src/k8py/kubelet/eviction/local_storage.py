"""Local ephemeral-storage eviction (upstream's ``localStorageEviction``).

Every eviction pass, before the node's thresholds are looked at, each active pod is checked
against its own storage limits, in upstream's order, and evicted at once (grace 0, reason
``Evicted``) on the first one it breaks:

1. an ``emptyDir`` holding more than its ``sizeLimit``::

       Usage of EmptyDir volume "scratch" exceeds the limit "1Mi".

2. the pod as a whole — its containers' writable layers and logs plus its emptyDirs — over
   the sum of its containers' ``limits.ephemeral-storage`` (only when one sets it)::

       Pod ephemeral local storage usage exceeds the total limit of containers 4Mi.

3. one container's writable layer and logs over its own ``limits.ephemeral-storage``::

       Container c exceeded its local ephemeral storage limit "1Mi".

(each message ends in a space, as upstream's formats do). :func:`violation` is the decision,
a pure function of the pod and its :class:`StorageUsage`; :func:`measure` reads the usage:
each emptyDir's directory, and for each container its newest attempt's log files (rotated
ones too) plus, where the runtime can say (``writable_layer_bytes``), its writable layer.
Sizes are allocated blocks, as ``du`` counts them. A process-runtime container of a catalog
image has no writable layer on disk (its root is the host's, read-only; ``/tmp`` is a tmpfs):
its logs and volumes are what it can fill.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from k8py.kubelet.eviction.ranking import format_quantity
from k8py.kubelet.runtime.protocols import ContainerStatus, Runtime

__all__ = ["StorageUsage", "has_limits", "violation", "measure"]


@dataclass(frozen=True)
class StorageUsage:
    #: emptyDir volume name -> bytes
    volumes: Mapping[str, int] = field(default_factory=dict)
    #: container name -> bytes of its writable layer and logs
    containers: Mapping[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.volumes.values()) + sum(self.containers.values())


def _bytes(q: Any) -> int:
    from k8py.kubelet.config import parse_quantity_bytes
    return parse_quantity_bytes(str(q))


def _storage_limit(container: Mapping[str, Any]) -> str | None:
    return ((container.get("resources") or {}).get("limits") or {}).get("ephemeral-storage")


def has_limits(pod: Mapping[str, Any]) -> bool:
    """Whether ``pod`` sets any limit this module checks (only those pods are measured)."""
    spec = pod.get("spec") or {}
    return any((v.get("emptyDir") or {}).get("sizeLimit") for v in spec.get("volumes") or []) or \
        any(_storage_limit(c) is not None for c in spec.get("containers") or [])


def violation(pod: Mapping[str, Any], usage: StorageUsage) -> str | None:
    """The eviction message for the first local-storage limit ``pod`` breaks, in upstream's order; else None."""
    spec = pod.get("spec") or {}
    for vol in spec.get("volumes") or []:
        limit = (vol.get("emptyDir") or {}).get("sizeLimit")
        used = usage.volumes.get(vol["name"])
        if limit and used is not None and _bytes(limit) > 0 and used > _bytes(limit):
            return f'Usage of EmptyDir volume "{vol["name"]}" exceeds the limit "{limit}". '
    limits = [lim for lim in (_storage_limit(c) for c in spec.get("containers") or []) if lim is not None]
    if limits:
        total = sum(_bytes(lim) for lim in limits)
        if usage.total > total:
            shown = limits[0] if len(limits) == 1 else format_quantity(total)
            return f"Pod ephemeral local storage usage exceeds the total limit of containers {shown}. "
    for c in spec.get("containers") or []:
        limit = _storage_limit(c)
        used = usage.containers.get(c["name"])
        if limit is not None and _bytes(limit) > 0 and used is not None and used > _bytes(limit):
            return f'Container {c["name"]} exceeded its local ephemeral storage limit "{limit}". '
    return None


def _du(path: str) -> int:
    size = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                size += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
    return size


def _logs(path: str) -> int:
    size = 0
    for f in glob.glob(glob.escape(path) + "*") if path else ():
        try:
            size += os.lstat(f).st_blocks * 512
        except OSError:
            continue
    return size


async def measure(runtime: Runtime, pod: Mapping[str, Any], sandbox_id: str, *, pod_dir: str) -> StorageUsage:
    """What ``pod`` (running in ``sandbox_id``, its files under ``pod_dir``) uses of local storage now."""
    spec = pod.get("spec") or {}
    volumes = {v["name"]: _du(os.path.join(pod_dir, "volumes", "kubernetes.io~emptydir", v["name"]))
               for v in spec.get("volumes") or [] if "emptyDir" in v}
    newest: dict[str, ContainerStatus] = {}
    for c in sorted(await runtime.list_containers(sandbox_id), key=lambda c: (c.attempt, c.created_at)):
        newest[c.name] = c
    layer = getattr(runtime, "writable_layer_bytes", None)
    containers: dict[str, int] = {}
    for c in spec.get("containers") or []:
        status = newest.get(c["name"])
        if status is None:
            continue
        containers[c["name"]] = _logs(status.log_path) + (layer(status.id) if layer is not None else 0)
    return StorageUsage(volumes, containers)

