"""The controller manager serves /healthz and /metrics with per-controller
work-queue metrics, and the CLI runs it as a process."""

from __future__ import annotations

import aiohttp

from k8py.controllers.controller_manager import ControllerManager
from k8py.controllers.keyed_controller import KeyedController
from k8py.controllers.registry import CONTROLLER_MODULES


class _Probe(KeyedController):
    async def sync(self, key: str) -> None:
        return None


async def test_healthz_and_workqueue_metrics_per_controller(client, monkeypatch):
    import sys
    import types

    module = types.ModuleType("k8py_test_probe_controller")
    module.new_controller = lambda ctx: _Probe(ctx, name="replicaset")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "k8py_test_probe_controller", module)
    monkeypatch.setitem(CONTROLLER_MODULES, "replicaset", "k8py_test_probe_controller")
    manager = ControllerManager(client, controllers="replicaset")
    import asyncio

    task = asyncio.create_task(manager.run(), name="manager")
    try:
        await asyncio.wait_for(manager.started.wait(), 30)
        probe = manager.controllers["replicaset"]
        probe.queue.add("default/x")
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{manager.port}/healthz") as r:
                assert r.status == 200 and await r.text() == "ok"
            for _ in range(200):
                async with http.get(f"http://127.0.0.1:{manager.port}/metrics") as r:
                    text = await r.text()
                if 'workqueue_adds_total{name="replicaset"} 1.0' in text:
                    break
                await asyncio.sleep(0.05)
        assert 'workqueue_adds_total{name="replicaset"} 1.0' in text
        assert 'workqueue_depth{name="replicaset"}' in text
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
