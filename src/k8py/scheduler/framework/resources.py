"""A pod's and a node's resources as the scheduler counts them (upstream
``framework.Resource`` and ``resource.PodRequests``).

:class:`Resources` holds cpu in millicores, memory and ephemeral storage in
bytes, the pod count, and extended resources (hugepages too) by name.
:func:`pod_requests` is what a pod asks for: regular containers and sidecars
run together; each classic init container runs alone beside the sidecars
started before it; the larger of the two, plus the pod overhead. With
``non_zero``, cpu and memory a container leaves unset count as 100m and
200Mi (what scoring uses, so empty pods still spread).

:func:`pod_requests_pair` gives both at once; for the common pod (no init
containers, no overhead) it reads each container once: every pending pod's
PodInfo is built from it, and the general path made eight ``Resources``.
"""

from __future__ import annotations

from typing import Any

from k8py.api.quantity import quantity_milli_value, quantity_value

__all__ = ["Resources", "pod_requests", "pod_requests_pair", "DEFAULT_MILLI_CPU_REQUEST", "DEFAULT_MEMORY_REQUEST",
           "CPU", "MEMORY", "EPHEMERAL", "PODS"]

Object = dict[str, Any]

DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
CPU, MEMORY, EPHEMERAL, PODS = "cpu", "memory", "ephemeral-storage", "pods"


class Resources:
    """cpu in millicores, memory and ephemeral storage in bytes, other (extended,
    hugepages) resources by name in whole units."""

    __slots__ = ("milli_cpu", "memory", "ephemeral", "pods", "scalar")

    def __init__(self, milli_cpu: int = 0, memory: int = 0, ephemeral: int = 0, pods: int = 0,
                 scalar: dict[str, int] | None = None) -> None:
        self.milli_cpu = milli_cpu
        self.memory = memory
        self.ephemeral = ephemeral
        self.pods = pods
        self.scalar = scalar if scalar is not None else {}

    @classmethod
    def from_list(cls, values: Object | None) -> Resources:
        r = cls()
        for name, q in (values or {}).items():
            r.set(name, q)
        return r

    def set(self, name: str, q: Any) -> None:
        if name == CPU:
            self.milli_cpu = quantity_milli_value(q)
        elif name == MEMORY:
            self.memory = quantity_value(q)
        elif name == EPHEMERAL:
            self.ephemeral = quantity_value(q)
        elif name == PODS:
            self.pods = quantity_value(q)
        else:
            self.scalar[name] = quantity_value(q)

    def get(self, name: str) -> int:
        if name == CPU:
            return self.milli_cpu
        if name == MEMORY:
            return self.memory
        if name == EPHEMERAL:
            return self.ephemeral
        if name == PODS:
            return self.pods
        return self.scalar.get(name, 0)

    def add(self, other: Resources, sign: int = 1) -> None:
        self.milli_cpu += sign * other.milli_cpu
        self.memory += sign * other.memory
        self.ephemeral += sign * other.ephemeral
        for k, v in other.scalar.items():
            self.scalar[k] = self.scalar.get(k, 0) + sign * v

    def set_max(self, other: Resources) -> None:
        self.milli_cpu = max(self.milli_cpu, other.milli_cpu)
        self.memory = max(self.memory, other.memory)
        self.ephemeral = max(self.ephemeral, other.ephemeral)
        for k, v in other.scalar.items():
            self.scalar[k] = max(self.scalar.get(k, 0), v)

    def copy(self) -> Resources:
        return Resources(self.milli_cpu, self.memory, self.ephemeral, self.pods, dict(self.scalar))

    def names(self) -> list[str]:
        return [CPU, MEMORY, EPHEMERAL, *self.scalar]

    def __repr__(self) -> str:
        return f"Resources(cpu={self.milli_cpu}m, memory={self.memory}, ephemeral={self.ephemeral}, {self.scalar})"


def _container_requests(c: Object, non_zero: bool) -> Resources:
    res = c.get("resources") or {}
    # a container with limits and no requests requests its limits (API defaulting does this;
    # repeated here so objects from other servers agree)
    values = dict(res.get("limits") or {})
    values.update(res.get("requests") or {})
    r = Resources.from_list(values)
    if non_zero:
        if CPU not in values:
            r.milli_cpu = DEFAULT_MILLI_CPU_REQUEST
        if MEMORY not in values:
            r.memory = DEFAULT_MEMORY_REQUEST
    return r


def pod_requests(pod: Object, *, non_zero: bool = False) -> Resources:
    """Upstream ``resource.PodRequests``: regular containers and sidecars run
    together; each classic init container runs alone beside the sidecars
    started before it; the larger of the two, plus the pod overhead."""
    spec = pod.get("spec") or {}
    total = Resources()
    for c in spec.get("containers") or ():
        total.add(_container_requests(c, non_zero))
    sidecars = Resources()
    init_max = Resources()
    for c in spec.get("initContainers") or ():
        r = _container_requests(c, non_zero)
        if c.get("restartPolicy") == "Always":
            sidecars.add(r)
            total.add(r)
            init_max.set_max(sidecars)
        else:
            step = sidecars.copy()
            step.add(r)
            init_max.set_max(step)
    total.set_max(init_max)
    overhead = spec.get("overhead")
    if overhead:
        total.add(Resources.from_list(overhead))
    return total


def _container_values(c: Object) -> dict[str, Any]:
    res = c.get("resources") or {}
    # a container with limits and no requests requests its limits (API defaulting does this;
    # repeated here so objects from other servers agree)
    limits = res.get("limits")
    requests = res.get("requests") or {}
    if not limits:
        return requests  # type: ignore[no-any-return]
    values = dict(limits)
    values.update(requests)
    return values


def pod_requests_pair(pod: Object) -> tuple[Resources, Resources]:
    """``(pod_requests(pod), pod_requests(pod, non_zero=True))``."""
    spec = pod.get("spec") or {}
    if spec.get("initContainers") or spec.get("overhead"):
        return pod_requests(pod), pod_requests(pod, non_zero=True)
    total, non_zero = Resources(), Resources()
    for c in spec.get("containers") or ():
        values = _container_values(c)
        r = Resources.from_list(values)
        total.add(r)
        if CPU not in values:
            r.milli_cpu = DEFAULT_MILLI_CPU_REQUEST
        if MEMORY not in values:
            r.memory = DEFAULT_MEMORY_REQUEST
        non_zero.add(r)
    return total, non_zero
