"""CRIRuntime.container_events: the runtime's GetContainerEvents stream, and relisting when there is none or it breaks.

Debian's containerd (1.6) has no GetContainerEvents (it answers UNIMPLEMENTED: the relisting path, which
test_cri_runtime covers on the real containerd); containerd 1.7 has it (test_evented_pleg runs on Debian's
next release's). Here a small CRI server in the test (a real gRPC server on a unix socket, speaking k8py's
CRI stubs) drives what a real runtime will not do on demand: a stream that breaks, then comes back. It
serves only the calls container_events makes. Needs no root.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from typing import AsyncIterator

import grpc
import pytest
from grpc import aio

from k8py.kubelet.runtime.cri.api import runtime_v1_pb2 as pb
from k8py.kubelet.runtime.cri.api import runtime_v1_pb2_grpc as pb_grpc
from k8py.kubelet.runtime.cri.client import CRIClient
from k8py.kubelet.runtime.cri.runtime import CRIRuntime
from k8py.kubelet.runtime.protocols import ContainerEvent, ContainerEventType

pytestmark = pytest.mark.timeout(120)


class Runtime(pb_grpc.RuntimeServiceServicer):
    """Sandboxes and containers as the test sets them; events as the test pushes them."""

    def __init__(self, *, evented: bool) -> None:
        self.evented = evented
        self.sandboxes = [pb.PodSandbox(id="sb1", metadata=pb.PodSandboxMetadata(name="p", namespace="d", uid="uid-1"))]
        self.containers: list[pb.Container] = []
        self.streams: list[asyncio.Queue[pb.ContainerEventResponse | None]] = []
        self.subscribed = asyncio.Condition()

    async def Version(self, request, context):
        return pb.VersionResponse(version="0.1.0", runtime_name="fake", runtime_version="1", runtime_api_version="v1")

    async def ListPodSandbox(self, request, context):
        return pb.ListPodSandboxResponse(items=self.sandboxes)

    async def ListContainers(self, request, context):
        return pb.ListContainersResponse(containers=self.containers)

    async def GetContainerEvents(self, request, context):
        if not self.evented:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "method GetContainerEvents not implemented")
        queue: asyncio.Queue[pb.ContainerEventResponse | None] = asyncio.Queue()
        await context.send_initial_metadata(())
        async with self.subscribed:
            self.streams.append(queue)
            self.subscribed.notify_all()
        while (event := await queue.get()) is not None:
            yield event
        await context.abort(grpc.StatusCode.UNAVAILABLE, "the runtime restarted")

    async def wait_subscribers(self, n: int) -> None:
        async with asyncio.timeout(30), self.subscribed:
            await self.subscribed.wait_for(lambda: len(self.streams) >= n)

    def push(self, container_id: str, kind: int, at_ns: int) -> None:
        status = pb.PodSandboxStatus(id="sb1", metadata=pb.PodSandboxMetadata(name="p", namespace="d", uid="uid-1"))
        self.streams[-1].put_nowait(pb.ContainerEventResponse(container_id=container_id, container_event_type=kind,
                                                              created_at=at_ns, pod_sandbox_status=status))


async def serve(service: Runtime) -> tuple[aio.Server, str, str]:
    workdir = tempfile.mkdtemp(prefix="k8cri-ev-", dir="/tmp")  # a unix socket path must be short
    server = aio.server()
    pb_grpc.add_RuntimeServiceServicer_to_server(service, server)
    server.add_insecure_port(f"unix://{workdir}/cri.sock")
    await server.start()
    return server, f"unix://{workdir}/cri.sock", workdir


async def next_event(events: AsyncIterator[ContainerEvent]) -> ContainerEvent:
    async with asyncio.timeout(30):
        return await anext(events)


def container(cid: str, state: int) -> pb.Container:
    return pb.Container(id=cid, pod_sandbox_id="sb1", metadata=pb.ContainerMetadata(name=cid), state=state)


async def test_events_come_from_the_runtimes_stream_and_a_broken_stream_is_caught_up() -> None:
    service = Runtime(evented=True)
    service.containers = [container("c0", pb.CONTAINER_RUNNING)]
    server, endpoint, workdir = await serve(service)
    # relisting would take an hour: every event after the first relist comes from the stream
    runtime = await CRIRuntime(CRIClient(endpoint), poll_interval=3600, evented_relist_period=3600).connect()
    events = runtime.container_events()
    try:
        first = await next_event(events)  # the first relist reports what is there
        assert (first.type, first.container_id, first.pod_uid) == (ContainerEventType.STARTED, "c0", "uid-1")
        sandbox = await next_event(events)  # and the ready sandbox, as one of the pod's containers
        assert (sandbox.type, sandbox.container_id, sandbox.pod_uid) == (ContainerEventType.STARTED, "sb1", "uid-1")
        await service.wait_subscribers(1)
        service.push("c1", pb.CONTAINER_STARTED_EVENT, 1_700_000_000_000_000_000)
        ev = await next_event(events)
        assert (ev.type, ev.container_id, ev.sandbox_id, ev.pod_uid, ev.at) == (
            ContainerEventType.STARTED, "c1", "sb1", "uid-1", 1_700_000_000.0)
        assert runtime._events.mode == "evented"
        service.push("c1", pb.CONTAINER_STOPPED_EVENT, 1_700_000_001_000_000_000)
        assert (await next_event(events)).type == ContainerEventType.STOPPED

        # the stream breaks while c0 exits: one relist catches up at once, then the stream is taken again
        service.containers = [container("c0", pb.CONTAINER_EXITED), container("c1", pb.CONTAINER_EXITED)]
        service.streams[-1].put_nowait(None)
        ev = await next_event(events)
        assert (ev.type, ev.container_id) == (ContainerEventType.STOPPED, "c0"), ev
        await service.wait_subscribers(2)
        service.push("c1", pb.CONTAINER_DELETED_EVENT, 1_700_000_002_000_000_000)
        ev = await next_event(events)
        assert (ev.type, ev.container_id, ev.pod_uid) == (ContainerEventType.DELETED, "c1", "uid-1")
    finally:
        await events.aclose()
        await runtime.close()
        await server.stop(0)
        shutil.rmtree(workdir, ignore_errors=True)


async def test_a_runtime_without_the_stream_is_relisted_sandboxes_too() -> None:
    service = Runtime(evented=False)
    server, endpoint, workdir = await serve(service)
    runtime = await CRIRuntime(CRIClient(endpoint), poll_interval=0.05, evented_relist_period=3600).connect()
    events = runtime.container_events()
    try:
        service.containers = [container("c1", pb.CONTAINER_RUNNING)]
        first = {(ev.type, ev.container_id, ev.pod_uid) for ev in [await next_event(events), await next_event(events)]}
        assert first == {(ContainerEventType.STARTED, "c1", "uid-1"), (ContainerEventType.STARTED, "sb1", "uid-1")}
        service.containers = [container("c1", pb.CONTAINER_EXITED)]
        assert (await next_event(events)).type == ContainerEventType.STOPPED
        service.containers = []
        assert (await next_event(events)).type == ContainerEventType.DELETED
        assert runtime._events.mode == "relist"
        # the pod's sandbox dies (its pause exited): its worker is woken though no container changed
        service.sandboxes[0].state = pb.SANDBOX_NOTREADY
        ev = await next_event(events)
        assert (ev.type, ev.container_id, ev.sandbox_id, ev.pod_uid) == (ContainerEventType.STOPPED, "sb1", "sb1", "uid-1")
        service.sandboxes.clear()
        assert (await next_event(events)).type == ContainerEventType.DELETED
    finally:
        await events.aclose()
        await runtime.close()
        await server.stop(0)
        shutil.rmtree(workdir, ignore_errors=True)
