"""Plan first, then act: ``compute_pod_actions`` (upstream's computePodActions).

A pure function from the pod spec and what the runtime reports to a
:class:`PodActions` value; the pod worker carries it out. Rules:

- no ready sandbox → create one (unless the pod has finished for good, or its
  ``restartPolicy`` is ``Never`` and its containers ran in the dead one: then
  what still runs there is killed, as upstream);
- init containers run one at a time, in order, each to exit 0 before the
  next; a failed one is restarted (``OnFailure``/``Always``) or fails the
  pod (``Never``). Sidecars (init containers with ``restartPolicy: Always``)
  are started in order, must be *started* before the next init container
  runs, and are restarted whenever they stop;
- once initialised, every regular container that has not run is started;
  one that exited is restarted by policy: Always → always, OnFailure → on a
  non-zero exit, Never → never;
- a container whose liveness or startup probe failed is killed (and then
  restarted by the same rule);
- ephemeral containers (``kubectl debug``) start once the sandbox exists,
  even before initialisation ends, and are never restarted (upstream);
- a running container whose image no longer matches the spec (``kubectl set
  image`` on a pod) is killed and started again from the new image, without
  back-off.

Back-off is not decided here: the worker checks it for each restart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from k8py.kubelet.runtime.protocols import ContainerState, ContainerStatus

__all__ = ["PodActions", "compute_pod_actions", "should_restart"]


@dataclass
class PodActions:
    create_sandbox: bool = False
    #: the init container (regular or sidecar) to start next
    start_init: list[str] = field(default_factory=list)
    #: regular containers (and sidecars to restart) to start, in spec order
    start: list[str] = field(default_factory=list)
    #: ephemeral containers never started yet (each runs at most once)
    start_ephemeral: list[str] = field(default_factory=list)
    #: container id -> why it is killed
    kill: dict[str, str] = field(default_factory=dict)
    #: every regular init container completed and every sidecar started
    initialized: bool = False
    #: an init container failed under restartPolicy Never
    init_failed: bool = False


def should_restart(policy: str, cs: ContainerStatus) -> bool:
    if policy == "Always":
        return True
    if policy == "OnFailure":
        return cs.exit_code != 0
    return False


def compute_pod_actions(
    pod: Mapping[str, Any],
    *,
    sandbox_ready: bool,
    latest: Mapping[str, ContainerStatus | None],
    ever_initialized: bool,
    probe_failed: Callable[[str], str],
    is_started: Callable[[str], bool],
) -> PodActions:
    spec = pod.get("spec") or {}
    policy = spec.get("restartPolicy") or "Always"
    actions = PodActions()
    running = ContainerState.RUNNING
    if not sandbox_ready:
        if policy == "Never" and any(cs is not None for cs in latest.values()):
            # upstream: a pod that must not restart gets no new sandbox once its containers ran in one; what
            # still runs in the dead sandbox is killed, and the pod ends by its containers' exits
            actions.kill = {cs.id: "Pod sandbox changed, it will be killed." for cs in latest.values()
                            if cs is not None and cs.state is running}
            actions.initialized = ever_initialized
            return actions
        actions.create_sandbox = True

    def kill_if_failed(cs: ContainerStatus | None) -> None:
        if cs is not None and cs.state is running:
            why = probe_failed(cs.id)
            if why:
                actions.kill[cs.id] = why

    if sandbox_ready:
        actions.start_ephemeral = [c["name"] for c in spec.get("ephemeralContainers") or [] if latest.get(c["name"]) is None]
    initialized = True
    for c in spec.get("initContainers") or []:
        name = c["name"]
        cs = latest.get(name)
        if c.get("restartPolicy") == "Always":  # sidecar
            kill_if_failed(cs)
            if cs is None or cs.state is ContainerState.EXITED:
                (actions.start if ever_initialized else actions.start_init).append(name)
                if not ever_initialized:
                    initialized = False
                    break
            elif cs.state is running and not is_started(cs.id) and not ever_initialized:
                initialized = False
                break
            continue
        if ever_initialized:
            continue
        if cs is None:
            actions.start_init.append(name)
            initialized = False
            break
        if cs.state is ContainerState.EXITED and cs.exit_code == 0:
            continue
        initialized = False
        if cs.state is ContainerState.EXITED:
            if policy == "Never":
                actions.init_failed = True
            else:
                actions.start_init.append(name)
        else:
            kill_if_failed(cs)
        break
    actions.initialized = initialized or ever_initialized
    if not actions.initialized or actions.init_failed:
        return actions
    for c in spec.get("containers") or []:
        name = c["name"]
        cs = latest.get(name)
        kill_if_failed(cs)
        if cs is not None and cs.state is running and cs.id not in actions.kill and cs.image != c.get("image", cs.image):
            # the only mutable part of a container's spec: a new image means a new container
            actions.kill[cs.id] = f"Container {name} definition changed, will be restarted"
            actions.start.append(name)
            continue
        if cs is None:
            actions.start.append(name)
        elif cs.state is ContainerState.EXITED and should_restart(policy, cs):
            actions.start.append(name)
    return actions
