"""The evented PLEG on a real containerd that has CRI ``GetContainerEvents`` (1.7, Debian's next release's).

Debian 12's containerd (1.6) answers ``UNIMPLEMENTED``: the kubelet relists
(test_cri_runtime, test_cri_streams and the e2e tests run that path on it).
Here containerd 1.7 (``scripts/containerd-next`` unpacks it beside the
machine's 1.6; scripts/test runs it as root) serves the stream, and relisting
is put an hour apart, so every change seen after the first relist came from
containerd's events: first through :class:`~k8py.kubelet.runtime.cri.runtime.CRIRuntime`,
then through a real kubelet whose pod reacts to an exit at once.
Needs root (containerd).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
import uuid
from typing import Iterator

import pytest

from k8py.cluster.local_images import BUSYBOX_IMAGE
from k8py.kubelet.runtime.cri.client import CRIClient
from k8py.kubelet.runtime.cri.runtime import CRIRuntime
from k8py.kubelet.runtime.protocols import ContainerConfig, ContainerEvent, ContainerEventType, PodSandboxConfig, pod_log_directory
from tests.kubelet.conftest import Node, start_node
from tests.support.containerd import CONTAINERD_NEXT_MISSING, Containerd, containerd_missing, containerd_next
from tests.support.kube import official_client

pytestmark = pytest.mark.timeout(300)

CONTAINERD_MISSING = "containerd tests need root, Debian's containerd and containernetworking-plugins"
HOUR = 3600.0


@pytest.fixture(scope="module")
def containerd17() -> Iterator[Containerd]:
    why = containerd_missing()
    if why:
        pytest.skip(f"{CONTAINERD_MISSING}: {why}")
    binary = containerd_next()
    if binary is None:
        pytest.skip(CONTAINERD_NEXT_MISSING)
    workdir = tempfile.mkdtemp(prefix="k8cri17-", dir="/tmp")  # short: the socket path
    ctrd = Containerd(workdir, binary=binary)
    try:
        with ctrd:
            yield ctrd
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


async def _until(events: list[ContainerEvent], want: tuple[ContainerEventType, str], timeout: float = 60) -> ContainerEvent:
    async with asyncio.timeout(timeout):
        while True:
            for ev in events:
                if (ev.type, ev.container_id) == want:
                    return ev
            await asyncio.sleep(0.02)


async def test_container_events_come_from_containerds_stream(containerd17: Containerd, tmp_path) -> None:
    runtime = await CRIRuntime(CRIClient(containerd17.endpoint), cgroup_root=containerd17.cgroup_parent, poll_interval=HOUR,
                               evented_relist_period=HOUR).connect()
    assert runtime.info().version.startswith(("1.7", "v1.7", "2.")), runtime.info()
    uid = str(uuid.uuid4())
    log_dir = pod_log_directory(str(tmp_path), "default", "evented", uid)
    os.makedirs(log_dir)
    sandbox = PodSandboxConfig(name="evented", namespace="default", uid=uid, log_directory=log_dir,
                               cgroup_parent=f"kubepods/besteffort/pod{uid}")
    seen: list[ContainerEvent] = []

    async def collect() -> None:
        async for ev in runtime.container_events():
            seen.append(ev)

    collector = asyncio.create_task(collect(), name="collect-events")
    try:
        async with asyncio.timeout(60):
            while runtime._events.mode != "evented":  # the stream is open; relisting is an hour away
                await asyncio.sleep(0.02)
        sid = await runtime.run_pod_sandbox(sandbox)
        cfg = ContainerConfig(name="app", image=BUSYBOX_IMAGE, command=["/bin/sh", "-c", "read line; exit 3"], stdin=True,
                              stdin_once=True, log_path="app/0.log")
        cid = await runtime.create_container(sid, cfg, sandbox)
        created = await _until(seen, (ContainerEventType.CREATED, cid))
        assert created.pod_uid == uid and created.sandbox_id == sid
        await runtime.start_container(cid)
        await _until(seen, (ContainerEventType.STARTED, cid))
        stream = await runtime.attach_stream(cid, stdin=True, stdout=False, stderr=False, tty=False)
        try:
            t0 = time.time()
            await stream.write_stdin(b"go\n")  # the container exits now
            stopped = await _until(seen, (ContainerEventType.STOPPED, cid))
        finally:
            await stream.close()
        assert stopped.at >= t0 - 1, "the event carries the runtime's time of the exit"
        assert (await runtime.container_status(cid)).exit_code == 3
        await runtime.remove_container(cid)
        await _until(seen, (ContainerEventType.DELETED, cid))
        await runtime.stop_pod_sandbox(sid)
        await runtime.remove_pod_sandbox(sid)
        assert runtime._events.mode == "evented", "the stream broke: these events may have come from a relist"
    finally:
        collector.cancel()
        with pytest.raises(asyncio.CancelledError):
            await collector
        await runtime.close()


@pytest.fixture(scope="module")
def evented_node(tmp_path_factory, containerd17: Containerd) -> Iterator[Node]:
    tmp = str(tmp_path_factory.mktemp("evented-node"))
    # no relisting and no periodic sync within the test: only containerd's events can wake a pod
    server, kubelet, kubectl = start_node(tmp, extra=("--container-runtime-endpoint", containerd17.endpoint,
                                                      "--cgroup-root", containerd17.cgroup_parent,
                                                      "--runtime-relist-period", str(HOUR), "--sync-frequency", str(HOUR)))
    api = official_client(server.url)
    try:
        yield Node(server, kubelet, kubectl, api)
    finally:
        api.close()
        kubelet.stop()
        server.stop()


def test_the_kubelet_sees_an_exit_through_containerds_events(evented_node: Node) -> None:
    evented_node.core.create_namespace({"metadata": {"name": "evented"}})
    evented_node.core.create_namespaced_pod("evented", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "brief"},
        "spec": {"nodeName": "node-1", "restartPolicy": "Never", "containers": [{
            "name": "main", "image": BUSYBOX_IMAGE, "imagePullPolicy": "IfNotPresent",
            "command": ["/bin/sh", "-c", "sleep 2; exit 7"]}]}})
    evented_node.wait_pod("evented", "brief", lambda p: p["status"].get("phase") == "Running", timeout=120, what="Running")
    # with relisting and syncs an hour apart, only the stream's STOPPED event can make the pod Failed
    done = evented_node.wait_pod("evented", "brief", lambda p: p["status"].get("phase") == "Failed", timeout=90, what="Failed")
    term = done["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["exitCode"] == 7, term
    log = "".join(evented_node.kubelet.output)
    assert "container events: the runtime's event stream" in log and "relisting every" not in log, log[-3000:]
    evented_node.core.delete_namespaced_pod("brief", "evented", grace_period_seconds=0)
    evented_node.wait_gone("evented", "brief", timeout=120)
