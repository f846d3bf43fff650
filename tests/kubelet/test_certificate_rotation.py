"""Kubelet client-certificate rotation against a real HTTPS API server with Node,RBAC and the real
csrapproving and csrsigning controllers: nothing happens before 70-90 % of the certificate's life
(an injected clock), then a renewal CSR made with the node's own certificate is auto-approved
(selfnodeclient), signed, written to the cert dir and used by the node's client."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os

import pytest
from cryptography import x509

from k8py.client import certs
from k8py.client.config import ClientConfig
from k8py.client.resource import Resource
from k8py.client.resources import CERTIFICATE_SIGNING_REQUESTS
from k8py.client.rest import RestClient
from k8py.controllers.context import ControllerOptions
from k8py.controllers.controller_manager import ControllerManager
from k8py.kubelet.certificate_rotation import ClientCertificateRotation, rotation_deadline
from tests.support.servers import ServerThread, sqlite_storage

_CRB = Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings", False, "ClusterRoleBinding")
_SSR = Resource("authentication.k8s.io", "v1", "selfsubjectreviews", False, "SelfSubjectReview")


def test_the_deadline_falls_between_70_and_90_percent_of_the_life():
    ca = certs.new_self_signed_ca("ca")
    cert, _ = ca.issue_client("system:node:n", ["system:nodes"], validity=dt.timedelta(hours=10))
    start = cert.not_valid_before_utc
    assert rotation_deadline(cert, 0.0) - start == (cert.not_valid_after_utc - start) * 0.7
    assert rotation_deadline(cert, 0.999) - start == (cert.not_valid_after_utc - start) * (0.7 + 0.2 * 0.999)


@pytest.fixture
def secure(tmp_path):
    ca = certs.new_self_signed_ca("k8py-test-ca")
    ca.save(str(tmp_path / "ca.crt"), str(tmp_path / "ca.key"))
    with ServerThread(sqlite_storage(str(tmp_path / "data")), secure_port=0, insecure_port=None,
                      client_ca_file=str(tmp_path / "ca.crt"), authorization_modes=("Node", "RBAC")) as server:
        assert server.server is not None and server.server.serving is not None
        yield server, ca, server.server.serving.ca_pem


def _client(url: str, ca_pem: bytes, pair) -> RestClient:
    cert, key = pair
    return RestClient(ClientConfig(server=url, ca_data=ca_pem, cert_data=certs.encode_cert_pem(cert),
                                   key_data=certs.encode_private_key_pem(key)))


@contextlib.asynccontextmanager
async def controllers(client: RestClient, tmp_path):
    options = ControllerOptions(cluster_signing_cert_file=str(tmp_path / "ca.crt"), cluster_signing_key_file=str(tmp_path / "ca.key"))
    manager = ControllerManager(client, controllers=["csrapproving", "csrsigning"], options=options)
    task = asyncio.create_task(manager.run(), name="controller-manager")
    try:
        await asyncio.wait_for(manager.started.wait(), 30)
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_the_node_renews_its_certificate_at_the_deadline_and_uses_the_new_one(secure, tmp_path):
    server, ca, serving_ca = secure
    admin = _client(server.url, serving_ca, ca.issue_client("system:admin", ["system:masters"]))
    node = _client(server.url, serving_ca, ca.issue_client("system:node:n1", ["system:nodes"], validity=dt.timedelta(hours=1)))
    old = x509.load_pem_x509_certificate(node.config.cert_data)
    now = [dt.datetime.now(dt.timezone.utc)]
    naps: list[float] = []

    async def nap(seconds: float) -> None:  # the loop's wait, shortened: the clock is the test's
        naps.append(seconds)
        await asyncio.sleep(0.01)

    rotation = ClientCertificateRotation(node, node_name="n1", cert_dir=str(tmp_path / "pki"), clock=lambda: now[0],
                                         sleep=nap, rng=lambda: 0.5, poll=0.05)
    try:
        # what kubeadm binds so that nodes' renewals are approved (upstream has no default binding)
        await admin.create(_CRB, {"metadata": {"name": "node-autoapprove-certificate-rotation"},
                                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                              "name": "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"},
                                  "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}]})
        async with controllers(admin, tmp_path):
            runner = asyncio.create_task(rotation.run(), name="rotation")
            try:
                while len(naps) < 5:
                    await asyncio.sleep(0.01)
                assert rotation.rotations == 0 and not (await admin.list(CERTIFICATE_SIGNING_REQUESTS))["items"]
                assert 0 < naps[0] <= 60  # it naps in bounded steps towards the deadline
                assert rotation.deadline() == rotation_deadline(old, 0.5)
                now[0] = rotation_deadline(old, 0.5) + dt.timedelta(seconds=1)
                for _ in range(600):
                    if rotation.rotations:
                        break
                    await asyncio.sleep(0.05)
                assert rotation.rotations == 1
            finally:
                runner.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await runner
        (csr,) = (await admin.list(CERTIFICATE_SIGNING_REQUESTS))["items"]
        assert csr["spec"]["username"] == "system:node:n1"  # made with the node's own certificate: a renewal
        assert csr["spec"]["signerName"] == "kubernetes.io/kube-apiserver-client-kubelet"
        approved = next(c for c in csr["status"]["conditions"] if c["type"] == "Approved")
        assert approved["reason"] == "AutoApproved"
        new = x509.load_pem_x509_certificate(node.config.cert_data)
        assert new.serial_number != old.serial_number
        assert new.subject == old.subject
        new.verify_directly_issued_by(ca.cert)
        pem_file = tmp_path / "pki" / "kubelet-client-current.pem"
        assert oct(os.stat(pem_file).st_mode & 0o777) == "0o600"
        assert x509.load_pem_x509_certificate(pem_file.read_bytes()).serial_number == new.serial_number
        certs.parse_private_key_pem(pem_file.read_bytes())
        # the node's client goes on working with the new certificate
        review = await node.create(_SSR, {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        assert review["status"]["userInfo"]["username"] == "system:node:n1"
        assert rotation.deadline() == rotation_deadline(new, 0.5)  # the next deadline is the new certificate's
    finally:
        await node.close()
        await admin.close()



def test_a_restarted_kubelet_uses_the_rotated_certificate_when_it_is_the_later_one(tmp_path):
    from k8py.kubelet.certificate_rotation import prefer_rotated

    ca = certs.new_self_signed_ca("ca")

    def config_with(cert, key) -> ClientConfig:
        return ClientConfig(server="https://127.0.0.1:1", cert_data=certs.encode_cert_pem(cert), key_data=certs.encode_private_key_pem(key))

    def rotated(cert, key) -> None:
        certs.write_pem(str(tmp_path / "kubelet-client-current.pem"), certs.encode_cert_pem(cert) + certs.encode_private_key_pem(key),
                        private=True)

    old = ca.issue_client("system:node:n1", ["system:nodes"], validity=dt.timedelta(hours=1))
    new = ca.issue_client("system:node:n1", ["system:nodes"], validity=dt.timedelta(hours=2))
    assert not prefer_rotated(config_with(*old), str(tmp_path))  # nothing rotated yet
    rotated(*new)
    config = config_with(*old)
    assert prefer_rotated(config, str(tmp_path))
    assert x509.load_pem_x509_certificate(config.cert_data).serial_number == new[0].serial_number
    certs.parse_private_key_pem(config.key_data)
    assert not prefer_rotated(config_with(*ca.issue_client("system:node:n1", ["system:nodes"], validity=dt.timedelta(hours=3))),
                              str(tmp_path))  # the kubeconfig's is newer (renewed by k8py up): it stays
    assert not prefer_rotated(config_with(*ca.issue_client("system:node:n2", ["system:nodes"])), str(tmp_path))  # another node's
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=5)
    assert not prefer_rotated(config_with(*old), str(tmp_path), now=later)  # expired
