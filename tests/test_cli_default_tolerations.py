"""``k8py apiserver --default-not-ready-toleration-seconds / --default-unreachable-toleration-seconds``
(kube-apiserver's flags): how long a new pod tolerates a node that is not ready or stopped
reporting, written into the pod by DefaultTolerationSeconds admission. A real API server
process, a pod created through the official client."""

from __future__ import annotations

import kubernetes

from tests.support.kube import official_client
from tests.support.servers import ServerProcess

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
       "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def _tolerations(url: str, pod: dict) -> dict[str, int]:
    api = kubernetes.client.CoreV1Api(official_client(url))
    created = api.create_namespaced_pod("default", pod)
    return {t.key: t.toleration_seconds for t in created.spec.tolerations or []}


def test_the_flags_set_the_toleration_seconds_of_new_pods(tmp_path):
    server = ServerProcess(str(tmp_path / "data"), "--default-not-ready-toleration-seconds", "7",
                           "--default-unreachable-toleration-seconds", "11").start()
    try:
        assert _tolerations(server.url, POD) == {"node.kubernetes.io/not-ready": 7, "node.kubernetes.io/unreachable": 11}
    finally:
        server.stop()


def test_without_the_flags_a_pod_tolerates_a_lost_node_for_upstreams_five_minutes(tmp_path):
    server = ServerProcess(str(tmp_path / "data")).start()
    try:
        assert _tolerations(server.url, POD) == {"node.kubernetes.io/not-ready": 300, "node.kubernetes.io/unreachable": 300}
    finally:
        server.stop()
