"""Which pod is evicted first, and what it is told (upstream's ``eviction/helpers.go``).

Rankings, first evicted first, for the resource a threshold starves:

- **memory**: pods whose usage exceeds their requests (a BestEffort pod requests nothing, so
  any usage does), then lower priority, then the larger usage above requests;
- **ephemeral-storage**: the same with disk usage (container logs, emptyDir volumes, writable
  layers under the pod's directories);
- **pids**: lower priority, then more processes;
- **inodes**: lower priority, then more inodes used.

Critical pods (priority ≥ 2000000000, ``system-cluster-critical`` and up) and static pods are
never evicted, as upstream. The message is upstream's, word for word, e.g.::

    The node was low on resource: memory. Threshold quantity: 100Mi, available: 51200Ki.
    Container hog was using 81920Ki, request is 0, has larger consumption of memory.

with quantities printed as Kubernetes prints binary quantities (:func:`format_quantity`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

__all__ = ["PodUsage", "rank", "eviction_message", "format_quantity", "requests_of", "is_critical"]

CRITICAL_PRIORITY = 2_000_000_000


@dataclass(frozen=True)
class PodUsage:
    """What one pod uses now (per container where a message names containers)."""

    memory: Mapping[str, int] = field(default_factory=dict)
    disk: Mapping[str, int] = field(default_factory=dict)
    processes: int = 0
    inodes: int = 0


def format_quantity(n: int) -> str:
    """Go's ``resource.Quantity.String()`` for a BinarySI amount: ``100Mi``, ``51200Ki``, ``1023``."""
    if n == 0:
        return "0"
    for suffix, size in (("Ei", 1024**6), ("Pi", 1024**5), ("Ti", 1024**4), ("Gi", 1024**3), ("Mi", 1024**2), ("Ki", 1024)):
        if n % size == 0:
            return f"{n // size}{suffix}"
    return str(n)


def _bytes(q: Any) -> int:
    from k8py.kubelet.config import parse_quantity_bytes
    return parse_quantity_bytes(str(q))


def requests_of(container: Mapping[str, Any], resource: str) -> int:
    req = ((container.get("resources") or {}).get("requests") or {}).get(resource)
    if req is None:  # a limit alone defaults the request to it (API defaulting)
        req = ((container.get("resources") or {}).get("limits") or {}).get(resource)
    return _bytes(req) if req is not None else 0


def _pod_requests(pod: Mapping[str, Any], resource: str) -> int:
    return sum(requests_of(c, resource) for c in (pod.get("spec") or {}).get("containers") or [])


def _priority(pod: Mapping[str, Any]) -> int:
    return int((pod.get("spec") or {}).get("priority") or 0)


def is_critical(pod: Mapping[str, Any]) -> bool:
    meta = pod.get("metadata") or {}
    static = (meta.get("annotations") or {}).get("kubernetes.io/config.source", "api") != "api"
    return static or _priority(pod) >= CRITICAL_PRIORITY


def rank(pods: Sequence[Mapping[str, Any]], usage: Mapping[str, PodUsage], resource: str) -> list[Mapping[str, Any]]:
    """``pods`` in eviction order for ``resource``; critical ones left out."""
    def use(pod: Mapping[str, Any]) -> PodUsage:
        return usage.get(pod["metadata"]["uid"], PodUsage())

    def key(pod: Mapping[str, Any]) -> tuple[Any, ...]:
        u = use(pod)
        if resource in ("memory", "ephemeral-storage"):
            used = sum((u.memory if resource == "memory" else u.disk).values())
            over = used - _pod_requests(pod, resource)
            return (0 if over > 0 else 1, _priority(pod), -over)
        if resource == "pids":
            return (_priority(pod), -u.processes)
        return (_priority(pod), -u.inodes)

    return sorted((p for p in pods if not is_critical(p)), key=key)


def eviction_message(resource: str, pod: Mapping[str, Any], usage: PodUsage | None, *, quantity: int | None,
                     available: int | None) -> str:
    message = f"The node was low on resource: {resource}. "
    if quantity is not None and available is not None:
        message += f"Threshold quantity: {format_quantity(quantity)}, available: {format_quantity(available)}. "
    if usage is None or resource not in ("memory", "ephemeral-storage"):
        return message
    per_container = usage.memory if resource == "memory" else usage.disk
    for c in (pod.get("spec") or {}).get("containers") or []:
        used = per_container.get(c["name"])
        request = requests_of(c, resource)
        if used is not None and used > request:
            message += f"Container {c['name']} was using {format_quantity(used)}, request is {format_quantity(request)}, " \
                       f"has larger consumption of {resource}. "
    return message
