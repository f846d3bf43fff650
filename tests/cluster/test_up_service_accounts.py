"""``k8py up`` (secure by default) end to end for service accounts: a pod gets the kube-api-access
volume from admission, the kubelet projects its token and the published kube-root-ca.crt, and a
program in the pod using the official client's in-cluster config reaches the API server through the
``kubernetes`` Service over HTTPS as its service account — listing pods only once a RoleBinding
allows it. Legacy token Secrets and CSRs are served by the cluster's controller manager."""

from __future__ import annotations

import base64
import json
import sys
import textwrap

import pytest
import yaml

from tests.cluster.test_up import k8py, kubectl_for, wait_for
from tests.support.kube import Kubectl

pytestmark = [pytest.mark.kubectl, pytest.mark.slow, pytest.mark.timeout(600)]

SCRIPT = textwrap.dedent("""\
    import time
    from kubernetes import client, config
    from kubernetes.client.rest import ApiException
    config.load_incluster_config()
    api = client.ApiClient()
    me = client.AuthenticationV1Api(api).create_self_subject_review(client.V1SelfSubjectReview()).status.user_info
    print("user", me.username, flush=True)
    while True:
        try:
            pods = client.CoreV1Api(api).list_namespaced_pod("apps").items
        except ApiException as err:
            print("status", err.status, flush=True)
            time.sleep(0.5)
            continue
        print("pods", len(pods), flush=True)
        break
""")


def _logs(kubectl: Kubectl) -> list[str]:
    result = kubectl.run("logs", "-n", "apps", "client", check=False)
    return result.stdout.splitlines() if result.returncode == 0 else []


def test_a_pods_in_cluster_client_is_its_service_account_and_needs_a_rolebinding(tmp_path) -> None:
    data = str(tmp_path / "cluster")
    try:
        up = k8py("up", "--detach", "--data-dir", data, "--port", "0", "--no-dns")
        assert up.returncode == 0, up.stdout + up.stderr
        kubectl = kubectl_for(data, str(tmp_path / "home"))
        kubectl.run("create", "namespace", "apps")
        wait_for(lambda: kubectl.run("get", "serviceaccount", "default", "-n", "apps", check=False).returncode == 0,
                 "the default service account")
        wait_for(lambda: kubectl.run("get", "configmap", "kube-root-ca.crt", "-n", "apps", check=False).returncode == 0,
                 "the published root CA")
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "client", "namespace": "apps"},
               # OnFailure: a container killed from outside (a loaded machine) just runs again
               "spec": {"restartPolicy": "OnFailure", "containers": [
                   {"name": "c", "image": "python", "command": [sys.executable, "-c", SCRIPT]}]}}
        kubectl.run("apply", "-f", "-", input=json.dumps(pod))
        spec = json.loads(kubectl.run("get", "pod", "client", "-n", "apps", "-o", "json").stdout)["spec"]
        volume = next(v for v in spec["volumes"] if v["name"].startswith("kube-api-access-"))
        assert spec["containers"][0]["volumeMounts"][0]["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount"
        assert volume["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"] == 3607

        wait_for(lambda: "status 403" in _logs(kubectl), "the in-cluster client to be refused the pod list", timeout=120)
        assert _logs(kubectl)[0] == "user system:serviceaccount:apps:default"
        kubectl.run("create", "rolebinding", "default-view", "-n", "apps", "--clusterrole=view", "--serviceaccount=apps:default")
        wait_for(lambda: "pods 1" in _logs(kubectl), "the pod list once the RoleBinding exists", timeout=120)
        phase = wait_for(lambda: (p := kubectl.run("get", "pod", "client", "-n", "apps", "-o", "jsonpath={.status.phase}").stdout)
                         in ("Succeeded", "Failed") and p, "the client to finish")
        assert phase == "Succeeded"

        # a legacy token Secret is filled by the controller manager and works as a credential
        kubectl.run("create", "serviceaccount", "legacy", "-n", "apps")
        secret = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
                  "metadata": {"name": "legacy-token", "namespace": "apps",
                               "annotations": {"kubernetes.io/service-account.name": "legacy"}}}
        kubectl.run("apply", "-f", "-", input=json.dumps(secret))
        token = wait_for(lambda: kubectl.run("get", "secret", "legacy-token", "-n", "apps", "-o", "jsonpath={.data.token}").stdout,
                         "the legacy token")
        with open(kubectl.kubeconfig) as f:
            doc = yaml.safe_load(f)
        for user in doc["users"]:
            user["user"] = {"token": base64.b64decode(token).decode()}  # the token only: no client certificate
        only_token = tmp_path / "legacy.kubeconfig"
        only_token.write_text(yaml.safe_dump(doc))
        as_legacy = Kubectl(kubectl.url, str(tmp_path / "home-legacy"), str(only_token))
        whoami = as_legacy.run("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
        assert whoami.stdout == "system:serviceaccount:apps:legacy"
    finally:
        k8py("down", "--data-dir", data)
