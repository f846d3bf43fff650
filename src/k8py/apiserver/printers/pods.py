"""The Pod printer (core group): READY, STATUS and RESTARTS exactly as kubectl shows them.

Pods get their own module because their STATUS column is a small state
machine, the one users read most. It follows upstream ``printPod`` (1.32)
step by step:

1. start from ``status.reason`` or ``status.phase``; a ``PodScheduled``
   condition with reason ``SchedulingGated`` wins;
2. walk init containers in order; the first one that has not succeeded decides
   ``Init:<reason>``, ``Init:ExitCode:N``, ``Init:Signal:N`` or ``Init:i/n``
   (sidecars — restartable init containers — that have started are skipped
   and count towards READY);
3. once initialised, walk app containers **last to first**, so the first
   container's waiting/terminated reason is the one left standing;
   ``Completed`` with a container still running becomes ``Running`` (pod
   Ready) or ``NotReady``;
4. a deletion timestamp turns a non-terminal pod into ``Terminating`` (or
   ``Unknown`` when the node controller marked it ``NodeLost``).

RESTARTS sums restart counts (only sidecars' and app containers' once
initialised) and appends ``(<age> ago)`` of the latest
``lastState.terminated.finishedAt``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .cells import object_age, dig
from .columns import Column, Object, Printer, age_column, name_column
from .durations import parse_time, since

__all__ = ["POD", "PodSummary", "summarize", "pod_cells", "pod_conditions"]

_CORE = "io.k8s.api.core.v1."
NODE_UNREACHABLE_REASON = "NodeLost"

COLUMNS = (
    name_column(),
    Column("Ready", doc="The aggregate readiness state of this pod for accepting traffic."),
    Column("Status", doc="The aggregate status of the containers in this pod."),
    Column(
        "Restarts",
        doc="The number of times the containers in this pod have been restarted "
        "and when the last container in this pod has restarted.",
    ),
    age_column(),
    Column("IP", priority=1, doc=(_CORE + "PodStatus", "podIP")),
    Column("Node", priority=1, doc=(_CORE + "PodSpec", "nodeName")),
    Column("Nominated Node", priority=1, doc=(_CORE + "PodStatus", "nominatedNodeName")),
    Column("Readiness Gates", priority=1, doc=(_CORE + "PodSpec", "readinessGates")),
)


def _is_restartable(container: dict[str, Any] | None) -> bool:
    return container is not None and container.get("restartPolicy") == "Always"


def _condition_true(pod: Object, kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in dig(pod, "status", "conditions", default=[])
    )


class _LatestRestart:
    """The latest ``lastState.terminated.finishedAt`` seen (Go's zero time when none)."""

    def __init__(self) -> None:
        self.at: datetime | None = None
        self.raw: str | None = None

    def see(self, status: dict[str, Any]) -> None:
        raw = dig(status, "lastState", "terminated", "finishedAt")
        at = parse_time(raw)
        if at is not None and (self.at is None or self.at < at):
            self.at, self.raw = at, raw


def _terminated_reason(term: dict[str, Any], prefix: str = "") -> str:
    if term.get("reason"):
        return prefix + term["reason"]
    if term.get("signal"):
        return f"{prefix}Signal:{term['signal']}"
    return f"{prefix}ExitCode:{term.get('exitCode', 0)}"


@dataclass(frozen=True, slots=True)
class PodSummary:
    """What the READY, STATUS and RESTARTS cells are made of."""

    status: str
    ready: int
    total: int
    restarts: int
    last_restart: str | None  # raw finishedAt of the latest restart, if known


def summarize(pod: Object) -> PodSummary:
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    phase = status.get("phase", "")
    reason = status.get("reason") or phase
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"

    init_specs = {c.get("name"): c for c in spec.get("initContainers") or []}
    total = len(spec.get("containers") or []) + sum(
        1 for c in init_specs.values() if _is_restartable(c)
    )
    ready = 0
    restarts = 0
    sidecar_restarts = 0
    latest = _LatestRestart()
    latest_sidecar = _LatestRestart()

    initializing = False
    init_count = len(spec.get("initContainers") or [])
    for i, cs in enumerate(status.get("initContainerStatuses") or []):
        restarts += int(cs.get("restartCount") or 0)
        latest.see(cs)
        sidecar = _is_restartable(init_specs.get(cs.get("name")))
        if sidecar:
            sidecar_restarts += int(cs.get("restartCount") or 0)
            latest_sidecar.see(cs)
        state = cs.get("state") or {}
        term = state.get("terminated")
        waiting_reason = dig(state, "waiting", "reason", default="")
        if term is not None and int(term.get("exitCode") or 0) == 0:
            continue
        if sidecar and cs.get("started"):
            if cs.get("ready"):
                ready += 1
            continue
        if term is not None:
            reason = _terminated_reason(term, "Init:")
        elif waiting_reason and waiting_reason != "PodInitializing":
            reason = "Init:" + waiting_reason
        else:
            reason = f"Init:{i}/{init_count}"
        initializing = True
        break

    if not initializing or _condition_true(pod, "Initialized"):
        restarts = sidecar_restarts
        latest = latest_sidecar
        has_running = False
        for cs in reversed(status.get("containerStatuses") or []):
            restarts += int(cs.get("restartCount") or 0)
            latest.see(cs)
            state = cs.get("state") or {}
            waiting_reason = dig(state, "waiting", "reason", default="")
            term = state.get("terminated")
            if waiting_reason:
                reason = waiting_reason
            elif term is not None:
                reason = _terminated_reason(term)
            elif cs.get("ready") and state.get("running") is not None:
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            reason = "Running" if _condition_true(pod, "Ready") else "NotReady"

    deleting = bool(dig(pod, "metadata", "deletionTimestamp"))
    if deleting and status.get("reason") == NODE_UNREACHABLE_REASON:
        reason = "Unknown"
    elif deleting and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    return PodSummary(reason, ready, total, restarts, latest.raw)


def _readiness_gates(pod: Object) -> str:
    gates = dig(pod, "spec", "readinessGates", default=[])
    if not gates:
        return "<none>"
    conditions = dig(pod, "status", "conditions", default=[])
    true = 0
    for gate in gates:
        for cond in conditions:
            if cond.get("type") == gate.get("conditionType"):
                true += cond.get("status") == "True"
                break
    return f"{true}/{len(gates)}"


def pod_cells(pod: Object, now: datetime) -> list[Any]:
    summary = summarize(pod)
    restarts_cell = str(summary.restarts)
    if summary.restarts and summary.last_restart is not None:
        restarts_cell = f"{summary.restarts} ({since(summary.last_restart, now)} ago)"
    status = pod.get("status") or {}
    ips = status.get("podIPs") or []
    pod_ip = (ips[0].get("ip") if ips else None) or status.get("podIP") or "<none>"
    return [
        dig(pod, "metadata", "name", default=""),
        f"{summary.ready}/{summary.total}",
        summary.status,
        restarts_cell,
        object_age(pod, now),
        pod_ip,
        dig(pod, "spec", "nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        _readiness_gates(pod),
    ]


def pod_conditions(pod: Object) -> list[dict[str, str]] | None:
    phase = dig(pod, "status", "phase")
    if phase == "Succeeded":
        return [_completed("Succeeded", "The pod has completed successfully.")]
    if phase == "Failed":
        return [_completed("Failed", "The pod failed.")]
    return None


def _completed(reason: str, message: str) -> dict[str, str]:
    return {"type": "Completed", "status": "True", "reason": reason, "message": message}


POD = Printer(COLUMNS, pod_cells, pod_conditions)
