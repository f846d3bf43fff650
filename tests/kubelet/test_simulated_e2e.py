"""e2e: ``k8py kubelet --simulated --nodes 1000`` — a thousand real Nodes and Leases, pods through their phases."""

from __future__ import annotations

import time

import pytest

from tests.kubelet.conftest import Node
from tests.support.kube import Kubectl, official_client
from tests.support.kubelet import KubeletProcess
from tests.support.servers import ServerThread, sqlite_storage


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_thousand_simulated_nodes_go_ready_and_run_pods_through_their_phases(tmp_path) -> None:
    server = ServerThread(sqlite_storage(str(tmp_path / "api"))).start()
    kubectl = Kubectl(server.url, str(tmp_path / "home"))
    kubelet = KubeletProcess(kubectl.kubeconfig, str(tmp_path / "kubelet"), node_name="sim",
                             extra=("--simulated", "--nodes", "1000", "--log-level", "WARNING"))
    api = official_client(server.url)
    node = Node(server, kubelet, kubectl, api)
    try:
        started = time.monotonic()
        kubelet.start(timeout=300)
        print(f"1000 simulated nodes registered in {time.monotonic() - started:.1f}s")
        nodes = node.core.list_node().items
        assert len(nodes) == 1000
        assert all(any(c.type == "Ready" and c.status == "True" for c in n.status.conditions) for n in nodes)
        assert {n.metadata.labels["kubernetes.io/os"] for n in nodes} == {"linux"}
        for i in range(0, 1000, 50):  # 20 pods on nodes spread over the range
            kind = i // 50 % 3
            ann = {0: {}, 1: {"k8py.io/simulated-run-seconds": "1"},
                   2: {"k8py.io/simulated-run-seconds": "1", "k8py.io/simulated-exit-code": "2"}}[kind]
            node.core.create_namespaced_pod("default", {
                "metadata": {"name": f"p{i}", "annotations": ann},
                "spec": {"nodeName": f"sim-{i}", "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}})
        want = {0: "Running", 1: "Succeeded", 2: "Failed"}
        for i in range(0, 1000, 50):
            p = node.wait_pod("default", f"p{i}", lambda pod, i=i: pod["status"].get("phase") == want[i // 50 % 3],
                              timeout=120, what=want[i // 50 % 3])
            assert p["spec"]["nodeName"] == f"sim-{i}" and p["status"]["podIP"]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            leases = api.sanitize_for_serialization(
                official_coordination(api).list_namespaced_lease("kube-node-lease"))["items"]
            if len(leases) == 1000:
                break
            time.sleep(1)
        assert len(leases) == 1000
        node.core.delete_namespaced_pod("p0", "default")
        node.wait_gone("default", "p0")
    finally:
        kubelet.stop()
        api.close()
        server.stop()


def official_coordination(api):  # type: ignore[no-untyped-def]
    import kubernetes

    return kubernetes.client.CoordinationV1Api(api)
