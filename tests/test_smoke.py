"""The smallest end-to-end check: a real server answers the official client and kubectl."""

import kubernetes


def test_server_serves_bootstrap_namespaces_to_the_official_client(k8s):
    names = {ns.metadata.name for ns in kubernetes.client.CoreV1Api(k8s).list_namespace().items}
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= names


def test_kubectl_creates_and_lists_a_pod(kubectl):
    kubectl.run("run", "web", "--image=nginx")
    out = kubectl.run("get", "pods").stdout
    assert out.splitlines()[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert out.splitlines()[1].split()[:3] == ["web", "0/1", "Pending"]
