"""Which container attempt a kubelet request means, with upstream's refusals.

The kubelet server's requests name ``namespace/pod/container``; the runtime
knows containers by id and attempt. :func:`pick_attempt` chooses, as
upstream's ``validateContainerLogStatus`` does:

- the newest attempt (running or exited; while a restarting container waits
  in back-off the newest attempt is the one that exited, so its log shows);
- with ``previous``: the attempt before the newest, else
  ``previous terminated container "c" in pod "p" not found``;
- no attempt yet: ``container "c" in pod "p" is waiting to start: <reason>``
  (the reason from the pod's status, ``ContainerCreating`` if none).

Errors are :class:`KubeletError` values carrying the HTTP code and message the
server answers with (as a ``Status``).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import orjson

from k8py.kubelet.runtime.protocols import ContainerState, ContainerStatus
from k8py.kubelet.server_context import ServerContext

__all__ = ["KubeletError", "pick_attempt", "find_pod", "running_attempt"]

_REASONS = {400: "BadRequest", 404: "NotFound", 500: "InternalError"}


class KubeletError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def body(self) -> bytes:
        return orjson.dumps(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": self.message,
                "reason": _REASONS.get(self.code, ""),
                "code": self.code,
            }
        )


def find_pod(ctx: ServerContext, namespace: str, name: str) -> Mapping[str, Any]:
    for pod in ctx.pods.pods():
        meta = pod.get("metadata") or {}
        if meta.get("namespace") == namespace and meta.get("name") == name:
            return pod
    raise KubeletError(404, f'pod "{name}" in namespace "{namespace}" does not exist on node "{ctx.node_name}"')


def _waiting_reason(pod: Mapping[str, Any], container: str) -> str:
    status = pod.get("status") or {}
    for key in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
        for cs in status.get(key) or []:
            if cs.get("name") == container:
                waiting = (cs.get("state") or {}).get("waiting") or {}
                return waiting.get("reason") or "ContainerCreating"
    return "ContainerCreating"


def _declared(pod: Mapping[str, Any], container: str) -> bool:
    spec = pod.get("spec") or {}
    return any(
        c.get("name") == container
        for key in ("containers", "initContainers", "ephemeralContainers")
        for c in spec.get(key) or []
    )


async def pick_attempt(ctx: ServerContext, namespace: str, name: str, container: str, *, previous: bool = False) -> ContainerStatus:
    pod = find_pod(ctx, namespace, name)
    if not _declared(pod, container):
        raise KubeletError(400, f"container {container} is not valid for pod {name}")
    attempts: Sequence[ContainerStatus] = [c for c in await ctx.pods.containers(namespace, name) if c.name == container]
    if previous:
        if len(attempts) < 2:
            raise KubeletError(400, f'previous terminated container "{container}" in pod "{name}" not found')
        return attempts[-2]
    if not attempts:
        raise KubeletError(400, f'container "{container}" in pod "{name}" is waiting to start: {_waiting_reason(pod, container)}')
    return attempts[-1]


async def running_attempt(ctx: ServerContext, namespace: str, name: str, container: str) -> ContainerStatus:
    """The container's running attempt, for exec and attach."""
    pod = find_pod(ctx, namespace, name)
    if not _declared(pod, container):
        raise KubeletError(404, f'container not found ("{container}")')
    attempts = [c for c in await ctx.pods.containers(namespace, name) if c.name == container]
    if not attempts:
        raise KubeletError(400, f'container "{container}" in pod "{name}" is waiting to start: {_waiting_reason(pod, container)}')
    newest = attempts[-1]
    if newest.state != ContainerState.RUNNING:
        raise KubeletError(400, f'container "{container}" in pod "{name}" is not running (state {newest.state.name.lower()})')
    return newest
