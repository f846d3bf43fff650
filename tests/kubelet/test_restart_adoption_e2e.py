"""e2e: a restarted kubelet adopts its running containers and touches nothing else."""

from __future__ import annotations

import json
import os
import subprocess
import time

import kubernetes

from k8py.kubelet.runtime.process.records import is_same_process, write_record
from tests.kubelet.conftest import Node, phase, pod_manifest
from tests.support.kube import official_client
from tests.support.kubelet import KubeletProcess


def test_a_restarted_kubelet_adopts_its_containers_stops_orphans_and_spares_strangers(tmp_path) -> None:
    from tests.kubelet.conftest import start_node

    server, kubelet, kubectl = start_node(str(tmp_path))
    api = official_client(server.url)
    node = Node(server, kubelet, kubectl, api)
    stranger = subprocess.Popen(["sleep", "600"])
    second: KubeletProcess | None = None
    try:
        node.core.create_namespaced_pod("default", pod_manifest("keep", [{"name": "c", "image": "busybox", "command": ["sleep", "600"]}]))
        node.core.create_namespaced_pod("default", pod_manifest("orphan", [{"name": "c", "image": "busybox", "command": ["sleep", "600"]}]))
        before = node.wait_pod("default", "keep", phase("Running"), what="Running")["status"]["containerStatuses"][0]
        node.wait_pod("default", "orphan", phase("Running"), what="Running")
        records = {r["name"] if r["name"] != "c" else r["pod_uid"]: r for r in kubelet.container_records()}
        keep_uid = node.pod("default", "keep")["metadata"]["uid"]
        orphan_uid = node.pod("default", "orphan")["metadata"]["uid"]
        keep_rec, orphan_rec = records[keep_uid], records[orphan_uid]

        kubelet.stop()  # SIGTERM: the kubelet goes, its containers stay
        assert is_same_process(keep_rec["pid"], keep_rec["start_ticks"])
        # while it is away: the orphan's pod is force-deleted, and a record claims a stranger's pid
        node.core.delete_namespaced_pod("orphan", "default", grace_period_seconds=0)
        node.wait_gone("default", "orphan")
        fake = dict(keep_rec, id="f" * 64, name="fake", pid=stranger.pid, start_ticks=1, pod_uid=keep_uid)
        write_record(os.path.join(kubelet.root_dir, "runtime", "containers", fake["id"], "record.json"), fake)

        second = KubeletProcess(kubelet.kubeconfig, kubelet.root_dir, node_name="node-1").start()
        node.kubelet = second
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and is_same_process(orphan_rec["pid"], orphan_rec["start_ticks"]):
            time.sleep(0.1)
        assert not is_same_process(orphan_rec["pid"], orphan_rec["start_ticks"]), "the orphan pod's container still runs"
        assert stranger.poll() is None, "the kubelet signalled a process it did not start"
        after = node.pod("default", "keep")["status"]["containerStatuses"][0]
        assert after["containerID"] == before["containerID"] and after["restartCount"] == 0 and "running" in after["state"]
        assert is_same_process(keep_rec["pid"], keep_rec["start_ticks"])
        fake_now = json.load(open(os.path.join(kubelet.root_dir, "runtime", "containers", fake["id"], "record.json")))
        assert fake_now["state"] == "CONTAINER_EXITED" and fake_now["reason"] == "ContainerStatusUnknown"

        node.core.delete_namespaced_pod("keep", "default", body=kubernetes.client.V1DeleteOptions(grace_period_seconds=1))
        node.wait_gone("default", "keep")
        assert not is_same_process(keep_rec["pid"], keep_rec["start_ticks"])
    finally:
        stranger.kill()
        stranger.wait()
        for k in (second, kubelet):
            if k is not None:
                k.stop()
                k.kill_containers()
        api.close()
        server.stop()
