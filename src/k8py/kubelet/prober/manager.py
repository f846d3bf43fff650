"""Probe workers and their results (see the package docstring).

Per container id:

- ``started`` — True once the startup probe succeeded (at once when there
  is none); liveness and readiness probes do not run before;
- ``ready`` — the readiness probe's result (True at start when there is
  none, False until the first success when there is one);
- ``failed`` — a reason once the liveness or startup probe crossed its
  failure threshold: the pod worker kills the container.

Every change calls ``on_change(pod_uid)``. Workers are named tasks owned by
the manager; ``stop_container`` cancels those of one container.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Mapping

from k8py.kubelet.prober.probes import run_probe
from k8py.kubelet.runtime.protocols import StreamingRuntime

__all__ = ["ProbeManager"]

logger = logging.getLogger(__name__)

EventFn = Callable[[Mapping[str, Any], str, str, str], None]


class ProbeManager:
    def __init__(self, runtime: StreamingRuntime, *, on_change: Callable[[str], None], event: EventFn) -> None:
        self.runtime = runtime
        self.on_change = on_change
        self.event = event
        self._ready: dict[str, bool] = {}
        self._started: dict[str, bool] = {}
        self._failed: dict[str, str] = {}
        self._failed_grace: dict[str, float] = {}
        self._tasks: dict[str, list[asyncio.Task[None]]] = {}

    def ready(self, cid: str) -> bool:
        return self._ready.get(cid, False)

    def started(self, cid: str) -> bool:
        return self._started.get(cid, False)

    def failed(self, cid: str) -> str:
        return self._failed.get(cid, "")

    def failed_grace(self, cid: str) -> float | None:
        """The failed probe's own ``terminationGracePeriodSeconds``, if it set one."""
        return self._failed_grace.get(cid)

    def start(self, pod_get: Callable[[], Mapping[str, Any]], container: Mapping[str, Any], cid: str, pod_ip: str, uid: str) -> None:
        if cid in self._tasks:
            return
        self._started[cid] = "startupProbe" not in container
        self._ready[cid] = "readinessProbe" not in container
        tasks = []
        for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
            if kind in container:
                tasks.append(asyncio.create_task(self._work(kind, pod_get, container, cid, pod_ip, uid),
                                                 name=f"probe-{kind}-{container['name']}-{cid[:8]}"))
        self._tasks[cid] = tasks

    def stop_container(self, cid: str) -> None:
        for t in self._tasks.pop(cid, []):
            t.cancel()
        self._ready.pop(cid, None)
        self._started.pop(cid, None)
        self._failed.pop(cid, None)
        self._failed_grace.pop(cid, None)

    async def close(self) -> None:
        tasks = [t for ts in self._tasks.values() for t in ts]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _work(self, kind: str, pod_get: Callable[[], Mapping[str, Any]], container: Mapping[str, Any], cid: str,
                    pod_ip: str, uid: str) -> None:
        probe = container[kind]
        period = float(probe.get("periodSeconds") or 10)
        success_threshold = int(probe.get("successThreshold") or 1)
        failure_threshold = int(probe.get("failureThreshold") or 3)
        label = {"startupProbe": "Startup", "livenessProbe": "Liveness", "readinessProbe": "Readiness"}[kind]
        await asyncio.sleep(float(probe.get("initialDelaySeconds") or 0))
        successes = failures = 0
        while True:
            if kind != "startupProbe" and not self._started.get(cid, False):
                await asyncio.sleep(min(period, 0.5))
                continue
            try:
                ok, output = await run_probe(probe, runtime=self.runtime, container_id=cid, container=container, pod_ip=pod_ip)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # a probe that cannot run counts as failed
                logger.exception("probe failed to run", extra={"container": container["name"]})
                ok, output = False, str(err)
            if cid not in self._tasks:
                return
            if ok:
                successes, failures = successes + 1, 0
            else:
                successes, failures = 0, failures + 1
                self.event(pod_get(), "Warning", "Unhealthy", f"{label} probe failed: {output.strip()}")
            if kind == "readinessProbe":
                new = self._ready.get(cid, False)
                if ok and successes >= success_threshold:
                    new = True
                elif not ok and failures >= failure_threshold:
                    new = False
                if new != self._ready.get(cid):
                    self._ready[cid] = new
                    self.on_change(uid)
            elif kind == "startupProbe":
                if ok and successes >= success_threshold:
                    self._started[cid] = True
                    self.on_change(uid)
                    return
                if not ok and failures >= failure_threshold:
                    self._failed[cid] = f"Container {container['name']} failed startup probe, will be restarted"
                    if probe.get("terminationGracePeriodSeconds") is not None:
                        self._failed_grace[cid] = float(probe["terminationGracePeriodSeconds"])
                    self.on_change(uid)
                    return
            elif not ok and failures >= failure_threshold:
                self._failed[cid] = f"Container {container['name']} failed liveness probe, will be restarted"
                if probe.get("terminationGracePeriodSeconds") is not None:
                    self._failed_grace[cid] = float(probe["terminationGracePeriodSeconds"])
                self.on_change(uid)
                return
            await asyncio.sleep(period)
