"""k8py's CRI client against a real containerd: the pod lifecycle the kubelet drives, over the unix socket."""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest

from k8py.kubelet.runtime.cri.client import CRIClient, CRIError, parse_endpoint, pb
from k8py.kubelet.runtime.protocols import NotFoundError
from tests.support.containerd import Containerd
from tests.support.oci_registry import Registry, busybox_layer, image

pytestmark = pytest.mark.timeout(300)


def sandbox_config(ctrd: Containerd, log_dir: str, name: str) -> pb.PodSandboxConfig:
    return pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(name=name, namespace="default", uid=str(uuid.uuid4())),
        hostname=name, log_directory=log_dir, labels={"app": name},
        linux=pb.LinuxPodSandboxConfig(cgroup_parent=ctrd.cgroup_parent))


async def wait_exited(cri: CRIClient, cid: str, timeout: float = 120) -> pb.ContainerStatus:
    async with asyncio.timeout(timeout):
        while True:
            st = await cri.container_status(cid)
            if st.state == pb.CONTAINER_EXITED:
                return st
            await asyncio.sleep(0.1)


def test_endpoint_must_be_a_unix_socket() -> None:
    with pytest.raises(ValueError, match="unix:///"):
        parse_endpoint("tcp://127.0.0.1:1234")
    assert parse_endpoint("unix:///run/x.sock") == "unix:///run/x.sock"


async def test_version_and_status(containerd: Containerd) -> None:
    async with CRIClient(containerd.endpoint) as cri:
        v = await cri.version()
        assert v.runtime_name == "containerd" and v.runtime_api_version == "v1"
        conditions = {c.type: c.status for c in (await cri.status()).status.conditions}
        assert conditions == {"RuntimeReady": True, "NetworkReady": True}, conditions


async def test_pull_unknown_image_is_a_clear_error(containerd: Containerd, registry: Registry) -> None:
    async with CRIClient(containerd.endpoint) as cri:
        with pytest.raises(NotFoundError, match="absent:1: not found"):  # containerd answers NOT_FOUND
            await cri.pull_image(f"{registry.host}/k8py/absent:1")
        with pytest.raises(CRIError) as err:  # a registry that is not there: UNKNOWN, with containerd's reason
            await cri.pull_image("127.0.0.1:1/k8py/absent:1", timeout=60)
        assert "connection refused" in err.value.details, err.value.details
        assert await cri.image_status(f"{registry.host}/k8py/absent:1") is None
        with pytest.raises(NotFoundError):
            await cri.container_status("no-such-container")


async def test_pod_lifecycle(containerd: Containerd, registry: Registry, tmp_path) -> None:
    ref = registry.push("k8py/hello", "1", image([busybox_layer()], cmd=["/bin/sh", "-c", "echo from-image"]))
    log_dir = str(tmp_path / "logs")
    os.makedirs(log_dir)
    async with CRIClient(containerd.endpoint) as cri:
        image_ref = await cri.pull_image(ref)
        assert image_ref.startswith("sha256:")
        assert (await cri.image_status(ref)).id == image_ref
        assert ref in {t for i in await cri.list_images() for t in i.repo_tags}

        cfg = sandbox_config(containerd, log_dir, "hello")
        sid = await cri.run_pod_sandbox(cfg)
        try:
            st = await cri.pod_sandbox_status(sid)
            assert st.state == pb.SANDBOX_READY and st.metadata.name == "hello"
            net = st.network.ip.rsplit(".", 1)[0]
            assert containerd.subnet.startswith(net + "."), (st.network.ip, containerd.subnet)

            ccfg = pb.ContainerConfig(
                metadata=pb.ContainerMetadata(name="main"), image=pb.ImageSpec(image=ref),
                command=["/bin/sh", "-c"], args=['echo "hello $WHO"; cat /sys/fs/cgroup/memory/memory.limit_in_bytes; exit 3'],
                envs=[pb.KeyValue(key="WHO", value="cri")], log_path="main/0.log",
                linux=pb.LinuxContainerConfig(resources=pb.LinuxContainerResources(memory_limit_in_bytes=64 << 20)))
            cid = await cri.create_container(sid, ccfg, cfg)
            assert (await cri.container_status(cid)).state == pb.CONTAINER_CREATED
            await cri.start_container(cid)
            done = await wait_exited(cri, cid)
            assert done.exit_code == 3 and done.reason == "Error", (done.exit_code, done.reason)
            # containerd 1.6 may stamp started_at just after a fast exit: both set, within a second
            assert done.started_at > 0 and done.finished_at > 0 and abs(done.finished_at - done.started_at) < 1e9
            assert done.log_path == os.path.join(log_dir, "main/0.log")
            with open(done.log_path) as f:
                records = [line.rstrip("\n").split(" ", 3) for line in f]
            assert [r[1:] for r in records] == [["stdout", "F", "hello cri"], ["stdout", "F", str(64 << 20)]]
            assert [c.id for c in await cri.list_containers(sid)] == [cid]

            await cri.remove_container(cid)
            assert await cri.list_containers(sid) == []
        finally:
            await cri.stop_pod_sandbox(sid)
            await cri.remove_pod_sandbox(sid)
        assert sid not in {s.id for s in await cri.list_pod_sandbox()}
        with pytest.raises(NotFoundError):
            await cri.pod_sandbox_status(sid)


async def test_an_image_service_endpoint_of_its_own_carries_the_image_calls(containerd: Containerd, tmp_path) -> None:
    """``--image-service-endpoint``: the ImageService on another socket, the RuntimeService where it was."""
    runtime_socket = containerd.endpoint[len("unix://"):]
    elsewhere = os.path.join("/tmp", f"k8img-{uuid.uuid4().hex[:8]}.sock")
    os.symlink(runtime_socket, elsewhere)  # the same containerd reached by another path: its own channel
    try:
        async with CRIClient(containerd.endpoint, image_endpoint=f"unix://{elsewhere}") as cri:
            assert cri.image_endpoint == f"unix://{elsewhere}"
            assert (await cri.version()).runtime_name == "containerd"
            assert isinstance(await cri.list_images(), list)
        os.unlink(elsewhere)  # now nothing answers there: image calls fail, runtime calls still work
        async with CRIClient(containerd.endpoint, image_endpoint=f"unix://{elsewhere}", timeout=5) as cri:
            assert (await cri.version()).runtime_name == "containerd"
            with pytest.raises(CRIError) as failed:
                await cri.list_images()
            assert failed.value.method == "ListImages"
        async with CRIClient(containerd.endpoint) as cri:  # default: the runtime's own socket serves images
            assert cri.image_endpoint == containerd.endpoint
            assert isinstance(await cri.list_images(), list)
    finally:
        if os.path.lexists(elsewhere):
            os.unlink(elsewhere)
