"""Fixtures for the scheduler: a real API server (SQLite), a REST client, Node
and Pod builders, and an in-process scheduler running on the test's loop."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, AsyncIterator, Callable

import pytest

from k8py.client.config import ClientConfig
from k8py.client.event_series import SeriesEventBroadcaster
from k8py.client.resources import NODES, PODS
from k8py.client.rest import RestClient, RetryPolicy
from k8py.scheduler.profile import SchedulerConfig
from k8py.scheduler.scheduler import Scheduler


@pytest.fixture
def backend() -> str:
    return "sqlite"  # the scheduler only talks HTTP; one backend is enough here


@pytest.fixture
async def client(apiserver) -> AsyncIterator[RestClient]:
    async with RestClient(ClientConfig(server=apiserver.url), retry=RetryPolicy(initial=0.02, cap=0.2)) as c:
        yield c


def node(name: str, *, cpu: str = "4", memory: str = "8Gi", pods: int = 110, labels: dict[str, str] | None = None,
         taints: list[dict[str, Any]] | None = None, unschedulable: bool = False, images: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": memory, "pods": str(pods), "ephemeral-storage": "100Gi"}
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    status: dict[str, Any] = {"capacity": dict(alloc), "allocatable": dict(alloc),
                              "conditions": [{"type": "Ready", "status": "True"}]}
    if images:
        status["images"] = images
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": spec, "status": status}


def pod(name: str, *, cpu: str | None = None, memory: str | None = None, namespace: str = "default",
        labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    container: dict[str, Any] = {"name": "c", "image": "registry.k8s.io/pause:3.10"}
    if requests:
        container["resources"] = {"requests": requests}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": {"containers": [container], **spec}}


async def eventually(check: Callable[[], Any], timeout: float = 20.0, message: str = "condition not met in time") -> Any:
    """Poll ``check`` (sync or async) every 20 ms until truthy; fail after ``timeout`` s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return result
        if loop.time() > deadline:
            raise AssertionError(message)
        await asyncio.sleep(0.02)


async def node_of(client: RestClient, name: str, namespace: str = "default") -> str:
    return ((await client.get(PODS, namespace, name)).get("spec") or {}).get("nodeName") or ""


async def wait_bound(client: RestClient, name: str, namespace: str = "default", timeout: float = 20.0) -> str:
    async def bound() -> str:
        return await node_of(client, name, namespace)
    return await eventually(bound, timeout, f"pod {namespace}/{name} was not bound")


async def create_nodes(client: RestClient, *nodes: dict[str, Any]) -> None:
    for n in nodes:
        await client.create(NODES, n)


@contextlib.asynccontextmanager
async def running_scheduler(client: RestClient, config: SchedulerConfig | None = None, *, events: bool = True,
                            **kw: Any) -> AsyncIterator[Scheduler]:
    broadcaster = SeriesEventBroadcaster(client) if events else None
    recorder = broadcaster.new_recorder("default-scheduler", reporting_instance="default-scheduler-test") if broadcaster else None
    config = config or SchedulerConfig()
    scheduler = Scheduler(client, config, recorder=recorder, **kw)
    tasks = [asyncio.create_task(scheduler.run(), name="test-scheduler")]
    if broadcaster is not None:
        tasks.append(asyncio.create_task(broadcaster.run(), name="test-scheduler-events"))
    try:
        await asyncio.wait_for(scheduler.wait_for_sync(), 20)
        yield scheduler
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
