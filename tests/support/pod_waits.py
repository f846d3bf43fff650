"""Reading and waiting on pods through the official client, for e2e tests of a node.

:class:`PodWaits` is what a test's node handle shares, whatever runs the node
(a ``k8py kubelet`` process beside an in-process API server, or a whole
``k8py up``): read a pod, wait until a check holds, wait until it is gone,
list its Events. Waits poll a condition with a deadline, never sleep as
synchronisation; a wait that times out fails with the pod's last status and
the tail of the node's log (:meth:`PodWaits.log_tail`), which is what one
needs to see why.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import kubernetes

__all__ = ["PodWaits"]


class PodWaits:
    """Mixed into a node handle that has ``api`` (an official ``ApiClient``);
    ``wait_timeout`` is its default deadline, ``log_tail()`` what a failure shows."""

    api: kubernetes.client.ApiClient
    wait_timeout: float = 60

    @property
    def core(self) -> kubernetes.client.CoreV1Api:
        return kubernetes.client.CoreV1Api(self.api)

    def log_tail(self) -> str:
        return ""

    def pod(self, ns: str, name: str) -> dict[str, Any]:
        return self.api.sanitize_for_serialization(self.core.read_namespaced_pod(name, ns))

    def wait_pod(self, ns: str, name: str, check: Callable[[dict[str, Any]], Any], timeout: float | None = None,
                 what: str = "") -> dict[str, Any]:
        deadline = time.monotonic() + (self.wait_timeout if timeout is None else timeout)
        pod: dict[str, Any] = {}
        while time.monotonic() < deadline:
            try:
                pod = self.pod(ns, name)
            except kubernetes.client.ApiException as err:
                if err.status != 404:
                    raise
                pod = {}
            if pod and check(pod):
                return pod
            time.sleep(0.2)
        raise AssertionError(f"pod {ns}/{name} never became {what or check}: last seen {pod.get('status')}\n{self.log_tail()}")

    def wait_gone(self, ns: str, name: str, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (self.wait_timeout if timeout is None else timeout)
        while time.monotonic() < deadline:
            try:
                self.core.read_namespaced_pod(name, ns)
            except kubernetes.client.ApiException as err:
                if err.status == 404:
                    return
                raise
            time.sleep(0.2)
        raise AssertionError(f"pod {ns}/{name} was never deleted\n{self.log_tail()}")

    def events(self, ns: str, name: str) -> list[dict[str, Any]]:
        items = self.core.list_namespaced_event(ns, field_selector=f"involvedObject.name={name}").items
        return [self.api.sanitize_for_serialization(e) for e in items]
