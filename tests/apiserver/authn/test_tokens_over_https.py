"""Service-account and bootstrap tokens as credentials over real HTTPS, through the authenticator chain:
kubectl create token then requests with it, a deleted pod's token refused with 401, bootstrap tokens,
and a kubelet's TLS bootstrap approved by csrapproving and signed by csrsigning."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time

import pytest

from k8py.client.kubeconfig import load_kubeconfig
from k8py.client.rest import RestClient
from k8py.controllers.context import ControllerOptions
from k8py.controllers.controller_manager import ControllerManager
from k8py.kubelet.certificate_bootstrap import bootstrap_client_certificate
from tests.apiserver.authn.conftest import kubeconfig_for, kubectl

pytestmark = pytest.mark.kubectl

LOGIN_ERROR = "error: You must be logged in to the server (the server has asked for the client to provide credentials)"


def _whoami(kubeconfig: str) -> dict:
    return json.loads(kubectl(kubeconfig, "auth", "whoami", "-o", "json").stdout)["status"]["userInfo"]


def _admin(server, tmp_path) -> str:  # type: ignore[no-untyped-def]
    return kubeconfig_for(server, str(tmp_path / "admin" / "kubeconfig"), token="secret-alice")


def test_kubectl_create_token_then_requests_with_it_are_the_service_account(secure_server, tmp_path) -> None:
    admin = _admin(secure_server, tmp_path)
    kubectl(admin, "create", "serviceaccount", "builder")
    token = kubectl(admin, "create", "token", "builder").stdout.strip()
    as_sa = kubeconfig_for(secure_server, str(tmp_path / "sa" / "kubeconfig"), token=token)
    me = _whoami(as_sa)
    assert me["username"] == "system:serviceaccount:default:builder"
    assert me["groups"] == ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"]
    assert me["extra"]["authentication.kubernetes.io/credential-id"][0].startswith("JTI=")
    assert "builder" in kubectl(as_sa, "get", "serviceaccounts", "-o", "name").stdout


def test_a_deleted_pods_token_gets_401(secure_server, tmp_path) -> None:
    admin = _admin(secure_server, tmp_path)
    kubectl(admin, "create", "serviceaccount", "default")
    kubectl(admin, "run", "web", "--image=busybox", "--restart=Never")
    token = kubectl(admin, "create", "token", "default", "--bound-object-kind", "Pod", "--bound-object-name", "web").stdout.strip()
    as_pod = kubeconfig_for(secure_server, str(tmp_path / "pod" / "kubeconfig"), token=token)
    assert _whoami(as_pod)["extra"]["authentication.kubernetes.io/pod-name"] == ["web"]
    kubectl(admin, "delete", "pod", "web", "--grace-period=0", "--force")
    deadline = time.monotonic() + 30
    while (result := kubectl(as_pod, "get", "pods", check=False)).returncode == 0:  # the watch cache sees the delete
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert result.stderr.strip().splitlines()[-1] == LOGIN_ERROR  # after client-go's discovery complaints


def test_a_bootstrap_token_is_system_bootstrap_until_it_expires(secure_server, tmp_path) -> None:
    admin = _admin(secure_server, tmp_path)
    soon = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
    kubectl(admin, "create", "secret", "generic", "bootstrap-token-abcdef", "-n", "kube-system",
            "--type", "bootstrap.kubernetes.io/token", "--from-literal", "token-id=abcdef",
            "--from-literal", "token-secret=0123456789abcdef", "--from-literal", f"expiration={soon}",
            "--from-literal", "usage-bootstrap-authentication=true",
            "--from-literal", "auth-extra-groups=system:bootstrappers:k8py:default-node-token")
    boot = kubeconfig_for(secure_server, str(tmp_path / "boot" / "kubeconfig"), token="abcdef.0123456789abcdef")
    deadline = time.monotonic() + 30
    while (result := kubectl(boot, "auth", "whoami", "-o", "json", check=False)).returncode != 0:
        assert time.monotonic() < deadline, result.stderr
        time.sleep(0.05)
    assert json.loads(result.stdout)["status"]["userInfo"] == {
        "username": "system:bootstrap:abcdef",
        "groups": ["system:bootstrappers", "system:bootstrappers:k8py:default-node-token", "system:authenticated"]}
    wrong = kubeconfig_for(secure_server, str(tmp_path / "wrong" / "kubeconfig"), token="abcdef.0000000000000000")
    assert kubectl(wrong, "get", "pods", check=False).stderr.strip().splitlines()[-1] == LOGIN_ERROR


async def test_a_kubelet_bootstraps_with_a_token_and_is_auto_approved(secure_server, pki, tmp_path) -> None:
    admin = _admin(secure_server, tmp_path)
    await asyncio.to_thread(kubectl, admin, "create", "secret", "generic", "bootstrap-token-k8pyab", "-n", "kube-system",
                            "--type", "bootstrap.kubernetes.io/token", "--from-literal", "token-id=k8pyab",
                            "--from-literal", "token-secret=0123456789abcdef", "--from-literal", "usage-bootstrap-authentication=true")
    boot = kubeconfig_for(secure_server, str(tmp_path / "boot" / "kubeconfig"), token="k8pyab.0123456789abcdef")
    pki.ca.save(str(tmp_path / "signer.crt"), str(tmp_path / "signer.key"))  # the CA the server trusts for clients
    options = ControllerOptions(cluster_signing_cert_file=str(tmp_path / "signer.crt"), cluster_signing_key_file=str(tmp_path / "signer.key"))
    target = str(tmp_path / "node" / "kubeconfig")
    async with RestClient(load_kubeconfig(admin)) as client:
        manager = ControllerManager(client, controllers=["csrapproving", "csrsigning"], options=options)
        task = asyncio.create_task(manager.run(), name="controller-manager")
        try:
            await asyncio.wait_for(manager.started.wait(), 30)
            got = await asyncio.wait_for(bootstrap_client_certificate(
                bootstrap_kubeconfig=boot, kubeconfig=target, cert_dir=str(tmp_path / "pki"), node_name="node-z", poll=0.05), 60)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    assert got is True
    csrs = json.loads((await asyncio.to_thread(kubectl, admin, "get", "csr", "-o", "json")).stdout)["items"]
    assert len(csrs) == 1
    spec, conditions = csrs[0]["spec"], csrs[0]["status"]["conditions"]
    assert spec["username"] == "system:bootstrap:k8pyab" and "system:bootstrappers" in spec["groups"]
    assert [(c["type"], c["reason"], c["message"]) for c in conditions] == [
        ("Approved", "AutoApproved", "Auto approving kubelet client certificate after SubjectAccessReview.")]
    node_config = load_kubeconfig(target)
    assert node_config.server == secure_server.url and node_config.ca_data
    me = (await asyncio.to_thread(_whoami, target))
    assert me == {"username": "system:node:node-z", "groups": ["system:nodes", "system:authenticated"]}
