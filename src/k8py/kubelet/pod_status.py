"""The API PodStatus from the spec and the runtime's state: pure functions.

Upstream's ``generateAPIPodStatus`` / ``getPhase`` / ``convertToAPIContainerStatuses``:

- each container shows ``waiting`` (with the reason the worker recorded:
  ``ContainerCreating``, ``PodInitializing``, ``ErrImagePull``,
  ``CrashLoopBackOff`` …), ``running`` (``startedAt``) or ``terminated``
  (exit code, reason, times, containerID), plus ``lastState`` from the
  previous attempt, ``restartCount``, ``ready``, ``started``, ``image``,
  ``imageID`` and ``containerID``;
- the phase is getPhase's: Pending while initialising or any container waits
  without having run; Running while one runs (or all stopped and will
  restart); Succeeded when all stopped with 0 and none restarts; Failed when
  any failed and none restarts;
- conditions PodReadyToStartContainers, Initialized, ContainersReady, Ready
  (which also needs every ``spec.readinessGates`` condition True), keeping the
  conditions others own (readiness gates', DisruptionTarget) as they are
  and PodScheduled, with ``lastTransitionTime`` kept while a status holds;
- qosClass from requests and limits.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from k8py.kubelet.runtime.protocols import ContainerState, ContainerStatus

__all__ = ["ContainerView", "PodView", "container_statuses", "pod_phase", "qos_class", "build_pod_status", "ts"]


def ts(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


@dataclass
class ContainerView:
    """What the worker knows about one container of the spec."""

    name: str
    image: str
    latest: ContainerStatus | None = None
    previous: ContainerStatus | None = None
    waiting_reason: str = ""
    waiting_message: str = ""
    ready: bool = False
    started: bool = False


@dataclass
class PodView:
    pod: Mapping[str, Any]
    sandbox_ready: bool
    pod_ip: str
    host_ip: str
    runtime_name: str
    init: list[ContainerView] = field(default_factory=list)
    containers: list[ContainerView] = field(default_factory=list)
    #: ephemeral containers (debuggers): reported, never counted for phase or readiness
    ephemeral: list[ContainerView] = field(default_factory=list)
    #: set once the pod reached a terminal phase (it never leaves it)
    terminal_phase: str = ""
    reason: str = ""
    message: str = ""
    start_time: str = ""
    initialized: bool = False
    #: a node-pressure eviction's: the pod gets the DisruptionTarget condition (a local-storage
    #: eviction or an admission refusal, also reason Evicted, does not, as upstream)
    disruption: bool = False


def _state(cs: ContainerStatus, runtime: str) -> dict[str, Any]:
    if cs.state is ContainerState.RUNNING:
        return {"running": {"startedAt": ts(cs.started_at)}}
    if cs.state is ContainerState.EXITED:
        term: dict[str, Any] = {"exitCode": cs.exit_code, "reason": cs.reason or ("Completed" if cs.exit_code == 0 else "Error"),
                                "finishedAt": ts(cs.finished_at), "containerID": f"{runtime}://{cs.id}"}
        term["startedAt"] = ts(cs.started_at) if cs.started_at else ts(cs.finished_at)
        if cs.message:
            term["message"] = cs.message
        return {"terminated": term}
    return {"waiting": {"reason": "ContainerCreating"}}


def container_statuses(views: Sequence[ContainerView], runtime: str, *, default_waiting: str) -> list[dict[str, Any]]:
    out = []
    for v in views:
        st: dict[str, Any] = {"name": v.name, "image": v.image, "imageID": "", "ready": False, "restartCount": 0,
                              "started": False, "state": {}, "lastState": {}}
        latest = v.latest
        if latest is not None:
            st["restartCount"] = latest.attempt
            st["imageID"] = latest.image_ref
            st["containerID"] = f"{runtime}://{latest.id}"
        elif v.previous is not None:  # a new sandbox, its container not made yet: the count goes on
            st["restartCount"] = v.previous.attempt
        if v.previous is not None and v.previous.state is ContainerState.EXITED:
            st["lastState"] = _state(v.previous, runtime)
        if v.waiting_reason and not (latest is not None and latest.state is ContainerState.RUNNING):
            waiting: dict[str, Any] = {"reason": v.waiting_reason}
            if v.waiting_message:
                waiting["message"] = v.waiting_message
            if latest is not None and latest.state is ContainerState.EXITED and v.waiting_reason in ("CrashLoopBackOff", "RunContainerError"):
                st["lastState"] = _state(latest, runtime)
            st["state"] = {"waiting": waiting}
        elif latest is None or latest.state is ContainerState.CREATED:
            st["state"] = {"waiting": {"reason": default_waiting}}
        else:
            st["state"] = _state(latest, runtime)
        running = "running" in st["state"]
        st["ready"] = bool(v.ready and running)
        st["started"] = bool(v.started and running)
        out.append(st)
    return out


def _restart_policy(pod: Mapping[str, Any]) -> str:
    return (pod.get("spec") or {}).get("restartPolicy") or "Always"


def pod_phase(view: PodView, statuses: Sequence[Mapping[str, Any]], init_statuses: Sequence[Mapping[str, Any]]) -> str:
    if view.terminal_phase:
        return view.terminal_phase
    policy = _restart_policy(view.pod)
    spec_init = (view.pod.get("spec") or {}).get("initContainers") or []
    pending_init = 0
    failed_init = False
    for c, s in zip(spec_init, init_statuses):
        if c.get("restartPolicy") == "Always":
            if "running" not in s["state"] or not s.get("started"):
                pending_init += 0 if view.initialized else 1
            continue
        term = s["state"].get("terminated")
        if term is not None and term["exitCode"] == 0:
            continue
        if term is not None or s["lastState"].get("terminated", {}).get("exitCode", 0) != 0:
            failed_init = True
        pending_init += 1
    if failed_init and policy == "Never":
        return "Failed"
    if pending_init and not view.initialized:
        return "Pending"
    running = waiting = stopped = succeeded = 0
    for s in statuses:
        state = s["state"]
        if "running" in state:
            running += 1
        elif "terminated" in state:
            stopped += 1
            if state["terminated"]["exitCode"] == 0:
                succeeded += 1
        elif "waiting" in state:
            if s["lastState"].get("terminated") is not None:
                stopped += 1
            else:
                waiting += 1
    if waiting:
        return "Pending"
    if running:
        return "Running"
    if stopped:
        if policy == "Always":
            return "Running"
        if stopped == succeeded:
            return "Succeeded"
        if policy == "Never":
            return "Failed"
        return "Running"
    return "Pending"


def qos_class(pod: Mapping[str, Any]) -> str:
    spec = pod.get("spec") or {}
    containers = list(spec.get("containers") or []) + list(spec.get("initContainers") or [])
    requests_any = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        if req or lim:
            requests_any = True
        for r in ("cpu", "memory"):
            if r not in lim or str(req.get(r, lim[r]) if r in lim else "") != str(lim.get(r)):
                guaranteed = False
    if not requests_any:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _cond(kind: str, ok: bool, old: Mapping[str, Mapping[str, Any]], now: str, reason: str = "", message: str = "") -> dict[str, Any]:
    status = "True" if ok else "False"
    prev = old.get(kind)
    c: dict[str, Any] = {"type": kind, "status": status, "lastProbeTime": None,
                         "lastTransitionTime": prev["lastTransitionTime"] if prev and prev.get("status") == status and prev.get("lastTransitionTime") else now}
    if not ok and reason:
        c["reason"] = reason
        if message:
            c["message"] = message
    return c


#: the conditions the kubelet owns; any other (a readiness gate's, DisruptionTarget) is
#: someone else's and kept as the API has it, as upstream's status manager merges them
KUBELET_CONDITIONS = frozenset({"PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"})


def readiness_gates_problems(pod: Mapping[str, Any]) -> list[str]:
    """Why the pod's readiness gates keep it unready (empty: they all pass), in upstream's words."""
    present = {c.get("type"): c for c in ((pod.get("status") or {}).get("conditions") or [])}
    problems = []
    for gate in (pod.get("spec") or {}).get("readinessGates") or []:
        kind = gate.get("conditionType", "")
        condition = present.get(kind)
        if condition is None:
            problems.append(f'corresponding condition of pod readiness gate "{kind}" does not exist.')
        elif condition.get("status") != "True":
            problems.append(f'the status of pod readiness gate "{kind}" is not "True", but {condition.get("status")}')
    return problems


def _ready_condition(containers_ready: bool, not_ready: list[str], terminal: bool, pod: Mapping[str, Any],
                     old: Mapping[str, Mapping[str, Any]], now: str) -> dict[str, Any]:
    """Ready: every container ready, then every readiness gate's condition True (upstream's
    GeneratePodReadyCondition)."""
    if not containers_ready:
        return _cond("Ready", False, old, now, "PodCompleted" if terminal else "ContainersNotReady",
                     "" if terminal else f"containers with unready status: [{' '.join(not_ready)}]")
    problems = readiness_gates_problems(pod)
    if problems:
        return _cond("Ready", False, old, now, "ReadinessGatesNotReady", ", ".join(problems))
    return _cond("Ready", True, old, now)


def build_pod_status(view: PodView, *, now: float | None = None) -> dict[str, Any]:
    now_s = ts(time.time() if now is None else now)
    pod = view.pod
    old_status = pod.get("status") or {}
    old = {c.get("type"): c for c in old_status.get("conditions") or []}
    init_st = container_statuses(view.init, view.runtime_name, default_waiting="PodInitializing" if view.initialized else "ContainerCreating")
    main_st = container_statuses(view.containers, view.runtime_name, default_waiting="PodInitializing" if view.init and not view.initialized else "ContainerCreating")
    phase = pod_phase(view, main_st, init_st)
    terminal = phase in ("Succeeded", "Failed")
    not_ready = [s["name"] for s in main_st if not s["ready"]]
    containers_ready = not not_ready and not terminal
    initialized = view.initialized or phase == "Succeeded"
    conditions = [
        _cond("PodReadyToStartContainers", view.sandbox_ready, old, now_s),
        _cond("Initialized", initialized, old, now_s, "ContainersNotInitialized",
              f"containers with incomplete status: [{' '.join(v.name for v in view.init)}]"),
        _ready_condition(containers_ready, not_ready, terminal, pod, old, now_s),
        _cond("ContainersReady", containers_ready, old, now_s, "PodCompleted" if terminal else "ContainersNotReady",
              "" if terminal else f"containers with unready status: [{' '.join(not_ready)}]"),
        _cond("PodScheduled", True, old, now_s),
        *(c for c in old_status.get("conditions") or [] if c.get("type") not in KUBELET_CONDITIONS),
    ]
    if view.disruption and terminal and "DisruptionTarget" not in old:  # as upstream's eviction manager
        conditions.append({"type": "DisruptionTarget", "status": "True", "lastProbeTime": None, "lastTransitionTime": now_s,
                           "reason": "TerminationByKubelet", "message": view.message})
    status: dict[str, Any] = {
        "phase": phase, "conditions": conditions, "hostIP": view.host_ip, "hostIPs": [{"ip": view.host_ip}],
        "containerStatuses": main_st, "qosClass": qos_class(pod),
    }
    if view.start_time:
        status["startTime"] = view.start_time
    if view.pod_ip:
        status["podIP"] = view.pod_ip
        status["podIPs"] = [{"ip": view.pod_ip}]
    if init_st:
        status["initContainerStatuses"] = init_st
    if view.ephemeral:
        status["ephemeralContainerStatuses"] = [
            st | {"ready": False} for st in container_statuses(view.ephemeral, view.runtime_name, default_waiting="ContainerCreating")
        ]
    if view.reason:
        status["reason"] = view.reason
    if view.message:
        status["message"] = view.message
    return status
