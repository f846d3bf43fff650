"""SchedulingGates (PreEnqueue): a pod with ``spec.schedulingGates`` stays out of
the active queue (``SchedulingGated``) until every gate is removed."""

from __future__ import annotations

from k8py.scheduler.framework.status import Status, unresolvable
from k8py.scheduler.framework.types import PodInfo
from k8py.scheduler.plugins.names import SCHEDULING_GATES

__all__ = ["SchedulingGates", "gates_status"]


def gates_status(pod: PodInfo) -> Status | None:
    gates = [g.get("name", "") for g in pod.spec.get("schedulingGates") or ()]
    if not gates:
        return None
    return unresolvable(f"waiting for scheduling gates: [{' '.join(gates)}]")


class SchedulingGates:
    name = SCHEDULING_GATES

    def __init__(self, args: dict | None = None, handle: object = None) -> None:
        pass

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        return gates_status(pod)
