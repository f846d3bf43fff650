"""Kubelet TLS bootstrap against a real API server and the real csrsigning controller: the CSR,
its approval with kubectl, the signed certificate, the kubeconfig written for the node; and the real
``k8py kubelet --bootstrap-kubeconfig`` process joining the cluster that way."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from typing import Any, AsyncIterator

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import NameOID

from k8py.client import certs
from k8py.client.config import ClientConfig
from k8py.client.kubeconfig import load_kubeconfig
from k8py.client.resources import CERTIFICATE_SIGNING_REQUESTS
from k8py.client.rest import RestClient
from k8py.controllers.context import ControllerOptions
from k8py.controllers.controller_manager import ControllerManager
from k8py.kubelet.certificate_bootstrap import BootstrapError, bootstrap_client_certificate
from tests.support.kube import Kubectl
from tests.support.kubelet import KubeletProcess
from tests.support.servers import ServerThread, sqlite_storage


def _bootstrap_kubeconfig(path: str, server: str) -> str:
    doc = {"apiVersion": "v1", "kind": "Config",
           "clusters": [{"name": "c", "cluster": {"server": server}}],
           "users": [{"name": "u", "user": {"token": "abcdef.0123456789abcdef"}}],
           "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}], "current-context": "x"}
    with open(path, "w") as f:
        yaml.safe_dump(doc, f)
    return path


@pytest.fixture
def cluster(tmp_path):  # type: ignore[no-untyped-def]
    ca = certs.new_self_signed_ca("k8py-test-ca")
    ca.save(str(tmp_path / "ca.crt"), str(tmp_path / "ca.key"))
    with ServerThread(sqlite_storage(str(tmp_path / "data"))) as server:
        yield server, ca, ControllerOptions(cluster_signing_cert_file=str(tmp_path / "ca.crt"),
                                            cluster_signing_key_file=str(tmp_path / "ca.key"))


@contextlib.asynccontextmanager
async def signer(url: str, options: ControllerOptions) -> AsyncIterator[RestClient]:
    async with RestClient(ClientConfig(server=url)) as client:
        manager = ControllerManager(client, controllers=["csrsigning"], options=options)
        task = asyncio.create_task(manager.run(), name="controller-manager")
        try:
            await asyncio.wait_for(manager.started.wait(), 30)
            yield client
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def _pending(client: RestClient) -> list[dict[str, Any]]:
    items = (await client.list(CERTIFICATE_SIGNING_REQUESTS))["items"]
    return [c for c in items if not (c.get("status") or {}).get("conditions")]


async def test_bootstrap_requests_waits_for_approval_and_writes_the_nodes_kubeconfig(cluster, tmp_path) -> None:
    server, ca, options = cluster
    kubectl = Kubectl(server.url, str(tmp_path / "home"))
    boot = _bootstrap_kubeconfig(str(tmp_path / "bootstrap.kubeconfig"), server.url)
    target = str(tmp_path / "kubelet.kubeconfig")
    async with signer(server.url, options) as client:
        job = asyncio.create_task(bootstrap_client_certificate(
            bootstrap_kubeconfig=boot, kubeconfig=target, cert_dir=str(tmp_path / "pki"), node_name="node-b", poll=0.05))
        while not (pending := await _pending(client)):
            assert not job.done(), job
            await asyncio.sleep(0.05)
        csr = pending[0]
        assert csr["metadata"]["name"].startswith("node-csr-")
        assert csr["spec"]["signerName"] == "kubernetes.io/kube-apiserver-client-kubelet"
        assert csr["spec"]["usages"] == ["digital signature", "client auth"]
        await asyncio.to_thread(kubectl.run, "certificate", "approve", csr["metadata"]["name"])
        assert await asyncio.wait_for(job, 60) is True
    config = load_kubeconfig(target)
    assert config.server == server.url and config.cert_file == str(tmp_path / "pki" / "kubelet-client-current.pem")
    assert oct(os.stat(config.cert_file).st_mode & 0o777) == "0o600"
    pem = open(config.cert_file, "rb").read()
    cert = x509.load_pem_x509_certificate(pem)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "system:node:node-b"
    assert cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:nodes"
    cert.verify_directly_issued_by(ca.cert)
    certs.parse_private_key_pem(pem)  # the key is in the same file
    assert not os.path.exists(tmp_path / "pki" / "kubelet-client.key.tmp")
    # a valid kubeconfig is kept: nothing is requested again
    assert await bootstrap_client_certificate(bootstrap_kubeconfig=boot, kubeconfig=target,
                                              cert_dir=str(tmp_path / "pki"), node_name="node-b") is False


async def test_a_denied_request_stops_the_bootstrap_with_its_reason(cluster, tmp_path) -> None:
    server, _, _ = cluster
    kubectl = Kubectl(server.url, str(tmp_path / "home"))
    boot = _bootstrap_kubeconfig(str(tmp_path / "bootstrap.kubeconfig"), server.url)
    async with RestClient(ClientConfig(server=server.url)) as client:
        job = asyncio.create_task(bootstrap_client_certificate(
            bootstrap_kubeconfig=boot, kubeconfig=str(tmp_path / "k"), cert_dir=str(tmp_path / "pki"), node_name="n", poll=0.05))
        while not (pending := await _pending(client)):
            await asyncio.sleep(0.05)
        await asyncio.to_thread(kubectl.run, "certificate", "deny", pending[0]["metadata"]["name"])
        with pytest.raises(BootstrapError) as err:
            await asyncio.wait_for(job, 60)
    assert "was denied: KubectlDeny This CSR was denied by kubectl certificate deny." in str(err.value)


def test_the_kubelet_process_joins_with_a_bootstrap_kubeconfig(cluster, tmp_path) -> None:
    server, _, options = cluster
    kubectl = Kubectl(server.url, str(tmp_path / "home"))
    boot = _bootstrap_kubeconfig(str(tmp_path / "bootstrap.kubeconfig"), server.url)
    target = str(tmp_path / "kubelet.kubeconfig")
    stop = threading.Event()

    def approver() -> None:  # a human running kubectl certificate approve as requests come
        while not stop.is_set():
            names = kubectl.run("get", "csr", "-o", "name", check=False).stdout.split()
            for name in names:
                kubectl.run("certificate", "approve", name.split("/")[-1], check=False)
            time.sleep(0.2)

    async def run_signer() -> None:
        async with signer(server.url, options):
            while not stop.is_set():
                await asyncio.sleep(0.1)

    signing = threading.Thread(target=lambda: asyncio.run(run_signer()), daemon=True)
    approving = threading.Thread(target=approver, daemon=True)
    signing.start()
    approving.start()
    kubelet = KubeletProcess(target, str(tmp_path / "kubelet"), node_name="node-b",
                             extra=("--bootstrap-kubeconfig", boot))
    try:
        kubelet.start()
        assert any("bootstrapped a client certificate for system:node:node-b" in line for line in kubelet.output)
        assert load_kubeconfig(target).cert_file
        node = kubectl.run("get", "node", "node-b", "-o", "jsonpath={.metadata.name}").stdout
        assert node == "node-b"
    finally:
        stop.set()
        kubelet.stop()
        kubelet.kill_containers()
        signing.join(30)
        approving.join(30)
