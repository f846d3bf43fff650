"""Container log rotation on containerd: the kubelet renames a log past containerLogMaxSize, containerd reopens it."""

from __future__ import annotations

import asyncio
import glob
import gzip
import os
import uuid

import pytest

from k8py.cluster.local_images import BUSYBOX_IMAGE
from k8py.kubelet.runtime.cri.client import CRIClient, pb
from k8py.kubelet.runtime.cri.log_rotation import ContainerLogRotation
from tests.support.containerd import Containerd

pytestmark = pytest.mark.timeout(300)


async def _grown_past(path: str, size: int) -> None:
    async with asyncio.timeout(60):
        while not os.path.exists(path) or os.stat(path).st_size <= size:
            await asyncio.sleep(0.05)


async def test_a_log_past_its_limit_is_rotated_and_reopened_keeping_max_files(containerd: Containerd, tmp_path) -> None:
    clock = [1_800_000_000.0]
    async with CRIClient(containerd.endpoint) as cri:
        uid = str(uuid.uuid4())
        logs = tmp_path / "logs"
        logs.mkdir()
        sandbox = pb.PodSandboxConfig(metadata=pb.PodSandboxMetadata(name="chatty", namespace="default", uid=uid),
                                      log_directory=str(logs))
        sandbox.linux.cgroup_parent = f"{containerd.cgroup_parent}/pod{uid}"
        sid = await cri.run_pod_sandbox(sandbox)
        try:
            container = pb.ContainerConfig(
                metadata=pb.ContainerMetadata(name="app"), image=pb.ImageSpec(image=BUSYBOX_IMAGE), log_path="app/0.log",
                command=["/bin/sh", "-c", "i=0; while true; do i=$((i+1)); echo line $i; sleep 0.01; done"])
            cid = await cri.create_container(sid, container, sandbox)
            await cri.start_container(cid)
            live = str(logs / "app" / "0.log")
            rotation = ContainerLogRotation(cri, max_size=2048, max_files=3, clock=lambda: clock[0])
            for _ in range(4):
                await _grown_past(live, 2048)
                await rotation.rotate_all()
                clock[0] += 1
                await _grown_past(live, 0)  # containerd writes to a fresh file at the same path
            rotated = sorted(glob.glob(live + ".*"))
            assert [c for c, _ in rotation.rotated] == [cid] * 4
            assert len(rotated) == 2, f"at most containerLogMaxFiles (3) files, the live one included: {rotated}"
            older, newest = rotation.rotated[-2][1], rotation.rotated[-1][1]
            # the oldest went first; the rotations before the newest are gzip-compressed, as upstream's
            assert rotated == [older + ".gz", newest], rotated
            assert gzip.open(older + ".gz", "rt").readline().split(" ", 3)[1] == "stdout"
            with open(rotated[-1]) as f:
                first = f.readline().split(" ", 3)
            assert first[1] == "stdout" and first[2] == "F" and first[3].startswith("line "), first  # CRI records
            # nothing was lost at a rotation: the numbers go on from the newest rotated file to the live one
            last_rotated = int(open(rotated[-1]).read().splitlines()[-1].rsplit(" ", 1)[1])
            first_live = int(open(live).readline().rsplit(" ", 1)[1])
            assert first_live == last_rotated + 1, (last_rotated, first_live)
        finally:
            await cri.stop_pod_sandbox(sid)
            await cri.remove_pod_sandbox(sid)
