"""DefaultBinder (Bind): POST a ``Binding`` to ``pods/<name>/binding``; the API
server sets ``spec.nodeName`` and the ``PodScheduled`` condition."""

from __future__ import annotations

from typing import Any

from k8py.api.errors import StatusError
from k8py.client.resources import PODS
from k8py.scheduler.framework.interfaces import CycleState
from k8py.scheduler.framework.status import Status, as_error
from k8py.scheduler.framework.types import PodInfo
from k8py.scheduler.plugins.names import DEFAULT_BINDER

__all__ = ["DefaultBinder", "binding_for"]


def binding_for(pod: PodInfo, node_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
    }


class DefaultBinder:
    name = DEFAULT_BINDER

    def __init__(self, args: dict | None = None, handle: Any = None) -> None:
        self.handle = handle

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        try:
            await self.handle.client.create(PODS, binding_for(pod, node_name), namespace=pod.namespace,
                                            name=pod.name, subresource="binding")
        except StatusError as err:
            return as_error(err)
        return None
