"""A program in a pod uses the official client's in-cluster config (KUBERNETES_SERVICE_HOST/PORT, the
token and ca.crt the kubelet projects at /var/run/secrets/kubernetes.io/serviceaccount), reaches the
API server over HTTPS and is identified as the pod's service account."""

from __future__ import annotations

import sys
import textwrap
import time
from typing import Any, Iterator

import kubernetes
import pytest

from tests.apiserver.authn.conftest import PKI, kubeconfig_for, official_client_from
from tests.apiserver.authn.conftest import pki  # noqa: F401  (the fixture)
from tests.support.kubelet import KubeletProcess
from tests.support.servers import ServerThread, sqlite_storage

pytestmark = pytest.mark.slow

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"

SCRIPT = textwrap.dedent("""\
    import sys
    from kubernetes import client, config
    config.load_incluster_config()
    api = client.ApiClient()
    me = client.AuthenticationV1Api(api).create_self_subject_review(client.V1SelfSubjectReview()).status.user_info
    print(me.username)
    print(",".join(me.groups))
    print(me.extra["authentication.kubernetes.io/pod-name"][0])
    print(len(client.CoreV1Api(api).list_namespaced_pod(sys.argv[1]).items))
""")


@pytest.fixture
def cluster(tmp_path, pki: PKI) -> Iterator[tuple[ServerThread, KubeletProcess, kubernetes.client.ApiClient]]:
    with ServerThread(sqlite_storage(str(tmp_path / "data")), secure_port=0, insecure_port=None,
                      client_ca_file=pki.ca_file) as server:
        node_kc = kubeconfig_for(server, str(tmp_path / "node" / "kubeconfig"),
                                 cert=pki.client("node", "system:node:node-ic", ("system:nodes",)))
        admin_kc = kubeconfig_for(server, str(tmp_path / "admin" / "kubeconfig"),
                                  cert=pki.client("admin", "system:admin", ("system:masters",)))
        kubelet = KubeletProcess(node_kc, str(tmp_path / "kubelet"), node_name="node-ic").start()
        api = official_client_from(admin_kc)
        try:
            yield server, kubelet, api
        finally:
            api.close()
            kubelet.stop()
            kubelet.kill_containers()


def _wait_finished(core: kubernetes.client.CoreV1Api, ns: str, name: str, kubelet: KubeletProcess) -> Any:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        pod = core.read_namespaced_pod(name, ns)
        if pod.status.phase in ("Succeeded", "Failed"):
            return pod
        time.sleep(0.2)
    raise AssertionError(f"pod {name} never finished: {pod.status}\n" + "".join(list(kubelet.output)[-30:]))


def test_the_official_in_cluster_client_in_a_pod_is_its_service_account(cluster) -> None:
    server, kubelet, api = cluster
    core = kubernetes.client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": "apps"}})
    core.create_namespaced_service_account("apps", {"metadata": {"name": "robot"}})
    assert server.server is not None and server.server.serving is not None
    core.create_namespaced_config_map("apps", {"metadata": {"name": "kube-root-ca.crt"},
                                               "data": {"ca.crt": server.server.serving.ca_pem.decode()}})
    volume = {"name": "kube-api-access-x1y2z", "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
    ]}}
    core.create_namespaced_pod("apps", {"metadata": {"name": "client"}, "spec": {
        "nodeName": "node-ic", "restartPolicy": "Never", "serviceAccountName": "robot", "volumes": [volume],
        "containers": [{
            "name": "c", "image": "python", "command": [sys.executable, "-c", SCRIPT, "apps"],
            # where the kubernetes Service leads (here straight to the server: no proxy in this test)
            "env": [{"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
                    {"name": "KUBERNETES_SERVICE_PORT", "value": str(server.server.secure_port)}],
            "volumeMounts": [{"name": "kube-api-access-x1y2z", "mountPath": SA_DIR, "readOnly": True}],
        }],
    }})
    pod = _wait_finished(core, "apps", "client", kubelet)
    logs = core.read_namespaced_pod_log("client", "apps").splitlines()
    assert pod.status.phase == "Succeeded", logs
    assert logs == ["system:serviceaccount:apps:robot",
                    "system:serviceaccounts,system:serviceaccounts:apps,system:authenticated",
                    "client", "1"]
