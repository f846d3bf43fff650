"""Image GC on containerd through CRI: thresholds, minimum age, images in use, the sandbox image, LRU order."""

from __future__ import annotations

import os
import uuid

import pytest

from k8py.cluster.local_images import BUSYBOX_IMAGE, PAUSE_IMAGE
from k8py.kubelet.images.gc import GCPolicy
from k8py.kubelet.runtime.cri.client import CRIClient, pb
from k8py.kubelet.runtime.cri.image_gc import CRIImageGC, ImageUse, removal_order
from tests.support.containerd import Containerd
from tests.support.oci_registry import Registry, busybox_layer, image

pytestmark = pytest.mark.timeout(300)


def test_the_least_recently_used_go_first_then_the_oldest() -> None:
    images = [ImageUse("used-late", 1, first_seen=10, last_used=50), ImageUse("never-used-new", 1, first_seen=40),
              ImageUse("used-early", 1, first_seen=0, last_used=20), ImageUse("never-used-old", 1, first_seen=5)]
    assert [u.id for u in removal_order(images)] == ["never-used-old", "used-early", "never-used-new", "used-late"]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _tags(images: list[pb.Image]) -> set[str]:
    return {t for i in images for t in i.repo_tags}


async def test_images_no_container_uses_are_removed_when_the_disk_is_full(containerd: Containerd, registry: Registry,
                                                                         tmp_path) -> None:
    used_ref = registry.push("k8py/gc-used", "1", image([busybox_layer({"etc/which": "used\n"})]))
    idle_ref = registry.push("k8py/gc-idle", "1", image([busybox_layer({"etc/which": "idle\n"})]))
    disk = {"capacity": 10 << 30, "available": 5 << 30}  # bytes, as the kernel would say
    clock = Clock()
    async with CRIClient(containerd.endpoint) as cri:
        for ref in (used_ref, idle_ref):
            await cri.pull_image(ref)
        uid = str(uuid.uuid4())
        os.makedirs(tmp_path / "logs")
        sandbox = pb.PodSandboxConfig(metadata=pb.PodSandboxMetadata(name="gc", namespace="default", uid=uid),
                                      log_directory=str(tmp_path / "logs"))
        sandbox.linux.cgroup_parent = f"{containerd.cgroup_parent}/pod{uid}"
        sid = await cri.run_pod_sandbox(sandbox)
        container = pb.ContainerConfig(metadata=pb.ContainerMetadata(name="app"), image=pb.ImageSpec(image=used_ref),
                                       command=["sleep", "600"], log_path="app.log")
        cid = await cri.create_container(sid, container, sandbox)
        await cri.start_container(cid)
        try:
            gc = CRIImageGC(cri, GCPolicy(high_percent=85, low_percent=0, min_age=60, period=3600),
                            usage=lambda mount: (disk["capacity"], disk["available"]), clock=clock)
            assert await gc.collect() == 0 and gc.removed == []  # half full: below the high threshold
            disk["available"] = 0  # full (and the low threshold 0: all that can go must): but every image was first seen just now, younger than min_age
            assert await gc.collect() == 0 and gc.removed == []
            assert {used_ref, idle_ref, PAUSE_IMAGE} <= _tags(await cri.list_images())

            clock.now += 120
            gc.policy = GCPolicy(high_percent=85, low_percent=85, min_age=60, period=3600)
            disk["available"] = (10 << 30) * 15 // 100 - 1000  # 1000 bytes over 85%: one image is enough
            first = await gc.collect()
            assert len(gc.removed) == 1 and first >= 1000, (first, gc.removed)
            gc.policy = GCPolicy(high_percent=85, low_percent=0, min_age=60, period=3600)
            disk["available"] = 0
            freed = first + await gc.collect()
            left = _tags(await cri.list_images())
            assert idle_ref not in left and f"docker.io/library/{BUSYBOX_IMAGE}" not in left, left  # nothing uses them
            assert used_ref in left, "an image a container uses was removed"
            assert PAUSE_IMAGE in left, "the runtime's sandbox image was removed"
            assert freed > 0 and len(gc.removed) == 2, (freed, gc.removed)
        finally:
            await cri.stop_pod_sandbox(sid)
            await cri.remove_pod_sandbox(sid)
