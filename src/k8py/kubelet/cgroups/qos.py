"""QoS placement and pod-level resources, as upstream's kubelet computes them.

Upstream (``pkg/kubelet/cm``): Guaranteed pods sit directly under
``kubepods``, Burstable under ``kubepods/burstable``, BestEffort under
``kubepods/besteffort``, each pod in ``pod<uid>``. The pod cgroup gets a
memory limit and a CPU quota only when *every* container has that limit
(the sum of them; init containers count by their maximum), CPU shares from
the sum of CPU requests (``milliCPU * 1024 / 1000``, at least 2; BestEffort
pods get 2), and the kubelet's ``podPidsLimit``.
"""

from __future__ import annotations

from typing import Any, Mapping

from k8py.kubelet.runtime.protocols import Resources

__all__ = ["cgroup_parent", "pod_resources", "milli_cpu", "shares", "MIN_SHARES", "CPU_PERIOD"]

MIN_SHARES = 2
CPU_PERIOD = 100_000


def milli_cpu(q: Any) -> int:
    s = str(q).strip()
    if s.endswith("m"):
        return int(float(s[:-1]))
    return int(float(s) * 1000)


def shares(milli: int) -> int:
    return max(MIN_SHARES, milli * 1024 // 1000) if milli else MIN_SHARES


def cgroup_parent(qos: str, uid: str) -> str:
    pod = f"pod{uid}"
    if qos == "Guaranteed":
        return f"kubepods/{pod}"
    return f"kubepods/{'besteffort' if qos == 'BestEffort' else 'burstable'}/{pod}"


def pod_resources(pod: Mapping[str, Any], qos: str, *, pids_limit: int = 0) -> Resources:
    from k8py.kubelet.config import parse_quantity_bytes

    spec = pod.get("spec") or {}
    containers = list(spec.get("containers") or [])
    inits = list(spec.get("initContainers") or [])

    def res(c: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
        return ((c.get("resources") or {}).get(kind)) or {}

    def total(kind: str, name: str, conv: Any) -> int | None:
        values = [conv(res(c, kind)[name]) if name in res(c, kind) else None for c in containers]
        if kind == "limits" and (not values or any(v is None for v in values)):
            return None
        main = sum(v for v in values if v is not None)
        init = max((conv(res(c, kind)[name]) for c in inits if name in res(c, kind)), default=0)
        return max(main, init)

    memory = total("limits", "memory", parse_quantity_bytes)
    cpu = total("limits", "cpu", milli_cpu)
    requested = total("requests", "cpu", milli_cpu) or 0
    if not requested and qos != "BestEffort":
        requested = sum(milli_cpu(res(c, "limits")["cpu"]) for c in containers if "cpu" in res(c, "limits"))
    return Resources(cpu_quota=cpu * CPU_PERIOD // 1000 if cpu else 0, cpu_period=CPU_PERIOD,
                     cpu_shares=MIN_SHARES if qos == "BestEffort" else shares(requested), memory_limit=memory or 0,
                     pids_limit=max(0, pids_limit))
